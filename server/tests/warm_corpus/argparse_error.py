# warm corpus: an argparse error prints the usage to stderr and exits 2
# args: ["--bad"]
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--good", action="store_true")
parser.parse_args()
print("never printed")

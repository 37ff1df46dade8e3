# warm corpus: argparse names the program after sys.argv[0] and parses the arguments
# args: ["--count", "3", "positional"]
import argparse

parser = argparse.ArgumentParser(description="corpus")
parser.add_argument("--count", type=int, default=1)
parser.add_argument("name")
print(parser.prog)
print(parser.parse_args())
parser.print_usage()

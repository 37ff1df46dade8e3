# warm corpus: print to stderr and stdout, each stream's order kept
import sys

for i in range(5):
    print("out", i)
    print("err", i, file=sys.stderr)
sys.stderr.write("no newline at the end of stderr")
sys.stdout.write("no newline at the end of stdout")

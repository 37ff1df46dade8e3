# warm corpus: a run without arguments has only the script in sys.argv
import sys

print(sys.argv)
print(sys.argv[0] == __file__)

# warm corpus: a script whose name is not ASCII
import sys

print(repr(__file__))
print(sys.argv[0] == __file__)

# warm corpus: a script whose name has a space
# args: ["two words"]
import sys

print(repr(__file__))
print(sys.argv)

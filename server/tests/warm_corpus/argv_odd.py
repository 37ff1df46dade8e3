# warm corpus: odd arguments reach sys.argv unchanged
# args: ["", "a b", "--flag=1", "-c", "import os", "-m", "ü∂ 雪", "$HOME", "*", "'\"", "\\n", "-", "--", "x\ty"]
import sys

for i, arg in enumerate(sys.argv):
    print(i, repr(arg))
print(len(sys.argv))

# warm corpus: the stdin a caller gives is read whole
# stdin: "first line\nsecond ü\n\nlast without newline"
import sys

data = sys.stdin.read()
print(repr(data))
print(len(data), data.count("\n"))
print(repr(sys.stdin.read()))

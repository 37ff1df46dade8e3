# warm corpus: stdin read as bytes
# stdin: "bytes \u00e9\n"
import sys

print(sys.stdin.buffer.read())

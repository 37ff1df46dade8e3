# warm corpus: without stdin a script sees end-of-file at once
import sys

print(repr(sys.stdin.read()))
try:
    input()
except EOFError as e:
    print("EOFError", repr(e))

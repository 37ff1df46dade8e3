# warm corpus: print, sys.stdout.write and os.write keep their order on each stream
import os
import sys

print("print 1")
os.write(1, b"os.write 2\n")
sys.stdout.write("sys.stdout.write 3\n")
os.write(2, b"stderr os.write 1\n")
print("stderr print 2", file=sys.stderr)
print("print 4", end="")
os.write(1, b" os.write 5\n")

# warm corpus: a run that ends with nothing left to finalize: its status, unflushed output, atexit output
import atexit
import sys

with open(__file__) as f:
    first = f.readline()
atexit.register(print, "atexit: plain handler")
data = {"list": [1, 2, 3], "first": first.strip()}
print(data["first"][:15])
sys.stderr.write("stderr without a newline")
sys.stdout.write("stdout without a newline")
sys.exit(4)

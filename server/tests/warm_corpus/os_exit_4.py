# warm corpus: os._exit(4) skips atexit and finally, output already written stays
import atexit
import os
import sys

atexit.register(print, "atexit must not run")
print("before os._exit")
sys.stderr.write("stderr before os._exit\n")
try:
    os._exit(4)
finally:
    print("finally must not run")

# warm corpus: a script that kills itself with SIGTERM ends by that signal, without atexit
import atexit
import os
import signal

atexit.register(print, "atexit must not run")
print("before SIGTERM")
os.kill(os.getpid(), signal.SIGTERM)
print("never printed")

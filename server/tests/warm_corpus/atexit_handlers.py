# warm corpus: atexit handlers run last-in first-out, with their output, even after an error in one
import atexit
import sys


def say(text, stream="out"):
    print("atexit:", text, file=sys.stdout if stream == "out" else sys.stderr)


def broken():
    raise ValueError("an atexit handler failed")


atexit.register(say, "registered first, runs last")
atexit.register(broken)
atexit.register(say, "to stderr", stream="err")
atexit.register(say, "registered last, runs first")
atexit.register(say, "unregistered")
atexit.unregister(say)
atexit.register(say, "registered after unregister")
print("main done")

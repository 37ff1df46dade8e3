# warm corpus: an atexit handler sees the state the script left, and runs after a SystemExit
import atexit
import sys

log = []


@atexit.register
def check():
    print("at exit the log holds", log)
    print("exit code is not known to atexit, sys.last_value:", hasattr(sys, "last_value"))


log.append("set by the script")
sys.exit(5)

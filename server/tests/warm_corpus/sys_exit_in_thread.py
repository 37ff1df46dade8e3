# warm corpus: sys.exit in a thread ends only that thread
import sys
import threading


def t():
    sys.exit(8)


th = threading.Thread(target=t)
th.start()
th.join()
print("still running, exit code stays 0")

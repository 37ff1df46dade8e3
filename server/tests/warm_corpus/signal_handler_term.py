# warm corpus: a script's own SIGTERM handler runs when it signals itself
import os
import signal
import sys


def on_term(signum, frame):
    print("handler got", signal.Signals(signum).name, frame.f_code.co_name)
    sys.exit(12)


signal.signal(signal.SIGTERM, on_term)
os.kill(os.getpid(), signal.SIGTERM)
print("never printed")

# warm corpus: SIGINT sent to itself becomes a KeyboardInterrupt where the script is
import os
import signal
import time

try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("no interrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt caught")

# warm corpus: an alarm the script sets kills it with SIGALRM
import signal
import time

print("alarm set")
signal.alarm(1)
time.sleep(5)
print("never printed")

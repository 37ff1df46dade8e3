# warm corpus: a non-daemon thread still running when the script ends is waited for
import threading
import time


def late():
    time.sleep(0.3)
    print("the thread finished after the script's last line")


t = threading.Thread(target=late, name="late-worker")
t.start()
print("main thread is", threading.current_thread().name, threading.current_thread() is threading.main_thread())
print("threads", sorted(t.name for t in threading.enumerate()))
print("the script's last line")

# warm corpus: an uncaught KeyboardInterrupt waits for threads, runs atexit and flushes files before its signal (kbint_2_read reads the file)
import atexit
import threading
import time

f = open("kbint.txt", "w")
f.write("written before the interrupt, never closed\n")


def late():
    time.sleep(0.3)
    print("the thread finished")


threading.Thread(target=late).start()
atexit.register(print, "atexit ran")
raise KeyboardInterrupt

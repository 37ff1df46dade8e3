# warm corpus: a daemon thread blocked at exit does not hold the run; threading's names and counts
import threading

stop = threading.Event()
started = threading.Event()


def forever():
    started.set()
    stop.wait()


t = threading.Thread(target=forever, daemon=True)
t.start()
started.wait()
print(t.name, t.daemon)
print("active", threading.active_count())
print("main", threading.main_thread().name, threading.get_ident() == threading.main_thread().ident)
print("excepthook default", threading.excepthook is threading.__excepthook__)
print("done")

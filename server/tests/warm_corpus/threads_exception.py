# warm corpus: an exception in a thread is printed by threading.excepthook, the run still exits 0
import threading


def work():
    raise ValueError("in a thread")


t = threading.Thread(target=work)
t.start()
t.join()
t2 = threading.Thread(target=work, name="named")
t2.start()
t2.join()
print("main continues")

# warm corpus: multiprocessing's default start method and a plain Process
import multiprocessing as mp


def hello(q):
    q.put("hello from " + mp.current_process().name)


if __name__ == "__main__":
    print(mp.get_start_method(allow_none=True))
    print(mp.get_start_method())
    q = mp.Queue()
    p = mp.Process(target=hello, args=(q,))
    p.start()
    print(q.get(timeout=30))
    p.join()
    print(p.exitcode, mp.active_children())

# warm corpus: a spawn Process with a Queue and an exit code of its own
import multiprocessing as mp
import sys


def child(q, n):
    q.put(("child", n, sys.argv[1:]))
    sys.exit(9)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q, 7))
    p.start()
    print(q.get(timeout=30))
    p.join()
    print("child exit code", p.exitcode)

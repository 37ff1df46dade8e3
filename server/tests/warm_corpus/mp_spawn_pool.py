# warm corpus: a multiprocessing Pool with the spawn start method re-imports __main__ by its file
import multiprocessing as mp
import sys

IMPORTED_AS = __name__


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return self.k * x


def worker_facts(_):
    import __main__
    return (IMPORTED_AS, __main__.__name__, __main__.__file__ == __file__, sys.argv == [__file__] or sys.argv)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    print("imported as", IMPORTED_AS)
    pool = ctx.Pool(2)
    print(pool.map(Scale(5), range(4)))
    print(sorted(set(pool.map(worker_facts, range(4)))))
    pool.close()
    pool.join()
    print("done")

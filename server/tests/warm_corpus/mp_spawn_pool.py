# warm corpus: a multiprocessing Pool with the spawn start method re-imports __main__ by its file
import multiprocessing as mp
import sys

print("imported as", __name__)


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return self.k * x


def worker_facts(_):
    import __main__
    return (__name__, __main__.__name__, __main__.__file__ == __file__, sys.argv == [__file__] or sys.argv)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        print(pool.map(Scale(5), range(4)))
        print(sorted(set(pool.map(worker_facts, range(4)))))
    print("done")

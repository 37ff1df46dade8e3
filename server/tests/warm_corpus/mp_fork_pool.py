# warm corpus: a multiprocessing Pool with the fork start method, on a class of __main__
import multiprocessing as mp


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return self.k * x


def name_of_worker(_):
    return mp.current_process().name.split("-")[0], __name__


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        print(pool.map(Scale(3), range(6)))
        print(sorted(set(pool.map(name_of_worker, range(4)))))
    print(mp.current_process().name, mp.parent_process())

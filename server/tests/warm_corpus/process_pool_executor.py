# warm corpus: concurrent.futures.ProcessPoolExecutor, default and spawn
import concurrent.futures as cf
import multiprocessing as mp


def cube(x):
    return x ** 3


def fails(x):
    raise ValueError(f"worker failed on {x}")


if __name__ == "__main__":
    with cf.ProcessPoolExecutor(2) as ex:
        print(list(ex.map(cube, range(5))))
        try:
            ex.submit(fails, 3).result()
        except ValueError as e:
            print("ValueError:", e)
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
        print(list(ex.map(cube, range(3))))

# warm corpus: the forkserver start method (its AF_UNIX socket: the same result warm and cold)
import multiprocessing as mp


def square(x):
    return x * x


if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    with ctx.Pool(2) as pool:
        print(pool.map(square, range(5)))

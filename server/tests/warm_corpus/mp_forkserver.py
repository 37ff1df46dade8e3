# warm corpus: the forkserver start method (the sandbox refuses its AF_UNIX socket: the same error warm)
import multiprocessing as mp


def square(x):
    return x * x


if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    with ctx.Pool(2) as pool:
        print(pool.map(square, range(5)))

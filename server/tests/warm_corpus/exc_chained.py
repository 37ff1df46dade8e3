# warm corpus: an uncaught exception with a cause and a context; the traceback text exactly
from helper_pkg.tools import fail


def outer():
    try:
        fail("missing")
    except KeyError as e:
        raise ValueError("lookup failed") from e


def handler():
    try:
        outer()
    except ValueError:
        raise RuntimeError("while handling")


print("before the error")
handler()

# warm corpus: doctest.testmod() tests __main__
import doctest


def add(a, b):
    """
    >>> add(1, 2)
    3
    >>> add(2, 2)
    5
    """
    return a + b


print(doctest.testmod())

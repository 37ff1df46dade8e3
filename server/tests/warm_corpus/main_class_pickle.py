# warm corpus: classes of __main__ pickle and print as __main__'s
import pickle
import sys

import __main__


class Point:
    def __init__(self, x):
        self.x = x


p = Point(3)
print(repr(Point))
print(Point.__module__, Point.__qualname__)
data = pickle.dumps(p, protocol=4)
print(b"__main__" in data, b"Point" in data)
print(pickle.loads(data).x)
print(__main__ is sys.modules["__main__"], __main__.__file__ == __file__)
print(getattr(__main__, "Point") is Point)


def f():
    pass


print(f.__module__, f.__globals__ is globals())

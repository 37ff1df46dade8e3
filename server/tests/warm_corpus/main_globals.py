# warm corpus: the globals python gives a script run as a file
import sys

print("__name__", __name__)
print("__file__", __file__)
print("__doc__", __doc__)
print("__package__", repr(__package__))
print("__spec__", __spec__)
print("__cached__", repr(globals().get("__cached__", "<absent>")))
print("__loader__", type(__loader__).__module__, type(__loader__).__qualname__)
print("loader name", __loader__.name)
print("loader path", __loader__.path)
print("__builtins__", type(__builtins__).__name__, getattr(__builtins__, "__name__", None))
print("globals", sorted(globals()))
print("main module", sys.modules["__main__"].__dict__ is globals())
print("argv", sys.argv)
print("path[0]", sys.path[0])

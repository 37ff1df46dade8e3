# warm corpus: the stack under the script's module frame is empty
import inspect
import sys
import traceback

frame = sys._getframe()
print("f_back", frame.f_back)
print("stack depth", len(inspect.stack()))
print("code", frame.f_code.co_name, frame.f_code.co_filename == __file__)
print("extract_stack", [(f.name, f.lineno) for f in traceback.extract_stack()])


def depth():
    n = 0
    f = sys._getframe()
    while f is not None:
        n += 1
        f = f.f_back
    return n


print("depth in a function", depth())


def recurse(n):
    try:
        return recurse(n + 1)
    except RecursionError:
        return n


print("recursion limit", sys.getrecursionlimit())
print("deepest call", recurse(0))

# warm corpus: multiprocessing's __mp_main__ alias is the script's __main__
import multiprocessing  # noqa: F401
import sys

print(sys.modules["__mp_main__"] is sys.modules["__main__"])
print(sys.modules["__mp_main__"].__file__ == __file__)

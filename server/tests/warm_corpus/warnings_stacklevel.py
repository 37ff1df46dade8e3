# warm corpus: a warning whose stacklevel climbs above the script is placed where a cold run places it
import warnings

warnings.warn("from the top level, stacklevel 2", stacklevel=2)
warnings.warn("from the top level, stacklevel 3", stacklevel=3)


def f():
    warnings.warn("from a function, stacklevel 3", stacklevel=3)


f()
print("done")

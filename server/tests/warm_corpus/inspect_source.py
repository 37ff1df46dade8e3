# warm corpus: inspect and linecache find the script's source
import inspect
import linecache


def documented(a, b=2):
    """A function of the script."""
    return a + b


print(inspect.getsource(documented), end="")
print(inspect.getfile(documented) == __file__, inspect.getmodule(documented).__name__)
print(inspect.signature(documented))
print(repr(linecache.getline(__file__, 1)))
print(inspect.getsourcelines(documented)[1])

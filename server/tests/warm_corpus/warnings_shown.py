# warm corpus: a warning is printed once per place, and a DeprecationWarning in __main__ is shown
import warnings


def old():
    warnings.warn("old() is deprecated", DeprecationWarning, stacklevel=2)


for _ in range(3):
    warnings.warn("user warning from a loop")
for _ in range(2):
    old()
warnings.warn("a pending one", PendingDeprecationWarning)
warnings.warn("a runtime one", RuntimeWarning)
print("done")

# warm corpus: the warnings filters and options a run starts with
import sys
import warnings

for f in warnings.filters:
    action, message, category, module, lineno = f
    print(action, getattr(message, "pattern", message), category.__name__, getattr(module, "pattern", module), lineno)
print(warnings.defaultaction, warnings.onceregistry)
print(sys.warnoptions)
print(getattr(sys.modules["__main__"], "__warningregistry__", "no registry"))

# warm corpus: no module outside the stdlib in sys.modules but the script's own
import sys

names = sorted(
    m for m in sys.modules if m.split(".")[0] not in sys.stdlib_module_names
)
print(names)
print("__mp_main__" in sys.modules, "_pyrun_warm" in sys.modules)

# warm corpus: no module outside the stdlib in sys.modules but the script's own
import sys

# multiprocessing's alias of __main__ is left to mp_main_alias and mp_main_presence.
names = sorted(
    m for m in sys.modules if m.split(".")[0] not in sys.stdlib_module_names and m != "__mp_main__"
)
print(names)
print("_pyrun_warm" in sys.modules, "_pyrun_session" in sys.modules)

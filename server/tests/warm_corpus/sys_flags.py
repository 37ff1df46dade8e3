# warm corpus: sys.flags and the interpreter settings a run starts with
import sys

print(sys.flags)
print("dont_write_bytecode", sys.dont_write_bytecode)
print("pycache_prefix", sys.pycache_prefix)
print("xoptions", sys._xoptions)
print("recursion limit", sys.getrecursionlimit())
print("switch interval", sys.getswitchinterval())
print("int max str digits", sys.get_int_max_str_digits())
print("encodings", sys.getdefaultencoding(), sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
print("trace", sys.gettrace(), "profile", sys.getprofile())
print("hooks are the defaults", sys.excepthook is sys.__excepthook__, sys.displayhook is sys.__displayhook__,
      sys.breakpointhook is sys.__breakpointhook__, sys.unraisablehook is sys.__unraisablehook__)
print("interactive", hasattr(sys, "ps1"), hasattr(sys, "last_value"))
print("audit hooks", sys.addaudithook.__name__)
print("meta_path", [type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path])
print("path_hooks", [getattr(h, "__name__", type(h).__name__) for h in sys.path_hooks])
print("path", sys.path)
print("async gen hooks", sys.get_asyncgen_hooks())
print("coroutine depth", sys.get_coroutine_origin_tracking_depth())

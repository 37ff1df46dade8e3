# warm corpus: sibling modules and packages import (once) from the script's folder
import sys

print("before", "helper_mod" in sys.modules, "helper_pkg" in sys.modules)
import helper_mod  # noqa: E402
import helper_mod as again  # noqa: E402
from helper_pkg import double  # noqa: E402

print(helper_mod is again, helper_mod.answer(), double(21))
print("helper file", helper_mod.__file__)
print("helper spec origin", helper_mod.__spec__.origin)
print("helper cached", helper_mod.__cached__)
print("after", "helper_mod" in sys.modules, "helper_pkg" in sys.modules, "helper_pkg.tools" in sys.modules)

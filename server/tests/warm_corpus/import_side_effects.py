# warm corpus: a sibling module's import-time print happens in the run, once
print("script starts")
import helper_mod  # noqa: E402
import importlib  # noqa: E402

importlib.reload(helper_mod)
print(helper_mod.answer())

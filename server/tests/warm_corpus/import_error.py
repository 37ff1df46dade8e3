# warm corpus: an import of a missing module fails with the cold traceback
print("before")
import definitely_not_a_module_anywhere  # noqa: F401,E402

# warm corpus: multiprocessing's __mp_main__ alias exists only once the script imports multiprocessing
import sys

print("__mp_main__" in sys.modules)

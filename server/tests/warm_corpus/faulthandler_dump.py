# warm corpus: faulthandler is off at start; its dump shows only the script's frames
import faulthandler
import sys

print("enabled at start", faulthandler.is_enabled())
faulthandler.enable()
print("enabled now", faulthandler.is_enabled())


def inner():
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=False)


inner()
print("dumped")

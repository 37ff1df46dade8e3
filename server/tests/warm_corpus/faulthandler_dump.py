# warm corpus: faulthandler's dump shows only the script's frames
import faulthandler
import sys

faulthandler.enable()
print("enabled now", faulthandler.is_enabled())


def inner():
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=False)


inner()
print("dumped")

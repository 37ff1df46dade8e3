# warm corpus: faulthandler is off at start, and on once enabled
import faulthandler
import sys

print("enabled at start", faulthandler.is_enabled())
faulthandler.enable()
print("enabled now", faulthandler.is_enabled())
faulthandler.disable()
print("disabled", faulthandler.is_enabled(), sys.stderr.fileno())

# warm corpus: the garbage collector's state at start
import gc

print("enabled", gc.isenabled())
print("thresholds", gc.get_threshold())
print("garbage", gc.garbage)
print("callbacks", gc.callbacks)
print("debug", gc.get_debug())

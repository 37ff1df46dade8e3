# warm corpus: no object is frozen out of the collector's sight at start
import gc

print("frozen", gc.get_freeze_count())
gc.collect()
print("frozen after collect", gc.get_freeze_count())

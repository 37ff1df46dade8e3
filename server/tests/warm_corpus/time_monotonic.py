# warm corpus: clocks move forward
import time

values = [time.monotonic() for _ in range(1000)]
print("monotonic never goes back", all(b >= a for a, b in zip(values, values[1:])))
p = [time.perf_counter() for _ in range(1000)]
print("perf_counter never goes back", all(b >= a for a, b in zip(p, p[1:])))
print("wall clock after 2026-01-01", time.time() > 1767225600)
print("monotonic_ns agrees", abs(time.monotonic_ns() / 1e9 - time.monotonic()) < 1)
print("VARY: process_time", time.process_time())

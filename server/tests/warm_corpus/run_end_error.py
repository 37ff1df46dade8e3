# warm corpus: an uncaught exception ends a run whose script left only plain data: status 1, traceback
values = [n * n for n in range(10)]


def fail():
    raise ValueError("ends the run: %d values" % len(values))


print("before the error", flush=False)
fail()

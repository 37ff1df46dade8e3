# warm corpus: an uncaught ExceptionGroup with notes
def f():
    e = TypeError("inner type error")
    e.add_note("a note on the inner error")
    raise ExceptionGroup("two errors", [e, ValueError("inner value error")])


f()

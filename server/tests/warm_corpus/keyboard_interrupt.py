# warm corpus: an uncaught KeyboardInterrupt: its traceback and how the process ends
print("raising KeyboardInterrupt")


def f():
    raise KeyboardInterrupt


f()

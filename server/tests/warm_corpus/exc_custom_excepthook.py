# warm corpus: a custom sys.excepthook gets the uncaught exception
import sys


def hook(kind, value, tb):
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    print("hook:", kind.__name__, value, frames, file=sys.stderr)


print(sys.excepthook is sys.__excepthook__)
sys.excepthook = hook


def boom():
    raise LookupError("custom hook")


boom()

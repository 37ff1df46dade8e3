# warm corpus: after an uncaught exception, atexit handlers run and see it in sys.last_value
import atexit
import sys


@atexit.register
def after():
    print("atexit sees", type(getattr(sys, "last_value", None)).__name__, getattr(sys, "last_value", None))
    tb = getattr(sys, "last_traceback", None)
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    print("last traceback frames", frames)


def fail():
    raise OSError(2, "no such thing")


fail()

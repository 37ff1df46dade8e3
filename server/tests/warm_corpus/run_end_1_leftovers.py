# warm corpus: a run's end: files left open, atexit handlers, a finalizer that writes, a child still writing to stdout, exit 3
import atexit
import os
import sys
import time


class Farewell:
    """Finalized when the interpreter tears `__main__` down, after the atexit handlers."""

    def __del__(self, open=open, write=os.write):
        # Kept as defaults: the teardown may have emptied the module and the builtins by now.
        # One write of a whole line: the child's lines come between whole lines only.
        write(1, b"finalizer: written after the atexit handlers\n")
        with open("run_end_finalizer.txt", "w") as f:
            f.write("written by a finalizer\n")


farewell = Farewell()
left_open = open("run_end_open.txt", "w")
left_open.write("written, never flushed or closed\n" * 2)
# One write of a whole line each (runs are unbuffered: `print` writes its end apart).
atexit.register(lambda: sys.stdout.write("the script's atexit handler ran\n"))

# A child that outlives the interpreter, writing to the run's stdout until the run's end kills
# it: what it wrote before the interpreter ended is the run's; later lines race the end.
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(1, b"child: started\n")
    os.write(ready_w, b"x")
    while True:
        os.write(1, b"VARY: child still writing\n")
        time.sleep(0.001)
os.read(ready_r, 1)
# Whole lines only from here on (the child's lines may come between two writes).
sys.stdout.write("script: done\n")
sys.exit(3)

# warm corpus: finally blocks and context managers run on sys.exit, and the exit code is the last one
import contextlib
import sys


@contextlib.contextmanager
def managed():
    try:
        yield
    finally:
        print("context manager exited")


with managed():
    try:
        sys.exit(7)
    finally:
        print("finally ran")

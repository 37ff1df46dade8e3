# warm corpus: files written and never closed reach the disk at exit (unflushed_2_read reads them)
import os
import sys

f = open("unflushed.txt", "w")
f.write("written, never flushed or closed\n" * 3)
b = open("unflushed.bin", "wb", buffering=1 << 20)
b.write(b"\x00\x01binary" * 100)
globals()["kept"] = (f, b)
sys.stdout.write("stdout write without a newline at exit")

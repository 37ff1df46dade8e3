# warm corpus: what fd 0 is when the caller gives stdin
# stdin: "x\n"
import os
import stat

mode = os.fstat(0).st_mode
print("fifo", stat.S_ISFIFO(mode), "chr", stat.S_ISCHR(mode), "reg", stat.S_ISREG(mode))
print(repr(os.read(0, 100)))

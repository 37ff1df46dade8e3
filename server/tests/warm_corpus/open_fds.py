# warm corpus: the file descriptors a run starts with (only 0, 1 and 2 cross)
import os
import stat


def kind(mode):
    for name in ("FIFO", "CHR", "REG", "DIR", "SOCK", "LNK", "BLK"):
        if getattr(stat, "S_IS" + name)(mode):
            return name
    return oct(mode)


for fd in range(4096):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    print(fd, kind(st.st_mode), "blocking", os.get_blocking(fd), "inheritable", os.get_inheritable(fd),
          "flags", oct(__import__("fcntl").fcntl(fd, __import__("fcntl").F_GETFL)))

# warm corpus: with faulthandler enabled a SIGSEGV prints the fatal error and the script's frames
import faulthandler
import os
import signal

faulthandler.enable()


def crash():
    os.kill(os.getpid(), signal.SIGSEGV)


print("crashing")
crash()

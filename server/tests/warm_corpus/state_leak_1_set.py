# warm corpus: changes process state every way it can (state_leak_2_check must see none of it)
import builtins
import codecs
import gc
import json
import logging
import os
import random
import signal
import socket
import sys
import warnings

builtins.LEAKED_BUILTIN = "leaked"
sys.LEAKED_ATTR = "leaked"
json.LEAKED = "leaked"
os.environ["LEAKED_ENV"] = "leaked"
sys.path.append("/leaked/path")
random.seed(1234)
sys.setrecursionlimit(123)
gc.disable()
gc.set_threshold(1, 2, 3)
warnings.simplefilter("error")
logging.basicConfig(level=logging.DEBUG)
logging.getLogger("leaked.logger")
signal.signal(signal.SIGUSR1, lambda *a: None)
signal.signal(signal.SIGINT, signal.SIG_IGN)
os.umask(0o077)
socket.setdefaulttimeout(3.0)
codecs.register(lambda name: None)
sys.modules["leaked_module"] = type(sys)("leaked_module")
with open("leak_marker.txt", "w") as f:
    f.write("set")
os.chdir("/")
print("state changed")

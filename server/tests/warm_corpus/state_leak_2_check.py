# warm corpus: nothing state_leak_1_set changed is seen by a later run
import builtins
import gc
import json
import logging
import os
import random
import signal
import socket
import sys
import warnings

print("builtin", hasattr(builtins, "LEAKED_BUILTIN"))
print("sys attr", hasattr(sys, "LEAKED_ATTR"))
print("json attr", hasattr(json, "LEAKED"))
print("env", "LEAKED_ENV" in os.environ)
print("path", "/leaked/path" in sys.path)
random.seed(1234)
seeded = random.random()
random.seed()
print("random reseeded per run", random.random() != seeded)
print("recursion limit", sys.getrecursionlimit())
print("gc", gc.isenabled(), gc.get_threshold())
print("warnings first filter", warnings.filters[0][0])
print("root handlers", logging.getLogger().handlers, "leaked logger", "leaked.logger" in logging.Logger.manager.loggerDict)
print("SIGUSR1", signal.getsignal(signal.SIGUSR1), "SIGINT", getattr(signal.getsignal(signal.SIGINT), "__name__", None))
print("umask", oct(os.umask(0o022)))
print("socket timeout", socket.getdefaulttimeout())
print("cwd", os.getcwd())
print("module", "leaked_module" in sys.modules)
with open("leak_marker.txt") as f:
    print("the project file stays, as it should:", f.read())

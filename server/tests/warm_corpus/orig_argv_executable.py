# warm corpus: sys.orig_argv, sys.executable and the prefixes agree with a cold start
import os
import sys

print("orig_argv", sys.orig_argv)
print("executable", sys.executable)
print("_base_executable", sys._base_executable)
print("prefix", sys.prefix, sys.base_prefix, sys.exec_prefix)
print("platlibdir", sys.platlibdir)
print("orig_argv[-1] is the script", sys.orig_argv[-1] == __file__)
print("argv0 exists", os.path.exists(sys.orig_argv[0]))

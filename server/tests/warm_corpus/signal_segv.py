# warm corpus: a script that kills itself with SIGSEGV ends by that signal, output before it kept
import os
import signal

print("before SIGSEGV")
os.kill(os.getpid(), signal.SIGSEGV)
print("never printed")

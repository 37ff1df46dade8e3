# warm corpus: os.abort() ends the run with SIGABRT
import os

print("aborting")
os.abort()

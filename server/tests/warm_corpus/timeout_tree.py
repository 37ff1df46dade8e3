# warm corpus: a run over its time limit is stopped with its child, and what it printed is kept
# timeout: 2
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; print('child up', flush=True); time.sleep(60)"])
time.sleep(0.5)
print("started, child", child.poll())
time.sleep(60)
print("never printed")

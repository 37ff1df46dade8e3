# warm corpus: a subprocess of sys.executable -c sees what a cold child sees
import subprocess
import sys

code = (
    "import os, sys; print(sys.argv, sys.executable == %r, sys.flags.isolated, sys.flags.no_site);"
    "print(sorted(k for k in os.environ if k.startswith('PY')));"
    "print(os.getcwd() == %r)" % (sys.executable, __import__("os").getcwd())
)
out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
print(out.returncode)
print(out.stdout, end="")
print(repr(out.stderr))
r = subprocess.run([sys.executable, "-c", "import sys; sys.exit(6)"])
print("child exit", r.returncode)
r = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
print("child signal", r.returncode)

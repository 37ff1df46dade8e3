# warm corpus: a shell child, its stdin and its exit status
import subprocess

r = subprocess.run("echo from the shell; exit 3", shell=True, capture_output=True, text=True)
print(r.returncode, repr(r.stdout), repr(r.stderr))
r = subprocess.run(["cat"], input="through cat\n", capture_output=True, text=True)
print(r.returncode, repr(r.stdout))
r = subprocess.run(["cat"], capture_output=True, text=True)
print("cat of the run's stdin", r.returncode, repr(r.stdout))

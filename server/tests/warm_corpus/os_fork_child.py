# warm corpus: os.fork: the child's output, exit status and atfork hooks
import os
import sys

os.register_at_fork(after_in_child=lambda: print("after fork in child"))
pid = os.fork()
if pid == 0:
    print("child: parent is the script", os.getppid() != 0)
    sys.stdout.flush()
    os._exit(21)
_, status = os.waitpid(pid, 0)
print("parent: child exit", os.waitstatus_to_exitcode(status))

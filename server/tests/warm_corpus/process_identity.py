# warm corpus: pid, parent, process group, session, ids and limits inside the run's namespaces
import os
import resource

print("pid", os.getpid(), "ppid", os.getppid())
print("group leader", os.getpgrp() == os.getpid(), "session leader", os.getsid(0) == os.getpid())
print("pgrp", os.getpgrp(), "sid", os.getsid(0))
print("uid", os.getuid(), os.geteuid(), "gid", os.getgid(), os.getegid(), "groups", os.getgroups())
print("umask", oct(os.umask(0o022)))
print("nice", os.nice(0))
print("affinity", sorted(os.sched_getaffinity(0)))
for name in ("RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE",
             "RLIMIT_STACK", "RLIMIT_DATA", "RLIMIT_MEMLOCK", "RLIMIT_NICE"):
    print(name, resource.getrlimit(getattr(resource, name)))
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print("children so far", children.ru_utime, children.ru_stime, children.ru_maxrss)

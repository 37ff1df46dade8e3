# warm corpus: the signal dispositions and mask a run starts with
import signal

for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGCHLD", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
             "SIGALRM", "SIGXFSZ", "SIGTTOU", "SIGTTIN", "SIGTSTP", "SIGWINCH"):
    handler = signal.getsignal(getattr(signal, name))
    print(name, getattr(handler, "__name__", handler))
print("blocked", sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
print("pending", signal.sigpending())
print("itimer", signal.getitimer(signal.ITIMER_REAL))
print("wakeup fd", signal.set_wakeup_fd(-1))

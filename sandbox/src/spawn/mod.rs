//! Linux: the runner's spawner. Starts a child with `clone(CLONE_VM | CLONE_VFORK)`, like
//! `posix_spawn`, but runs the sandbox's steps in the child before `exec`.
//!
//! Why not `std::process::Command::pre_exec`: a pre-exec hook makes std `fork()` the whole server,
//! copying its page tables, write-protecting every page of a multi-threaded process (TLB
//! shootdowns to the other cores), then taking copy-on-write faults in both processes until the
//! child execs. Measured here, that was ~1 ms per run of a busy server, more than all the sandbox
//! layers together. A `CLONE_VM` child shares the server's memory instead and the server's thread
//! waits (`CLONE_VFORK`) until the child has exec'd or died, as glibc's `posix_spawn` does.
//!
//! The rules for the child, which runs on a stack of its own in the server's memory: raw syscalls
//! only, on data prepared before the clone; no allocation, no locks, no unwinding. Signals are
//! blocked around the clone and the child resets every handler to the default before unblocking,
//! so no server signal handler ever runs in it. A failing step writes (step, errno) to a
//! close-on-exec pipe and the child exits: the spawn fails and nothing runs half-confined.
//!
//! With a pid namespace (the sandbox's `pid-ns` layer), the child does the sandbox's entering
//! steps, unshares a pid namespace and clones, into the server's memory again and as the server's
//! own child (`CLONE_PARENT`), the namespace's pid 1 (`init.rs`), then exits. Pid 1 starts the
//! interpreter with a `CLONE_VFORK` clone that confines itself (Landlock, seccomp) and execs,
//! then stays as its reaper. The server waits only until the interpreter has exec'd, as before.
//! The spawned [`Child`] is pid 1; its wait reports the interpreter's own exit status.
//!
//! Pid 1 shares the server's memory but is a process of its own: a `kill -9` of the server leaves
//! it (and so the whole run) alive, and `PR_SET_PDEATHSIG` cannot help (its parent is whichever
//! server thread cloned it, and `getppid()` is 0 in its namespace). So every pid 1 watches the
//! server's lifeline, a pipe whose write end only the server holds (close-on-exec, never written):
//! when the server dies, the kernel closes it, pid 1 sees the hang-up and exits, and the kernel
//! kills the rest of the namespace.
//!
//! Should a kernel refuse a step in a child that shares the server's memory (`EINVAL`, as
//! `unshare(CLONE_NEWUSER)` does for threads), the [`Spawner`] falls back to a plain fork-like
//! clone for that run and every later one, and says so once in the log.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

mod init;

/// What to start.
#[derive(Debug)]
pub struct Spec<'a> {
    pub program: &'a Path,
    /// argv\[0\] when it must differ from the program (the interpreter of a virtual
    /// environment finds its `pyvenv.cfg` from it); `None`: the program's path.
    pub argv0: Option<&'a OsStr>,
    /// argv\[1..\].
    pub args: Vec<&'a OsStr>,
    pub env: Vec<(&'a OsStr, &'a OsStr)>,
    pub cwd: &'a Path,
    /// A pipe for stdin; otherwise `/dev/null`.
    pub stdin_piped: bool,
}

/// Runs in the child before `exec`: must be async-signal-safe (see the module doc).
pub type Hook<'a> = &'a (dyn Fn() -> io::Result<()> + Sync);

/// The sandbox's steps in the child, in two parts: `enter` (cgroups, limits, namespaces) runs
/// in the first child; `confine` (Landlock, seccomp) runs in the process that execs. With
/// `pid_namespace`, a pid 1 stands between them (see the module doc).
#[derive(Clone, Copy)]
pub struct Hooks<'a> {
    pub enter: Hook<'a>,
    /// After `enter` and the pid namespace, before pid 1 or the program starts: the run gives
    /// up the namespace's root (and every capability) for its own uid.
    pub run_user: Hook<'a>,
    pub confine: Hook<'a>,
    pub pid_namespace: bool,
}

impl std::fmt::Debug for Hooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("pid_namespace", &self.pid_namespace)
            .finish_non_exhaustive()
    }
}

/// Whether this build can give runs a pid namespace (pid 1 needs raw syscalls for its CPU).
pub const PID_NAMESPACE_SUPPORTED: bool = init::SUPPORTED;

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The hook failed in the child; the program never ran.
    #[error("the sandbox could not be applied in the child: {0}")]
    Hook(io::Error),
    /// Anything else: pipes, the folder, the process group, the program itself.
    #[error("{what}: {source}")]
    Start {
        what: &'static str,
        source: io::Error,
    },
}

impl SpawnError {
    fn start(what: &'static str) -> impl FnOnce(io::Error) -> Self {
        move |source| Self::Start { what, source }
    }
}

impl From<SpawnError> for io::Error {
    fn from(e: SpawnError) -> Self {
        let kind = match &e {
            SpawnError::Hook(source) | SpawnError::Start { source, .. } => source.kind(),
        };
        io::Error::new(kind, e.to_string())
    }
}

/// A child started by [`Spawner::spawn`], in its own process group. Not reaped until
/// [`Child::try_wait`] or [`Child::wait`] reports its end; dropping it kills and reaps it
/// (blocking for the reap: an async caller drops it off its reactor threads).
/// The pipes are plain blocking fds; the server registers them with its reactor.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    /// Readable once the child has exited (`pidfd_open`): what an event loop waits on.
    pidfd: OwnedFd,
    reaped: bool,
    /// With a pid namespace: where pid 1 writes the interpreter's wait status before it exits.
    status: Option<OwnedFd>,
    /// With a pid namespace: the stack pid 1 runs on, in the server's memory; freed only once
    /// pid 1 is reaped.
    init_stack: Option<Vec<u128>>,
    pub stdin: Option<std::io::PipeWriter>,
    pub stdout: Option<std::io::PipeReader>,
    pub stderr: Option<std::io::PipeReader>,
}

/// Sizes the child's stack: it runs a few syscall wrappers, far below this.
const CHILD_STACK: usize = 64 * 1024;
/// What the child reports it failed at.
const STEP_HOOK: i32 = 1;
const STEP_STDIO: i32 = 2;
const STEP_CWD: i32 = 3;
const STEP_GROUP: i32 = 4;
const STEP_EXEC: i32 = 5;
const STEP_FDS: i32 = 6;
const STEP_PID_NAMESPACE: i32 = 7;
const STEP_INIT: i32 = 8;
/// Not a failure: the message carries pid 1's pid (in the server's namespace) in place of errno.
const REPORT_INIT_PID: i32 = 0;

/// How the child is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Shares the server's memory; the calling thread waits until it execs or dies.
    SharedMemory,
    /// A copy of the server's memory, as `fork()` makes.
    Copy,
}

/// Everything the child reads, made before the clone.
struct Prepared<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CString,
    stdio: [RawFd; 3],
    report: RawFd,
    mask: libc::sigset_t,
    hooks: Option<Hooks<'a>>,
    /// Pid namespace only: pid 1's stack top, the interpreter's stack top, the status pipe, the
    /// read end of the server's lifeline.
    init_stack: *mut libc::c_void,
    exec_stack: *mut libc::c_void,
    status: RawFd,
    lifeline: RawFd,
}

/// The server's lifeline (read end, write end): made once, held for the server's whole life.
static LIFELINE: Mutex<Option<(OwnedFd, OwnedFd)>> = Mutex::new(None);

/// The read end of the server's lifeline, made on first use. Both ends are close-on-exec: no
/// program the server starts holds the write end, so it closes only when the server dies.
fn lifeline() -> io::Result<RawFd> {
    let mut held = LIFELINE.lock().unwrap_or_else(PoisonError::into_inner);
    if held.is_none() {
        *held = Some(pipe()?);
    }
    Ok(held.as_ref().map_or(-1, |(read, _)| read.as_raw_fd()))
}

/// Spawns runs; remembers when this kernel needs the fork-like fallback.
#[derive(Debug, Default)]
pub struct Spawner {
    copy_only: AtomicBool,
}

impl Spawner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `spec` with `hook` applied in the child, in a new process group whose id is its
    /// pid. Blocks the calling thread until the child has exec'd (well under a millisecond).
    pub fn spawn(&self, spec: &Spec<'_>, hooks: Option<Hooks<'_>>) -> Result<Child, SpawnError> {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| SpawnError::Start {
                what: "preparing the command",
                source: invalid("NUL byte in an argument"),
            })
        };
        let program = c(spec.program.as_os_str())?;
        let cwd = c(spec.cwd.as_os_str())?;
        let mut args = vec![match spec.argv0 {
            Some(argv0) => c(argv0)?,
            None => program.clone(),
        }];
        for a in &spec.args {
            args.push(c(a)?);
        }
        let mut env = Vec::with_capacity(spec.env.len());
        for (k, v) in &spec.env {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            env.push(CString::new(pair).map_err(|_| SpawnError::Start {
                what: "preparing the command",
                source: invalid("NUL byte in the environment"),
            })?);
        }
        let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let (argv, envp) = (pointers(&args), pointers(&env));

        let (stdin_child, stdin_parent) = if spec.stdin_piped {
            let (r, w) = pipe().map_err(SpawnError::start("making the stdin pipe"))?;
            (r, Some(w))
        } else {
            let null =
                std::fs::File::open("/dev/null").map_err(SpawnError::start("opening /dev/null"))?;
            (OwnedFd::from(null), None)
        };
        let pipes = SpawnError::start("making the output pipes");
        let ((stdout_parent, stdout_child), (stderr_parent, stderr_child)) =
            pipe().and_then(|out| Ok((out, pipe()?))).map_err(pipes)?;
        let stdio = [
            stdin_child.as_raw_fd(),
            stdout_child.as_raw_fd(),
            stderr_child.as_raw_fd(),
        ];
        let pid_namespace = hooks.is_some_and(|h| h.pid_namespace);
        let start = |mode| {
            start(
                Prepared {
                    program: &program,
                    argv: &argv,
                    envp: &envp,
                    cwd: &cwd,
                    stdio,
                    report: -1,
                    // SAFETY: a zeroed sigset_t is valid; `start` overwrites it.
                    mask: unsafe { std::mem::zeroed() },
                    hooks,
                    init_stack: std::ptr::null_mut(),
                    exec_stack: std::ptr::null_mut(),
                    status: -1,
                    lifeline: -1,
                },
                mode,
                pid_namespace,
            )
        };
        let started = if self.copy_only.load(Ordering::Relaxed) {
            start(Mode::Copy)?
        } else {
            match start(Mode::SharedMemory) {
                Err(SpawnError::Hook(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                    tracing::warn!(
                        "this kernel refuses a sandbox step in a child sharing the server's \
                         memory ({e}); spawning runs with a fork from now on (slower)"
                    );
                    self.copy_only.store(true, Ordering::Relaxed);
                    start(Mode::Copy)?
                }
                other => other?,
            }
        };
        let pid = started.pid;
        drop((stdin_child, stdout_child, stderr_child));

        // From here on, an error drops `child`, which kills and reaps the process.
        let pidfd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                // SAFETY: our own child, not reaped yet: the pid cannot have been reused.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                reap_blocking(pid);
                return Err(SpawnError::Start {
                    what: "watching the child",
                    source: e,
                });
            }
        };
        Ok(Child {
            pid,
            pidfd,
            reaped: false,
            status: started.status,
            init_stack: started.init_stack,
            stdin: stdin_parent.map(std::io::PipeWriter::from),
            stdout: Some(std::io::PipeReader::from(stdout_parent)),
            stderr: Some(std::io::PipeReader::from(stderr_parent)),
        })
    }
}

/// What `start` made: the process to wait for, and with a pid namespace, pid 1's status pipe and
/// stack.
struct Started {
    pid: libc::pid_t,
    status: Option<OwnedFd>,
    init_stack: Option<Vec<u128>>,
}

/// Clones the child in `mode` and waits for its report: the pid once the program has exec'd.
fn start(
    mut prepared: Prepared<'_>,
    mode: Mode,
    pid_namespace: bool,
) -> Result<Started, SpawnError> {
    let (report_r, report_w) = pipe().map_err(SpawnError::start("making the report pipe"))?;
    prepared.report = report_w.as_raw_fd();
    let mut stack = vec![0u128; CHILD_STACK / 16];
    // Pid namespace only: pid 1's stack (lives as long as pid 1), the interpreter's (until it
    // exec'd), the status pipe.
    let mut extra = None;
    if pid_namespace {
        let status = pipe().map_err(SpawnError::start("making the status pipe"))?;
        let mut init_stack = vec![0u128; CHILD_STACK / 16];
        let mut exec_stack = vec![0u128; CHILD_STACK / 16];
        // SAFETY: one past the end of each stack, which grows down.
        unsafe {
            prepared.init_stack = init_stack.as_mut_ptr().add(init_stack.len()).cast();
            prepared.exec_stack = exec_stack.as_mut_ptr().add(exec_stack.len()).cast();
        }
        prepared.status = status.1.as_raw_fd();
        prepared.lifeline =
            lifeline().map_err(SpawnError::start("making the server's lifeline"))?;
        extra = Some((status, init_stack, exec_stack));
    }
    let flags = match mode {
        Mode::SharedMemory => libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
        Mode::Copy => libc::SIGCHLD,
    };
    // SAFETY: sigfillset/pthread_sigmask on valid sigset_t values owned here.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut prepared.mask);
    }
    // SAFETY: the child runs `child_main` on `stack` (16-byte aligned; its top is passed, as
    // stacks grow down). Sharing our memory, it only reads `prepared` and what it points to,
    // which CLONE_VFORK keeps alive and unchanged until it has exec'd or exited (with a pid
    // namespace, it exits only once the interpreter has exec'd); with a copy of our memory, it
    // reads its own copy.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        libc::clone(
            child_main,
            top,
            flags,
            (&prepared as *const Prepared<'_>).cast_mut().cast(),
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores this thread's own mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &prepared.mask, std::ptr::null_mut()) };
    drop(report_w);
    if pid < 0 {
        return Err(SpawnError::Start {
            what: "clone",
            source: clone_error,
        });
    }
    let Some((status, init_stack, exec_stack)) = extra else {
        // EOF: the child exec'd (the pipe is close-on-exec). Otherwise it says what failed.
        let mut report = [0u8; 8];
        if read_full(&report_r, &mut report) {
            reap_blocking(pid);
            return Err(report_error(report));
        }
        drop(stack);
        return Ok(Started {
            pid,
            status: None,
            init_stack: None,
        });
    };
    drop(status.1);
    // The first child exits once pid 1 has started the interpreter (or something failed).
    reap_blocking(pid);
    drop((stack, exec_stack));
    let mut init = None;
    let mut report = [0u8; 8];
    let failure = loop {
        if !read_full(&report_r, &mut report) {
            break None;
        }
        let (step, value) = decode(report);
        if step == REPORT_INIT_PID {
            init = Some(value);
        } else {
            break Some(report_error(report));
        }
    };
    match (init, failure) {
        (Some(init), None) => Ok(Started {
            pid: init,
            status: Some(status.0),
            init_stack: Some(init_stack),
        }),
        (init, failure) => {
            if let Some(init) = init {
                // SAFETY: our own child (CLONE_PARENT), not reaped yet.
                unsafe { libc::kill(init, libc::SIGKILL) };
                reap_blocking(init);
            }
            drop(init_stack);
            Err(failure.unwrap_or_else(|| SpawnError::Start {
                what: "the run's pid 1 did not start",
                source: io::Error::from_raw_os_error(libc::ECHILD),
            }))
        }
    }
}

fn decode(report: [u8; 8]) -> (i32, i32) {
    let step = i32::from_ne_bytes([report[0], report[1], report[2], report[3]]);
    let value = i32::from_ne_bytes([report[4], report[5], report[6], report[7]]);
    (step, value)
}

fn report_error(report: [u8; 8]) -> SpawnError {
    let (step, errno) = decode(report);
    let cause = io::Error::from_raw_os_error(errno);
    match step {
        STEP_HOOK => SpawnError::Hook(cause),
        step => SpawnError::Start {
            what: step_name(step),
            source: cause,
        },
    }
}

fn step_name(step: i32) -> &'static str {
    match step {
        STEP_STDIO => "the child's stdio could not be set up",
        STEP_CWD => "the child could not enter the script's folder",
        STEP_GROUP => "the child could not get its own process group",
        STEP_FDS => "the child could not close the server's file descriptors",
        STEP_PID_NAMESPACE => "the run's pid namespace could not be made",
        STEP_INIT => "the run's pid 1 could not be started",
        _ => "the interpreter could not be executed",
    }
}

/// Writes (step, value) to the report pipe. Async-signal-safe.
///
/// # Safety
/// `fd` is the report pipe's write end.
unsafe fn report(fd: RawFd, step: i32, value: i32) {
    let mut message = [0u8; 8];
    message[..4].copy_from_slice(&step.to_ne_bytes());
    message[4..].copy_from_slice(&value.to_ne_bytes());
    libc::write(fd, message.as_ptr().cast(), message.len());
}

/// The first child: stdio, sandbox, folder, fds; then either exec (no pid namespace) or a pid
/// namespace and its pid 1. Never returns to the server's code.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` of `start`, alive and unchanged while the child needs it.
    let p = unsafe { &*(arg as *const Prepared<'_>) };
    let fail = |step: i32, errno: i32| -> libc::c_int {
        // SAFETY: one write to the report pipe, then leaves the child at once, without running
        // any of the server's code.
        unsafe {
            report(p.report, step, errno);
            libc::_exit(127)
        }
    };
    let hook_error = |e: io::Error| e.raw_os_error().unwrap_or(libc::EPERM);
    // SAFETY: raw syscalls on fds, strings and masks prepared by the parent.
    unsafe {
        // No server handler may run here, and a run does not inherit what the server's own
        // parent ignored (a shell's background job ignores SIGINT and SIGQUIT, `nohup` SIGHUP:
        // a script could not trap them, Python would install no KeyboardInterrupt, and pid 1
        // would lose its children to an ignored SIGCHLD): every signal back to its default.
        for sig in 1..libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        for (target, &fd) in p.stdio.iter().enumerate() {
            if libc::dup2(fd, target as RawFd) < 0 {
                return fail(STEP_STDIO, errno());
            }
        }
        let pid_namespace = p.hooks.is_some_and(|h| h.pid_namespace);
        if !pid_namespace && libc::setpgid(0, 0) != 0 {
            return fail(STEP_GROUP, errno());
        }
        if let Some(hooks) = p.hooks {
            if let Err(e) = (hooks.enter)() {
                return fail(STEP_HOOK, hook_error(e));
            }
        }
        // After the hook: joining the sandbox's file view moves the child to the view's root.
        if libc::chdir(p.cwd.as_ptr()) != 0 {
            return fail(STEP_CWD, errno());
        }
        // Only fds 0-2 (and the spawner's own pipes, close-on-exec) cross into the program,
        // whatever the server inherited or opened without close-on-exec.
        if close_from(3) != 0 {
            return fail(STEP_FDS, errno());
        }
        if pid_namespace {
            if libc::unshare(libc::CLONE_NEWPID) != 0 {
                return fail(STEP_PID_NAMESPACE, errno());
            }
            if let Some(hooks) = p.hooks {
                if let Err(e) = (hooks.run_user)() {
                    return fail(STEP_HOOK, hook_error(e));
                }
            }
            // "Interpreter started": made here, not by the server, so that only this child, pid 1
            // and the interpreter (until its exec, close-on-exec) hold its write end. A pipe the
            // server held would never reach EOF while the server's thread waits for this child.
            let mut ready = [-1; 2];
            if libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return fail(STEP_INIT, errno());
            }
            // Pid 1 shares this memory (no copy) and is the server's own child.
            let init = libc::clone(
                init_main,
                p.init_stack,
                libc::CLONE_VM | libc::CLONE_PARENT | libc::SIGCHLD,
                arg,
            );
            if init < 0 {
                return fail(STEP_INIT, errno());
            }
            report(p.report, REPORT_INIT_PID, init);
            // Wait until pid 1 has started the interpreter: `prepared` must stay alive until
            // then, and the server's thread waits for this child to exit.
            libc::close(ready[1]);
            let mut byte = 0u8;
            while libc::read(ready[0], (&mut byte as *mut u8).cast(), 1) < 0
                && errno() == libc::EINTR
            {}
            libc::_exit(0);
        }
        if let Some(hooks) = p.hooks {
            if let Err(e) = (hooks.run_user)().and_then(|()| (hooks.confine)()) {
                return fail(STEP_HOOK, hook_error(e));
            }
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &p.mask, std::ptr::null_mut());
        libc::execve(p.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
    }
    fail(STEP_EXEC, errno())
}

/// Pid 1 of the run's pid namespace: its own process group, the interpreter, then `init::serve`.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` of `start`, alive until this process closes the first
    // child's "interpreter started" pipe.
    let p = unsafe { &*(arg as *const Prepared<'_>) };
    // SAFETY: raw syscalls while the server's thread waits (see `child_main`); once "started" is
    // closed, only `init::serve`, which writes no errno and touches only its stack.
    unsafe {
        if libc::setpgid(0, 0) != 0 {
            report(p.report, STEP_GROUP, errno());
            libc::_exit(127);
        }
        let interpreter = libc::clone(
            exec_main,
            p.exec_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        if interpreter < 0 {
            report(p.report, STEP_EXEC, errno());
            libc::_exit(127);
        }
        // Pid 1 keeps only the status pipe. Closing "started" lets the first child exit and the
        // server's thread go on: from here, no libc (it would write that thread's errno).
        init::serve(interpreter, p.status, p.lifeline)
    }
}

/// The interpreter's process: the sandbox's confining steps, the caller's signal mask, exec.
extern "C" fn exec_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` of `start`, alive until this process has exec'd or died.
    let p = unsafe { &*(arg as *const Prepared<'_>) };
    // SAFETY: raw syscalls on prepared data; pid 1 waits (CLONE_VFORK).
    unsafe {
        if let Some(hooks) = p.hooks {
            if let Err(e) = (hooks.confine)() {
                report(p.report, STEP_HOOK, e.raw_os_error().unwrap_or(libc::EPERM));
                libc::_exit(127);
            }
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &p.mask, std::ptr::null_mut());
        libc::execve(p.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        report(p.report, STEP_EXEC, errno());
        libc::_exit(127)
    }
}

/// Marks every descriptor from 3 up close-on-exec in this process: whatever the server inherited
/// (a supervisor's socket, a terminal's pipe, a leaked log file) never reaches a script, even
/// through a spawn that does not close it itself. Call first thing in `main`.
pub fn seal_inherited_fds() -> io::Result<()> {
    // SAFETY: `close_from` only sets FD_CLOEXEC on this process's own descriptors; it passes no
    // pointer and closes nothing.
    if unsafe { close_from(3) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Marks every fd from `first` up close-on-exec (`close_range`, Linux 5.11); on older kernels,
/// one by one up to the fd limit. Async-signal-safe (raw syscalls only, as a child between clone
/// and exec needs). 0 on success.
///
/// # Safety
/// Changes the flags of every descriptor of the calling process from `first` up.
unsafe fn close_from(first: libc::c_uint) -> libc::c_int {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    let rc = libc::syscall(
        libc::SYS_close_range,
        first,
        libc::c_uint::MAX,
        CLOSE_RANGE_CLOEXEC,
    );
    if rc == 0 {
        return 0;
    }
    if *libc::__errno_location() != libc::ENOSYS && *libc::__errno_location() != libc::EINVAL {
        return -1;
    }
    let mut limit: libc::rlimit = std::mem::zeroed();
    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
        return -1;
    }
    let last = limit.rlim_cur.min(1 << 20) as libc::c_int;
    for fd in first as libc::c_int..last {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
    0
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

/// Reads exactly `buf.len()` bytes; false at EOF (or error) before that.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> bool {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the unfilled part of `buf` from an fd we own.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
    true
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh fds that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Reaps `pid` (our child), waiting for it.
fn reap_blocking(pid: libc::pid_t) -> Option<libc::c_int> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Some(status);
        }
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

impl Child {
    /// The child's pid (and process group id); `Option` like std's and tokio's `Child::id`.
    pub fn id(&self) -> Option<u32> {
        Some(self.pid.unsigned_abs())
    }

    /// Readable once the child has exited; an event loop waits on it, then calls
    /// [`Child::try_wait`].
    pub fn exit_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.pidfd.as_fd()
    }

    /// Reaps the child if it has exited: its exit status (with a pid namespace, the
    /// interpreter's own), or `None` while it runs.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.reaped {
            return Err(io::Error::other("child already reaped"));
        }
        let mut status = 0;
        // SAFETY: our own child; `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if rc == self.pid {
            Ok(Some(self.reaped(status)))
        } else if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(None)
        }
    }

    /// Waits for the child to exit, blocking the calling thread, and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if self.reaped {
            return Err(io::Error::other("child already reaped"));
        }
        let status = reap_blocking(self.pid).ok_or_else(io::Error::last_os_error)?;
        Ok(self.reaped(status))
    }

    /// Bookkeeping once `status` was reaped: pid 1's stack is free now.
    fn reaped(&mut self, status: libc::c_int) -> ExitStatus {
        self.reaped = true;
        self.init_stack = None;
        ExitStatus::from_raw(self.interpreter_status().unwrap_or(status))
    }

    /// With a pid namespace, the interpreter's wait status as pid 1 wrote it before exiting;
    /// `None` when pid 1 was killed first (then its own status tells how the run ended).
    fn interpreter_status(&self) -> Option<libc::c_int> {
        let fd = self.status.as_ref()?;
        let mut bytes = [0u8; 4];
        // SAFETY: reads into a stack buffer from a pipe we own whose writers are all gone.
        let n = unsafe { libc::read(fd.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len()) };
        (n == 4).then(|| libc::c_int::from_ne_bytes(bytes))
    }

    /// Reads stdout and stderr to their end (one thread for stderr) and waits for the child,
    /// blocking: for callers without an event loop (tests, benchmarks).
    pub fn wait_with_output(mut self) -> io::Result<std::process::Output> {
        use std::io::Read;
        drop(self.stdin.take());
        let err = self.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                pipe.read_to_end(&mut bytes).map(|_| bytes)
            })
        });
        let mut stdout = Vec::new();
        if let Some(mut pipe) = self.stdout.take() {
            pipe.read_to_end(&mut stdout)?;
        }
        let stderr = match err {
            Some(reader) => reader
                .join()
                .map_err(|_| io::Error::other("the stderr reader panicked"))??,
            None => Vec::new(),
        };
        let status = self.wait()?;
        Ok(std::process::Output {
            status,
            stdout,
            stderr,
        })
    }

    /// Whether the child has been reaped (then dropping it blocks on nothing).
    pub fn is_reaped(&self) -> bool {
        self.reaped
    }

    /// Sends SIGKILL to the child (not its group; the runner kills the group).
    pub fn start_kill(&mut self) -> io::Result<()> {
        // SAFETY: our own, not yet reaped, child: the pid cannot have been reused.
        if !self.reaped && unsafe { libc::kill(self.pid, libc::SIGKILL) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Child {
    /// Kills and reaps the child, blocking until it is gone (microseconds to milliseconds).
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        let _ = self.start_kill();
        reap_blocking(self.pid);
        // Pid 1 ran on `init_stack` until now; it is freed with `self`.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::atomic::AtomicUsize;

    fn spec<'a>(args: &'a [&'a str], stdin_piped: bool) -> Spec<'a> {
        Spec {
            program: Path::new("/bin/sh"),
            argv0: None,
            args: args.iter().map(OsStr::new).collect(),
            env: vec![(OsStr::new("GREETING"), OsStr::new("hi there"))],
            cwd: Path::new("/"),
            stdin_piped,
        }
    }

    /// The normal spawner, and one already fallen back to fork-like clones.
    fn spawners() -> [Spawner; 2] {
        [
            Spawner::new(),
            Spawner {
                copy_only: AtomicBool::new(true),
            },
        ]
    }

    fn no_step() -> io::Result<()> {
        Ok(())
    }

    /// `hook` as the entering step, nothing to confine, no pid namespace.
    fn entering(hook: Hook<'_>) -> Option<Hooks<'_>> {
        Some(Hooks {
            enter: hook,
            run_user: &no_step,
            confine: &no_step,
            pid_namespace: false,
        })
    }

    /// Starts `args` with `hooks` (stdin empty) and waits for its end: its status and stdout.
    fn run_to_end(
        spawner: &Spawner,
        args: &[&str],
        hooks: Option<Hooks<'_>>,
    ) -> (ExitStatus, String) {
        let out = spawner
            .spawn(&spec(args, false), hooks)
            .unwrap()
            .wait_with_output()
            .unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn read_all(mut r: std::io::PipeReader) -> String {
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn argv0_is_what_the_program_is_told_and_the_program_is_what_runs() {
        for spawner in spawners() {
            let spec = Spec {
                argv0: Some(OsStr::new("/not/a/shell")),
                ..spec(&["-c", "echo \"$0\""], false)
            };
            let out = spawner
                .spawn(&spec, None)
                .unwrap()
                .wait_with_output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), "/not/a/shell\n");
        }
    }

    #[test]
    fn runs_with_env_cwd_stdin_its_own_group_and_exit_code() {
        let script = r#"read line; echo "$GREETING|$(pwd)|$line|$$|$(cut -d' ' -f5 /proc/$$/stat)"; echo oops >&2; exit 3"#;
        for spawner in spawners() {
            let mut child = spawner.spawn(&spec(&["-c", script], true), None).unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"from stdin\n").unwrap();
            drop(stdin);
            let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            let pid = child.id().unwrap();
            let status = child.wait().unwrap();
            let out = read_all(out);
            let fields: Vec<&str> = out.trim().split('|').collect();
            assert_eq!(&fields[..3], ["hi there", "/", "from stdin"], "{out}");
            assert_eq!(fields[3], pid.to_string());
            assert_eq!(
                fields[4].trim(),
                pid.to_string(),
                "not its own process group"
            );
            assert_eq!(read_all(err), "oops\n");
            assert_eq!(status.code(), Some(3));
        }
    }

    /// As root a pid namespace needs nothing more; otherwise a user namespace first.
    fn may_make_a_pid_namespace() -> io::Result<()> {
        // SAFETY: geteuid has no preconditions; unshare changes only this child's namespaces.
        unsafe {
            if libc::geteuid() != 0 && libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    fn in_pid_namespace() -> Option<Hooks<'static>> {
        Some(Hooks {
            enter: &may_make_a_pid_namespace,
            run_user: &no_step,
            confine: &no_step,
            pid_namespace: PID_NAMESPACE_SUPPORTED,
        })
    }

    #[test]
    fn in_a_pid_namespace_the_script_is_pid_2_and_its_exit_code_or_signal_is_reported() {
        for spawner in spawners() {
            let (status, out) =
                run_to_end(&spawner, &["-c", "echo $$; exit 7"], in_pid_namespace());
            assert_eq!(out.trim(), "2", "pid 1 is the reaper");
            assert_eq!(status.code(), Some(7));

            let (status, _) = run_to_end(&spawner, &["-c", "kill -KILL $$"], in_pid_namespace());
            assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        }
    }

    #[test]
    fn signals_sent_to_the_run_reach_the_script_through_pid_1() {
        for signal in [libc::SIGTERM, libc::SIGINT] {
            let script = "trap 'echo caught; exit 3' TERM INT; echo ready; \
                          while :; do sleep 0.05; done";
            let mut child = Spawner::new()
                .spawn(&spec(&["-c", script], false), in_pid_namespace())
                .unwrap();
            let mut out = child.stdout.take().unwrap();
            let mut seen = Vec::new();
            while !seen.ends_with(b"ready\n") {
                let mut byte = [0u8; 1];
                assert_eq!(out.read(&mut byte).unwrap(), 1, "no ready line");
                seen.push(byte[0]);
            }
            // SAFETY: our own child, not reaped yet.
            assert_eq!(unsafe { libc::kill(child.pid, signal) }, 0);
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(3), "signal {signal}: {status:?}");
            assert_eq!(read_all(out), "caught\n");
        }
    }

    #[test]
    fn in_a_pid_namespace_orphans_die_with_the_script() {
        let marker = tempfile::tempdir().unwrap();
        let file = marker.path().join("orphan-alive");
        // The orphan would touch the file after the script is gone, were it still alive.
        let script = format!("(sleep 0.5; touch {}) & exit 0", file.display());
        let mut child = Spawner::new()
            .spawn(&spec(&["-c", &script], false), in_pid_namespace())
            .unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(1000));
        assert!(!file.exists(), "an orphan outlived its run");
    }

    #[test]
    fn only_stdin_stdout_and_stderr_cross_into_the_program() {
        // A descriptor the server holds without close-on-exec (inherited from whoever started
        // it): a file the run must not read.
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), "secret").unwrap();
        let file = std::fs::File::open(secret.path()).unwrap();
        let fd = file.as_raw_fd();
        // SAFETY: F_SETFD on a descriptor this test owns.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        let script = format!("(cat <&{fd}) 2>/dev/null; ls /proc/self/fd");
        for hooks in [None, in_pid_namespace()] {
            let (_, out) = run_to_end(&Spawner::new(), &["-c", &script], hooks);
            assert!(!out.contains("secret"), "{out}");
            // 0-2, and the one `ls` opened to list them.
            let fds: Vec<&str> = out.split_whitespace().collect();
            assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
        }
        drop(file);
    }

    #[test]
    fn a_signal_the_server_ignores_is_back_to_its_default_in_the_program() {
        // SIGUSR1 ignored in this process while it spawns (no other test uses SIGUSR1), as a
        // shell ignores SIGINT for a background job.
        // SAFETY: sets and restores this process's disposition of one signal.
        let old = unsafe { libc::signal(libc::SIGUSR1, libc::SIG_IGN) };
        // `/proc/self`: grep's own status (ignored signals stay ignored through `exec`).
        let script = "grep SigIgn /proc/self/status";
        let outputs: Vec<String> = spawners()
            .iter()
            .flat_map(|spawner| [None, in_pid_namespace()].map(|hooks| (spawner, hooks)))
            .map(|(spawner, hooks)| {
                let (_, out) = run_to_end(spawner, &["-c", script], hooks);
                out
            })
            .collect();
        // SAFETY: restores the disposition saved above.
        unsafe { libc::signal(libc::SIGUSR1, old) };
        for out in outputs {
            let mask = out
                .split_whitespace()
                .nth(1)
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .unwrap_or_else(|| panic!("no SigIgn line: {out}"));
            assert_eq!(
                mask & 1 << (libc::SIGUSR1 - 1),
                0,
                "SIGUSR1 still ignored: {out}"
            );
        }
    }

    #[test]
    fn stdin_is_empty_unless_piped() {
        let (status, out) = run_to_end(&Spawner::new(), &["-c", "cat; echo end"], None);
        assert!(status.success());
        assert_eq!(out, "end\n");
    }

    #[test]
    fn a_failing_hook_fails_the_spawn_and_nothing_runs() {
        let marker = tempfile::tempdir().unwrap();
        let file = marker.path().join("ran");
        let script = format!("touch {}", file.display());
        let hook = || Err(io::Error::from_raw_os_error(libc::EACCES));
        for spawner in spawners() {
            let err = spawner
                .spawn(&spec(&["-c", &script], false), entering(&hook))
                .unwrap_err();
            assert!(
                matches!(&err, SpawnError::Hook(e) if e.raw_os_error() == Some(libc::EACCES)),
                "{err}"
            );
            assert!(err.to_string().contains("sandbox"), "{err}");
            assert!(!file.exists(), "the program ran although the hook failed");
        }
    }

    #[test]
    fn a_step_refused_in_shared_memory_falls_back_to_a_copy_for_good() {
        // In shared memory the child's increment is seen here; in a copy it is not.
        let calls = AtomicUsize::new(0);
        let hook = || {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(())
            }
        };
        let spawner = Spawner::new();
        for _ in 0..2 {
            let (status, out) = run_to_end(&spawner, &["-c", "echo ran"], entering(&hook));
            assert!(status.success());
            assert_eq!(out, "ran\n");
        }
        assert!(spawner.copy_only.load(Ordering::Relaxed));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "copies do not write back");
    }

    #[test]
    fn the_hook_runs_in_the_child_only() {
        // The hook lowers RLIMIT_NOFILE: the child sees it, the server keeps its own.
        let ours = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let hook = || {
            let limit = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            // SAFETY: setrlimit with a valid struct.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        for spawner in spawners() {
            let (_, out) = run_to_end(&spawner, &["-c", "ulimit -n"], entering(&hook));
            assert_eq!(out.trim(), "64");
            let after = rustix::process::getrlimit(rustix::process::Resource::Nofile);
            assert_eq!(ours.current, after.current);
        }
    }

    #[test]
    fn a_missing_program_or_folder_is_an_error_not_a_child() {
        for spawner in spawners() {
            let mut s = spec(&[], false);
            s.program = Path::new("/nonexistent/python3");
            let err = io::Error::from(spawner.spawn(&s, None).unwrap_err());
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
            let mut s = spec(&[], false);
            s.cwd = Path::new("/nonexistent-folder");
            let err = io::Error::from(spawner.spawn(&s, None).unwrap_err());
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
            assert!(err.to_string().contains("folder"), "{err}");
        }
    }

    #[test]
    fn dropping_an_unfinished_child_kills_and_reaps_it() {
        let child = Spawner::new()
            .spawn(&spec(&["-c", "sleep 60"], false), None)
            .unwrap();
        let pid = child.id().unwrap();
        drop(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "child {pid} still there"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

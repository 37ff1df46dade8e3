//! seccomp as an allowlist, compiled to one BPF program once at start-up: the syscalls a run
//! may make ([`ALLOWED`]) pass; the dangerous ones ([`DENIED`]) get `EPERM`; a few pass only
//! with safe arguments (modes without set-id bits, sockets of listed families ([`Sockets`]), `clone` without
//! namespaces, `prlimit64` on itself); every other number gets `ENOSYS`, the answer of a kernel
//! that lacks the call, on which libc and runtimes fall back to an older call (`clone3` to
//! `clone`, `openat2` to `openat`) and Python raises a plain `OSError`.
//!
//! The list holds what CPython, its native packages (numpy, pandas, scipy, matplotlib,
//! scikit-learn and their BLAS and OpenMP threads), multiprocessing, asyncio and the installers
//! (pip, uv) were seen to need, with Docker's default profile as the reference, needing far
//! less: no admin, tracing, keyring, kernel-module, clock-setting or id-changing calls.

use super::bpf::{self, Action, ArgIn, ArgTest, BpfError, FilterSpec, Outcome, Rule};
use crate::error::SandboxError;

/// Allowed whatever their arguments; any number in neither list nor the argument rules below gets
/// `ENOSYS`.
const ALLOWED: &[i64] = &[
    // Files and descriptors (Landlock and the view decide which files).
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_lseek,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_fcntl,
    libc::SYS_ioctl,
    libc::SYS_flock,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_sync,
    libc::SYS_syncfs,
    libc::SYS_ftruncate,
    libc::SYS_truncate,
    libc::SYS_fallocate,
    libc::SYS_fadvise64,
    libc::SYS_readahead,
    libc::SYS_sendfile,
    libc::SYS_copy_file_range,
    libc::SYS_splice,
    libc::SYS_tee,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlinkat,
    libc::SYS_getdents64,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_renameat2,
    libc::SYS_unlinkat,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_utimensat,
    libc::SYS_umask,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_fgetxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_flistxattr,
    // Memory.
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_mlock,
    libc::SYS_munlock,
    libc::SYS_mlock2,
    libc::SYS_mlockall,
    libc::SYS_munlockall,
    libc::SYS_membarrier,
    libc::SYS_memfd_create,
    libc::SYS_mbind,
    libc::SYS_get_mempolicy,
    libc::SYS_set_mempolicy,
    // Processes, threads, ids (reading only), scheduling of its own threads.
    libc::SYS_execve,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_gettid,
    libc::SYS_getpgid,
    libc::SYS_getsid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getgroups,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_capget,
    libc::SYS_set_tid_address,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_rseq,
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    libc::SYS_prctl,
    // A script may only narrow itself further.
    libc::SYS_seccomp,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_getparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_getattr,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_getpriority,
    libc::SYS_setpriority,
    // Time, limits, the machine's description.
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_times,
    libc::SYS_getrusage,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_getrandom,
    libc::SYS_getcpu,
    // Signals and timers (the pid namespace and Landlock's scope bound whom they reach).
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigpending,
    libc::SYS_rt_sigsuspend,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_sigaltstack,
    libc::SYS_setitimer,
    libc::SYS_getitimer,
    libc::SYS_timer_create,
    libc::SYS_timer_settime,
    libc::SYS_timer_gettime,
    libc::SYS_timer_getoverrun,
    libc::SYS_timer_delete,
    libc::SYS_restart_syscall,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    // Waiting on descriptors, event and notification descriptors, pipes.
    libc::SYS_ppoll,
    libc::SYS_pselect6,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_eventfd2,
    libc::SYS_signalfd4,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    libc::SYS_pipe2,
    // Sockets once made (`socket` itself has its own rule).
    libc::SYS_socketpair,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_connect,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_shutdown,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    // SysV and POSIX IPC: the run's own IPC namespace holds nothing but its own objects.
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
    // x86_64's older calls, which other tables lack or `libc` does not name for them (their
    // newer forms are above).
    #[cfg(target_arch = "x86_64")]
    libc::SYS_sync_file_range,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_renameat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_setrlimit,
    // A thread's shadow stack, when glibc turns on the CPU's shadow stacks.
    #[cfg(target_arch = "x86_64")]
    SYS_MAP_SHADOW_STACK,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_stat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lstat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_access,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_readlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getdents,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rename,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rmdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_unlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_link,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_symlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_dup2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getpgrp,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_arch_prctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_time,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getrlimit,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pause,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_alarm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_poll,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_select,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_create,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_wait,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_eventfd,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_signalfd,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_inotify_init,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pipe,
];

/// Refused with `EPERM` whatever their arguments.
const DENIED: &[i64] = &[
    // Reading or steering other processes.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    // Leaving the process group the runner kills.
    libc::SYS_setsid,
    libc::SYS_setpgid,
    // Namespaces and mounts.
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // Owners and extended attributes (file capabilities are an xattr). Landlock does not govern
    // them, and a run of a root server keeps kernel uid 0, which owns every root-owned file.
    libc::SYS_chown,
    libc::SYS_fchown,
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
    // Running a file by descriptor (a memfd, a file deleted after opening): Landlock's execute
    // right is checked on paths. `fexecve` needs it; nothing a script usually does.
    libc::SYS_execveat,
    // Kernel attack surface a script never needs.
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_fanotify_init,
    // Machine administration.
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `map_shadow_stack` (Linux 6.6, x86_64), not in `libc` yet.
#[cfg(target_arch = "x86_64")]
const SYS_MAP_SHADOW_STACK: i64 = 453;

/// `setxattrat`/`removexattrat` (Linux 6.13; the same number on every architecture's generic
/// table and on x86_64), not in `libc` yet.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// Mode bits no run may set on anything: a set-user-ID or set-group-ID file made by a root
/// server's run would run as root for every local user (`nosuid` on the run's own mounts does not
/// help: the host's mount of the same folder honours the bit).
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// The syscalls that take a file mode, and which argument (0-based) holds it. `open`'s mode is
/// only read with `O_CREAT`/`O_TMPFILE`; libc passes 0 otherwise, so testing it always is safe.
const MODE_ARGUMENT: &[(i64, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mkdir, 1),
    (libc::SYS_mkdirat, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// `fchmodat2` (Linux 6.6), not in every `libc` release.
const SYS_FCHMODAT2: i64 = 452;

/// `clone` flags that would create a namespace (`clone3` cannot be inspected: it gets `ENOSYS`,
/// and libc falls back to `clone`).
const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// `clone` flags refused besides: `CLONE_PARENT` makes the new process the sibling of the caller,
/// so the run's pid 1 (or the server) would inherit it: zombies nobody waits for.
const CLONE_REFUSED: u32 = CLONE_NAMESPACES | libc::CLONE_PARENT as u32;

const EPERM: Action = Action::Errno(libc::EPERM as u16);
const ENOSYS: Action = Action::Errno(libc::ENOSYS as u16);

/// The run's BPF program in `libc` layout, ready to install without allocating.
#[derive(Debug)]
pub(super) struct SeccompFilters {
    program: Vec<libc::sock_filter>,
}

impl SeccompFilters {
    /// The allowed syscalls pass; `EPERM` for the denied ones, namespace-creating `clone` and
    /// `socket` but of the families `sockets` allows; `ENOSYS` for everything else; the
    /// process is killed for a syscall of another architecture's table (`int 0x80` on x86_64).
    pub(super) fn compile(sockets: Sockets) -> Result<Self, SandboxError> {
        let program = bpf::assemble(&FilterSpec {
            arch: audit_arch()?,
            wrong_arch: Action::KillProcess,
            rules: &rules(sockets)?,
            default: ENOSYS,
        })
        .map_err(err)?;
        Ok(Self {
            program: program.into_iter().map(bpf::Insn::to_sock_filter).collect(),
        })
    }

    /// Installs the filter on the calling thread (inherited by everything it execs and forks).
    /// Async-signal-safe: one syscall. `PR_SET_NO_NEW_PRIVS` must be set already.
    pub(super) fn install(&self) -> std::io::Result<()> {
        let Ok(len) = u16::try_from(self.program.len()) else {
            return Err(std::io::Error::from_raw_os_error(libc::E2BIG));
        };
        let fprog = libc::sock_fprog {
            len,
            filter: self.program.as_ptr().cast_mut(),
        };
        // SAFETY: `fprog` points to `len` valid instructions that outlive the call; the kernel
        // copies the program and never writes through the pointer.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &fprog as *const libc::sock_fprog,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// Which families `socket()` may make; `socketpair` is allowed whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sockets {
    /// IPv4/IPv6 TCP and UDP, and netlink (`--allow-network`).
    pub(super) network: bool,
    /// `AF_UNIX` stream and datagram sockets: only where a run's view holds no host socket and
    /// Landlock scopes abstract names to the run (`mod.rs`, [`super::LinuxSandbox::new`]).
    /// Local daemons (Docker, systemd, D-Bus) trust the server's uid; elsewhere a run could
    /// reach them.
    pub(super) unix: bool,
}

/// The socket types a run may make (without `SOCK_NONBLOCK` and `SOCK_CLOEXEC`). Raw IP
/// sockets pass but need `CAP_NET_RAW`, which no run has in the host's network namespace;
/// `AF_UNIX` turns `SOCK_RAW` into a datagram socket.
const SOCKET_TYPES: ArgIn = ArgIn {
    arg: 1,
    mask: 0xf,
    one_of: &[
        libc::SOCK_STREAM as u32,
        libc::SOCK_DGRAM as u32,
        libc::SOCK_RAW as u32,
    ],
};

/// The protocols: the family's default, TCP, UDP. MPTCP, SCTP and the like are not TCP to
/// Landlock, whose port rules they would pass by.
const SOCKET_PROTOCOLS: ArgIn = ArgIn {
    arg: 2,
    mask: u32::MAX,
    one_of: &[0, libc::IPPROTO_TCP as u32, libc::IPPROTO_UDP as u32],
};

/// The families, one allowlist for each [`Sockets`] that allows any: IP and netlink (which
/// the resolver asks for the host's addresses); vsock, ALG, TIPC and RDS reach the hypervisor
/// or the kernel's rarer code.
const NETWORK_SOCKETS: &[ArgIn] = &[
    ArgIn {
        arg: 0,
        mask: u32::MAX,
        one_of: &[
            libc::AF_INET as u32,
            libc::AF_INET6 as u32,
            libc::AF_NETLINK as u32,
        ],
    },
    SOCKET_TYPES,
    SOCKET_PROTOCOLS,
];
const UNIX_SOCKETS: &[ArgIn] = &[
    ArgIn {
        arg: 0,
        mask: u32::MAX,
        one_of: &[libc::AF_UNIX as u32],
    },
    SOCKET_TYPES,
    SOCKET_PROTOCOLS,
];
const NETWORK_AND_UNIX_SOCKETS: &[ArgIn] = &[
    ArgIn {
        arg: 0,
        mask: u32::MAX,
        one_of: &[
            libc::AF_INET as u32,
            libc::AF_INET6 as u32,
            libc::AF_NETLINK as u32,
            libc::AF_UNIX as u32,
        ],
    },
    SOCKET_TYPES,
    SOCKET_PROTOCOLS,
];

/// Every syscall number that does not get `Allow`.
fn rules(sockets: Sockets) -> Result<Vec<Rule>, SandboxError> {
    let allowed = match (sockets.network, sockets.unix) {
        (false, false) => None,
        (true, false) => Some(NETWORK_SOCKETS),
        (false, true) => Some(UNIX_SOCKETS),
        (true, true) => Some(NETWORK_AND_UNIX_SOCKETS),
    };
    let socket = match allowed {
        Some(all) => Outcome::AllOf {
            all,
            matched: Action::Allow,
            otherwise: EPERM,
        },
        // No socket at all; `socketpair` (pipes for multiprocessing, asyncio) stays allowed.
        None => Outcome::Always(EPERM),
    };
    let clone = Outcome::Arg {
        arg: 0,
        test: ArgTest::AnyBit(CLONE_REFUSED),
        matched: EPERM,
        otherwise: Action::Allow,
    };
    // `clone3`'s flags and `openat2`'s mode sit in structs seccomp cannot read: they are left
    // to the default, `ENOSYS`, and libc falls back to `clone` and `openat`, which it can.
    let always = |list: &[i64], action| {
        list.iter()
            .map(move |&nr| Ok(Rule::one(syscall_nr(nr)?, Outcome::Always(action))))
            .collect::<Result<Vec<_>, SandboxError>>()
    };
    let mut rules = always(DENIED, EPERM)?;
    rules.extend(always(ALLOWED, Action::Allow)?);
    rules.push(Rule::one(syscall_nr(libc::SYS_clone)?, clone));
    rules.push(Rule::one(syscall_nr(libc::SYS_socket)?, socket));
    for &(nr, arg) in MODE_ARGUMENT {
        rules.push(Rule::one(
            syscall_nr(nr)?,
            Outcome::Arg {
                arg,
                test: ArgTest::AnyBit(SET_ID_BITS),
                matched: EPERM,
                otherwise: Action::Allow,
            },
        ));
    }
    // Resource limits of the run itself only (pid 0): another process's `RLIMIT_NOFILE` or
    // `RLIMIT_CPU` cripples it (the pid namespace already hides the server; this holds without).
    rules.push(Rule::one(
        syscall_nr(libc::SYS_prlimit64)?,
        Outcome::Arg {
            arg: 0,
            test: ArgTest::Equals(0),
            matched: Action::Allow,
            otherwise: EPERM,
        },
    ));
    // x32 syscalls share x86_64's audit arch but number from 0x4000_0000, past every rule above:
    // the default refuses them as a kernel without x32 support would.
    Ok(rules)
}

fn syscall_nr(nr: libc::c_long) -> Result<u32, SandboxError> {
    u32::try_from(nr).map_err(|_| SandboxError::Seccomp(format!("bad syscall number {nr}")))
}

fn err(e: BpfError) -> SandboxError {
    SandboxError::Seccomp(e.to_string())
}

/// The `AUDIT_ARCH_*` value of this build's syscall table (linux/audit.h).
fn audit_arch() -> Result<u32, SandboxError> {
    const LE_64BIT: u32 = 0x8000_0000 | 0x4000_0000; // __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
    if cfg!(target_arch = "x86_64") {
        Ok(LE_64BIT | 62) // EM_X86_64
    } else if cfg!(target_arch = "aarch64") {
        Ok(LE_64BIT | 183) // EM_AARCH64
    } else if cfg!(target_arch = "riscv64") {
        Ok(LE_64BIT | 243) // EM_RISCV
    } else {
        Err(SandboxError::Seccomp(
            "no seccomp filter for this CPU architecture".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::bpf::interpreter::{run, SeccompData};
    use super::*;

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    /// The program as the generator made it, back from `libc` layout.
    fn program(sockets: Sockets) -> Vec<bpf::Insn> {
        let filters = SeccompFilters::compile(sockets).expect("compiles");
        filters
            .program
            .iter()
            .map(|i| bpf::Insn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    }

    fn syscall(nr: i64, arg0: u64) -> SeccompData {
        SeccompData {
            nr: nr as u32,
            arch: audit_arch().expect("supported arch"),
            args: [arg0, 0, 0, 0, 0, 0],
        }
    }

    /// The policy, written out independently of the rule builder.
    fn policy(sockets: Sockets, data: &SeccompData) -> u32 {
        let nr = i64::from(data.nr);
        let arg = |i: usize| data.args[i] as u32;
        let mode_arg = |nr: i64| -> Option<usize> {
            match nr {
                #[cfg(target_arch = "x86_64")]
                libc::SYS_chmod | libc::SYS_creat | libc::SYS_mkdir | libc::SYS_mknod => Some(1),
                #[cfg(target_arch = "x86_64")]
                libc::SYS_open => Some(2),
                libc::SYS_fchmod => Some(1),
                libc::SYS_fchmodat | 452 | libc::SYS_mkdirat | libc::SYS_mknodat => Some(2),
                libc::SYS_openat => Some(3),
                _ => None,
            }
        };
        let set_id = libc::S_ISUID | libc::S_ISGID;
        if data.arch != audit_arch().expect("supported arch") {
            KILL
        } else if DENIED.contains(&nr) {
            RET_EPERM
        } else if nr == libc::SYS_clone {
            let refused = REFUSED_CLONE_FLAGS
                .iter()
                .any(|&flag| arg(0) & flag as u32 != 0);
            if refused {
                RET_EPERM
            } else {
                ALLOW
            }
        } else if nr == libc::SYS_socket {
            let ip = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]
                .iter()
                .any(|&f| arg(0) == f as u32);
            let unix = arg(0) == libc::AF_UNIX as u32;
            let kind = [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_RAW]
                .iter()
                .any(|&t| arg(1) & 0xf == t as u32);
            let protocol = [0, libc::IPPROTO_TCP, libc::IPPROTO_UDP]
                .iter()
                .any(|&p| arg(2) == p as u32);
            let family = (sockets.network && ip) || (sockets.unix && unix);
            if family && kind && protocol {
                ALLOW
            } else {
                RET_EPERM
            }
        } else if nr == libc::SYS_prlimit64 {
            if arg(0) == 0 {
                ALLOW
            } else {
                RET_EPERM
            }
        } else if let Some(i) = mode_arg(nr) {
            if arg(i) & set_id != 0 {
                RET_EPERM
            } else {
                ALLOW
            }
        } else if ALLOWED.contains(&nr) {
            ALLOW
        } else {
            // Unknown to the policy (clone3, openat2, x32's numbers, calls newer than the
            // list): what a kernel without the call answers.
            RET_ENOSYS
        }
    }

    /// Each `clone` flag the policy refuses, one by one (the reference model's list, written
    /// out flag by flag rather than taken from the filter's own masks).
    const REFUSED_CLONE_FLAGS: [libc::c_int; 8] = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_PARENT,
    ];

    /// Every combination of socket families a filter is compiled for.
    fn every_sockets() -> impl Iterator<Item = Sockets> {
        [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .map(|(network, unix)| Sockets { network, unix })
    }

    /// First arguments worth trying on every syscall: none, namespace flags, socket families,
    /// garbage in the high word.
    fn arg0_variants() -> Vec<u64> {
        let fork_flags = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        let mut variants = vec![
            0,
            libc::SIGCHLD as u64,
            fork_flags,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::AF_NETLINK as u64,
            1 << 32 | libc::AF_UNIX as u64,
            1 << 32 | libc::AF_INET as u64,
            u64::MAX,
        ];
        for flag in REFUSED_CLONE_FLAGS {
            variants.push(flag as u64 | libc::SIGCHLD as u64);
            variants.push(flag as u64 | fork_flags);
        }
        variants
    }

    /// The policy test over every syscall number: for each number 0..=1024 (and x32's and the top
    /// one), with first arguments and modes that matter to some rule, the generated program
    /// answers what the reference model above answers.
    #[test]
    fn every_syscall_number_gets_the_policy_verdict() {
        for sockets in every_sockets() {
            let program = program(sockets);
            // Every number of the table and well past its end (1024), x32's, the top one.
            let numbers = (0..=1024).chain([0x4000_0000, 0x4000_0000 | 112, u32::MAX]);
            for nr in numbers {
                for arg0 in arg0_variants() {
                    let data = syscall(nr.into(), arg0);
                    assert_eq!(
                        run(&program, &data).ret,
                        policy(sockets, &data),
                        "{sockets:?}, nr {nr}, arg0 {arg0:#x}"
                    );
                }
                // Modes in every argument: set-id bits alone, with others, in the high word.
                for mode in [0o4755u64, 0o2755, 0o6000, 0o755, 0o777, 1 << 32 | 0o644] {
                    let mut data = syscall(nr.into(), 0);
                    data.args = [mode; 6];
                    assert_eq!(
                        run(&program, &data).ret,
                        policy(sockets, &data),
                        "{sockets:?}, nr {nr}, args {mode:#o}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_syscalls_the_sandbox_relies_on_get_the_right_answer() {
        for sockets in every_sockets() {
            let program = program(sockets);
            let ret = |nr: i64, arg0: u64| run(&program, &syscall(nr, arg0)).ret;
            assert_eq!(ret(libc::SYS_ptrace, 0), RET_EPERM);
            assert_eq!(ret(libc::SYS_setsid, 0), RET_EPERM);
            assert_eq!(ret(libc::SYS_setpgid, 0), RET_EPERM);
            assert_eq!(
                ret(libc::SYS_unshare, libc::CLONE_NEWUSER as u64),
                RET_EPERM
            );
            assert_eq!(ret(libc::SYS_mount, 0), RET_EPERM);
            assert_eq!(ret(libc::SYS_bpf, 0), RET_EPERM);
            assert_eq!(ret(libc::SYS_io_uring_setup, 0), RET_EPERM);
            assert_eq!(ret(libc::SYS_clone3, 0), RET_ENOSYS);
            assert_eq!(ret(libc::SYS_clone, libc::SIGCHLD as u64), ALLOW);
            let new_user = (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64;
            assert_eq!(ret(libc::SYS_clone, new_user), RET_EPERM);
            let inet = if sockets.network { ALLOW } else { RET_EPERM };
            let unix = if sockets.unix { ALLOW } else { RET_EPERM };
            let socket = |family: i32, kind: i32, protocol: i32| {
                let mut data = syscall(libc::SYS_socket, family as u64);
                data.args[1] = kind as u64;
                data.args[2] = protocol as u64;
                run(&program, &data).ret
            };
            let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
            assert_eq!(socket(libc::AF_INET, stream, 0), inet);
            assert_eq!(socket(libc::AF_INET6, stream, libc::IPPROTO_TCP), inet);
            assert_eq!(socket(libc::AF_INET, libc::SOCK_DGRAM, 0), inet);
            assert_eq!(socket(libc::AF_NETLINK, libc::SOCK_RAW, 0), inet);
            assert_eq!(socket(libc::AF_UNIX, stream, 0), unix);
            assert_eq!(socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0), unix);
            assert_eq!(socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0), RET_EPERM);
            // Not TCP to Landlock (its port rules would not apply), or not IP at all.
            assert_eq!(socket(libc::AF_INET, stream, 262), RET_EPERM); // IPPROTO_MPTCP
            assert_eq!(socket(libc::AF_INET, stream, libc::IPPROTO_SCTP), RET_EPERM);
            assert_eq!(socket(libc::AF_INET, libc::SOCK_SEQPACKET, 0), RET_EPERM);
            assert_eq!(socket(libc::AF_VSOCK, stream, 0), RET_EPERM);
            assert_eq!(socket(libc::AF_ALG, libc::SOCK_SEQPACKET, 0), RET_EPERM);
            assert_eq!(ret(libc::SYS_socketpair, libc::AF_UNIX as u64), ALLOW);
            let parent = (libc::CLONE_PARENT | libc::SIGCHLD) as u64;
            assert_eq!(ret(libc::SYS_clone, parent), RET_EPERM);
            assert_eq!(ret(libc::SYS_prlimit64, 0), ALLOW);
            assert_eq!(ret(libc::SYS_prlimit64, 1), RET_EPERM);
            assert_eq!(ret(libc::SYS_openat2, 0), RET_ENOSYS);
            // Not on the list: what a kernel without the call answers, so libc falls back.
            for nr in [
                libc::SYS_clone3,
                libc::SYS_setuid,
                libc::SYS_personality,
                1000,
            ] {
                assert_eq!(ret(nr, 0), RET_ENOSYS, "nr {nr}");
            }
            for nr in [
                libc::SYS_futex,
                libc::SYS_rseq,
                libc::SYS_statx,
                libc::SYS_faccessat2,
                libc::SYS_close_range,
                libc::SYS_epoll_pwait,
                libc::SYS_memfd_create,
                libc::SYS_getrandom,
            ] {
                assert_eq!(ret(nr, 0), ALLOW, "nr {nr}");
            }
            for nr in [libc::SYS_fchownat, libc::SYS_setxattr, libc::SYS_execveat] {
                assert_eq!(ret(nr, 0), RET_EPERM, "nr {nr}");
            }
            let mode = |nr: i64, arg: usize, mode: u64| {
                let mut data = syscall(nr, 0);
                data.args[arg] = mode;
                run(&program, &data).ret
            };
            assert_eq!(mode(libc::SYS_fchmodat, 2, 0o4755), RET_EPERM);
            assert_eq!(mode(libc::SYS_fchmodat, 2, 0o755), ALLOW);
            assert_eq!(mode(libc::SYS_openat, 3, 0o2644), RET_EPERM);
            assert_eq!(mode(libc::SYS_openat, 3, 0o644), ALLOW);
            assert_eq!(mode(libc::SYS_mkdirat, 2, 0o2775), RET_EPERM);
            for nr in [
                libc::SYS_read,
                libc::SYS_write,
                libc::SYS_openat,
                libc::SYS_exit_group,
            ] {
                assert_eq!(ret(nr, 0), ALLOW, "nr {nr}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn other_syscall_tables_are_refused() {
        let program = program(Sockets {
            network: true,
            unix: true,
        });
        // i386 `int 0x80`: another syscall table, the process is killed.
        let mut i386 = syscall(20, 0); // getpid in the i386 table
        i386.arch = 0x4000_0003; // AUDIT_ARCH_I386
        assert_eq!(run(&program, &i386).ret, KILL);
        // x32 setsid: the x86_64 arch, number | 0x4000_0000.
        let x32 = syscall(0x4000_0000 | libc::SYS_setsid, 0);
        assert_eq!(run(&program, &x32).ret, RET_ENOSYS);
    }

    /// What makes installing cheap: the kernel emulates the filter for each syscall number on
    /// install, and caches the numbers that are allowed without looking at arguments.
    #[test]
    fn allowed_syscalls_are_decided_in_a_few_instructions_without_arguments() {
        for sockets in every_sockets() {
            let program = program(sockets);
            assert!(program.len() < 256, "{} instructions", program.len());
            for nr in 0..512 {
                let data = syscall(nr, 0);
                let r = run(&program, &data);
                let with_args = [libc::SYS_clone, libc::SYS_socket, libc::SYS_prlimit64];
                if !with_args.contains(&nr) && !MODE_ARGUMENT.iter().any(|&(m, _)| m == nr) {
                    assert!(!r.read_args, "nr {nr} reads arguments");
                }
                // `socket` checks three arguments against an allowlist: a few compares more.
                let most = if nr == libc::SYS_socket { 24 } else { 13 };
                assert!(r.steps <= most, "nr {nr} takes {} steps", r.steps);
            }
        }
    }
}

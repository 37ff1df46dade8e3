//! The pid 1 of a run's pid namespace: starts the script's interpreter, reaps every orphan,
//! forwards the signals a supervisor sends, and reports the interpreter's exit status.
//!
//! Why a pid 1 of our own: a run in a pid namespace can name no process but its own (no
//! `prlimit`, `kill` or `/proc` reach into the host), but the kernel gives pid 1 two duties the
//! interpreter would fail: it ignores signals it has no handler for (a `SIGTERM` to python as
//! pid 1 does nothing) and it must reap orphans (else zombies fill the run's pids limit). When
//! this pid 1 exits, the kernel kills everything left in the namespace: nothing of a run
//! outlives its interpreter.
//!
//! It lives in the server's memory (made with `CLONE_VM` by the spawner, so starting it costs no
//! copy of the server) and runs while the server runs, for the whole run. So the loop below makes
//! its syscalls with the `syscall` instruction itself: libc's wrappers write `errno`, which is a
//! thread-local of the server's thread that cloned it. It touches nothing but its own stack and
//! fds. Other architectures get no pid namespace (see `supported`).

use std::os::fd::RawFd;

/// Whether this CPU architecture has the raw syscalls below.
pub(super) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// Signals a supervisor may send the run that pid 1 passes on to the interpreter.
const FORWARDED: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// Waits for signals (all blocked since the clone) until `interpreter` exits; writes its wait
/// status (4 bytes, native endian) to `status_fd`, then exits, which ends the namespace. Exits
/// at once, without a status, when the server's `lifeline` hangs up: the server died.
///
/// # Safety
/// Runs in a `CLONE_VM` child; must not return, allocate, lock or touch `errno`.
pub(super) unsafe fn serve(interpreter: libc::pid_t, status_fd: RawFd, lifeline: RawFd) -> ! {
    // Every fd but the status pipe and the lifeline: the run's output pipes reach EOF when the
    // run ends, the spawner's "started" pipe tells the first child it may exit, and a copy of
    // the lifeline's write end held here would keep it from ever hanging up.
    let (low, high) = if status_fd < lifeline {
        (status_fd, lifeline)
    } else {
        (lifeline, status_fd)
    };
    for fd in 0..3 {
        raw::syscall4(libc::SYS_close as usize, fd, 0, 0, 0);
    }
    close_between(2, low as usize);
    close_between(low as usize, high as usize);
    close_between(high as usize, u32::MAX as usize + 1);
    let mut all: u64 = !0;
    // SIGKILL and SIGSTOP cannot be waited for; the kernel ignores them in the mask.
    all &= !(bit(libc::SIGKILL) | bit(libc::SIGSTOP));
    // Signals arrive as reads of a signalfd, so one `ppoll` waits for them and the lifeline.
    let signals = raw::syscall4(
        libc::SYS_signalfd4 as usize,
        -1isize as usize,
        &all as *const u64 as usize,
        8,
        libc::SFD_CLOEXEC as usize,
    );
    // Without a signalfd (never seen), signals are waited for a second at a time between looks
    // at the lifeline.
    let second = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut info = [0u64; 16]; // siginfo_t and signalfd_siginfo: 128 bytes, the signal first.
    loop {
        let mut fds = [
            libc::pollfd {
                fd: lifeline,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: signals as RawFd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let (count, wait) = if signals >= 0 {
            (2, std::ptr::null())
        } else {
            (1, &now as *const libc::timespec)
        };
        // No signal mask is passed, so the kernel reads no fifth argument.
        raw::syscall4(
            libc::SYS_ppoll as usize,
            fds.as_mut_ptr() as usize,
            count,
            wait as usize,
            0,
        );
        if fds[0].revents != 0 {
            // The server is gone: nobody is left to read a status or to kill the run.
            raw::syscall4(libc::SYS_exit_group as usize, 0, 0, 0, 0);
        }
        let signal = if signals >= 0 {
            if fds[1].revents == 0 {
                continue;
            }
            let read = raw::syscall4(
                libc::SYS_read as usize,
                signals as usize,
                info.as_mut_ptr() as usize,
                std::mem::size_of_val(&info),
                0,
            );
            if read <= 0 {
                continue;
            }
            (info[0] & 0xffff_ffff) as libc::c_int
        } else {
            let signal = raw::syscall4(
                libc::SYS_rt_sigtimedwait as usize,
                &all as *const u64 as usize,
                info.as_mut_ptr() as usize,
                &second as *const libc::timespec as usize,
                8,
            );
            if signal <= 0 {
                continue;
            }
            signal as libc::c_int
        };
        if signal == libc::SIGCHLD {
            loop {
                let mut status: libc::c_int = 0;
                let pid = raw::syscall4(
                    libc::SYS_wait4 as usize,
                    -1isize as usize,
                    &mut status as *mut libc::c_int as usize,
                    libc::WNOHANG as usize,
                    0,
                );
                if pid <= 0 {
                    break;
                }
                if pid as libc::pid_t == interpreter {
                    let bytes = status.to_ne_bytes();
                    raw::syscall4(
                        libc::SYS_write as usize,
                        status_fd as usize,
                        bytes.as_ptr() as usize,
                        bytes.len(),
                        0,
                    );
                    raw::syscall4(libc::SYS_exit_group as usize, 0, 0, 0, 0);
                }
            }
        } else if FORWARDED.contains(&signal) {
            raw::syscall4(
                libc::SYS_kill as usize,
                interpreter as usize,
                signal as usize,
                0,
                0,
            );
        }
    }
}

/// Closes every fd strictly between `after` and `before`.
///
/// # Safety
/// As [`serve`]: raw syscalls only.
unsafe fn close_between(after: usize, before: usize) {
    if before > after + 1 {
        raw::syscall4(libc::SYS_close_range as usize, after + 1, before - 1, 0, 0);
    }
}

const fn bit(signal: libc::c_int) -> u64 {
    1 << (signal - 1)
}

#[cfg(target_arch = "x86_64")]
mod raw {
    /// One syscall, its result or `-errno`; no `errno` written.
    ///
    /// # Safety
    /// The caller passes arguments valid for syscall `nr`.
    pub(super) unsafe fn syscall4(nr: usize, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the x86_64 syscall ABI: number in rax, arguments in rdi, rsi, rdx, r10; the
        // kernel clobbers rcx and r11.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                in("r10") d,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }
}

#[cfg(target_arch = "aarch64")]
mod raw {
    /// One syscall, its result or `-errno`; no `errno` written.
    ///
    /// # Safety
    /// The caller passes arguments valid for syscall `nr`.
    pub(super) unsafe fn syscall4(nr: usize, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the aarch64 syscall ABI: number in x8, arguments in x0-x3, result in x0.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") nr,
                inlateout("x0") a as isize => ret,
                in("x1") b,
                in("x2") c,
                in("x3") d,
                options(nostack),
            );
        }
        ret
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod raw {
    /// Never called: `SUPPORTED` is false here and the spawner makes no pid namespace.
    pub(super) unsafe fn syscall4(_: usize, _: usize, _: usize, _: usize, _: usize) -> isize {
        -(libc::ENOSYS as isize)
    }
}

//! The few process and file calls outside the sandbox proper that need `unsafe`: kept here so
//! that the server has none of its own.

#[cfg(any(unix, windows))]
use std::io;
use std::process::Command;

/// Makes `cmd`'s process yield the CPU to everything else (Linux: `SCHED_IDLE`, else the lowest
/// nice) and, on Linux, die with the thread that waits for it (so with the server). For the
/// server's own background work (the bytecode cache's fill), never for runs.
pub fn background_priority(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: the hook runs in the forked child before exec and makes raw syscalls only.
        unsafe {
            cmd.pre_exec(|| {
                #[cfg(target_os = "linux")]
                {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    // Priority 0, the only one SCHED_IDLE takes (zeroed: musl's struct has
                    // more fields than glibc's).
                    let param: libc::sched_param = std::mem::zeroed();
                    if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 {
                        return Ok(());
                    }
                }
                // The child's own priority only: it is a process of its own here.
                libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                Ok(())
            });
        }
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        const IDLE_PRIORITY_CLASS: u32 = 0x0000_0040;
        cmd.creation_flags(IDLE_PRIORITY_CLASS);
    }
}

/// `chmod 0700` on the folder `name` in `dir`, refused (not followed) when it is a symlink.
#[cfg(unix)]
pub fn let_owner_in(dir: impl std::os::fd::AsFd, name: &std::ffi::CStr) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // libc's fchmodat honours AT_SYMLINK_NOFOLLOW (fchmodat2, or a check through O_PATH);
    // rustix's refuses the flag on Linux.
    // SAFETY: a borrowed open fd and a NUL-terminated name, both valid for the call.
    let rc = unsafe {
        libc::fchmodat(
            dir.as_fd().as_raw_fd(),
            name.as_ptr(),
            0o700,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Linux: lowers the calling thread's priority a little (nice 10), and that of the processes it
/// starts from now on. For a probe nobody waits for yet, so that it yields the CPU to the
/// server's replies. Elsewhere: nothing.
pub fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread (who = 0 is the caller's tid on Linux).
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Linux: puts the calling thread (and the processes it starts from now on) at idle priority
/// (`SCHED_IDLE`, else nice 19): for background work nobody waits for. Elsewhere: nothing.
pub fn idle_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: both calls act on the calling thread only (0 is the caller's tid on Linux); the
    // parameter is zeroed (priority 0, the only one SCHED_IDLE takes).
    unsafe {
        let param: libc::sched_param = std::mem::zeroed();
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
    }
}

/// Windows: ends the process `process` is a handle to, with exit code 1 (as `Child::kill`
/// does), for a caller that holds a handle of its own to it rather than its `Child`: the run
/// layer's helper registry.
#[cfg(windows)]
pub fn terminate_process(process: std::os::windows::io::BorrowedHandle<'_>) -> io::Result<()> {
    use std::os::windows::io::AsRawHandle;
    // SAFETY: a borrowed handle is open for the whole call; on a handle that is not a process
    // the call fails, which is returned.
    let ok = unsafe {
        windows_sys::Win32::System::Threading::TerminateProcess(
            process.as_raw_handle() as windows_sys::Win32::Foundation::HANDLE,
            1,
        )
    };
    if ok != 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

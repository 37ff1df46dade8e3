//! seccomp: the syscalls a run may not make, compiled to BPF once at start-up.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::sandbox::SandboxError;

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

/// `clone` flags that would create a namespace (`clone3` cannot be inspected: it gets `ENOSYS`,
/// and libc falls back to `clone`).
const CLONE_NAMESPACES: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// The two BPF programs of a run, in `libc` layout, ready to install without allocating.
#[derive(Debug)]
pub(super) struct SeccompFilters {
    /// `EPERM` for the denied syscalls, namespace-creating `clone`, and `socket`.
    deny: Vec<libc::sock_filter>,
    /// `ENOSYS` for `clone3`.
    no_clone3: Vec<libc::sock_filter>,
}

impl SeccompFilters {
    pub(super) fn compile(allow_network: bool) -> Result<Self, SandboxError> {
        let arch = target_arch()?;
        let masked = |flag: u64| -> Result<SeccompRule, SandboxError> {
            let cond = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .map_err(err)?;
            SeccompRule::new(vec![cond]).map_err(err)
        };

        let mut deny: BTreeMap<i64, Vec<SeccompRule>> =
            DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
        let clone_rules = CLONE_NAMESPACES
            .iter()
            .map(|&flag| masked(flag))
            .collect::<Result<Vec<_>, _>>()?;
        deny.insert(libc::SYS_clone, clone_rules);
        let socket_rules = if allow_network {
            // UNIX sockets reach local daemons (docker, systemd, dbus) that trust our uid.
            let unix = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                libc::AF_UNIX as u64,
            )
            .map_err(err)?;
            vec![SeccompRule::new(vec![unix]).map_err(err)?]
        } else {
            // No socket at all; `socketpair` (pipes for multiprocessing, asyncio) stays allowed.
            Vec::new()
        };
        deny.insert(libc::SYS_socket, socket_rules);

        let errno = |n: i32| SeccompAction::Errno(n as u32);
        let deny = SeccompFilter::new(deny, SeccompAction::Allow, errno(libc::EPERM), arch)
            .map_err(err)?;
        let no_clone3 = SeccompFilter::new(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            SeccompAction::Allow,
            errno(libc::ENOSYS),
            arch,
        )
        .map_err(err)?;
        Ok(Self {
            deny: to_libc(deny.try_into().map_err(err)?),
            no_clone3: to_libc(no_clone3.try_into().map_err(err)?),
        })
    }

    /// Installs both filters on the calling thread (inherited by everything it execs and forks).
    /// Async-signal-safe: two syscalls. `PR_SET_NO_NEW_PRIVS` must be set already.
    pub(super) fn install(&self) -> std::io::Result<()> {
        install(&self.no_clone3)?;
        install(&self.deny)
    }
}

fn install(program: &[libc::sock_filter]) -> std::io::Result<()> {
    let Ok(len) = u16::try_from(program.len()) else {
        return Err(std::io::Error::from_raw_os_error(libc::E2BIG));
    };
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points to `len` valid instructions that outlive the call; the kernel copies
    // the program and never writes through the pointer.
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

fn err(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Seccomp(e.to_string())
}

fn to_libc(program: BpfProgram) -> Vec<libc::sock_filter> {
    program
        .into_iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

fn target_arch() -> Result<TargetArch, SandboxError> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else if cfg!(target_arch = "riscv64") {
        Ok(TargetArch::riscv64)
    } else {
        Err(SandboxError::Seccomp(
            "no seccomp filter for this CPU architecture".into(),
        ))
    }
}

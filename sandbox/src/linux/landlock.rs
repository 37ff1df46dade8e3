//! Landlock: which files a run may read, write and execute; no TCP (or, for package installs, TCP
//! connect to chosen ports only), no signals or abstract sockets out, path sockets made only in
//! the run's own scratch.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use crate::error::SandboxError;
use crate::policy::Grant;

/// The newest ABI this module was written and tested against; newer kernels are used at this level.
const TESTED_ABI: ABI = ABI::V7;

/// Read-only system trees every interpreter needs (those that do not exist are skipped).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    // Debian's alternatives: libraries in /usr (libblas.so.3, numpy's) are links through here.
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    // Not all of /etc/ssl: a run of a root server would read /etc/ssl/private (root owns it).
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/fonts",
    // Debian's system-wide matplotlib settings, which its matplotlib opens on import.
    "/etc/matplotlibrc",
    "/etc/mime.types",
    "/sys/devices/system/cpu",
    "/proc/cpuinfo",
    "/proc/meminfo",
];

/// Read-only files name resolution needs; only with `--allow-network`.
const NETWORK_READ: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/services",
    "/etc/protocols",
];

/// Devices a run may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The file rules of a policy, with system paths added; the scratch dir is added per run.
#[derive(Debug)]
pub(super) struct FsRules {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    allow_network: bool,
    /// With `allow_network`: TCP connect only to these ports, no TCP bind.
    tcp_connect: Option<Vec<u16>>,
}

impl FsRules {
    pub(super) fn new(read: &[PathBuf], write: &[PathBuf], allow_network: bool) -> Self {
        let mut system: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        if allow_network {
            system.extend(NETWORK_READ.iter().map(PathBuf::from));
        }
        let existing = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
            paths
                .into_iter()
                .filter(|p| match p.try_exists() {
                    Ok(true) => true,
                    _ => {
                        tracing::debug!(path = %p.display(), "sandbox: skipping missing path");
                        false
                    }
                })
                .collect()
        };
        Self {
            read: existing(read.iter().cloned().chain(system).collect()),
            write: existing(write.to_vec()),
            allow_network,
            tcp_connect: None,
        }
    }

    /// With the network allowed, TCP connections only to `ports` and no TCP bind (`None`: as
    /// `allow_network` says). The caller has checked that the kernel enforces it (ABI 4).
    pub(super) fn connecting_only_to(mut self, ports: Option<Vec<u16>>) -> Self {
        self.tcp_connect = ports;
        self
    }

    /// Everything a process may read or write of the host under these rules: what its file
    /// view shows (`world.rs`); nothing else exists for it.
    pub(super) fn shown(&self) -> Vec<PathBuf> {
        self.read
            .iter()
            .chain(&self.write)
            .cloned()
            .chain(DEVICES.iter().map(PathBuf::from))
            .collect()
    }

    /// Builds this run's ruleset and returns its fd, to be enforced in the child with
    /// [`restrict_self`]. `None` when the kernel has no Landlock.
    pub(super) fn ruleset_fd(&self, scratch: &Path) -> Result<Option<OwnedFd>, SandboxError> {
        self.ruleset_fd_granting(scratch, &[])
    }

    /// [`FsRules::ruleset_fd`] with `grants` (existing folders) readable or writable besides.
    pub(super) fn ruleset_fd_granting(
        &self,
        scratch: &Path,
        grants: &[Grant],
    ) -> Result<Option<OwnedFd>, SandboxError> {
        let err = |e: &dyn std::fmt::Display| SandboxError::Landlock(e.to_string());
        let abi = TESTED_ABI;
        let read = AccessFs::from_read(abi);
        // W^X: a run may write files but not execve what it wrote.
        let scratch_write = AccessFs::from_all(abi) & !BitFlags::from(AccessFs::Execute);
        // Path sockets only in the scratch (the run's `/tmp`, which no other run sees): one made
        // in the projects folder, the cache or `/dev/shm`'s host folder could be found and
        // connected to by another run of the same project, or stand where a program of the
        // user's expects its own.
        let write = scratch_write & !BitFlags::from(AccessFs::MakeSock);
        let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;

        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| err(&e))?
            .scope(Scope::from_all(abi))
            .map_err(|e| err(&e))?;
        let connect_ports: &[u16] = match &self.tcp_connect {
            Some(ports) if self.allow_network => ports,
            _ => &[],
        };
        if !self.allow_network || self.tcp_connect.is_some() {
            // Handled: every TCP bind and connect is denied but the ports given a rule below.
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(|e| err(&e))?;
        }
        let mut created = ruleset.create().map_err(|e| err(&e))?;
        for &port in connect_ports {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(|e| err(&e))?;
        }
        let rules = self
            .read
            .iter()
            .map(|p| (p.as_path(), read))
            .chain(self.write.iter().map(|p| (p.as_path(), write)))
            .chain(std::iter::once((scratch, scratch_write)))
            .chain(
                grants
                    .iter()
                    .map(|g| (g.source(), if g.writable { write } else { read })),
            )
            .chain(DEVICES.iter().map(|d| (Path::new(*d), device)));
        for (path, access) in rules {
            let fd = match PathFd::new(path) {
                Ok(fd) => fd,
                // Devices may be missing in minimal containers; the run simply cannot use them.
                Err(_) if path.starts_with("/dev") => continue,
                Err(e) => return Err(err(&e)),
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| err(&e))?;
        }
        Ok(created.into())
    }
}

/// The kernel's Landlock ABI version, 0 when Landlock is unavailable or disabled.
pub(super) fn kernel_abi() -> i64 {
    // SAFETY: landlock_create_ruleset with a NULL attr, size 0 and the VERSION flag only returns
    // the ABI version (or -1/errno); it reads and writes no memory of ours.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    version.max(0)
}

/// Enforces `ruleset` on the calling thread (and what it execs). Async-signal-safe: one syscall.
/// `PR_SET_NO_NEW_PRIVS` must be set already.
pub(super) fn restrict_self(ruleset: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: landlock_restrict_self takes a ruleset fd we own (open for the whole call) and flags 0;
    // it touches no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

//! The install sandbox profiles: the two [`Sandbox`]es installs run in (the fetch step's, with
//! the network to the index's port only; the other steps', with none), built once, on first use.
//!
//! # What they allow (Linux)
//! Both are [`Sandbox`]es of their own, built from policies of their own (runs' rules are
//! untouched):
//! - **network**: the fetch step has the host's network namespace (not the runs' empty one)
//!   inside a user namespace of its own (no capabilities); Landlock (ABI ≥ 4) allows TCP
//!   `connect` only to the index's port and denies every TCP `bind`; seccomp allows only IPv4/IPv6
//!   TCP and UDP sockets and netlink (no `AF_UNIX`: local daemons; no MPTCP or SCTP, which
//!   Landlock's TCP rules do not see). The resolver's files (`/etc/resolv.conf`, `/etc/hosts`,
//!   `nsswitch.conf`...) are readable. A kernel that cannot enforce the port rule gets no install
//!   at all (fail closed), whatever `--sandbox` says but `off`. The other steps have no network
//!   (the runs' empty namespace, no socket but `socketpair`).
//! - **files**: the system trees and the interpreter's trees read-only (with execute: a venv's
//!   `bin/python` is a link to the base interpreter); uv's folder read-only with execute; the
//!   project's own folder of the server's install cache and the install's scratch (its HOME and
//!   TMPDIR) writable, and for the venv and install steps the project's `.venv` (the folder
//!   proven, by its descriptor), all without execute (W^X as for runs); nothing else of the
//!   projects folder, not even readable. No mount view: the view's job is to show runs the
//!   projects folder with its protected names (`.venv` first) read-only, and an install must
//!   write exactly that folder, so installs rely on Landlock alone for files.
//! - **processes**: a pid namespace as for runs, the same seccomp filter, `RLIMIT_*` and
//!   per-install cgroups with larger bounds (memory, processes, open files: uv resolves on many
//!   threads), CPU seconds as long as `--install-timeout`.
//!
//! Code planted in the project's venv thus runs with no network, writes only that venv, the
//! scratch and (with uv, which writes its cache also `--offline`) the project's cache, and reads
//! nothing of the projects folder. What it leaves in the cache the next fetch reads as data only:
//! uv links cached files into the throwaway venv, no package code runs. A fetch that runs code,
//! a build with `--allow-sdist`, gets a fresh cache beside its scratch instead.
//!
//! What the fetch profile does not stop: UDP (DNS needs it; Landlock has no UDP rules) and TCP to any
//! host on the index's port (Landlock rules name ports, not addresses). With wheels only
//! (the default) no code of a package runs during an install; `--allow-sdist` lets a build
//! backend run inside this profile.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pyrun_sandbox::{ResourceLimits, Sandbox, SandboxError, SandboxMode};

use super::{InstallError, InstallSettings, Installs};
use crate::python_env::python_read_paths;

/// Larger bounds than a run's: uv and pip resolve on threads and unpack large wheels. No file
/// may be larger than the whole install's budget (`max_bytes`), nor than 2 GiB.
pub fn install_limits(timeout: Duration, max_bytes: u64) -> ResourceLimits {
    ResourceLimits {
        memory_bytes: 4096 << 20,
        cpu_secs: timeout.as_secs().max(1),
        file_size_bytes: max_bytes.clamp(1 << 20, 2048 << 20),
        open_files: 4096,
        processes: 512,
    }
}

/// What the installers read about the system (missing ones are skipped).
const DISTRIBUTION_FILES: &[&str] = &[
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/redhat-release",
    "/etc/alpine-release",
];

/// Which network an install sandbox has.
#[derive(Debug, Clone, Copy)]
pub(super) enum Network {
    /// The host's, TCP to the index's port only (the fetch step).
    IndexOnly,
    /// None, as runs (the steps that start the project's venv).
    None,
}

/// An install sandbox's policy (see the module header) made into a [`Sandbox`]. Blocking.
fn build_sandbox(settings: &InstallSettings, network: Network) -> Result<Sandbox, SandboxError> {
    let mut read_paths = if settings.sandbox_mode == SandboxMode::Off {
        Vec::new()
    } else {
        python_read_paths(&settings.python)?
    };
    if let Some(folder) = settings.uv.as_deref().and_then(Path::parent) {
        read_paths.push(folder.to_path_buf());
    }
    // pip names the distribution in its User-Agent and fails when it cannot read these.
    read_paths.extend(DISTRIBUTION_FILES.iter().map(PathBuf::from));
    Sandbox::new(pyrun_sandbox::SandboxPolicy {
        read_paths,
        // Each install's `.venv` and cache are added to its own slot.
        write_paths: Vec::new(),
        allow_network: matches!(network, Network::IndexOnly),
        limits: install_limits(settings.timeout, settings.max_bytes),
        tcp_connect_ports: match network {
            Network::IndexOnly => Some(vec![settings.index.port()]),
            Network::None => None,
        },
        ..pyrun_sandbox::SandboxPolicy::bare(settings.sandbox_mode)
    })
}

impl Installs {
    /// One of the install sandboxes, built on first use on a blocking thread.
    pub(super) async fn sandbox(&self, network: Network) -> Result<Arc<Sandbox>, InstallError> {
        if !cfg!(target_os = "linux") && self.settings.sandbox_mode != SandboxMode::Off {
            return Err(InstallError::Unsupported);
        }
        let cell = match network {
            Network::IndexOnly => &self.online,
            Network::None => &self.offline,
        };
        let built = cell
            .get_or_init(|| async {
                let settings = self.settings.clone();
                let build = move || build_sandbox(&settings, network);
                match tokio::task::spawn_blocking(build).await {
                    Ok(result) => result.map(Arc::new).map_err(Arc::new),
                    Err(_) => Err(Arc::new(SandboxError::ProbeLost)),
                }
            })
            .await;
        built.clone().map_err(InstallError::Sandbox)
    }
}

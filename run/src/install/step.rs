//! One step of an install: what it runs (`Command`: a program the server chose, its argv, its
//! environment on top of the installers' own) and how (`Steps::run`: in an install sandbox, its
//! output merged into the install's capture, supervised under the install's one deadline, its
//! cancellation and the server's shutdown, its whole tree killed at the end).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::budget::DiskBudget;
use super::{InstallError, Installs};
use crate::live_output::LiveOutput;
use crate::supervise::Ending;
#[cfg(target_os = "linux")]
use crate::supervise::{Limits, Process, Sink};
use pyrun_sandbox::Sandbox;
#[cfg(target_os = "linux")]
use pyrun_sandbox::SandboxError;

/// A program and its argv, owned.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) struct Command {
    program: PathBuf,
    args: Vec<OsString>,
    /// Set on top of the installers' environment.
    pub(super) env: Vec<(OsString, OsString)>,
}

impl Command {
    pub(super) fn new(program: &Path) -> Self {
        Self {
            program: program.to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    pub(super) fn args<'a>(mut self, args: impl IntoIterator<Item = &'a OsStr>) -> Self {
        self.args.extend(args.into_iter().map(OsStr::to_os_string));
        self
    }

    pub(super) fn owned_args(mut self, args: impl IntoIterator<Item = OsString>) -> Self {
        self.args.extend(args);
        self
    }
}

/// What every step of one install shares.
pub(super) struct Steps<'a> {
    pub(super) installs: &'a Installs,
    pub(super) scratch: &'a Path,
    pub(super) live: &'a Arc<LiveOutput>,
    pub(super) deadline: tokio::time::Instant,
    pub(super) cancel: &'a CancellationToken,
    /// What the install may write; a step past it is killed and `over_budget` set.
    pub(super) budget: &'a DiskBudget,
    pub(super) over_budget: std::sync::atomic::AtomicBool,
}

impl Steps<'_> {
    /// Runs `commands` one after the other while each succeeds: how the first that did not
    /// ended, or the last's success.
    pub(super) async fn run_each(
        &self,
        sandbox: &Sandbox,
        slot: &pyrun_sandbox::SandboxSlot,
        commands: Vec<Command>,
    ) -> Result<Ending, InstallError> {
        let mut ended = Ending::success();
        for command in commands {
            if !ended.succeeded() {
                break;
            }
            ended = self.run(sandbox, slot, &command).await?;
        }
        Ok(ended)
    }

    /// Starts `cmd` in the install sandbox and waits for its end, the deadline or cancellation;
    /// its whole process group is killed whatever happened.
    #[cfg(target_os = "linux")]
    pub(super) async fn run(
        &self,
        sandbox: &Sandbox,
        slot: &pyrun_sandbox::SandboxSlot,
        cmd: &Command,
    ) -> Result<Ending, InstallError> {
        let spec = pyrun_sandbox::spawn::Spec {
            program: &cmd.program,
            argv0: None,
            args: cmd.args.iter().map(OsString::as_os_str).collect(),
            env: {
                let mut env = self.installs.env(self.scratch);
                env.extend(cmd.env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())));
                env
            },
            cwd: self.scratch,
            stdin_piped: false,
        };
        let child = sandbox
            .spawn(slot, &spec, self.scratch)
            .map_err(|e| match e {
                SandboxError::Spawn(pyrun_sandbox::spawn::SpawnError::Start { what, source }) => {
                    InstallError::Spawn { what, source }
                }
                other => InstallError::Sandbox(Arc::new(other)),
            })?;
        let child = crate::child::AsyncChild::new(child).map_err(|source| InstallError::Spawn {
            what: "the installer's pipes could not be registered",
            source,
        })?;
        // The step's own cancellation: the caller's, or the budget's watchdog.
        let cancel = self.cancel.child_token();
        let limits = Limits {
            deadline: self.deadline,
            cancel: &cancel,
            shutdown: &self.installs.shutdown,
        };
        let mut process = Process::new(child);
        let supervised = process.supervise(Sink::Merged(self.live), limits);
        tokio::pin!(supervised);
        let every = super::budget::WATCH_EVERY;
        let mut watch = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let supervised = loop {
            tokio::select! {
                done = &mut supervised => break done,
                _ = watch.tick(), if !cancel.is_cancelled() => {
                    let budget = self.budget.clone();
                    let over = tokio::task::spawn_blocking(move || budget.exceeded())
                        .await
                        .unwrap_or(false);
                    if over {
                        tracing::warn!(limit = self.budget.limit(), "an install step wrote past its budget: killed");
                        self.over_budget.store(true, std::sync::atomic::Ordering::SeqCst);
                        cancel.cancel();
                    }
                }
            }
        };
        // A step that wrote past the budget and ended between two looks (pip unpacks a
        // hundred MB well within one interval) is caught here: the watchdog's last look.
        if supervised.ending.succeeded() && !cancel.is_cancelled() {
            let budget = self.budget.clone();
            let over = tokio::task::spawn_blocking(move || budget.exceeded())
                .await
                .unwrap_or(false);
            if over {
                tracing::warn!(
                    limit = self.budget.limit(),
                    "an install step wrote past its budget"
                );
                self.over_budget
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                return Ok(crate::supervise::Ending::Cancelled);
            }
        }
        Ok(supervised.ending)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) async fn run(
        &self,
        _sandbox: &Sandbox,
        _slot: &pyrun_sandbox::SandboxSlot,
        _cmd: &Command,
    ) -> Result<Ending, InstallError> {
        let _ = (
            self.installs,
            self.scratch,
            self.live,
            self.deadline,
            self.cancel,
            self.budget,
            &self.over_budget,
        );
        Err(InstallError::Unsupported)
    }
}

impl Installs {
    /// uv with no configuration of the server's user, plain output, and the install's cache.
    pub(super) fn uv(uv: &Path, cache: &Path) -> Command {
        Command::new(uv).args([
            OsStr::new("--no-config"),
            OsStr::new("--color"),
            OsStr::new("never"),
            OsStr::new("--no-progress"),
            OsStr::new("--cache-dir"),
            cache.join("uv").as_os_str(),
        ])
    }

    /// `uv pip install` into `python`'s environment, with the install's cache.
    pub(super) fn uv_pip_install(&self, uv: &Path, cache: &Path, python: &Path) -> Command {
        Self::uv(uv, cache).args([
            OsStr::new("pip"),
            OsStr::new("install"),
            OsStr::new("--no-python-downloads"),
            OsStr::new("--python"),
            python.as_os_str(),
        ])
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    /// The installer's environment: the runs' allowlist, scratch HOME and temp folders, and
    /// settings that keep uv and pip from reading anything of the server's user.
    fn env<'a>(&'a self, scratch: &'a Path) -> Vec<(&'a OsStr, &'a OsStr)> {
        let scratch = scratch.as_os_str();
        let set: [(&OsStr, &OsStr); 14] = [
            (OsStr::new("HOME"), scratch),
            (OsStr::new("TMPDIR"), scratch),
            (OsStr::new("XDG_CONFIG_HOME"), scratch),
            (OsStr::new("XDG_CACHE_HOME"), scratch),
            (OsStr::new("XDG_DATA_HOME"), scratch),
            (OsStr::new("PYTHONNOUSERSITE"), OsStr::new("1")),
            (OsStr::new("PYTHONIOENCODING"), OsStr::new("utf-8")),
            (OsStr::new("PYTHONUNBUFFERED"), OsStr::new("1")),
            (OsStr::new("PIP_CONFIG_FILE"), OsStr::new("/dev/null")),
            (OsStr::new("PIP_NO_INPUT"), OsStr::new("1")),
            (OsStr::new("UV_NO_CONFIG"), OsStr::new("1")),
            (OsStr::new("UV_PYTHON_DOWNLOADS"), OsStr::new("never")),
            (OsStr::new("UV_NO_PROGRESS"), OsStr::new("1")),
            (OsStr::new("NO_COLOR"), OsStr::new("1")),
        ];
        let kept = self
            .env
            .iter()
            .filter(|(name, _)| !set.iter().any(|(n, _)| n == name))
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()));
        kept.chain(set).collect()
    }
}

//! What the engine is built from: [`EngineSettings`], one struct the server's configuration
//! maps into, and the pure mappings from it to each part's own settings (the runner's, the
//! registry's, the sessions', the artifact store's limits, an install's, the sandbox policy of
//! runs). Pure, so that the policy they encode is tested here rather than through the server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pyrun_sandbox::{ResourceLimits, SandboxMode, SandboxPolicy, WriteScope};

use super::backend::RemoteBackend;
use crate::artifacts::ArtifactLimits;
use crate::background::BackgroundSettings;
use crate::install::InstallSettings;
use crate::package_index::PackageIndex;
use crate::runner::{RunError, RunnerSettings};
use crate::session::SessionSettings;
use crate::warm::WarmSettings;

/// Installs at once, server-wide (each resolves and unpacks on several threads).
const MAX_CONCURRENT_INSTALLS: usize = 2;

/// Everything the engine is built from.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The projects folder scripts come from.
    pub projects_dir: PathBuf,
    /// `--state-dir`: where artifacts, the install cache and the quarantine are kept; `None`:
    /// temp folders.
    pub state_dir: Option<PathBuf>,
    /// The `--python` interpreter, and the others runs may use (`--allow-python`).
    pub python: PathBuf,
    pub allow_python: Vec<PathBuf>,
    /// Environment variables runs inherit.
    pub pass_env: Vec<String>,
    /// Bytes kept per stream of a run.
    pub max_output_bytes: usize,
    /// Runs at once in the foreground pool.
    pub max_concurrent: usize,
    /// The time limit of a run the call waits for (`run_python`, inline code, a session exec).
    pub timeout: Duration,
    pub sandbox: SandboxSettings,
    pub background: BackgroundPolicy,
    pub sessions: SessionLimits,
    pub artifacts: ArtifactStorage,
    /// `--allow-install`: `None` offers no installs.
    pub install: Option<InstallPolicy>,
    pub warm: WarmSettings,
    /// Several callers share the server (OAuth): one caller's runs leave places to the others.
    pub caller_turns: bool,
    /// The remote backends runs may be sent to.
    pub remote: Vec<Arc<dyn RemoteBackend>>,
    /// Turns a background run that could not start into the words its owner reads.
    pub describe_failure: fn(RunError) -> String,
}

/// The sandbox of runs, as the operator set it.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    pub allow_network: bool,
    /// Runs may not change the projects folder.
    pub read_only_projects: bool,
    pub write_scope: WriteScope,
    /// Protected names a run creates stay where it made them (no quarantine).
    pub allow_protected_writes: bool,
    pub limits: ResourceLimits,
}

/// Background runs: their limits, and `--detach-after`.
#[derive(Debug, Clone)]
pub struct BackgroundPolicy {
    pub timeout: Duration,
    /// Background runs at once, in their own pool.
    pub max_concurrent: usize,
    pub max_runs: usize,
    pub max_per_caller: usize,
    pub retention: Duration,
    /// A `run_python` still going after this long is handed over to the background.
    pub detach_after: Option<Duration>,
}

/// Persistent sessions' limits.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    pub max_sessions: usize,
    pub max_per_caller: usize,
    pub idle_timeout: Duration,
}

/// Disk the kept artifacts may use.
#[derive(Debug, Clone, Copy)]
pub struct ArtifactStorage {
    pub max_total_bytes: u64,
    pub max_bytes_per_caller: u64,
}

/// Package installs (`--allow-install`).
#[derive(Debug, Clone)]
pub struct InstallPolicy {
    pub index: PackageIndex,
    pub allow_sdist: bool,
    /// uv's real path; `None`: pip.
    pub uv: Option<PathBuf>,
    pub timeout: Duration,
    /// The most one install may write (`--max-install-mb`), in bytes.
    pub max_bytes: u64,
}

impl EngineSettings {
    pub(crate) fn runner(&self) -> RunnerSettings {
        RunnerSettings {
            python: self.python.clone(),
            max_output_bytes: self.max_output_bytes,
            max_concurrent: self.max_concurrent,
            max_background_concurrent: self.background.max_concurrent,
            pass_env: self.pass_env.clone(),
        }
    }

    pub(crate) fn background(&self) -> BackgroundSettings {
        BackgroundSettings {
            timeout: self.background.timeout,
            max_runs: self.background.max_runs,
            max_per_caller: self.background.max_per_caller,
            retention: self.background.retention,
        }
    }

    pub(crate) fn sessions(&self) -> SessionSettings {
        SessionSettings {
            max_sessions: self.sessions.max_sessions,
            max_per_caller: self.sessions.max_per_caller,
            idle_timeout: self.sessions.idle_timeout,
            max_output: self.max_output_bytes,
        }
    }

    /// The store's limits: no caller, and no file, may take more than the whole storage.
    pub(crate) fn artifact_limits(&self) -> ArtifactLimits {
        let storage = self.artifacts.max_total_bytes;
        ArtifactLimits {
            max_total_bytes: storage,
            max_bytes_per_caller: self.artifacts.max_bytes_per_caller.min(storage),
            max_file_bytes: ArtifactLimits::default().max_file_bytes.min(storage),
            ..ArtifactLimits::default()
        }
    }

    /// An install's settings, with its cache in `cache_dir` (`None`: a private temp folder).
    pub(crate) fn install(
        &self,
        policy: &InstallPolicy,
        cache_dir: Option<PathBuf>,
    ) -> InstallSettings {
        InstallSettings {
            python: self.python.clone(),
            uv: policy.uv.clone(),
            index: policy.index.clone(),
            allow_sdist: policy.allow_sdist,
            timeout: policy.timeout,
            max_bytes: policy.max_bytes,
            max_output_bytes: self.max_output_bytes,
            sandbox_mode: self.sandbox.mode,
            cache_dir,
            max_concurrent: MAX_CONCURRENT_INSTALLS,
        }
    }

    /// The sandbox policy of runs: the projects folder writable (and readable) unless
    /// read-only, and never executable — a program a script wrote there does not run; the
    /// interpreters' trees readable (`interpreter_paths`, asked only with the sandbox on).
    pub(crate) fn sandbox_policy(
        &self,
        projects: &Path,
        interpreter_paths: Vec<PathBuf>,
        pycache: Option<PathBuf>,
        support: Option<PathBuf>,
    ) -> SandboxPolicy {
        let settings = &self.sandbox;
        let mut read_paths = interpreter_paths;
        // Read-only projects: scripts read the folder and write only their scratch.
        let write_paths = if settings.read_only_projects {
            read_paths.push(projects.to_path_buf());
            Vec::new()
        } else {
            vec![projects.to_path_buf()]
        };
        SandboxPolicy {
            mode: settings.mode,
            read_paths,
            write_paths,
            allow_network: settings.allow_network,
            limits: settings.limits.clone(),
            projects: Some(projects.to_path_buf()),
            read_only_projects: settings.read_only_projects,
            write_scope: settings.write_scope,
            pycache,
            support,
            tcp_connect_ports: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn settings(projects: &Path) -> EngineSettings {
        EngineSettings {
            projects_dir: projects.to_path_buf(),
            state_dir: None,
            python: PathBuf::from("/usr/bin/python3"),
            allow_python: Vec::new(),
            pass_env: Vec::new(),
            max_output_bytes: 1 << 20,
            max_concurrent: 2,
            timeout: Duration::from_secs(30),
            sandbox: SandboxSettings {
                mode: SandboxMode::Off,
                allow_network: false,
                read_only_projects: false,
                write_scope: WriteScope::Project,
                allow_protected_writes: false,
                limits: ResourceLimits::default(),
            },
            background: BackgroundPolicy {
                timeout: Duration::from_secs(3600),
                max_concurrent: 3,
                max_runs: 32,
                max_per_caller: 16,
                retention: Duration::from_secs(600),
                detach_after: None,
            },
            sessions: SessionLimits {
                max_sessions: 8,
                max_per_caller: 4,
                idle_timeout: Duration::from_secs(900),
            },
            artifacts: ArtifactStorage {
                max_total_bytes: 1 << 30,
                max_bytes_per_caller: 512 << 20,
            },
            install: None,
            warm: WarmSettings::default(),
            caller_turns: false,
            remote: Vec::new(),
            describe_failure: |e| e.to_string(),
        }
    }

    #[test]
    fn read_only_projects_are_read_paths_and_nothing_is_writable() {
        let projects = Path::new("/srv/projects");
        let mut s = settings(projects);
        let python = vec![PathBuf::from("/usr/lib/python3.12")];
        let open = s.sandbox_policy(projects, python.clone(), None, None);
        assert_eq!(open.write_paths, [projects]);
        assert_eq!(open.read_paths, python);
        assert!(!open.read_only_projects);
        s.sandbox.read_only_projects = true;
        let closed = s.sandbox_policy(projects, python, None, None);
        assert!(closed.write_paths.is_empty());
        assert_eq!(
            closed.read_paths,
            [Path::new("/usr/lib/python3.12"), projects]
        );
        assert!(closed.read_only_projects);
        assert_eq!(closed.projects.as_deref(), Some(projects));
        assert_eq!(closed.tcp_connect_ports, None, "runs never get a port list");
    }

    #[test]
    fn no_caller_and_no_file_may_take_more_than_the_whole_storage() {
        let mut s = settings(Path::new("/p"));
        s.artifacts = ArtifactStorage {
            max_total_bytes: 1 << 20,
            max_bytes_per_caller: 1 << 30,
        };
        let limits = s.artifact_limits();
        assert_eq!(limits.max_total_bytes, 1 << 20);
        assert_eq!(limits.max_bytes_per_caller, 1 << 20);
        assert!(limits.max_file_bytes <= 1 << 20);
        s.artifacts.max_total_bytes = 1 << 40;
        s.artifacts.max_bytes_per_caller = 1 << 20;
        let limits = s.artifact_limits();
        assert_eq!(limits.max_bytes_per_caller, 1 << 20);
        assert_eq!(
            limits.max_file_bytes,
            ArtifactLimits::default().max_file_bytes
        );
    }

    #[test]
    fn each_part_gets_its_share_of_the_settings() {
        let s = settings(Path::new("/p"));
        let runner = s.runner();
        assert_eq!(runner.max_output_bytes, s.max_output_bytes);
        assert_eq!(runner.max_background_concurrent, 3);
        let background = s.background();
        assert_eq!(background.timeout, Duration::from_secs(3600));
        assert_eq!(background.retention, Duration::from_secs(600));
        let sessions = s.sessions();
        assert_eq!(
            sessions.max_output, s.max_output_bytes,
            "a session exec keeps what a run keeps"
        );
        let policy = InstallPolicy {
            index: PackageIndex::parse("https://pypi.org/simple").unwrap(),
            allow_sdist: false,
            uv: None,
            timeout: Duration::from_secs(300),
            max_bytes: 1024 << 20,
        };
        let install = s.install(&policy, None);
        assert_eq!(install.sandbox_mode, SandboxMode::Off);
        assert_eq!(install.max_concurrent, MAX_CONCURRENT_INSTALLS);
        assert_eq!(install.timeout, Duration::from_secs(300));
        assert_eq!(install.max_bytes, 1024 << 20);
    }
}

//! How a run's interpreter is started: where it works (`Placement`), what it runs (`Program`),
//! with which arguments (`Launch`), in which environment (`scrubbed_env`, `RunExtras`,
//! `Starter::run_env`), and the start itself (`Starter::spawn`: Linux through the sandbox's own
//! `clone`/`exec` child, elsewhere a `Command` the sandbox confines), or why it failed
//! (`RunError`). The runner decides when; this decides how, and holds the platform split:
//! `Starter::start_run` (a warm spare, the warm driver or a cold start on Linux; a cold start
//! elsewhere), `Starter::hand_over` (a spare given a resident's job) and `Starter::contain` (the
//! child with its whole tree, in a kill-on-close job on Windows). It is shared (`Arc<Starter>`)
//! so that warm interpreters are started off a run's path the same way.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::paths::{ProjectDir, ProjectPath};
use super::python_env::PythonEnv;
use super::slots::{Slot, SlotError, SlotLease, SlotPool, OUTPUT_DIR_NAME};
use super::supervise::Process;
pub(crate) use super::supervise::Spawned;
#[cfg(target_os = "linux")]
use super::warm::{await_ready, driver_arg, job_frame, WARM_DRIVER};
use pyrun_sandbox::{RunScope, Sandbox, SandboxError, SandboxMode};

/// The file inline code is written to, in the run's scratch.
pub const INLINE_FILE_NAME: &str = "_pyrun_inline.py";
/// The matplotlib backend the server ships (`MPLBACKEND`): `plt.show()` saves PNG artifacts.
pub const MPL_BACKEND: &str = "module://_pyrun_mpl_backend";

/// Variables a script sees from the server's environment; everything else (tokens, API keys) is
/// dropped unless the user passes it with `--pass-env`.
const ALLOWED_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "PATHEXT",
    "COMSPEC",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
];

/// How long a warm driver started for a run may take to say READY (it imports nothing).
#[cfg(target_os = "linux")]
const DRIVER_READY_WITHIN: Duration = Duration::from_secs(30);

/// Why a run did not start. The text is for the server's log: it may name host paths (a cgroup
/// folder, the interpreter); clients see `client_message::ClientMessage`'s mapping of it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `what` is the step that failed, in fixed words.
    #[error("the Python interpreter could not be started: {what}: {source}")]
    Spawn {
        what: &'static str,
        source: io::Error,
    },
    #[error("a scratch directory for the run could not be created: {0}")]
    Scratch(io::Error),
    #[error("the run was refused because the sandbox could not be applied: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("the run was refused because the sandbox could not be set up: {0}")]
    SandboxUnavailable(Arc<SandboxError>),
    #[error("the run was cancelled before it started")]
    CancelledWhileQueued,
}

/// What starting an interpreter needs: the runner's interpreter, the scrubbed server
/// environment, the slots runs take.
pub(crate) struct Starter {
    pub(crate) python: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) slots: Arc<SlotPool>,
    /// Compiles the venvs runs use into the bytecode cache, in the background.
    #[cfg(target_os = "linux")]
    pub(crate) venv_bytecode: super::venv_bytecode::VenvBytecode,
}

/// A run's process, started or taken warm.
pub(crate) struct Started {
    pub(crate) process: Process,
    /// The job frame the warm driver reads before the run's stdin.
    pub(crate) job: Option<Vec<u8>>,
    /// It was started ahead of the run.
    pub(crate) warm: bool,
}

impl Starter {
    /// Starts with `python` (the runner's interpreter) in `env` (the scrubbed server
    /// environment). Fails when no private scratch root can be made.
    pub(crate) fn new(python: PathBuf, env: Vec<(OsString, OsString)>) -> io::Result<Self> {
        Ok(Self {
            python,
            env,
            slots: Arc::new(SlotPool::new()?),
            #[cfg(target_os = "linux")]
            venv_bytecode: Default::default(),
        })
    }

    /// Linux: a run's process. With warm runs on (`warm`), a spare of its kind when one was
    /// ready, or the warm driver started now (nothing preloaded, so that what the run imports is
    /// learned), with the job to send it; a driver that does not get ready within `timeout` (or
    /// its own bound) gives way to a cold start, never a failed call. With warm runs off, a cold
    /// start.
    #[cfg(target_os = "linux")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start_run(
        &self,
        warm: bool,
        spare: Option<Spawned>,
        launch: &Launch<'_>,
        timeout: Duration,
        sandbox: &Sandbox,
        slot: &Slot,
        scope: &RunScope,
    ) -> Result<Started, RunError> {
        let cold = || -> Result<Started, RunError> {
            let child = self.spawn(launch, sandbox, slot, scope)?;
            Ok(Started {
                process: self.contain(child, sandbox)?,
                job: None,
                warm: false,
            })
        };
        if !warm || sandbox.support_dir().is_none() {
            return cold();
        }
        let seen = Seen::of(launch, sandbox, slot)?;
        let Some(job) = job_frame(
            &seen.script,
            launch.args,
            &seen.cwd,
            launch.stdin_piped,
            &seen.scratch,
        ) else {
            return cold();
        };
        if let Some(child) = spare {
            return Ok(Started {
                process: self.contain(child, sandbox)?,
                job: Some(job),
                warm: true,
            });
        }
        let args = [driver_arg("")];
        let driver = Launch {
            place: launch.place,
            program: Program::Support(WARM_DRIVER),
            args: &args,
            stdin_piped: true,
            python: launch.python,
        };
        let mut child = self.spawn(&driver, sandbox, slot, scope)?;
        match await_ready(&mut child, timeout.min(DRIVER_READY_WITHIN)).await {
            Ok(_) => Ok(Started {
                process: self.contain(child, sandbox)?,
                job: Some(job),
                warm: false,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "the warm driver did not get ready; the run starts cold");
                drop(child);
                cold()
            }
        }
    }

    /// Elsewhere: a cold start (warm runs are Linux's; no spare is ever taken here).
    #[cfg(not(target_os = "linux"))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start_run(
        &self,
        warm: bool,
        spare: Option<Spawned>,
        launch: &Launch<'_>,
        timeout: Duration,
        sandbox: &Sandbox,
        slot: &Slot,
        scope: &RunScope,
    ) -> Result<Started, RunError> {
        let _ = (warm, spare, timeout);
        let child = self.spawn(launch, sandbox, slot, scope)?;
        Ok(Started {
            process: self.contain(child, sandbox)?,
            job: None,
            warm: false,
        })
    }

    /// Linux: hands a warm spare a resident's job (`launch`); `None` when it could not take it
    /// (it is dropped: the caller starts cold in the same slot).
    #[cfg(target_os = "linux")]
    pub(crate) async fn hand_over(
        &self,
        mut spare: Spawned,
        launch: &Launch<'_>,
        sandbox: &Sandbox,
        slot: &Slot,
    ) -> Result<Option<Spawned>, RunError> {
        use tokio::io::AsyncWriteExt;
        let seen = Seen::of(launch, sandbox, slot)?;
        let job = job_frame(
            &seen.script,
            launch.args,
            &seen.cwd,
            launch.stdin_piped,
            &seen.scratch,
        );
        let sent = match (job, spare.stdin.as_mut()) {
            (Some(job), Some(pipe)) => pipe.write_all(&job).await.is_ok(),
            _ => false,
        };
        Ok(sent.then_some(spare))
    }

    /// Elsewhere: no spare is ever taken; one would start cold.
    #[cfg(not(target_os = "linux"))]
    pub(crate) async fn hand_over(
        &self,
        spare: Spawned,
        launch: &Launch<'_>,
        sandbox: &Sandbox,
        slot: &Slot,
    ) -> Result<Option<Spawned>, RunError> {
        let _ = (launch, sandbox, slot);
        drop(spare);
        Ok(None)
    }

    /// The child with its whole tree, to be supervised and killed together. Windows: put in a
    /// kill-on-close Job Object first (on error the child goes: `kill_on_drop`).
    pub(crate) fn contain(&self, child: Spawned, sandbox: &Sandbox) -> Result<Process, RunError> {
        #[cfg(windows)]
        {
            let job = match child.raw_handle() {
                Some(handle) => sandbox.assign_job(handle)?,
                None => None,
            };
            Ok(Process::new(child).with_job(job))
        }
        #[cfg(not(windows))]
        {
            let _ = sandbox;
            Ok(Process::new(child))
        }
    }

    /// A free slot of `sandbox` (its output folder is there, empty).
    pub(crate) async fn take_slot(&self, sandbox: &Sandbox) -> Result<SlotLease, RunError> {
        self.slots.take(sandbox).await.map_err(|e| match e {
            SlotError::Scratch(e) => RunError::Scratch(e),
            SlotError::Sandbox(e) => RunError::Sandbox(e),
        })
    }

    /// Linux: the sandbox starts the run (its own `clone`/`exec` child applies every layer
    /// before `exec`); `child.rs` makes it awaitable.
    #[cfg(target_os = "linux")]
    pub(crate) fn spawn(
        &self,
        launch: &Launch<'_>,
        sandbox: &Sandbox,
        slot: &Slot,
        scope: &RunScope,
    ) -> Result<Spawned, RunError> {
        let Seen {
            scratch,
            script,
            cwd,
        } = Seen::of(launch, sandbox, slot)?;
        let scratch = scratch.as_path();
        let place = &launch.place;
        let import_dir = place.import_dir.map(|dir| sandbox.view_path(dir));
        let pycache = pycache_prefix(sandbox, scratch);
        if let Some(env) = launch.python {
            self.venv_bytecode.touch(env, sandbox);
        }
        let extra = RunExtras::new(sandbox, scratch, import_dir.as_deref(), &self.env);
        // A venv's run execs its checked base interpreter, told it is the venv's `bin/python`
        // (as the run sees it) so that CPython finds the venv's `pyvenv.cfg`.
        let (program, argv0) = self.program(launch);
        // An interpreter inside the projects folder is started where the run's view shows it.
        let program = sandbox.view_path(program);
        let argv0 = argv0.map(|path| sandbox.view_path(&path));
        let spec = pyrun_sandbox::spawn::Spec {
            program: &program,
            argv0: argv0.as_deref().map(Path::as_os_str),
            args: std::iter::once(script.as_os_str())
                .chain(launch.args.iter().map(OsStr::new))
                .collect(),
            env: self.run_env(scratch, pycache.as_deref(), &extra),
            cwd: &cwd,
            stdin_piped: launch.stdin_piped,
        };
        let child = sandbox
            .spawn_scoped(slot.rules(), &spec, scope)
            .map_err(|e| match e {
                // A layer that failed in the child (`Hook`) stays a sandbox failure.
                SandboxError::Spawn(pyrun_sandbox::spawn::SpawnError::Start { what, source }) => {
                    RunError::Spawn { what, source }
                }
                other => RunError::Sandbox(other),
            })?;
        super::child::AsyncChild::new(child).map_err(|source| RunError::Spawn {
            what: "the run's pipes could not be registered",
            source,
        })
    }

    /// Elsewhere: tokio's `Command`, with the sandbox's `pre_exec` hook where it has one.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn spawn(
        &self,
        launch: &Launch<'_>,
        sandbox: &Sandbox,
        slot: &Slot,
        scope: &RunScope,
    ) -> Result<Spawned, RunError> {
        // No view of the run's own to key on its scope: it is only swept after the run.
        let _ = scope;
        use std::process::Stdio;
        let pycache = pycache_prefix(sandbox, slot.dir());
        let place = &launch.place;
        let extra = RunExtras::new(sandbox, slot.dir(), place.import_dir, &self.env);
        let script = match launch.program {
            Program::Script(script) => script.absolute().to_path_buf(),
            Program::Scratch(name) => slot.dir().join(name),
            Program::Support(name) => support_file(sandbox, name)?,
        };
        let (program, argv0) = self.program(launch);
        let mut cmd = std::process::Command::new(program);
        #[cfg(unix)]
        if let Some(argv0) = &argv0 {
            std::os::unix::process::CommandExt::arg0(&mut cmd, argv0);
        }
        #[cfg(not(unix))]
        let _ = argv0;
        cmd.arg(script)
            .args(launch.args)
            .current_dir(place.cwd.unwrap_or(slot.dir()))
            .env_clear()
            .envs(self.run_env(slot.dir(), pycache.as_deref(), &extra))
            .stdin(if launch.stdin_piped {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Its own group, so that one signal reaches every descendant that stays in it.
            cmd.process_group(0);
        }
        sandbox.confine(&mut cmd, slot.rules())?;
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        cmd.spawn().map_err(|source| RunError::Spawn {
            what: "the interpreter could not be executed",
            source,
        })
    }

    /// The program a run execs (always a checked interpreter) and the argv\[0\] it is given on
    /// the host: the venv's `bin/python` when the run has a venv.
    fn program<'r>(&'r self, launch: &Launch<'r>) -> (&'r Path, Option<PathBuf>) {
        match launch.python {
            Some(env) => (&env.interpreter, env.argv0()),
            None => (&self.python, None),
        }
    }

    /// The run's whole environment: the scrubbed server environment, with HOME and the temp
    /// variables on the slot's scratch dir, Python's I/O settings and its bytecode settings
    /// (these win over passed names).
    ///
    /// Bytecode: a run never writes any (`PYTHONDONTWRITEBYTECODE`): beside a project module it
    /// would leave `__pycache__` in the projects folder, and the cache is read-only to it anyway
    /// (a write there would only fail, after a few wasted syscalls). With `pycache`, Python reads
    /// bytecode only from there, never from a `__pycache__` a script may have forged.
    fn run_env<'a>(
        &'a self,
        scratch: &'a Path,
        pycache: Option<&'a Path>,
        extra: &'a RunExtras,
    ) -> Vec<(&'a OsStr, &'a OsStr)> {
        let scratch = scratch.as_os_str();
        let mut set: Vec<(&OsStr, &OsStr)> = vec![
            (OsStr::new("HOME"), scratch),
            (OsStr::new("TMPDIR"), scratch),
            (OsStr::new("TEMP"), scratch),
            (OsStr::new("TMP"), scratch),
            (OsStr::new("PYTHONUNBUFFERED"), OsStr::new("1")),
            (OsStr::new("PYTHONIOENCODING"), OsStr::new("utf-8")),
            (OsStr::new("PYTHONDONTWRITEBYTECODE"), OsStr::new("1")),
        ];
        if let Some(pycache) = pycache {
            set.push((OsStr::new("PYTHONPYCACHEPREFIX"), pycache.as_os_str()));
        }
        if cfg!(windows) {
            set.push((OsStr::new("USERPROFILE"), scratch));
        }
        set.extend(extra.vars());
        let kept = self
            .env
            .iter()
            .filter(|(name, _)| !set.iter().any(|(n, _)| n == name))
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()));
        kept.chain(set.iter().copied()).collect()
    }
}

/// The allowlisted part of an environment, plus the names the user passes explicitly.
pub(crate) fn scrubbed_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, _)| {
        let name = name.to_string_lossy();
        let upper = name.to_ascii_uppercase();
        ALLOWED_ENV.contains(&upper.as_str())
            || upper.starts_with("LC_")
            || pass.iter().any(|p| p == name.as_ref())
    })
    .collect()
}

/// A launch's paths as the run sees them (in the sandbox's own view: `/projects/...`, `/tmp`).
#[cfg(target_os = "linux")]
pub(crate) struct Seen {
    pub(crate) scratch: PathBuf,
    pub(crate) script: PathBuf,
    pub(crate) cwd: PathBuf,
}

#[cfg(target_os = "linux")]
impl Seen {
    pub(crate) fn of(
        launch: &Launch<'_>,
        sandbox: &Sandbox,
        slot: &Slot,
    ) -> Result<Self, RunError> {
        let scratch = if sandbox.has_view() {
            Path::new(pyrun_sandbox::RUN_SCRATCH_DIR)
        } else {
            slot.dir()
        };
        let script = match launch.program {
            Program::Script(script) => sandbox.view_path(script.absolute()),
            Program::Scratch(name) => scratch.join(name),
            Program::Support(name) => support_file(sandbox, name)?,
        };
        let cwd = match launch.place.cwd {
            Some(dir) => sandbox.view_path(dir),
            None => scratch.to_path_buf(),
        };
        Ok(Self {
            scratch: scratch.to_path_buf(),
            script,
            cwd,
        })
    }
}

/// Where a run's Python looks for bytecode: the server's cache as the run sees it. With the
/// sandbox on but no cache (no private folder could be made), a folder in the run's scratch,
/// empty since nothing writes bytecode: slower runs (the stdlib compiles each time), never a
/// forged `.pyc` read. With the sandbox off, no prefix: scripts are trusted, they have every right
/// the server has, and the stdlib's own `__pycache__` spares compiling it.
fn pycache_prefix(sandbox: &Sandbox, scratch: &Path) -> Option<PathBuf> {
    if sandbox.mode() == SandboxMode::Off {
        return None;
    }
    Some(
        sandbox
            .pycache_prefix()
            .unwrap_or_else(|| scratch.join(".pycache")),
    )
}

/// Where a run works, on the host: its working directory (`None`: the scratch), the folder whose
/// protected names the sandbox keeps read-only on the way to it, and for inline code in a project
/// the folder its imports come from first (a script's own folder is Python's `sys.path[0]`; the
/// inline file's is the scratch).
#[derive(Clone, Copy)]
pub(crate) struct Placement<'a> {
    pub(crate) cwd: Option<&'a Path>,
    // Only Linux's sandbox keeps protected names read-only with a view of its own.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) project_dir: &'a Path,
    pub(crate) import_dir: Option<&'a Path>,
}

impl<'a> Placement<'a> {
    /// Code that is not a file of the projects folder (inline code, a session): in `cwd` with
    /// its imports from there first, or in the scratch.
    pub(crate) fn in_project(cwd: Option<&'a ProjectDir>, scratch: &'a Path) -> Self {
        match cwd {
            Some(dir) => Self {
                cwd: Some(dir.absolute()),
                project_dir: dir.absolute(),
                import_dir: Some(dir.absolute()),
            },
            // Outside the projects folder: only its top level's protected names are kept.
            None => Self {
                cwd: None,
                project_dir: scratch,
                import_dir: None,
            },
        }
    }
}

/// What the interpreter runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Program<'a> {
    /// A `.py` file of the projects folder.
    Script(&'a ProjectPath),
    /// A file the runner wrote into the slot's scratch (inline code).
    Scratch(&'static str),
    /// A module the server ships (`python_support`), e.g. the session driver.
    Support(&'static str),
}

/// One start of the interpreter: where, on what, with which arguments.
pub(crate) struct Launch<'a> {
    pub(crate) place: Placement<'a>,
    pub(crate) program: Program<'a>,
    pub(crate) args: &'a [String],
    pub(crate) stdin_piped: bool,
    /// The environment, when not the runner's own interpreter (`--python`) without a venv.
    pub(crate) python: Option<&'a PythonEnv>,
}

impl<'a> Launch<'a> {
    /// What the run may write of the projects folder (its project), and the protected names there.
    pub(crate) fn scope(&self, sandbox: &Sandbox) -> RunScope {
        sandbox.run_scope(&sandbox.project_of(self.place.project_dir))
    }
}

/// A module of the server's support folder as the run sees it; an error when the folder could
/// not be written at start-up.
pub(crate) fn support_file(sandbox: &Sandbox, name: &str) -> Result<PathBuf, RunError> {
    match sandbox.support_dir() {
        Some(dir) => Ok(dir.join(name)),
        None => Err(RunError::Spawn {
            what: "the server's support modules were not written at start-up",
            source: io::Error::from(io::ErrorKind::Unsupported),
        }),
    }
}

/// What a run's environment gets beyond the fixed names: its output folder, and a `PYTHONPATH`
/// of the inline code's project folder, then the server's support modules where they exist
/// (with the matplotlib backend), then a passed `PYTHONPATH` (never replaced). Paths as the run
/// sees them.
struct RunExtras {
    output: PathBuf,
    python_path: Option<OsString>,
    /// The server's `PATH` with only the folders of the run's world.
    search_path: Option<OsString>,
    mpl_backend: bool,
}

impl RunExtras {
    fn new(
        sandbox: &Sandbox,
        scratch: &Path,
        import_dir: Option<&Path>,
        env: &[(OsString, OsString)],
    ) -> Self {
        let support = sandbox.support_dir();
        let passed = env
            .iter()
            .find(|(name, _)| name == "PYTHONPATH")
            .map(|(_, v)| v.as_os_str())
            .filter(|v| !v.is_empty());
        let mut python_path: Option<OsString> = None;
        // A passed PYTHONPATH alone is already in the scrubbed environment.
        if import_dir.is_some() || support.is_some() {
            let parts = [
                import_dir.map(Path::as_os_str),
                support.as_deref().map(Path::as_os_str),
                passed,
            ];
            for part in parts.into_iter().flatten() {
                let path = python_path.get_or_insert_with(OsString::new);
                if !path.is_empty() {
                    path.push(if cfg!(windows) { ";" } else { ":" });
                }
                path.push(part);
            }
        }
        let search_path = env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| sandbox.search_path_in_view(value));
        Self {
            output: scratch.join(OUTPUT_DIR_NAME),
            python_path,
            search_path,
            mpl_backend: support.is_some(),
        }
    }

    fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        let output = (OsStr::new("PYRUN_OUTPUT_DIR"), self.output.as_os_str());
        let path = self
            .python_path
            .as_ref()
            .map(|path| (OsStr::new("PYTHONPATH"), path.as_os_str()));
        let backend = self
            .mpl_backend
            .then(|| (OsStr::new("MPLBACKEND"), OsStr::new(MPL_BACKEND)));
        let search = self
            .search_path
            .as_ref()
            .map(|path| (OsStr::new("PATH"), path.as_os_str()));
        std::iter::once(output)
            .chain(path)
            .chain(backend)
            .chain(search)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keeps_only_the_allowlist_and_passed_names() {
        let vars = [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("MCP_AUTH_TOKEN", "secret"),
            ("OPENAI_API_KEY", "sk"),
            ("MY_SETTING", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept = scrubbed_env(vars, &["MY_SETTING".to_owned()]);
        let names: Vec<_> = kept.iter().map(|(k, _)| k.to_string_lossy()).collect();
        assert_eq!(names, ["PATH", "LC_ALL", "MY_SETTING"]);
    }

    #[test]
    fn bytecode_is_read_from_the_cache_or_scratch_when_sandboxed_and_as_usual_when_off() {
        use pyrun_sandbox::SandboxPolicy;
        let sandbox = |mode, pycache: Option<PathBuf>| {
            Sandbox::new(SandboxPolicy {
                pycache,
                ..SandboxPolicy::bare(mode)
            })
            .unwrap()
        };
        let scratch = Path::new("/scratch/slot-0");
        let cache = std::env::temp_dir();
        assert_eq!(
            pycache_prefix(
                &sandbox(SandboxMode::Standard, Some(cache.clone())),
                scratch
            ),
            Some(cache)
        );
        // No cache: never `__pycache__` beside the sources; an empty folder of the run's own.
        assert_eq!(
            pycache_prefix(&sandbox(SandboxMode::Standard, None), scratch),
            Some(scratch.join(".pycache"))
        );
        assert_eq!(
            pycache_prefix(
                &sandbox(SandboxMode::Off, Some(std::env::temp_dir())),
                scratch
            ),
            None
        );
    }
}

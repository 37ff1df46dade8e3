//! What every tool call may need, whatever its room, as free functions: its `CallContext` (the
//! `App`, the caller, the audit notes), its audit notes alone, progress notifications, the
//! prologue of a file run (the script proven, the time limit checked, its environment found) and
//! the Python environment of a folder, over the run layer's `Engine`. The checks of a call's
//! arguments are `arguments.rs`.

pub(super) mod arguments;
pub(super) mod start_run;
pub(in crate::mcp) mod stdin_upload;
pub(super) mod waited_run;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{NotificationMetaObject, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::app::App;
use crate::audit::CallNotes;
use crate::client_message::ClientMessage;
use crate::mcp::present::reply::{python_info_of, PythonInfo, NOTIFY_TIMEOUT};
use arguments::effective_timeout;
use pyrun_run::caller::Caller;
use pyrun_run::engine::placement::RunMode;
use pyrun_run::engine::Engine;
use pyrun_run::paths::{ProjectDir, ProjectPath};
use pyrun_run::python_env::PythonEnv;
use stdin_upload::StdinUploads;

/// How often a run that the caller follows with a progress token reports that it is still going.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The arguments of a run of a Python file (`run_python`, `start_python`, a `run_python` task).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunPythonArgs {
    /// Path of the .py file, relative to the projects folder (e.g. `hello_world.py` or
    /// `mathpkg/main.py`; `/projects/mathpkg/main.py` names the same file).
    pub file_name: String,
    /// Command-line arguments for the script (its `sys.argv[1:]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Text given to the script on standard input; it sees end-of-file at once when omitted.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Instead of `stdin`: the id `upload_stdin` returned for text sent in pieces (too large
    /// for one request); the run takes the upload.
    #[serde(default)]
    pub stdin_upload: Option<String>,
    #[serde(flatten)]
    pub limit: TimeLimit,
    /// Where the run goes: `local` (this machine, the default) or a configured remote backend.
    /// Left out of the derived schema: the server lists it, with its configured backends, only
    /// when it has a remote one (see `backend_schema::with_backend_argument`).
    #[serde(default)]
    #[schemars(skip)]
    pub backend: Option<String>,
}

/// The time limit a run's caller may ask for (`run_python`, `start_python`, `run_python_code`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TimeLimit {
    /// Seconds before the run is killed; may lower the server's limit, never raise it.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
}

/// Puts in `stdin` the text of the upload `upload` names (taken: it feeds one run), or checks
/// the inline text against `--max-stdin-bytes`. Called once the rest of the call is checked, so
/// that a refused call leaves the upload for the next.
pub fn take_stdin(
    uploads: &StdinUploads,
    caller: &Caller,
    stdin: &mut Option<String>,
    upload: Option<&str>,
) -> Result<(), ClientMessage> {
    *stdin = uploads.stdin_of(caller, stdin.take(), upload)?;
    Ok(())
}

/// A file run's arguments, checked.
pub struct ScriptCall {
    pub script: ProjectPath,
    pub timeout: Duration,
    /// `None`: the runner's own interpreter (see [`run_env`]).
    pub python: Option<Arc<PythonEnv>>,
}

/// What the audit log learns of this call (names, counts and the outcome, never values); a
/// call the audit log does not follow gets notes nobody reads.
pub fn call_notes(ctx: &RequestContext<RoleServer>) -> CallNotes {
    ctx.extensions
        .get::<CallNotes>()
        .cloned()
        .unwrap_or_default()
}

/// One tool call as the rooms' free helpers see it: the server's `App`, who called, and the
/// call's audit notes. Made once at the call's start (`PyRunServer::call_context`), so a
/// helper takes this instead of being a method of the whole server. The `App` is its shared
/// handle, so that work that outlives the call (a task's run) can keep it.
pub struct CallContext<'a> {
    pub app: &'a Arc<App>,
    pub caller: Caller,
    pub notes: CallNotes,
}

/// One progress report: the message people see, and the `_meta` a caller asked for (a run's
/// new output).
pub struct Progress {
    pub message: ClientMessage,
    pub meta: Option<NotificationMetaObject>,
}

impl From<ClientMessage> for Progress {
    fn from(message: ClientMessage) -> Self {
        Self {
            message,
            meta: None,
        }
    }
}

/// Awaits `work` while telling the caller, every [`PROGRESS_EVERY`], how long it has run and
/// what `message` says of it then.
pub async fn with_progress<F: Future, P: Into<Progress>>(
    ctx: &RequestContext<RoleServer>,
    token: ProgressToken,
    message: impl Fn(Duration) -> P,
    work: F,
) -> F::Output {
    tokio::pin!(work);
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    ticks.tick().await; // the first tick is immediate
    let started = tokio::time::Instant::now();
    loop {
        tokio::select! {
            result = &mut work => return result,
            _ = ticks.tick() => {
                let elapsed = started.elapsed();
                let Progress { message, meta } = message(elapsed).into();
                let mut param = ProgressNotificationParam::new(token.clone(), elapsed.as_secs_f64().floor())
                    .with_message(message.into_string());
                param.meta = meta;
                let send = ctx.peer.notify_progress(param);
                let _ = tokio::time::timeout(NOTIFY_TIMEOUT, send).await;
            }
        }
    }
}

/// The prologue of every file run: the argument count and the script noted for the audit
/// log, the script proven, the time limit checked against `mode`'s, its environment found.
pub async fn script_call(
    engine: &Engine,
    args: &RunPythonArgs,
    mode: RunMode,
    notes: &CallNotes,
) -> Result<ScriptCall, ClientMessage> {
    notes.note(|n| n.arg_count = Some(args.args.len()));
    let script = match engine.root().resolve_script(&args.file_name) {
        Ok(script) => script,
        Err(e) => {
            notes.asked_file(&args.file_name);
            return Err(e.into());
        }
    };
    notes.note(|n| n.file_name = Some(script.relative().to_owned()));
    let limit = engine.time_limit(mode);
    let timeout = effective_timeout(args.limit.timeout_seconds, limit)?;
    let python = run_env(engine, script.directory()).await?;
    Ok(ScriptCall {
        script,
        timeout,
        python,
    })
}

/// The folder of the projects folder that code works in (`project` of `run_python_code`
/// and `session_start`), proven; `None` when none was given (its own scratch folder).
pub fn optional_project(
    engine: &Engine,
    given: Option<&str>,
) -> Result<Option<ProjectDir>, ClientMessage> {
    match given {
        Some(project) => match engine.root().resolve_project(Some(project)) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) => Err(e.into()),
        },
        None => Ok(None),
    }
}

/// The environment a run in `dir` uses (its nearest checked venv, or the server's
/// interpreter), or why it is refused.
pub async fn python_env(engine: &Engine, dir: &Path) -> Result<Arc<PythonEnv>, ClientMessage> {
    engine.python_env(dir).await.map_err(ClientMessage::from)
}

/// The engine's `run_env`: `None` is the runner's own interpreter.
pub async fn run_env(engine: &Engine, dir: &Path) -> Result<Option<Arc<PythonEnv>>, ClientMessage> {
    engine.run_env(dir).await.map_err(ClientMessage::from)
}

/// The engine's `project_env`: the environment of code that runs in `project` (or in its
/// scratch, then the projects folder's).
pub async fn project_env(
    engine: &Engine,
    project: Option<&ProjectDir>,
) -> Result<Option<Arc<PythonEnv>>, ClientMessage> {
    engine
        .project_env(project)
        .await
        .map_err(ClientMessage::from)
}

/// What a result says of the interpreter: `env`'s, else the server's own (a run whose
/// environment is not known here: one handed over, or started without one).
pub fn python_info(engine: &Engine, env: Option<&PythonEnv>) -> PythonInfo {
    match env {
        Some(env) => python_info_of(env),
        None => match engine.python_envs().default_env() {
            Ok(env) => python_info_of(&env),
            Err(_) => PythonInfo {
                version: String::new(),
                venv: None,
            },
        },
    }
}

//! `install_packages` (`--allow-install`): packages installed into a project's `.venv`. Its
//! router joins the server's only with the flag, so without it the tool is neither listed nor
//! callable.
//!
//! Steps: prove `project` with `ProjectRoot::resolve_project`; check every requirement of
//! `packages`, then read `requirements` (a file of that project, proven with
//! `ProjectRoot::resolve_file` and read without following links) and check each of its lines —
//! all before anything runs. With neither, the project's `uv.lock` and `pyproject.toml` (read
//! the same way) are checked by `pyrun_run::uv_lock` (uv only; no lock: nothing to install) and the
//! lock is synced. Then hand them to `pyrun_run::install` (its pool, its sandbox profile); follow
//! the installer's last line with progress notifications; report the outcome with the host's
//! folders cut from the output. A failed install is a tool error with the installer's last lines.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::call::{with_progress, CallContext};
use crate::mcp::present::reply::{millis, refusal};
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::install::{
    InstallOutcome, InstallRequest, InstallStep, Installer, Installs, OverBudget, Wanted,
};
use pyrun_run::live_output::{LiveOutput, Stream};
use pyrun_run::paths::{PathError, ProjectDir, ReadError};
use pyrun_run::requirement::{
    parse_requirement, parse_requirements_file, Requirement, MAX_REQUIREMENTS,
    MAX_REQUIREMENTS_FILE_BYTES,
};
use pyrun_run::uv_lock::{
    check_lock, project_name, CheckedLock, MAX_LOCK_BYTES, MAX_PYPROJECT_BYTES,
};

/// The installer's last lines a result shows.
const TAIL_LINES: usize = 40;
/// The most bytes of them.
const TAIL_BYTES: usize = 8 << 10;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InstallPackagesArgs {
    /// The project folder, relative to the projects folder (e.g. `mathpkg`; `""` for the folder
    /// itself). Packages go into its `.venv`, made when missing.
    pub project: String,
    /// Requirements to install: a package name with optional extras and version specifiers,
    /// e.g. `requests`, `numpy>=1.26,<3`, `pandas[excel]==2.2.*`. No URLs, paths or options.
    #[serde(default)]
    pub packages: Vec<String>,
    /// A requirements file of the project (relative to the project folder, e.g.
    /// `requirements.txt`): every line a requirement as for `packages`, or a `#` comment.
    /// With neither `packages` nor `requirements`, the project's `uv.lock` (with its
    /// `pyproject.toml`) is synced, when every locked package comes from the server's index.
    #[serde(default)]
    pub requirements: Option<String>,
}

/// What a call asks for, checked.
enum Asked {
    Requirements(Vec<Requirement>),
    Lock(CheckedLock),
}

impl Asked {
    fn wanted(&self) -> Wanted<'_> {
        match self {
            Self::Requirements(requirements) => Wanted::Requirements(requirements),
            Self::Lock(lock) => Wanted::Lock(lock),
        }
    }

    /// As the installer gets them, or as the lock pins them (`name==version`).
    fn listed(&self) -> Vec<String> {
        let requirements = match self {
            Self::Requirements(requirements) => requirements.as_slice(),
            Self::Lock(lock) => lock.locked(),
        };
        requirements.iter().map(Requirement::to_arg).collect()
    }
}

/// The structured result of an install.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InstallReport {
    /// Whether the venv is ready and every requirement was installed.
    pub ok: bool,
    /// The installer: `uv` or `pip`.
    pub installer: String,
    /// The environment, relative to the projects folder (e.g. `mathpkg/.venv`).
    pub venv: String,
    /// Whether this install made the venv.
    pub created_venv: bool,
    /// The requirements as given to the installer; for a synced lock, every locked package
    /// as `name==version`.
    pub requirements: Vec<String>,
    /// Whether the project's uv.lock was synced (neither packages nor a requirements file given).
    pub synced_lock: bool,
    /// The installer's exit code; null when it was killed (timeout, cancellation).
    pub exit_code: Option<i32>,
    /// Whether the install was killed for taking longer than the server's --install-timeout.
    pub timed_out: bool,
    /// The installer's last lines (stdout and stderr as they came; host folders removed).
    pub output_tail: String,
    /// Whether the installer wrote more than the server keeps.
    pub output_truncated: bool,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// The isolation layers of the install's sandbox.
    pub sandbox: Vec<String>,
    /// Whether the install would write, or wrote, more than the server's --max-install-mb.
    pub over_budget: bool,
    /// Whether the venv was left as it was before the call (true unless a failed install
    /// could not put it back: then it may be half-made).
    pub venv_unchanged_on_failure: bool,
}

#[tool_router(router = install_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// Install Python packages into a project's virtual environment (`<project>/.venv`, made
    /// when missing), from the server's package index only, wheels only unless the server
    /// allows source builds. Scripts of the project then import them. Give package names with
    /// optional versions, or a requirements file of the project; with neither, the project's
    /// uv.lock is synced (uv only; every locked package must come from the server's index).
    #[tool(
        title = "Install Python packages",
        annotations(title = "Install Python packages", open_world_hint = true),
        output_schema = schema_for_output::<InstallReport>()
    )]
    async fn install_packages(
        &self,
        Parameters(args): Parameters<InstallPackagesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = self.call_context(&ctx);
        let Some(installs) = self.engine().installs().cloned() else {
            return Ok(refusal(ClientMessage::new(
                "package installs are off on this server",
            )));
        };
        let project = match self.engine().root().resolve_project(Some(&args.project)) {
            Ok(dir) => dir,
            Err(e) => return Ok(refusal(e.into())),
        };
        let asked = match asked(&call, &args, &project, &installs).await {
            Ok(asked) => asked,
            Err(message) => return Ok(refusal(message)),
        };
        let requirements = asked.listed();
        call.notes.note(|n| n.arg_count = Some(requirements.len()));
        let live = Arc::new(LiveOutput::new(installs.max_output()));
        let request = InstallRequest {
            project: &project,
            wanted: asked.wanted(),
            live: Arc::clone(&live),
        };
        let install = installs.install(request, &ctx.ct);
        let outcome = match ctx.meta.get_progress_token() {
            Some(token) => {
                let message =
                    |elapsed| install_message(call.app, &project, &live, &installs, elapsed);
                with_progress(&ctx, token, message, install).await
            }
            None => install.await,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return Ok(refusal(e.into())),
        };
        call.notes.note(|n| {
            n.exit_code = outcome.exit_code;
            n.timed_out = outcome.timed_out;
            n.cancelled = outcome.cancelled;
        });
        tracing::info!(
            project = project.relative(),
            installer = outcome.installer.name(),
            ok = outcome.ok(),
            exit_code = outcome.exit_code,
            ms = millis(outcome.duration),
            "install ended"
        );
        let (output, truncated) = live.take_text(Stream::Stdout);
        let report = InstallReport {
            ok: outcome.ok(),
            installer: outcome.installer.name().to_owned(),
            venv: outcome.venv.clone(),
            created_venv: outcome.created_venv,
            requirements,
            synced_lock: matches!(asked, Asked::Lock(_)),
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            output_tail: tail(&without_install_folders(call.app, &output, &installs)),
            output_truncated: truncated,
            duration_ms: millis(outcome.duration),
            sandbox: installs.layers().into_iter().map(String::from).collect(),
            over_budget: outcome.over_budget.is_some(),
            venv_unchanged_on_failure: !outcome.venv_not_restored,
        };
        Ok(result(&outcome, report, installs.max_install_bytes()))
    }
}

/// What the call asks for: its requirements, or with none named the project's uv.lock.
async fn asked(
    call: &CallContext<'_>,
    args: &InstallPackagesArgs,
    project: &ProjectDir,
    installs: &Installs,
) -> Result<Asked, ClientMessage> {
    if !args.packages.is_empty() || args.requirements.is_some() {
        return requirements(call, args, project)
            .await
            .map(Asked::Requirements);
    }
    let Some(lock) = project_text(call, LOCK_FILE, project, MAX_LOCK_BYTES).await? else {
        return Err(nothing_to_install());
    };
    if installs.installer() != Installer::Uv {
        return Err(ClientMessage::lock_needs_uv());
    }
    let checked = check_lock(&lock, installs.index())?;
    let pyproject = project_text(call, PYPROJECT_FILE, project, MAX_PYPROJECT_BYTES)
        .await?
        .ok_or_else(|| {
            ClientMessage::new("the project has a uv.lock but no pyproject.toml")
                .hint("lock the project again (uv lock), or name the packages")
        })?;
    project_name(&pyproject, &checked)?;
    Ok(Asked::Lock(checked))
}

/// Every requirement of the call, checked: `packages` first, then the file's lines.
async fn requirements(
    call: &CallContext<'_>,
    args: &InstallPackagesArgs,
    project: &ProjectDir,
) -> Result<Vec<Requirement>, ClientMessage> {
    let mut found = Vec::new();
    for given in &args.packages {
        let requirement = parse_requirement(given)
            .map_err(|e| ClientMessage::quoting(given).then(" ").then(e.describe()))?;
        found.push(requirement);
    }
    if let Some(file) = &args.requirements {
        found.extend(requirements_file(call, file, project).await?);
    }
    if found.is_empty() {
        return Err(nothing_to_install());
    }
    if found.len() > MAX_REQUIREMENTS {
        return Err(ClientMessage::new("one install takes at most ")
            .number(MAX_REQUIREMENTS)
            .then(" requirements, not ")
            .number(found.len()));
    }
    Ok(found)
}

/// A requirements file of `project`, checked line by line.
async fn requirements_file(
    call: &CallContext<'_>,
    given: &str,
    project: &ProjectDir,
) -> Result<Vec<Requirement>, ClientMessage> {
    let text = project_text(call, given, project, MAX_REQUIREMENTS_FILE_BYTES)
        .await?
        .ok_or_else(|| ClientMessage::from(PathError::NotFound(given.to_owned())))?;
    parse_requirements_file(&text).map_err(|e| {
        ClientMessage::quoting(given)
            .then(": line ")
            .number(e.line)
            .then(" ")
            .then(e.reason.describe())
            .hint("a requirements file here holds package names with versions and # comments only")
    })
}

/// A text file of `project` (`given` relative to it), proven inside it and read without
/// following links, at most `cap` bytes; `None` when there is none.
async fn project_text(
    call: &CallContext<'_>,
    given: &str,
    project: &ProjectDir,
    cap: u64,
) -> Result<Option<String>, ClientMessage> {
    let inside = match project.relative() {
        "" | "." => given.to_owned(),
        dir => format!("{dir}/{given}"),
    };
    let file = match call.app.engine.root().resolve_file(&inside) {
        Ok(file) => file,
        Err(PathError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let in_project = match project.relative() {
        "" | "." => true,
        dir => file
            .relative()
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/')),
    };
    if !in_project {
        return Err(ClientMessage::quoting(given).then(" is not a file of the project"));
    }
    let root = call.app.engine.root().clone();
    let read = tokio::task::spawn_blocking(move || root.read_file(&file, cap))
        .await
        .unwrap_or(Err(ReadError::Changed));
    let bytes = read.map_err(|e| match e {
        ReadError::TooLarge { .. } => ClientMessage::quoting(given)
            .then(" is larger than the ")
            .number(cap)
            .then(" bytes read at most"),
        ReadError::Changed => ClientMessage::quoting(given).then(" changed while it was read"),
        ReadError::Io(kind) => ClientMessage::quoting(given)
            .then(" could not be read")
            .kind(kind),
    })?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ClientMessage::quoting(given).then(" is not UTF-8 text"))
}

/// The installer's output as a client may see it: the projects folder, the runs' scratch
/// and the installs' own folders cut (`mathpkg/.venv/lib/...`).
fn without_install_folders(app: &App, text: &str, installs: &Installs) -> String {
    let mut text = app.engine.without_host_folder(text);
    for folder in installs.host_folders() {
        let mut prefix = folder.to_string_lossy().into_owned();
        prefix.push(std::path::MAIN_SEPARATOR);
        if text.contains(&prefix) {
            text = text.replace(&prefix, "");
        }
        let bare = folder.to_string_lossy();
        if text.contains(bare.as_ref()) {
            text = text.replace(bare.as_ref(), "<install>");
        }
    }
    text
}

/// An install's progress message: `installing into mathpkg (4 s): Collecting requests`.
fn install_message(
    app: &App,
    project: &ProjectDir,
    live: &LiveOutput,
    installs: &Installs,
    elapsed: Duration,
) -> ClientMessage {
    let project = match project.relative() {
        "" | "." => ".",
        dir => dir,
    };
    let message = ClientMessage::new("installing into ")
        .given(project)
        .then(" (")
        .number(elapsed.as_secs())
        .then(" s)");
    match live.last_line() {
        Some(line) => message
            .then(": ")
            .output(&without_install_folders(app, &line, installs)),
        None => message,
    }
}

/// The project's files a sync reads (relative to the project).
const LOCK_FILE: &str = "uv.lock";
const PYPROJECT_FILE: &str = "pyproject.toml";

fn nothing_to_install() -> ClientMessage {
    ClientMessage::new("there is nothing to install").hint(
        "name packages (e.g. [\"requests\"]), a requirements file of the project, or give the \
         project a pyproject.toml and uv.lock to sync",
    )
}

/// The result: structured always; a tool error (with the last lines) when the install failed.
fn result(outcome: &InstallOutcome, report: InstallReport, max_bytes: u64) -> CallToolResult {
    let mb = |bytes: u64| bytes.div_ceil(1 << 20);
    let mut text = if report.ok && report.synced_lock {
        format!(
            "synced the project's uv.lock ({} packages) into {} with {} in {:.1} s",
            report.requirements.len(),
            report.venv,
            report.installer,
            outcome.duration.as_secs_f64()
        )
    } else if report.ok {
        format!(
            "installed {} into {} with {} in {:.1} s",
            report.requirements.join(", "),
            report.venv,
            report.installer,
            outcome.duration.as_secs_f64()
        )
    } else if let Some(over) = outcome.over_budget {
        let why = match over {
            OverBudget::Stated(bytes) => format!(
                "its packages unpack to {} MB, more than the server's --max-install-mb ({} MB); \
                 nothing was unpacked",
                mb(bytes),
                mb(max_bytes)
            ),
            OverBudget::Written => format!(
                "it wrote more than the server's --max-install-mb ({} MB) and was stopped",
                mb(max_bytes)
            ),
        };
        format!(
            "the install into {} was refused: {why}\nhint: install fewer packages at a time, or \
             ask the server's operator to raise --max-install-mb (PYRUN_MAX_INSTALL_MB)",
            report.venv
        )
    } else if report.timed_out {
        format!(
            "the install into {} was killed after the server's --install-timeout",
            report.venv
        )
    } else if outcome.cancelled {
        format!("the install into {} was cancelled", report.venv)
    } else {
        let step = match outcome.step {
            InstallStep::Fetch if report.synced_lock => "fetching the uv.lock's packages",
            InstallStep::Fetch => "fetching the packages",
            InstallStep::Venv => "making the venv",
            InstallStep::Install if report.synced_lock => "syncing the uv.lock",
            InstallStep::Install => "installing",
        };
        let code = report
            .exit_code
            .map_or_else(|| "no exit code".to_owned(), |c| format!("exit code {c}"));
        format!(
            "the install into {} failed while {step} ({} ended with {code})",
            report.venv, report.installer
        )
    };
    if !report.ok {
        text.push_str(if outcome.venv_not_restored {
            "\nthe venv could NOT be put back as it was: it may be half-made (the server's log \
             says why)"
        } else {
            "\nthe venv is left as it was before the call"
        });
    }
    if !report.output_tail.is_empty() {
        text.push_str("\n--- installer output (last lines) ---\n");
        text.push_str(&report.output_tail);
    }
    let content = vec![ContentBlock::text(text)];
    let mut result = if report.ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = serde_json::to_value(&report).ok();
    result
}

/// The last [`TAIL_LINES`] lines of `text`, at most [`TAIL_BYTES`] (cut on a character).
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let joined = lines[start..].join("\n");
    let mut cut = joined.len().saturating_sub(TAIL_BYTES);
    while !joined.is_char_boundary(cut) {
        cut += 1;
    }
    joined[cut..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_bytes() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let kept = tail(&text);
        assert!(kept.starts_with("line 60\n"), "{kept}");
        assert!(kept.ends_with("line 99"), "{kept}");
        let long = "é".repeat(TAIL_BYTES);
        let kept = tail(&long);
        assert!(kept.len() <= TAIL_BYTES && !kept.is_empty());
    }
}

//! `install_packages` (`--allow-install`): packages installed into a project's `.venv`. Its
//! router joins the server's only with the flag, so without it the tool is neither listed nor
//! callable.
//!
//! Steps: prove `project` with `ProjectRoot::resolve_project`; check every requirement of
//! `packages`, then read `requirements` (a file of that project, proven with
//! `ProjectRoot::resolve_file` and read without following links) and check each of its lines —
//! all before anything runs; hand them to `run::install` (its pool, its sandbox profile); follow
//! the installer's last line with progress notifications; report the outcome with the host's
//! folders cut from the output. A failed install is a tool error with the installer's last lines.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::client_message::ClientMessage;
use crate::run::install::{InstallOutcome, InstallRequest, InstallStep, Installs};
use crate::run::live_output::{LiveOutput, Stream};
use crate::run::paths::{ProjectDir, ReadError};
use crate::run::requirement::{
    parse_requirement, parse_requirements_file, Requirement, MAX_REQUIREMENTS,
    MAX_REQUIREMENTS_FILE_BYTES,
};
use crate::run_tools::call_notes;
use crate::tools::{refusal, PyRunServer, NOTIFY_TIMEOUT, PROGRESS_EVERY};

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
    #[serde(default)]
    pub requirements: Option<String>,
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
    /// The requirements as given to the installer.
    pub requirements: Vec<String>,
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
}

#[tool_router(router = install_router, vis = "pub(crate)")]
impl PyRunServer {
    /// Install Python packages into a project's virtual environment (`<project>/.venv`, made
    /// when missing), from the server's package index only, wheels only unless the server
    /// allows source builds. Scripts of the project then import them. Give package names with
    /// optional versions, or a requirements file of the project.
    #[tool(
        annotations(title = "Install Python packages", open_world_hint = true),
        output_schema = schema_for_output::<InstallReport>()
    )]
    async fn install_packages(
        &self,
        Parameters(args): Parameters<InstallPackagesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let notes = call_notes(&ctx);
        let Some(installs) = self.app.installs.clone() else {
            return Ok(refusal(ClientMessage::new(
                "package installs are off on this server",
            )));
        };
        let project = match self.app.root.resolve_project(Some(&args.project)) {
            Ok(dir) => dir,
            Err(e) => return Ok(refusal(e.into())),
        };
        let requirements = match self.requirements(&args, &project).await {
            Ok(found) => found,
            Err(message) => return Ok(refusal(message)),
        };
        notes.note(|n| n.arg_count = Some(requirements.len()));
        let live = Arc::new(LiveOutput::new(installs.max_output()));
        let request = InstallRequest {
            project: &project,
            requirements: &requirements,
            live: Arc::clone(&live),
        };
        let install = installs.install(request, &ctx.ct);
        let outcome = match ctx.meta.get_progress_token() {
            Some(token) => {
                let progress = InstallProgress {
                    ctx: &ctx,
                    token,
                    project: &project,
                    live: &live,
                    server: self,
                    installs: &installs,
                };
                progress.around(install).await
            }
            None => install.await,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return Ok(refusal(e.into())),
        };
        notes.note(|n| {
            n.exit_code = outcome.exit_code;
            n.timed_out = outcome.timed_out;
            n.cancelled = outcome.cancelled;
        });
        tracing::info!(
            project = project.relative(),
            installer = outcome.installer.name(),
            ok = outcome.ok(),
            exit_code = outcome.exit_code,
            ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            "install ended"
        );
        let (output, truncated) = live.take_text(Stream::Stdout);
        let report = InstallReport {
            ok: outcome.ok(),
            installer: outcome.installer.name().to_owned(),
            venv: outcome.venv.clone(),
            created_venv: outcome.created_venv,
            requirements: requirements.iter().map(Requirement::to_arg).collect(),
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            output_tail: tail(&self.without_install_folders(&output, &installs)),
            output_truncated: truncated,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            sandbox: installs.layers().into_iter().map(String::from).collect(),
        };
        Ok(result(&outcome, report))
    }
}

impl PyRunServer {
    /// Every requirement of the call, checked: `packages` first, then the file's lines.
    async fn requirements(
        &self,
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
            found.extend(self.requirements_file(file, project).await?);
        }
        if found.is_empty() {
            return Err(ClientMessage::new("there is nothing to install").hint(
                "name packages (e.g. [\"requests\"]) or a requirements file of the project",
            ));
        }
        if found.len() > MAX_REQUIREMENTS {
            return Err(ClientMessage::new("one install takes at most ")
                .number(MAX_REQUIREMENTS)
                .then(" requirements, not ")
                .number(found.len()));
        }
        Ok(found)
    }

    /// A requirements file of `project`, proven inside it and read without following links.
    async fn requirements_file(
        &self,
        given: &str,
        project: &ProjectDir,
    ) -> Result<Vec<Requirement>, ClientMessage> {
        let inside = match project.relative() {
            "" | "." => given.to_owned(),
            dir => format!("{dir}/{given}"),
        };
        let file = self.app.root.resolve_file(&inside)?;
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
        let root = self.app.root.clone();
        let read =
            tokio::task::spawn_blocking(move || root.read_file(&file, MAX_REQUIREMENTS_FILE_BYTES))
                .await
                .unwrap_or(Err(ReadError::Changed));
        let bytes = read.map_err(|e| match e {
            ReadError::TooLarge { .. } => ClientMessage::quoting(given)
                .then(" is larger than the ")
                .number(MAX_REQUIREMENTS_FILE_BYTES)
                .then(" bytes a requirements file may have"),
            ReadError::Changed => ClientMessage::quoting(given).then(" changed while it was read"),
            ReadError::Io(kind) => ClientMessage::quoting(given)
                .then(" could not be read")
                .kind(kind),
        })?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ClientMessage::quoting(given).then(" is not UTF-8 text"))?;
        parse_requirements_file(&text).map_err(|e| {
            ClientMessage::quoting(given)
                .then(": line ")
                .number(e.line)
                .then(" ")
                .then(e.reason.describe())
                .hint("a requirements file here holds package names with versions and # comments only")
        })
    }

    /// The installer's output as a client may see it: the projects folder, the runs' scratch
    /// and the installs' own folders cut (`mathpkg/.venv/lib/...`).
    fn without_install_folders(&self, text: &str, installs: &Installs) -> String {
        let mut text = self.without_host_folder(text);
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
}

/// The result: structured always; a tool error (with the last lines) when the install failed.
fn result(outcome: &InstallOutcome, report: InstallReport) -> CallToolResult {
    let mut text = if report.ok {
        format!(
            "installed {} into {} with {} in {:.1} s",
            report.requirements.join(", "),
            report.venv,
            report.installer,
            outcome.duration.as_secs_f64()
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
            InstallStep::Fetch => "fetching the packages",
            InstallStep::Venv => "making the venv",
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

/// Progress notifications of an install: every second, how long it has run and the
/// installer's last line.
struct InstallProgress<'a> {
    ctx: &'a RequestContext<RoleServer>,
    token: rmcp::model::ProgressToken,
    project: &'a ProjectDir,
    live: &'a LiveOutput,
    server: &'a PyRunServer,
    installs: &'a Installs,
}

impl InstallProgress<'_> {
    async fn around<F: std::future::Future>(self, work: F) -> F::Output {
        tokio::pin!(work);
        let mut ticks = tokio::time::interval(PROGRESS_EVERY);
        ticks.tick().await; // the first tick is immediate
        let started = tokio::time::Instant::now();
        loop {
            tokio::select! {
                result = &mut work => return result,
                _ = ticks.tick() => {
                    let secs = started.elapsed().as_secs_f64();
                    let param = ProgressNotificationParam::new(self.token.clone(), secs.floor())
                        .with_message(self.message(started.elapsed()).into_string());
                    let send = self.ctx.peer.notify_progress(param);
                    let _ = tokio::time::timeout(NOTIFY_TIMEOUT, send).await;
                }
            }
        }
    }

    /// `installing into mathpkg (4 s): Collecting requests`
    fn message(&self, elapsed: Duration) -> ClientMessage {
        let project = match self.project.relative() {
            "" | "." => ".",
            dir => dir,
        };
        let message = ClientMessage::new("installing into ")
            .given(project)
            .then(" (")
            .number(elapsed.as_secs())
            .then(" s)");
        match self.live.last_line() {
            Some(line) => message
                .then(": ")
                .output(&self.server.without_install_folders(&line, self.installs)),
            None => message,
        }
    }
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

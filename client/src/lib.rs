//! pyrun-mcp-client: a command-line MCP client (stdio, Streamable HTTP, legacy SSE) for smoke
//! tests and scripts. `run` resolves the flags, connects, runs one subcommand and returns its exit code.

pub mod cli;
pub mod commands;
pub mod connect;
pub mod error;
mod handler;
pub mod interactive;
mod live;
pub mod output;
pub mod reporter;
pub mod session;
mod term;

use std::io::IsTerminal;
use std::time::Duration;

use crate::cli::{Cli, Command, SessionCommand};
use crate::commands::artifacts;
use crate::commands::run::RunOutcome;
use crate::connect::{HttpOptions, Target};
use crate::error::{exit_code, ClientError};
use crate::handler::Notifier;
use crate::live::LiveSink;
use crate::output::Output;
use crate::reporter::Reporter;
use crate::session::{Interrupt, Limits, Session};

/// Runs the command line to completion; `Ok` carries the exit code (for `run`, the script's).
pub fn run(cli: Cli) -> Result<u8, ClientError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| ClientError::Io {
            context: "cannot start the async runtime".into(),
            source,
        })?;
    let result = runtime.block_on(run_async(cli));
    // A blocking stdin read (interactive mode) must not hold the process open.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

async fn run_async(cli: Cli) -> Result<u8, ClientError> {
    // Stage 1: validate everything without I/O.
    let command = match cli.command {
        Some(command) => command,
        None if std::io::stdin().is_terminal() => Command::Interactive,
        None => {
            return Err(ClientError::Usage(
                "no subcommand given (tools, call, run, code, files, runs, logs, cancel, \
                 session, install, packages, resources, read, prompts, prompt, ping, \
                 interactive); see --help"
                    .into(),
            ))
        }
    };
    let server = cli.server.ok_or_else(|| {
        ClientError::Usage(
            "no server given: pass --server URL-or-command or set MCP_SERVER_URL".into(),
        )
    })?;
    let target = Target::detect(&server, cli.transport)?;
    match &command {
        Command::Logs(args) => commands::runs::check_run_id(&args.run_id)?,
        Command::Cancel { run_id } => commands::runs::check_run_id(run_id)?,
        Command::Code(args) => commands::code::check(args)?,
        _ => {}
    }
    if let (Target::Stdio { .. }, Some(name)) = (&target, command.needs_lasting_server()) {
        return Err(ClientError::NeedsHttp { command: name });
    }
    let http = HttpOptions::new(cli.token, &cli.headers)?;
    let deadline = match cli.timeout {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 => {
            let limit = Duration::from_secs_f64(s);
            Some((tokio::time::Instant::now() + limit, limit))
        }
        Some(s) => {
            return Err(ClientError::Usage(format!(
                "--timeout must be a positive number of seconds, not {s}"
            )))
        }
    };

    // Stage 2: connect and run.
    let limits = Limits {
        interrupt: watch_ctrl_c(matches!(command, Command::Interactive)),
        deadline,
    };
    let output = Output::new(cli.json);
    let stdin_passed = match &command {
        Command::Run(args) => Some(args.stdin || args.stdin_file.is_some()),
        Command::Code(args) => Some(
            args.stdin
                || args.stdin_file.is_some()
                || args
                    .source
                    .file
                    .as_deref()
                    .is_some_and(|f| f.as_os_str() == "-"),
        ),
        _ => None,
    };
    // Said after the run's output (a hint, like the others), so that it never lands in the middle.
    let stdin_note = stdin_passed == Some(false);
    let reporter = Reporter::for_terminal(cli.json);
    let live = LiveSink::default();
    let (service, used) = limits
        .guard(connect::connect(
            &target,
            &http,
            Notifier::new(reporter.clone(), live.clone()),
            if cli.verbose {
                connect::ServerLog::All
            } else {
                connect::ServerLog::Errors
            },
        ))
        .await?;
    if cli.verbose {
        output.note(&format!("connected to {}", used.describe()));
    }
    let session = Session::new(service, limits, reporter, live);
    let result = execute(&session, command, &output, cli.verbose).await;
    session.close().await;
    if stdin_note && result.is_ok() && commands::run_arguments::stdin_is_data() {
        output.hint(commands::run_arguments::STDIN_NOT_PASSED);
    }
    result
}

async fn execute(
    session: &Session,
    command: Command,
    output: &Output,
    verbose: bool,
) -> Result<u8, ClientError> {
    match command {
        Command::Tools => {
            output.tools(&commands::tools::execute(session).await?, verbose);
            Ok(0)
        }
        Command::Call(args) => {
            let result = commands::call::execute(session, &args).await?;
            // A failed call's text becomes the error message (stderr); --json keeps the whole result.
            if result.is_error != Some(true) || output.json() {
                output.call_result(&result);
            }
            if result.is_error == Some(true) {
                return Err(ClientError::tool_failed(&args.tool, &result));
            }
            if let Some(dir) = &args.save_artifacts {
                save_artifacts(session, output, &artifacts::links(&result), dir).await?;
            }
            Ok(0)
        }
        Command::Run(args) if args.detach => {
            output.started_run(&commands::runs::start(session, &args).await?);
            Ok(0)
        }
        Command::Run(args) => {
            let report = commands::run::execute(session, &args, !output.json()).await?;
            if let RunOutcome::HandedOver { run_id } = &report.outcome {
                output.handed_over(run_id);
                let save = args.save_artifacts.as_deref();
                return match show_run(session, output, run_id, true, save).await {
                    // `run`'s promise: Ctrl-C and --timeout stop the script.
                    Err(stop @ (ClientError::Interrupted | ClientError::Timeout(_))) => {
                        commands::runs::cancel_after_stop(session, run_id).await;
                        Err(stop)
                    }
                    other => other,
                };
            }
            output.run_report(&report, args.save_artifacts.is_some());
            if let Some(dir) = &args.save_artifacts {
                save_artifacts(session, output, &artifacts::links(&report.result), dir).await?;
            }
            Ok(report.exit_code())
        }
        Command::Code(args) => {
            let report = commands::code::execute(session, &args, !output.json()).await?;
            output.run_report(&report, false);
            Ok(report.exit_code())
        }
        Command::Session(command) => session_command(session, output, command).await,
        Command::Install(args) => {
            output.call_result(&commands::packages::install(session, &args).await?);
            Ok(0)
        }
        Command::Packages { project } => {
            output.call_result(&commands::packages::list(session, project.as_deref()).await?);
            Ok(0)
        }
        Command::Runs => {
            output.runs(&commands::runs::list(session).await?);
            Ok(0)
        }
        Command::Logs(args) => {
            let save = args.save_artifacts.as_deref();
            match show_run(session, output, &args.run_id, args.follow, save).await {
                // Only the following stopped (unlike `run`, whose promise is to stop the script).
                Err(stop @ (ClientError::Interrupted | ClientError::Timeout(_))) => {
                    output.hint(&format!(
                        "the run goes on in the server; `pyrun-mcp-client cancel {}` stops it",
                        args.run_id
                    ));
                    Err(stop)
                }
                other => other,
            }
        }
        Command::Cancel { run_id } => {
            output.cancelled_run(&commands::runs::cancel(session, &run_id).await?);
            Ok(0)
        }
        Command::Resources => {
            output.resources(&commands::resources::list(session).await?);
            Ok(0)
        }
        Command::Read { uri, output: dest } => {
            let to_stdout = dest.as_ref().is_none_or(|d| d.as_os_str() == "-");
            let content = commands::resources::read(session, &uri, dest.as_deref()).await?;
            if to_stdout && !content.text && !output.json() && std::io::stdout().is_terminal() {
                return Err(ClientError::Usage(format!(
                    "{uri} is binary ({} bytes{}); write it to a file with -o FILE, or pipe it",
                    content.bytes.len(),
                    content
                        .mime_type
                        .as_deref()
                        .map(|m| format!(", {m}"))
                        .unwrap_or_default()
                )));
            }
            output.resource_content(&content);
            Ok(0)
        }
        Command::Prompts => {
            output.prompts(&commands::prompts::list(session).await?);
            Ok(0)
        }
        Command::Prompt { name, args } => {
            output.prompt_messages(&commands::prompts::get(session, &name, &args).await?);
            Ok(0)
        }
        Command::Files { dir } => {
            output.files(&commands::files::execute(session, dir.as_deref()).await?);
            Ok(0)
        }
        Command::Ping { count } => {
            output.ping(&commands::ping::execute(session, count).await?);
            Ok(0)
        }
        Command::Interactive => interactive::execute(session, output).await,
    }
}

/// `session start|exec|stop|list`; `exec` exits 1 when the code raised, 124 when it timed out.
async fn session_command(
    session: &Session,
    output: &Output,
    command: SessionCommand,
) -> Result<u8, ClientError> {
    use commands::sessions;
    match command {
        SessionCommand::Start { project } => {
            output.session_started(&sessions::start(session, project.as_deref()).await?);
            Ok(0)
        }
        SessionCommand::Exec(args) => {
            let code = commands::code::source_text(&args.source)?;
            let answer =
                sessions::exec(session, &args.session_id, &code, args.script_timeout).await?;
            output.session_exec(&answer);
            Ok(answer.value.exit_code())
        }
        SessionCommand::Stop { session_id } => {
            output.call_result(&sessions::stop(session, &session_id).await?);
            Ok(0)
        }
        SessionCommand::List => {
            output.sessions(&sessions::list(session).await?);
            Ok(0)
        }
    }
}

/// `logs`, and `run` after a hand-over: the run's output as it comes, how it ended, its artifacts
/// saved; the run's exit code.
async fn show_run(
    session: &Session,
    output: &Output,
    run_id: &str,
    follow: bool,
    save: Option<&std::path::Path>,
) -> Result<u8, ClientError> {
    let log = commands::runs::logs(session, run_id, follow, |page| output.run_page(page)).await?;
    output.run_log(&log, save.is_some());
    if let Some(dir) = save {
        if log.last.status.has_ended() {
            save_artifacts(session, output, &artifacts::links(&log.result), dir).await?;
        } else {
            output.hint("the run has not ended yet: no artifacts to save (add --follow)");
        }
    }
    if !log.last.status.has_ended() {
        return Ok(exit_code::STILL_RUNNING);
    }
    Ok(log.last.exit_code())
}

/// `--save-artifacts DIR`: saves what it can, shows it, then fails if any artifact was not saved.
async fn save_artifacts(
    session: &Session,
    output: &Output,
    links: &[artifacts::ArtifactLink],
    dir: &std::path::Path,
) -> Result<(), ClientError> {
    let report = artifacts::save(session, links, dir).await?;
    output.saved_artifacts(&report, dir);
    report.into_result()
}

/// First Ctrl-C: cancel the call in flight and exit 130. Second Ctrl-C: exit 130 at once.
/// In the interactive menu (`rearm`) each Ctrl-C cancels what runs then and the menu goes on.
fn watch_ctrl_c(rearm: bool) -> Interrupt {
    let interrupt = Interrupt::new(rearm);
    let on_signal = interrupt.clone();
    tokio::spawn(async move {
        let mut presses = 0u32;
        while tokio::signal::ctrl_c().await.is_ok() {
            on_signal.press();
            presses += 1;
            if presses >= 2 && !on_signal.rearms() {
                std::process::exit(i32::from(exit_code::INTERRUPTED));
            }
        }
    });
    interrupt
}

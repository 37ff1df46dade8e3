//! pyrun-mcp-client: a command-line MCP client (stdio, Streamable HTTP, legacy SSE) for smoke
//! tests and scripts. `run` resolves the flags, connects, runs one subcommand and returns its exit code.

pub mod cli;
pub mod commands;
pub mod connect;
pub mod error;
mod handler;
pub mod interactive;
pub mod output;
pub mod reporter;
pub mod session;
mod term;

use std::io::IsTerminal;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command};
use crate::connect::{HttpOptions, Target};
use crate::error::{exit_code, ClientError};
use crate::handler::Notifier;
use crate::output::Output;
use crate::reporter::Reporter;
use crate::session::{Limits, Session};

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
                "no subcommand given (tools, call, run, files, ping, interactive); see --help"
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
        interrupt: watch_ctrl_c(),
        deadline,
    };
    let output = Output::new(cli.json);
    let reporter = Reporter::for_terminal(cli.json);
    let service = limits
        .guard(connect::connect(
            &target,
            &http,
            Notifier::new(reporter.clone()),
        ))
        .await?;
    let session = Session::new(service, limits, reporter);
    let result = execute(&session, command, &output).await;
    session.close().await;
    result
}

async fn execute(session: &Session, command: Command, output: &Output) -> Result<u8, ClientError> {
    match command {
        Command::Tools { verbose } => {
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
            Ok(0)
        }
        Command::Run(args) => {
            let report = commands::run::execute(session, &args).await?;
            output.run_report(&report);
            Ok(report.exit_code())
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

/// First Ctrl-C: cancel the call in flight and exit 130. Second Ctrl-C: exit 130 at once.
fn watch_ctrl_c() -> CancellationToken {
    let token = CancellationToken::new();
    let on_signal = token.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        on_signal.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(exit_code::INTERRUPTED));
        }
    });
    token
}

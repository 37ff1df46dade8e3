//! pyrun-mcp-server: parse settings, set up logs on stderr, pick a transport, own the shutdown.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use pyrun_mcp_server::app::App;
use pyrun_mcp_server::config::{Cli, Subcommand, Transport};
use pyrun_mcp_server::integrations::{self, Assistant};
use pyrun_mcp_server::transport;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::load();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_env("PYRUN_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn")),
        )
        .with_ansi(std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal())
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(Subcommand::Config { assistant, url }) = &cli.command {
        return print_config(&cli, *assistant, url.as_deref());
    }
    let config = cli.resolve()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let shutdown = CancellationToken::new();
        let app = App::build(config, shutdown.clone())?;
        tracing::info!(
            python = %app.config.python.display(),
            sandbox = ?app.runner.sandbox().layers(),
            "pyrun-mcp {} ready", env!("CARGO_PKG_VERSION")
        );
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        match app.config.transport {
            Transport::Stdio => transport::stdio::serve(app, shutdown).await,
            Transport::Http => anyhow::bail!(
                "the HTTP transport is not built yet\nhint: pass --transport stdio (or set MCP_TRANSPORT=stdio)"
            ),
        }
    })
}

/// `config ASSISTANT`: the snippet on stdout (it may be piped into a file), hints on stderr.
fn print_config(cli: &Cli, assistant: Assistant, url: Option<&str>) -> anyhow::Result<()> {
    let snippet = integrations::snippet(assistant, &cli.integration_target(url)?);
    println!("{}", snippet.text);
    for hint in &snippet.hints {
        eprintln!("{hint}");
    }
    Ok(())
}

/// Ctrl-C or SIGTERM: cancel the shutdown token (running scripts are killed).
async fn cancel_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("shutting down");
    shutdown.cancel();
}

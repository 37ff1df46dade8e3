//! pyrun-mcp-server: parse settings, set up logs on stderr, pick a transport, own the shutdown.

// With the stdio transport, stdout is the protocol: prints only where an `allow` says why.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use pyrun_mcp_server::app::{banner, shutdown, stderr, App};
use pyrun_mcp_server::config::{Cli, Subcommand, Transport};
use pyrun_mcp_server::integrations::{self, Assistant};
use pyrun_mcp_server::oauth;
use pyrun_mcp_server::transport;
use pyrun_mcp_server::tunnel::{self, OpenTunnel};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

pub fn main() -> ExitCode {
    // First, before anything opens a file: what the server inherited must not reach a run, and
    // every connection and run pipe needs a descriptor.
    let inherited = process_setup::seal_inherited_fds();
    let fd_limit = process_setup::raise_fd_limit();
    let (cli, dotenv) = Cli::load();
    tracing_subscriber::fmt()
        // Never fails, panics or blocks: see `stderr`.
        .with_writer(stderr::Stderr::new)
        .log_internal_errors(false)
        .with_env_filter(
            EnvFilter::try_from_env("PYRUN_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn")),
        )
        .with_ansi(std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal())
        .init();
    dotenv.log();
    for lookalike in pyrun_mcp_server::config::lookalikes(&dotenv) {
        tracing::warn!("{lookalike}");
    }
    // A `.env` line that cannot be read stops everything: the settings after it (a token, the
    // sandbox mode) must not silently fall back to their defaults.
    if let Some(refusal) = dotenv.refusal() {
        print_error(&anyhow::anyhow!(refusal));
        return ExitCode::from(2);
    }
    let cli = match cli {
        Ok(cli) => cli,
        Err(bad) => {
            print_error(&anyhow::anyhow!(bad));
            return ExitCode::from(2);
        }
    };
    if let Err(error) = inherited {
        tracing::warn!(%error, "could not mark inherited file descriptors close-on-exec");
    }
    match fd_limit {
        Ok(limit) => tracing::debug!(limit, "open-file limit (RLIMIT_NOFILE)"),
        Err(error) => tracing::warn!(%error, "could not raise the open-file limit (RLIMIT_NOFILE)"),
    }
    let code = match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(&e);
            ExitCode::from(2)
        }
    };
    // The last lines out, unless nobody reads them.
    stderr::flush(LAST_WORDS);
    code
}

/// How long the process's last log lines may take to be written before it exits.
const LAST_WORDS: Duration = Duration::from_millis(200);

/// Why the server did not start or stopped: one line on stderr, whatever the log filter says.
fn print_error(e: &anyhow::Error) {
    stderr::line(&format!("error: {e:#}"));
    stderr::flush(LAST_WORDS);
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(Subcommand::Config {
        assistant,
        url,
        allow_venv_pythons,
    }) = &cli.command
    {
        return print_config(&cli, *assistant, url.as_deref(), *allow_venv_pythons);
    }
    if let Some(Subcommand::Oauth { action }) = &cli.command {
        let state_dir = cli.state_dir()?;
        return oauth::admin::run(action, &state_dir, &mut std::io::stdout().lock());
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    // Before anything starts a process (the interpreter is asked where it is): a signal from
    // here on waits for the stop instead of killing the server with a helper half-done.
    let signals = {
        let _runtime = runtime.enter();
        shutdown::Signals::install()
    };
    let mut config = cli.resolve()?;
    let served = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        // Bind first, so a taken port fails before anything is public; then the tunnel, whose
        // host name must be allowed before the router is built.
        let listener = match config.transport {
            Transport::Http => Some(transport::http::bind(config.http.bind).await?),
            Transport::Stdio => None,
        };
        let tunnel = match &config.tunnel {
            Some(settings) => {
                let opened = tunnel::open(settings).await?;
                opened.announce(settings.url_file.as_deref())?;
                config.http.allowed_hosts.push(opened.host().to_owned());
                Some(opened)
            }
            None => None,
        };
        // `--oauth` without `--public-url`: the issuer is where clients reach the server.
        if let Some(settings) = config.oauth.as_mut().filter(|s| s.public_url.is_none()) {
            settings.public_url = match (&tunnel, &listener) {
                (Some(tunnel), _) => Some(format!("https://{}", tunnel.host())),
                (None, Some(listener)) => Some(format!("http://{}", listener.local_addr()?)),
                (None, None) => None,
            };
        }
        let app = App::build(config, shutdown.clone())?;
        tracing::info!(
            python = %app.config.python.display(),
            state_dir = %app
                .config
                .state_dir
                .as_deref()
                .map_or_else(|| "none".into(), |d| d.display().to_string()),
            sandbox = %app
                .engine
                .runner()
                .sandbox()
                .layers_now()
                .map_or_else(|| "probing".to_owned(), |l| format!("{l:?}")),
            "pyrun-mcp {} ready", env!("CARGO_PKG_VERSION")
        );
        tokio::spawn(shutdown::on_signals(signals, shutdown.clone()));
        banner::protection_when_probed(app.clone());
        let served = match (listener, tunnel) {
            (None, _) => {
                banner::stdio(&app);
                transport::stdio::serve(app.clone(), shutdown).await
            }
            (Some(listener), None) => transport::http::serve(app.clone(), listener, shutdown).await,
            (Some(listener), Some(tunnel)) => {
                serve_with_tunnel(app.clone(), listener, tunnel, shutdown).await
            }
        };
        // However the session ended (a client that closed stdin at once, a signal, an error).
        app.close().await;
        served
    });
    // Every run and helper is reaped by now; a blocking-pool thread still waiting (a read of a
    // stdin that never closes) must not hold the process.
    runtime.shutdown_timeout(Duration::from_millis(200));
    served
}

/// Serves the local listener and the tunnel's connections with one router; a tunnel that closes
/// for good stops the server with an error (a supervisor may restart it).
async fn serve_with_tunnel(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    tunnel: OpenTunnel,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let lost = CancellationToken::new();
    let public = tunnel.with_local(listener, lost.clone());
    let stop = shutdown.clone();
    let watch = lost.clone();
    tokio::spawn(async move {
        watch.cancelled().await;
        stop.cancel();
    });
    transport::http::serve(app, public, shutdown).await?;
    if lost.is_cancelled() {
        anyhow::bail!("the ngrok tunnel closed; the server stopped");
    }
    Ok(())
}

/// `config ASSISTANT`: the snippet on stdout (it may be piped into a file), hints on stderr.
#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a CLI subcommand that serves no protocol: its output is the snippet"
)]
fn print_config(
    cli: &Cli,
    assistant: Assistant,
    url: Option<&str>,
    allow_venv_pythons: bool,
) -> anyhow::Result<()> {
    let (target, notes) = cli.integration_target(assistant, url, allow_venv_pythons)?;
    let snippet = integrations::snippet(assistant, &target);
    println!("{}", snippet.text);
    for hint in snippet.hints.iter().chain(&notes) {
        eprintln!("{hint}");
    }
    Ok(())
}

/// Process-wide settings made first thing in `main`, while the server is one thread.
mod process_setup {
    /// Marks every descriptor from 3 up close-on-exec: whatever the server inherited (a
    /// supervisor's socket, a terminal's pipe, a leaked log file) never reaches a script.
    #[cfg(target_os = "linux")]
    pub use pyrun_sandbox::spawn::seal_inherited_fds;

    #[cfg(not(target_os = "linux"))]
    pub fn seal_inherited_fds() -> std::io::Result<()> {
        Ok(())
    }

    /// Raises the soft open-file limit to the hard one (often 1024 of 4096 or more): every
    /// connection, SSE stream and run pipe holds a descriptor. Returns the limit now in force.
    #[cfg(unix)]
    pub fn raise_fd_limit() -> std::io::Result<u64> {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let limit = getrlimit(Resource::Nofile);
        let current = limit.current.unwrap_or(u64::MAX);
        let wanted = limit.maximum.unwrap_or(u64::MAX);
        if current >= wanted {
            return Ok(current);
        }
        let raise = |to: u64| {
            setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(to),
                    maximum: limit.maximum,
                },
            )
        };
        match raise(wanted) {
            Ok(()) => Ok(wanted),
            // macOS refuses more than OPEN_MAX (10240) when the hard limit is unlimited.
            Err(_) if cfg!(target_os = "macos") && wanted > 10_240 => {
                raise(10_240)?;
                Ok(10_240)
            }
            Err(e) => Err(e.into()),
        }
    }

    #[cfg(not(unix))]
    pub fn raise_fd_limit() -> std::io::Result<u64> {
        Ok(0)
    }
}

//! pyrun-mcp-client binary: parse flags, run, print the error chain once, exit with its code.

use std::process::ExitCode;

use clap::Parser;
use pyrun_mcp_client::cli::Cli;
use pyrun_mcp_client::output::Output;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Quiet unless RUST_LOG asks: failures reach the user as one classified error instead.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .init();
    let output = Output::new(cli.json);
    match pyrun_mcp_client::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            output.error(&err);
            ExitCode::from(err.exit_code())
        }
    }
}

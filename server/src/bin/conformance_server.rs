//! `pyrun-mcp-conformance-server`: the server's own `main`, built only with the test-only
//! `conformance` feature (its `[[bin]]` requires it), so the official conformance suite gets its
//! fixtures in a binary of another name and the normal `pyrun-mcp-server` never carries them. It
//! shares the normal build's target folder, so the dependencies compile once.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[path = "../main.rs"]
mod server_main;

fn main() -> std::process::ExitCode {
    server_main::main()
}

//! Settings checked at start through the real binary: a bad value names the variable and where it
//! was set (never a flag nobody typed), `~` is the home folder in path settings, `--bind
//! localhost:PORT` listens on loopback, and `config` takes the server's own `--projects-dir`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::{run_bounded, Output};

const DEADLINE: Duration = Duration::from_secs(30);
const BINARY: &str = env!("CARGO_BIN_EXE_pyrun-mcp-server");

/// The binary run from `cwd` with `args` and `env` only (the developer's settings scrubbed),
/// until it exits or [`DEADLINE`] passes.
fn server(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BINARY);
    pyrun_mcp_tests::scrub_env(&mut cmd)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .args(args)
        .envs(env.iter().copied());
    run_bounded(&mut cmd, DEADLINE)
}

/// A temporary folder holding `projects/` (with `hello.py`), the server's working directory.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("projects")).unwrap();
    std::fs::write(dir.path().join("projects/hello.py"), "print('hi')\n").unwrap();
    dir
}

/// It refused to start with exit code 2 before listening; its stderr.
fn refused(out: &Output) -> &str {
    assert!(!out.timed_out, "the server started:\n{}", out.stderr);
    assert_eq!(out.code, Some(2), "{}", out.describe());
    assert!(!out.stderr.contains("listening on"), "{}", out.stderr);
    &out.stderr
}

#[test]
fn a_bad_value_in_dotenv_names_its_variable_and_line_not_a_flag_nobody_typed() {
    let dir = workdir();
    std::fs::write(
        dir.path().join(".env"),
        "# settings\nPYRUN_MAX_CONCURRENT=2\nPYTHON_TIMEOUT=thirty\n",
    )
    .unwrap();
    let out = server(dir.path(), &["--projects-dir", "projects"], &[]);
    let said = refused(&out);
    assert!(
        said.contains("PYTHON_TIMEOUT, set in .env line 3, has the invalid value 'thirty'"),
        "{said}"
    );
    assert!(!said.contains("for '--timeout"), "{said}");
}

#[test]
fn a_bad_value_in_the_environment_names_its_variable_and_the_environment() {
    let dir = workdir();
    let out = server(
        dir.path(),
        &["--projects-dir", "projects"],
        &[("PYRUN_SANDBOX", "loose")],
    );
    let said = refused(&out);
    assert!(
        said.contains("PYRUN_SANDBOX, set in the environment, has the invalid value 'loose'"),
        "{said}"
    );
    assert!(said.contains("strict, standard, off"), "{said}");
    assert!(!said.contains("for '--sandbox"), "{said}");
    // The environment wins over `.env`, and so is named, not the file.
    std::fs::write(dir.path().join(".env"), "PYRUN_SANDBOX=strict\n").unwrap();
    let out = server(
        dir.path(),
        &["--projects-dir", "projects"],
        &[("PYRUN_SANDBOX", "loose")],
    );
    assert!(
        refused(&out).contains("set in the environment"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_bad_value_typed_as_a_flag_still_names_the_flag() {
    let dir = workdir();
    std::fs::write(dir.path().join(".env"), "PYTHON_TIMEOUT=20\n").unwrap();
    let out = server(
        dir.path(),
        &["--projects-dir", "projects", "--timeout", "thirty"],
        &[],
    );
    let said = refused(&out);
    assert!(said.contains("'--timeout"), "{said}");
    assert!(!said.contains("PYTHON_TIMEOUT"), "{said}");
}

#[test]
fn bind_localhost_listens_on_the_loopback_address() {
    let dir = workdir();
    let launch = pyrun_mcp_tests::ServerLaunch::new(BINARY, &dir.path().join("projects"));
    let mut cmd = launch.command("http", Some("localhost:0"));
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let started = pyrun_mcp_tests::wait_for_listening(&mut child, DEADLINE);
    let _ = child.kill();
    let _ = child.wait();
    let (url, _) = started.unwrap_or_else(|e| panic!("{e:?}"));
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
}

#[test]
fn config_takes_the_servers_projects_dir_and_expands_the_home_folder() {
    let dir = workdir();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("proj")).unwrap();
    let home_text = home.to_str().unwrap();
    // The flag after the subcommand, as a newcomer types it, with `~`.
    let out = server(
        dir.path(),
        &["config", "claude-desktop", "--projects-dir", "~/proj"],
        &[("HOME", home_text)],
    );
    assert!(out.success(), "{}", out.describe());
    let snippet: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let args = snippet["mcpServers"]["pyrun"]["args"].to_string();
    let absolute = dunce::canonicalize(home.join("proj")).unwrap();
    assert!(
        args.contains(&format!("\"{}\"", absolute.display())),
        "{args}"
    );
    // The same through `.env`, and a folder given as `./x` before the subcommand.
    std::fs::write(dir.path().join(".env"), "PYTHON_PROJECTS_DIR=~/proj\n").unwrap();
    let out = server(
        dir.path(),
        &["config", "claude-code"],
        &[("HOME", home_text)],
    );
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains(&absolute.display().to_string()),
        "{}",
        out.stdout
    );
}

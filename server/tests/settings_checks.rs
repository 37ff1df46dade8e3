//! Settings checked at start through the real binary, and what it says when it starts: a bad
//! value names the variable and where it was set (never a flag nobody typed), the interpreter
//! must be Python 3.8+, a broad projects folder needs a confirmation, `~` is the home folder in
//! path settings, `--bind localhost:PORT` listens on loopback, `config` takes the server's own
//! `--projects-dir`; the banner names the endpoints, the folder and the platform's protection,
//! and the MCP `instructions` say what is off.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::{run_bounded, Output, ServerLaunch};

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

/// The second stage (checks clap cannot make) names the variable too.
#[test]
fn a_value_refused_after_parsing_names_its_variable_and_where_it_was_set() {
    let dir = workdir();
    std::fs::write(dir.path().join(".env"), "# a\nPYRUN_PASS_ENV=A=B\n").unwrap();
    let out = server(dir.path(), &["--projects-dir", "projects"], &[]);
    let said = refused(&out);
    assert!(
        said.contains("PYRUN_PASS_ENV (set in .env line 2) 'A=B' is not a valid variable name"),
        "{said}"
    );
    assert!(!said.contains("--pass-env 'A=B'"), "{said}");
    std::fs::remove_file(dir.path().join(".env")).unwrap();
    let out = server(
        dir.path(),
        &["--projects-dir", "projects"],
        &[("MCP_ALLOWED_HOSTS", "https://x.example")],
    );
    let said = refused(&out);
    assert!(
        said.contains("MCP_ALLOWED_HOSTS (set in the environment) 'https://x.example'"),
        "{said}"
    );
    // Typed, the flag is named.
    let out = server(
        dir.path(),
        &[
            "--projects-dir",
            "projects",
            "--allowed-host",
            "https://x.example",
        ],
        &[],
    );
    assert!(
        refused(&out).contains("--allowed-host 'https://x.example'"),
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

// The stand-ins (a shell script, HOME) are Unix ones.
#[cfg(unix)]
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

/// A server started with `cmd` (stderr piped): its `listening on` URL and its growing log; the
/// process is killed with the guard.
struct Started {
    child: std::process::Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Started {
    fn new(mut cmd: Command) -> Result<Self, String> {
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        match pyrun_mcp_tests::wait_for_listening(&mut child, DEADLINE) {
            Ok((url, log)) => Ok(Self { child, url, log }),
            Err(e) => Err(e.0),
        }
    }

    /// The log once it holds `line` (or after the deadline).
    fn log_with(&self, line: &str) -> String {
        let until = std::time::Instant::now() + DEADLINE;
        loop {
            let log = self.log.lock().unwrap().clone();
            if log.contains(line) || std::time::Instant::now() > until {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// The stand-ins (a shell script, HOME) are Unix ones.
#[cfg(unix)]
#[test]
fn an_interpreter_that_is_not_python_3_8_or_later_stops_the_start_naming_it_and_its_answer() {
    let dir = workdir();
    // A stand-in that answers as python2 does: the version on stderr.
    let python2 = dir.path().join("python2");
    std::fs::write(&python2, "#!/bin/sh\necho 'Python 2.7.18' >&2\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python2, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let python2_text = python2.to_str().unwrap();
    let out = server(
        dir.path(),
        &["--projects-dir", "projects", "--python", python2_text],
        &[],
    );
    let said = refused(&out);
    assert!(
        said.contains(python2_text) && said.contains("it is Python 2.7.18"),
        "{said}"
    );
    assert!(said.contains("Python 3.8 or later"), "{said}");
    // A program that is not Python at all, through the variable.
    let out = server(
        dir.path(),
        &["--projects-dir", "projects"],
        &[("PYTHON_BIN", "/bin/ls")],
    );
    let said = refused(&out);
    assert!(
        said.contains("'/bin/ls'") && said.contains("not a Python interpreter"),
        "{said}"
    );
    // A missing file: named once (the hint does not repeat the error).
    let out = server(
        dir.path(),
        &["--projects-dir", "projects", "--python", "/no/such/python3"],
        &[],
    );
    let said = refused(&out);
    assert_eq!(said.matches("/no/such/python3").count(), 1, "{said}");
}

// The stand-ins (a shell script, HOME) are Unix ones.
#[cfg(unix)]
#[test]
fn a_broad_projects_folder_needs_an_explicit_confirmation() {
    let dir = workdir();
    let out = server(dir.path(), &["--projects-dir", "/"], &[]);
    let said = refused(&out);
    assert!(
        said.contains("the root of the filesystem") && said.contains("--allow-broad-projects-dir"),
        "{said}"
    );
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let home_text = home.to_str().unwrap();
    let out = server(dir.path(), &["--projects-dir", "~"], &[("HOME", home_text)]);
    assert!(refused(&out).contains("your home folder"), "{}", out.stderr);
    // Confirmed (here through the variable): it serves.
    let confirmed = ServerLaunch::new(BINARY, &home)
        .env("HOME", home_text)
        .env("PYRUN_ALLOW_BROAD_PROJECTS_DIR", "1")
        .command("http", Some("127.0.0.1:0"));
    Started::new(confirmed).unwrap_or_else(|log| panic!("did not start:\n{log}"));
    // A folder below the home folder needs nothing.
    std::fs::create_dir(home.join("proj")).unwrap();
    let below = ServerLaunch::new(BINARY, &home.join("proj"))
        .env("HOME", home_text)
        .command("http", Some("127.0.0.1:0"));
    Started::new(below).unwrap_or_else(|log| panic!("did not start:\n{log}"));
}

#[test]
fn the_banner_names_the_endpoints_the_folder_a_missing_token_and_the_protection() {
    let dir = workdir();
    let projects = dir.path().join("projects");
    let server =
        Started::new(ServerLaunch::new(BINARY, &projects).command("http", Some("127.0.0.1:0")))
            .unwrap_or_else(|log| panic!("{log}"));
    let log = server.log_with("pyrun-mcp protection:");
    let base = &server.url;
    assert!(
        log.contains(&format!("{base}/mcp")) && log.contains(&format!("{base}/sse")),
        "{log}"
    );
    let folder = dunce::canonicalize(&projects).unwrap();
    assert!(
        log.contains(&format!("projects folder: {}", folder.display())),
        "{log}"
    );
    assert!(log.contains("no auth token"), "{log}");
    let protection = log
        .lines()
        .find(|l| l.starts_with("pyrun-mcp protection: "))
        .unwrap_or_else(|| panic!("no protection line:\n{log}"));
    if cfg!(target_os = "linux") {
        assert!(
            protection.contains("Linux sandbox (standard)"),
            "{protection}"
        );
        assert!(protection.contains("network: off"), "{protection}");
    } else {
        assert!(protection.contains("NOT protected"), "{protection}");
    }
    // With a token, no such note.
    let with_token = ServerLaunch::new(BINARY, &projects)
        .args(["--auth-token", "t0k"])
        .command("http", Some("127.0.0.1:0"));
    let server = Started::new(with_token).unwrap_or_else(|log| panic!("{log}"));
    let log = server.log_with("pyrun-mcp protection:");
    assert!(!log.contains("no auth token"), "{log}");
}

#[test]
fn a_non_loopback_bind_says_which_host_names_it_accepts_and_oauth_says_the_connector_url() {
    let dir = workdir();
    let projects = dir.path().join("projects");
    let public = ServerLaunch::new(BINARY, &projects)
        .args(["--auth-token", "t0k", "--allowed-host", "pyrun.example"])
        .command("http", Some("0.0.0.0:0"));
    let server = Started::new(public).unwrap_or_else(|log| panic!("{log}"));
    let log = server.log_with("accepted Host names");
    let line = log
        .lines()
        .find(|l| l.contains("accepted Host names"))
        .unwrap_or_else(|| panic!("no host line:\n{log}"));
    assert!(
        line.contains("127.0.0.1")
            && line.contains("pyrun.example")
            && line.contains("--allowed-host"),
        "{line}"
    );
    drop(server);
    let oauth = ServerLaunch::new(BINARY, &projects)
        .args(["--oauth", "--auth-token", "owner-secret-t0k"])
        .command("http", Some("127.0.0.1:0"));
    let server = Started::new(oauth).unwrap_or_else(|log| panic!("{log}"));
    let log = server.log_with("connector URL");
    assert!(
        log.contains(&format!(
            "connector URL (Settings > Connectors > Add custom connector): {}/mcp",
            server.url
        )),
        "{log}"
    );
}

/// The `instructions` of a real `initialize` over `/mcp`.
fn instructions(args: &[&str]) -> String {
    let dir = workdir();
    let server = ServerLaunch::new(BINARY, &dir.path().join("projects"))
        .args(args)
        .http();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = pyrun_mcp_tests::http::http();
        let response = pyrun_mcp_tests::http::mcp_post(
            &client,
            &server.mcp_url(),
            &Default::default(),
            &pyrun_mcp_tests::http::initialize_request(0),
        )
        .await;
        let (init, _) = pyrun_mcp_tests::SseReader::new(response)
            .response_to(0)
            .await;
        init["result"]["instructions"]
            .as_str()
            .unwrap_or_else(|| panic!("no instructions: {init}"))
            .to_owned()
    })
}

#[test]
fn the_instructions_tell_the_model_what_is_off_its_setting_and_the_protection() {
    let said = instructions(&["--timeout", "12"]);
    // Only Linux's sandbox takes the network away.
    assert_eq!(
        said.contains("--allow-network"),
        cfg!(target_os = "linux"),
        "{said}"
    );
    for expected in [
        "--allow-inline-code",
        "--allow-install",
        "12 s per run",
        "Protection on this machine: ",
    ] {
        assert!(said.contains(expected), "{expected:?} missing:\n{said}");
    }
    // What is allowed is not said to be off.
    let said = instructions(&["--allow-network", "--allow-inline-code"]);
    assert!(!said.contains("network access:"), "{said}");
    assert!(!said.contains("inline code (run_python_code)"), "{said}");
    assert!(said.contains("--allow-install"), "{said}");
}

/// An interpreter that passes the start-up check but cannot answer the sandbox's probe (one that
/// quotes its arguments back, as `ls` does) is named once in the log, without the probe's code.
#[cfg(unix)]
#[test]
fn a_failed_probe_is_logged_once_without_the_probe_script() {
    use std::os::unix::fs::PermissionsExt;
    let dir = workdir();
    let python = dir.path().join("python3");
    std::fs::write(
        &python,
        "#!/bin/sh\ncase \"$1\" in --version) echo 'Python 3.11.0';; \
         -I) echo \"python3: cannot access '$3'\" >&2; exit 2;; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let launch = ServerLaunch::new(BINARY, &dir.path().join("projects"))
        .args(["--python", python.to_str().unwrap()])
        .command("http", Some("127.0.0.1:0"));
    let server = Started::new(launch).unwrap_or_else(|log| panic!("{log}"));
    let log = server.log_with("pyrun-mcp protection:");
    let error = log
        .lines()
        .find(|l| l.contains("the sandbox cannot be set up"))
        .unwrap_or_else(|| panic!("no probe error:\n{log}"));
    assert_eq!(
        error.matches("cannot ask the interpreter").count(),
        1,
        "{error}"
    );
    assert!(!log.contains("import os, platform"), "{log}");
    assert!(
        log.contains("pyrun-mcp protection: the sandbox could not be set up"),
        "{log}"
    );
}

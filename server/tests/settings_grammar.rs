//! One grammar for every setting, tried through the real binary: a boolean, a number, a size or a
//! duration is read the same from a flag, the environment and `.env`, takes effect (said in the
//! `instructions` of a real `initialize` over stdio), and anything else is refused naming the
//! variable and where it was set; a name close to one of the server's settings gets a warning
//! with the likely name, and CPython's own `PYTHON*` variables never do.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const BINARY: &str = env!("CARGO_BIN_EXE_pyrun-mcp-server");

/// What one start of the stdio server said: the `instructions` of its `initialize` answer (`None`
/// when it refused to start), its exit code and its stderr.
pub(crate) struct Started {
    instructions: Option<String>,
    code: Option<i32>,
    stderr: String,
}

/// A temporary folder holding `projects/`, the server's working directory (where `.env` is read).
fn workdir(dotenv: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("projects")).unwrap();
    if let Some(text) = dotenv {
        std::fs::write(dir.path().join(".env"), text).unwrap();
    }
    dir
}

/// Starts the server over stdio in `cwd` with `args` and `env` (the developer's settings
/// scrubbed), asks `initialize`, then closes its stdin so that it ends.
fn start(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Started {
    let mut cmd = Command::new(BINARY);
    pyrun_mcp_tests::scrub_env(&mut cmd)
        .current_dir(cwd)
        .args([
            "--transport",
            "stdio",
            "--projects-dir",
            "projects",
            "--state-dir",
            "state",
        ])
        .args(args)
        .envs(env.iter().copied());
    initialize(cmd)
}

/// Starts `cmd` (a stdio server), asks `initialize`, then closes its stdin so that it ends.
pub(crate) fn initialize(mut cmd: Command) -> Started {
    cmd.env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let mut stdin = child.stdin.take().unwrap();
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "grammar-test", "version": "1"}}});
    // A server that refused to start has closed its stdin: the write fails, the read ends.
    let _ = writeln!(stdin, "{initialize}");
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    drop(stdin);
    let status = child.wait().unwrap();
    let instructions = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|answer| answer["result"]["instructions"].as_str().map(str::to_owned));
    Started {
        instructions,
        code: status.code(),
        stderr: stderr.join().unwrap(),
    }
}

impl Started {
    pub(crate) fn instructions(&self) -> &str {
        self.instructions
            .as_deref()
            .unwrap_or_else(|| panic!("the server did not start:\n{}", self.stderr))
    }

    fn refusal(&self) -> &str {
        assert!(self.instructions.is_none(), "it started:\n{}", self.stderr);
        assert_eq!(self.code, Some(2), "{}", self.stderr);
        &self.stderr
    }
}

/// Whether the instructions say the network is off (Linux's sandbox only takes it away).
pub(crate) fn network_off(said: &str) -> bool {
    said.contains("network access:")
}

/// Whether the instructions say inline code is off.
pub(crate) fn inline_off(said: &str) -> bool {
    said.contains("inline code (run_python_code)")
}

#[test]
fn every_boolean_spelling_is_read_alike_from_a_flag_the_environment_and_dotenv() {
    for (yes, no) in [("1", "0"), ("true", "false"), ("YES", "No"), ("on", "off")] {
        // The environment.
        let dir = workdir(None);
        let said = start(
            dir.path(),
            &[],
            &[
                ("PYRUN_ALLOW_NETWORK", yes),
                ("PYRUN_ALLOW_INLINE_CODE", yes),
            ],
        );
        let said = said.instructions();
        assert!(!inline_off(said), "{yes}: {said}");
        if cfg!(target_os = "linux") {
            assert!(!network_off(said), "{yes}: {said}");
        }
        let said = start(
            dir.path(),
            &[],
            &[("PYRUN_ALLOW_NETWORK", no), ("PYRUN_ALLOW_INLINE_CODE", no)],
        );
        assert!(inline_off(said.instructions()), "{no}");
        // `.env`.
        let dir = workdir(Some(&format!(
            "PYRUN_ALLOW_NETWORK={yes}\nPYRUN_ALLOW_INLINE_CODE={yes}\nPYRUN_WARM={no}\n"
        )));
        let said = start(dir.path(), &[], &[]);
        let said = said.instructions();
        assert!(!inline_off(said), "{yes}: {said}");
        if cfg!(target_os = "linux") {
            assert!(!network_off(said), "{yes}: {said}");
        }
        // Flags: bare, or with the same spellings after `=`.
        let dir = workdir(None);
        let network = format!("--allow-network={yes}");
        let inline = format!("--allow-inline-code={no}");
        let warm = format!("--warm={yes}");
        let said = start(dir.path(), &[&network, &inline, &warm], &[]);
        let said = said.instructions();
        assert!(inline_off(said), "{no}: {said}");
        if cfg!(target_os = "linux") {
            assert!(!network_off(said), "{yes}: {said}");
        }
    }
}

#[test]
fn a_boolean_that_is_no_spelling_is_refused_naming_the_variable_and_its_source() {
    let dir = workdir(None);
    let said = start(dir.path(), &[], &[("PYRUN_ALLOW_INLINE_CODE", "maybe")]);
    let said = said.refusal();
    assert!(
        said.contains(
            "PYRUN_ALLOW_INLINE_CODE, set in the environment, has the invalid value 'maybe'"
        ),
        "{said}"
    );
    assert!(said.contains("1, true, yes, on"), "{said}");
    let dir = workdir(Some("# flags\nPYRUN_ALLOW_NETWORK=enabled\n"));
    let said = start(dir.path(), &[], &[]);
    assert!(
        said.refusal()
            .contains("PYRUN_ALLOW_NETWORK, set in .env line 2, has the invalid value 'enabled'"),
        "{}",
        said.stderr
    );
    let dir = workdir(None);
    let said = start(dir.path(), &["--allow-network=enabled"], &[]);
    let said = said.refusal();
    assert!(said.contains("--allow-network"), "{said}");
    assert!(!said.contains("PYRUN_ALLOW_NETWORK"), "{said}");
}

#[test]
fn numbers_sizes_and_durations_have_one_grammar_in_every_source() {
    let dir = workdir(Some(
        "PYRUN_MAX_MEMORY_MB=1GiB\nPYRUN_MAX_OUTPUT_BYTES=64k\n",
    ));
    let said = start(dir.path(), &[], &[("PYTHON_TIMEOUT", "2m")]);
    let said = said.instructions();
    assert!(said.contains("120 s per run"), "{said}");
    assert!(said.contains("memory 1024 MB"), "{said}");
    assert!(said.contains("output kept 65536 bytes"), "{said}");
    let said = start(dir.path(), &["--timeout", "90s"], &[]);
    assert!(said.instructions().contains("90 s per run"));
    let said = start(dir.path(), &["--timeout=1h"], &[]);
    assert!(said.instructions().contains("3600 s per run"));
    // Refused, naming the variable and where it was set.
    let dir = workdir(Some("PYTHON_TIMEOUT=\"2 minutes\"\n"));
    let said = start(dir.path(), &[], &[]);
    assert!(
        said.refusal()
            .contains("PYTHON_TIMEOUT, set in .env line 1, has the invalid value '2 minutes'"),
        "{}",
        said.stderr
    );
    let dir = workdir(None);
    let said = start(dir.path(), &[], &[("PYRUN_MAX_MEMORY_MB", "lots")]);
    assert!(
        said.refusal()
            .contains("PYRUN_MAX_MEMORY_MB, set in the environment, has the invalid value 'lots'"),
        "{}",
        said.stderr
    );
    let said = start(dir.path(), &[], &[("PYTHON_TIMEOUT", "2d")]);
    assert!(
        said.refusal()
            .contains("PYTHON_TIMEOUT, set in the environment"),
        "{}",
        said.stderr
    );
}

#[test]
fn a_name_close_to_a_setting_gets_a_warning_with_the_likely_name() {
    let dir = workdir(Some("# typo\nPYTHON_TIMOUT=5\n"));
    let said = start(
        dir.path(),
        &[],
        &[
            ("PYRUN_ALOW_NETWORK", "1"),
            // CPython's own variables, and the client's, are no typos.
            ("PYTHON_GIL", "0"),
            ("PYTHON_COLORS", "0"),
            ("PYTHON_JIT", "0"),
            ("PYTHONPATH", "/nowhere"),
            ("MCP_SERVER_URL", "http://127.0.0.1:1/mcp"),
        ],
    );
    said.instructions();
    let log = &said.stderr;
    let line = log
        .lines()
        .find(|l| l.contains("PYTHON_TIMOUT"))
        .unwrap_or_else(|| panic!("no warning for PYTHON_TIMOUT:\n{log}"));
    assert!(
        line.contains("PYTHON_TIMEOUT") && line.contains(".env line 2"),
        "{line}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("PYRUN_ALOW_NETWORK"))
        .unwrap_or_else(|| panic!("no warning for PYRUN_ALOW_NETWORK:\n{log}"));
    assert!(
        line.contains("PYRUN_ALLOW_NETWORK") && line.contains("environment"),
        "{line}"
    );
    for quiet in [
        "PYTHON_GIL",
        "PYTHON_COLORS",
        "PYTHON_JIT",
        "PYTHONPATH",
        "MCP_SERVER_URL",
    ] {
        assert!(!log.contains(quiet), "{quiet} was warned about:\n{log}");
    }
}

#[test]
fn the_client_reads_durations_with_the_same_grammar() {
    let client = pyrun_mcp_tests::bin_path("pyrun-mcp-client");
    let refused = Command::new(&client)
        .args([
            "--timeout",
            "soon",
            "--server",
            "http://127.0.0.1:9/mcp",
            "tools",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--timeout") && said.contains("expected a duration"),
        "{said}"
    );
    let dir = workdir(None);
    std::fs::write(dir.path().join("projects/hi.py"), "print('hi')\n").unwrap();
    let server = format!(
        "{BINARY} --transport stdio --projects-dir {}/projects --state-dir {}/state",
        dir.path().display(),
        dir.path().display()
    );
    let mut cmd = Command::new(&client);
    pyrun_mcp_tests::scrub_env(&mut cmd)
        .args(["--timeout", "1m", "--server", &server, "run", "hi.py"])
        .args(["--script-timeout", "1m30s"]);
    let ran = cmd.output().unwrap();
    assert!(ran.status.success(), "{ran:?}");
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "hi\n");
}

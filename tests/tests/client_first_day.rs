//! `pyrun-mcp-client` as a newcomer meets it: the script's output as it comes (also piped), what
//! arrived kept when Ctrl-C, `--timeout` or a vanished server ends the call (and no hang then, over
//! any transport), the base URL the server prints, script arguments without `--`, whole tool
//! descriptions, `logs` exit codes, a clear stdio start-up failure, and the interactive menu in a
//! real terminal (tmux).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use crate::util::*;
use pyrun_mcp_tests::{bin_path, scrub_env, HttpServer, StdioCommand};

const TOKEN: &str = "first-day-token";
/// Only catches a hang: the behaviour under test ends within seconds.
const HANG: Duration = Duration::from_secs(40);

/// Prints `first`, then waits (up to 30 s) for a file `go` beside it that the test makes only
/// once it has seen `first` from the client; prints `second` if it came, `no go` otherwise.
const WAITS_FOR_GO: &str = r#"
import os, sys, time
print("first", flush=True)
print("to stderr", file=sys.stderr, flush=True)
for _ in range(300):
    if os.path.exists("go"):
        print("second", flush=True)
        break
    time.sleep(0.1)
else:
    print("no go", flush=True)
"#;

/// Prints `first`, then sleeps a minute.
const PRINTS_THEN_SLEEPS: &str = r#"
import time
print("first", flush=True)
time.sleep(60)
print("never", flush=True)
"#;

/// The client with piped stdout and stderr, each read line by line on its own thread.
struct Running {
    child: Child,
    stdout: Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    seen: String,
}

impl Running {
    fn start(target: &str, args: &[&str]) -> Running {
        Self::start_with(target, args, |_| {})
    }

    fn start_with(target: &str, args: &[&str], prepare: impl FnOnce(&mut Command)) -> Running {
        let mut cmd = Command::new(bin_path("pyrun-mcp-client"));
        scrub_env(&mut cmd);
        cmd.env_remove("MCP_SERVER_URL")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .env("MCP_AUTH_TOKEN", TOKEN)
            .arg("--server")
            .arg(target)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        prepare(&mut cmd);
        let mut child = cmd.spawn().expect("start pyrun-mcp-client");
        let out = child.stdout.take().expect("piped stdout");
        let mut err = child.stderr.take().expect("piped stderr");
        let (tx, stdout) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Running {
            child,
            stdout,
            stderr,
            seen: String::new(),
        }
    }

    /// Waits for `line` on the client's stdout while the client runs; panics (killing it) if
    /// the client ends or 30 s pass first.
    fn wait_for_line(&mut self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(got) => {
                    self.seen.push_str(&got);
                    self.seen.push('\n');
                    if got == line {
                        return;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "`{line}` did not come from the client while it ran; stdout so far:\n{}",
                        self.seen
                    );
                }
            }
        }
    }

    /// Waits for the exit (killing the client after [`HANG`]): exit code, all stdout, stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let status = wait_with_limit(&mut self.child, HANG);
        while let Ok(line) = self.stdout.recv_timeout(Duration::from_secs(5)) {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        let stderr = self.stderr.join().unwrap_or_default();
        (status.code(), self.seen, stderr)
    }
}

fn http_server(script: &str, name: &str) -> HttpServer {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    write_script(server.projects(), name, script);
    server
}

fn write_script(projects: &Path, name: &str, script: &str) {
    std::fs::write(projects.join(name), script).expect("write the script");
}

fn stdio_target(cmd: &StdioCommand) -> String {
    command_line(&cmd.program, &cmd.args)
}

/// The script's first line reaches the client's piped stdout while the script still runs: it
/// can only end with `second` after the test saw `first` and answered.
fn output_comes_as_the_script_prints(target: &str, projects: &Path) {
    write_script(projects, "waits.py", WAITS_FOR_GO);
    let mut client = Running::start(target, &["run", "waits.py"]);
    client.wait_for_line("first");
    std::fs::write(projects.join("go"), "").expect("write go");
    let (code, stdout, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "first\nsecond\n", "{stderr}");
    assert_eq!(
        stderr.matches("to stderr").count(),
        1,
        "stderr printed once:\n{stderr}"
    );
}

#[test]
fn run_streams_the_scripts_output_when_piped_over_stdio() {
    let server = StdioCommand::new(&[]);
    output_comes_as_the_script_prints(&stdio_target(&server), server.projects.path());
}

#[test]
fn run_streams_the_scripts_output_when_piped_over_streamable_http() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    output_comes_as_the_script_prints(&server.mcp_url(), server.projects());
}

#[test]
fn ctrl_c_keeps_the_output_that_arrived_before_the_error_line() {
    let server = http_server(PRINTS_THEN_SLEEPS, "sleeps.py");
    let mut client = Running::start(&server.mcp_url(), &["run", "sleeps.py"]);
    client.wait_for_line("first");
    interrupt(client.child.id());
    let (code, stdout, stderr) = client.finish();
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(stdout, "first\n");
    assert!(stderr.contains("interrupted"), "{stderr}");
}

#[test]
fn the_clients_timeout_keeps_the_output_that_arrived() {
    let server = http_server(PRINTS_THEN_SLEEPS, "sleeps.py");
    let client = Running::start(&server.mcp_url(), &["--timeout", "15", "run", "sleeps.py"]);
    let (code, stdout, stderr) = client.finish();
    assert_eq!(code, Some(124), "{stderr}");
    assert_eq!(stdout, "first\n", "{stderr}");
    assert!(stderr.contains("timed out after 15 s"), "{stderr}");
}

/// Kills the server by pid once the script's first line came through; the client must end on
/// its own with the connection-lost code (15), the line kept. Returns its stderr.
fn a_vanished_server_ends_the_call(
    target: &str,
    args: &[&str],
    kill_server: impl FnOnce(u32),
) -> String {
    let mut client = Running::start(target, args);
    client.wait_for_line("first");
    kill_server(client.child.id());
    let (code, stdout, stderr) = client.finish();
    assert_eq!(code, Some(15), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(stdout, "first\n", "{stderr}");
    stderr
}

fn kill(pid: u32) {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid} failed");
}

#[test]
fn a_vanished_server_ends_run_over_streamable_http() {
    let server = http_server(PRINTS_THEN_SLEEPS, "sleeps.py");
    let pid = server.pid();
    let stderr =
        a_vanished_server_ends_the_call(&server.mcp_url(), &["run", "sleeps.py"], |_| kill(pid));
    assert!(
        stderr.contains("lost the connection to the server during `run_python`"),
        "{stderr}"
    );
}

#[test]
fn a_vanished_server_ends_run_over_sse() {
    let server = http_server(PRINTS_THEN_SLEEPS, "sleeps.py");
    let pid = server.pid();
    a_vanished_server_ends_the_call(&server.sse_url(), &["run", "sleeps.py"], |_| kill(pid));
}

#[test]
fn a_vanished_server_ends_run_over_stdio() {
    let server = StdioCommand::new(&[]);
    write_script(server.projects.path(), "sleeps.py", PRINTS_THEN_SLEEPS);
    a_vanished_server_ends_the_call(&stdio_target(&server), &["run", "sleeps.py"], |client| {
        kill(child_of(client))
    });
}

#[test]
fn a_vanished_server_ends_logs_follow_over_streamable_http() {
    let server = http_server(PRINTS_THEN_SLEEPS, "sleeps.py");
    let started = Running::start(&server.mcp_url(), &["run", "--detach", "sleeps.py"]);
    let (code, run_id, stderr) = started.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let pid = server.pid();
    // Killed while a long poll (`get_run` waiting up to 30 s for news) is the call in flight,
    // not between two calls, where a refused connection would end it anyway.
    a_vanished_server_ends_the_call(
        &server.mcp_url(),
        &["logs", run_id.trim(), "--follow"],
        |_| {
            std::thread::sleep(Duration::from_secs(3));
            kill(pid)
        },
    );
}

/// The stdio server the client started (its only child).
fn child_of(pid: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .expect("read the client's children");
    children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the client {pid} has no child: {children:?}"))
}

#[test]
fn the_base_url_the_server_prints_reaches_mcp_and_verbose_says_so() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    let assert = client()
        .env("MCP_AUTH_TOKEN", TOKEN)
        .args([
            "--server",
            &server.base,
            "--verbose",
            "run",
            "hello_world.py",
        ])
        .assert()
        .code(0)
        .stdout("Hello, World!\n");
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!(
            "connected to {}/mcp (Streamable HTTP)",
            server.base
        )),
        "{stderr}"
    );
}

#[test]
fn a_base_url_with_no_mcp_endpoint_says_both_paths_were_tried() {
    let base = html_page_server();
    let assert = client()
        .args(["--server", &base, "tools"])
        .assert()
        .code(14);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("at /sse, and not as MCP at /mcp either"),
        "{stderr}"
    );
}

#[test]
fn run_takes_script_arguments_without_a_double_dash() {
    let server = StdioCommand::new(&[]);
    write_script(
        server.projects.path(),
        "argv.py",
        "import sys\nprint(sys.argv[1:])\n",
    );
    client()
        .args(["--server", &stdio_target(&server)])
        .args(["run", "argv.py", "3", "x", "--", "--flag"])
        .assert()
        .code(0)
        .stdout("['3', 'x', '--flag']\n");
}

#[test]
fn tools_verbose_prints_every_description_whole() {
    let server = StdioCommand::new(&[]);
    let target = stdio_target(&server);
    let listed = client()
        .args(["--server", &target, "--json", "tools"])
        .assert()
        .success();
    let tools: serde_json::Value =
        serde_json::from_slice(&listed.get_output().stdout).expect("--json prints JSON");
    let verbose = client()
        .args(["--server", &target, "tools", "--verbose"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&verbose.get_output().stdout).into_owned();
    let tools = tools.as_array().expect("a list of tools");
    assert!(!tools.is_empty());
    let mut multi_line = 0;
    for tool in tools {
        let description = tool["description"].as_str().unwrap_or("");
        multi_line += usize::from(description.trim().lines().count() > 1);
        for line in description.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                text.contains(line.trim_end()),
                "`tools --verbose` lacks this line of {}: {line}\n{text}",
                tool["name"]
            );
        }
    }
    assert!(
        multi_line > 0,
        "no description spans lines: the test proves nothing"
    );
}

#[test]
fn logs_exit_codes_tell_a_running_run_from_a_good_and_a_failed_end() {
    let server = http_server(PRINTS_THEN_SLEEPS, "sleeps.py");
    let url = server.mcp_url();
    let start = |file: &str| {
        let (code, id, stderr) = Running::start(&url, &["run", "--detach", file]).finish();
        assert_eq!(code, Some(0), "{stderr}");
        id.trim().to_owned()
    };
    let logs = |id: &str, follow: bool| {
        let mut args = vec!["logs", id];
        if follow {
            args.push("--follow");
        }
        Running::start(&url, &args).finish().0
    };
    let sleeping = start("sleeps.py");
    assert_eq!(logs(&sleeping, false), Some(75), "still running");
    let good = start("hello_world.py");
    assert_eq!(logs(&good, true), Some(0));
    assert_eq!(logs(&good, false), Some(0), "ended well");
    let failed = start("error_test.py");
    assert_eq!(logs(&failed, true), Some(1));
    assert_eq!(logs(&failed, false), Some(1), "ended with a failure");
}

#[test]
fn a_stdio_server_that_dies_at_start_is_named_without_rust_internals() {
    let program = bin_path("pyrun-mcp-server");
    let target = command_line(
        &program,
        &[
            "--transport".into(),
            "stdio".into(),
            "--no-such-flag".into(),
        ],
    );
    let assert = client()
        .args(["--server", &target, "tools"])
        .assert()
        .code(10);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    // The server's own lines come first, passed on as they came.
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: cannot connect"))
        .unwrap_or_else(|| panic!("no error line:\n{stderr}"));
    assert!(
        error.contains("exited before the MCP handshake") && error.contains("--no-such-flag"),
        "{stderr}"
    );
    for leak in ["rmcp::", "TokioChildProcess", "Broken pipe"] {
        assert!(!stderr.contains(leak), "`{leak}` leaked:\n{stderr}");
    }
}

/// A tmux session running the client's interactive menu, read with capture-pane.
struct Terminal {
    name: String,
}

impl Terminal {
    fn start(target: &str) -> Terminal {
        let name = format!("pyrun-first-day-{}", std::process::id());
        let client = bin_path("pyrun-mcp-client");
        let line = format!(
            "env -u MCP_SERVER_URL NO_COLOR=1 {} --server {} interactive",
            command_line(&client, &[]),
            shell_quote(target)
        );
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "50",
                "-s",
                &name,
                &line,
            ])
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        Terminal { name }
    }

    fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .expect("run tmux send-keys");
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-S", "-200", "-t", &self.name])
            .output()
            .expect("run tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `times` lines of the screen start with `text` (tmux drops the spaces that
    /// end a line).
    fn wait_for(&self, text: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(40);
        let start = text.trim_end();
        loop {
            let screen = self.screen();
            if screen.lines().filter(|l| l.starts_with(start)).count() >= times {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "`{text}` (x{times}) did not show:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[test]
fn interactive_picks_a_file_passes_stdin_and_survives_ctrl_c_in_a_terminal() {
    let server = StdioCommand::new(&[]);
    let projects = server.projects.path();
    write_script(
        projects,
        "greet.py",
        "name = input()\nprint(f'hello {name}!')\n",
    );
    write_script(projects, "sleeps.py", PRINTS_THEN_SLEEPS);
    let files = client()
        .args(["--server", &stdio_target(&server), "files"])
        .assert()
        .success();
    let files = String::from_utf8_lossy(&files.get_output().stdout).into_owned();
    let number = |name: &str| {
        files
            .lines()
            .position(|l| l == name)
            .map(|i| (i + 1).to_string())
            .unwrap_or_else(|| panic!("{name} not listed:\n{files}"))
    };
    let term = Terminal::start(&stdio_target(&server));
    term.wait_for("> ", 1);

    // A file picked by its number, stdin typed in.
    term.keys(&["1", "Enter"]);
    term.wait_for("file (number or path): ", 1);
    term.keys(&[&number("greet.py"), "Enter"]);
    term.wait_for("arguments", 1);
    term.keys(&["Enter"]);
    term.wait_for("| ", 1);
    term.keys(&["Ada", "Enter", "Enter"]);
    term.wait_for("hello Ada!", 1);
    term.wait_for("> ", 2);

    // Ctrl-C stops the long run and the menu comes back.
    term.keys(&["1", "Enter"]);
    term.wait_for("file (number or path): ", 2);
    term.keys(&["sleeps.py", "Enter"]);
    term.wait_for("arguments", 2);
    term.keys(&["Enter"]);
    term.keys(&["Enter"]);
    term.wait_for("first", 1);
    term.keys(&["C-c"]);
    term.wait_for("cancelled", 1);
    term.wait_for("> ", 3);

    // Still alive: it lists files.
    term.keys(&["2", "Enter"]);
    term.wait_for("greet.py", 1);
    term.keys(&["q", "Enter"]);
}

#[test]
fn a_missing_interpreter_is_said_once_and_its_hint_does_not_repeat_it() {
    let server = StdioCommand::new(&["--python", "/nonexistent/python3"]);
    let assert = client()
        .args(["--server", &stdio_target(&server), "tools"])
        .assert()
        .code(10);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("it said: error: no Python interpreter found"),
        "{stderr}"
    );
    for hint in stderr.lines().filter(|l| l.starts_with("hint:")) {
        assert!(
            !hint.contains("no Python interpreter found"),
            "the hint repeats the error:\n{stderr}"
        );
    }
}

/// The first day end to end, as the README tells it: the snippet `config claude-code` prints
/// holds the server command an assistant would start; that command, given to the client, runs a
/// file with its output as it comes, and a script that needs the network fails with a hint
/// naming the setting that allows it.
#[test]
fn a_newcomer_connects_with_the_printed_snippet_sees_live_output_and_understands_a_refusal() {
    let projects = tempfile::tempdir().expect("a projects folder");
    let mut config = Command::new(bin_path("pyrun-mcp-server"));
    scrub_env(&mut config);
    let printed = config
        .args(["config", "claude-code", "--projects-dir"])
        .arg(projects.path())
        .output()
        .expect("run config claude-code");
    let snippet = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.status.success(), "{snippet}");
    let server = snippet
        .lines()
        .find_map(|line| line.strip_prefix("claude mcp add pyrun -- "))
        .unwrap_or_else(|| panic!("no `claude mcp add` line in:\n{snippet}"))
        .to_owned();

    output_comes_as_the_script_prints(&server, projects.path());

    write_script(
        projects.path(),
        "fetch.py",
        "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=5)\n",
    );
    let (code, _, stderr) = Running::start(&server, &["run", "fetch.py"]).finish();
    assert_eq!(code, Some(1), "{stderr}");
    let hint = stderr
        .lines()
        .find(|line| line.starts_with("hint:") && line.contains("--allow-network"));
    assert!(hint.is_some(), "no hint naming --allow-network:\n{stderr}");
}

/// Live processes whose command line holds `marker` (a word only this test put there).
#[cfg(target_os = "linux")]
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&line).contains(marker) && pyrun_mcp_tests::procs::alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// Waits up to `within` for every process holding `marker` to end; kills (and names) any left.
#[cfg(target_os = "linux")]
fn none_left(marker: &str, within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    while !processes_with(marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = processes_with(marker);
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    left
}

/// `--server` commands that are not MCP stdio servers: each is an error within seconds, the
/// error says what to fix, and the process the client started is gone when it exits.
#[cfg(target_os = "linux")]
#[test]
fn a_server_command_that_is_not_an_mcp_stdio_server_is_an_error_within_seconds() {
    let projects = tempfile::tempdir().unwrap();
    let marker = projects.path().display().to_string();
    let python = pyrun_mcp_tests::python().display().to_string();
    let server = bin_path("pyrun-mcp-server");
    let cases = [
        // What a newcomer types: the server's HTTP default.
        (
            "serves HTTP",
            command_line(
                &server,
                &[
                    "--projects-dir".into(),
                    marker.clone(),
                    "--bind".into(),
                    "127.0.0.1:0".into(),
                ],
            ),
            "--transport stdio",
        ),
        (
            "prints something else",
            command_line(
                Path::new(&python),
                &[
                    "-c".into(),
                    "import sys, time; print('hello there', flush=True); time.sleep(60)".into(),
                    marker.clone(),
                ],
            ),
            "initialize",
        ),
        (
            "never answers",
            command_line(
                Path::new(&python),
                &[
                    "-c".into(),
                    "import time; time.sleep(60)".into(),
                    marker.clone(),
                ],
            ),
            "initialize",
        ),
    ];
    for (what, target, says) in cases {
        let started = Instant::now();
        let out = client()
            .args(["--server", &target, "tools"])
            .output()
            .expect("run the client");
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            took < Duration::from_secs(15),
            "{what}: the client took {took:?}\n{stderr}"
        );
        assert!(!out.status.success(), "{what}: {stderr}");
        let error = stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_else(|| panic!("{what}: no error line:\n{stderr}"));
        assert!(
            stderr.contains(says),
            "{what}: `{says}` not said:\n{stderr}"
        );
        let left = none_left(&marker, Duration::from_secs(3));
        assert!(
            left.is_empty(),
            "{what}: the server outlived its client: {left:?}"
        );
        eprintln!("{what}: {took:?}: {error}");
    }
}

/// A client killed by a signal (SIGKILL: it cannot clean up) takes the server it started with
/// it, even one that does not stop at its stdin's end.
#[cfg(target_os = "linux")]
#[test]
fn a_server_the_client_started_dies_with_the_client_killed_by_a_signal() {
    let marker = format!("pyrun-client-death-{}", std::process::id());
    let python = pyrun_mcp_tests::python().display().to_string();
    let target = command_line(
        Path::new(&python),
        &[
            "-c".into(),
            "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(60)"
                .into(),
            marker.clone(),
        ],
    );
    let mut client = client_command();
    client
        .args(["--server", &target, "tools"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut client = client.spawn().expect("start the client");
    let deadline = Instant::now() + Duration::from_secs(10);
    // The client's own command line holds the marker too.
    while processes_with(&marker)
        .iter()
        .all(|&pid| pid == client.id())
    {
        assert!(
            Instant::now() < deadline,
            "the client never started its server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    client.kill().expect("SIGKILL the client");
    let _ = client.wait();
    let left = none_left(&marker, Duration::from_secs(3));
    assert!(
        left.is_empty(),
        "the server outlived its killed client: {left:?}"
    );
}

//! Shared by the `client_*` modules: the `pyrun-mcp-client` command with a clean environment, a
//! projects folder holding a long-running script, and helpers for Ctrl-C and process checks.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use pyrun_mcp_tests::{bin_path, scrub_env};

/// Upper bound for one client invocation; a hang fails the test instead of stalling the suite.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// `pyrun-mcp-client` with none of the developer's settings: neither the client's own nor any
/// server setting (a stdio server it starts inherits its environment).
pub fn client_command() -> Command {
    let mut cmd = Command::new(bin_path("pyrun-mcp-client"));
    scrub_env(&mut cmd);
    for name in ["MCP_SERVER_URL", "RUST_LOG"] {
        cmd.env_remove(name);
    }
    cmd
}

/// `pyrun-mcp-client ARGS…` that ignores the developer's settings.
pub fn client() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::from_std(client_command());
    cmd.env("NO_COLOR", "1").timeout(CLIENT_TIMEOUT);
    cmd
}

/// A stdio server command line for `--server`, each word single-quoted for the client's shell-like split.
pub fn command_line(program: &Path, args: &[String]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().cloned())
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes `sleeper.py` into `projects`: for a minute it appends a byte to `sleeper.beat` (next to
/// itself) every 50 ms. The file tells whether the run is alive: the pids a sandboxed script sees
/// are its pid namespace's, and its view has no host `/proc`.
pub fn add_sleeper(projects: &Path) {
    let script = r#"
import time
print("sleeping", flush=True)
for _ in range(1200):
    with open("sleeper.beat", "a") as f:
        f.write(".")
    time.sleep(0.05)
"#;
    std::fs::write(projects.join("sleeper.py"), script).expect("write sleeper.py");
}

/// The sleeper's heartbeat file in `projects`.
pub fn sleeper_beat(projects: &Path) -> PathBuf {
    projects.join("sleeper.beat")
}

/// Waits until the sleeper's heartbeat file exists in `projects` and returns its path.
pub fn wait_for_sleeper(projects: &Path, client: &mut Child) -> PathBuf {
    let beat = sleeper_beat(projects);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !beat.exists() {
        if let Ok(Some(status)) = client.try_wait() {
            panic!("the client exited ({status}) before the script started");
        }
        assert!(
            Instant::now() < deadline,
            "the script did not start within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    beat
}

fn beat_len(beat: &Path) -> u64 {
    std::fs::metadata(beat).map_or(0, |m| m.len())
}

/// Whether the sleeper still beats: its file grows within half a second.
pub fn sleeper_alive(beat: &Path) -> bool {
    let before = beat_len(beat);
    std::thread::sleep(Duration::from_millis(500));
    beat_len(beat) > before
}

/// Polls until the sleeper stops beating; true if it did within `limit`.
pub fn sleeper_gone_within(beat: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !sleeper_alive(beat) {
            return true;
        }
    }
    false
}

/// Sends SIGINT (what Ctrl-C sends) to one process.
pub fn interrupt(pid: u32) {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT {pid} failed");
}

/// Waits for `child` to exit, killing it after `limit`.
pub fn wait_with_limit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the client did not exit within {limit:?} after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The client as a plain child process (to signal it mid-call), output discarded.
pub fn spawn_client(args: &[&str]) -> Child {
    client_command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pyrun-mcp-client")
}

/// A one-thread HTTP server answering every request with an HTML page, like a tunnel's warning or
/// offline page. Returns its base URL; the thread ends with the test process.
pub fn html_page_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 8192];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.read(&mut buf);
            let body = "<!DOCTYPE html><html><body>You are about to visit this site</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

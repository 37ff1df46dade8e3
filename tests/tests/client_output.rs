//! `pyrun-mcp-client run` prints every byte a script wrote, once and in order per stream, and
//! exits with its code, even when the result (sized for a model) showed only a stream's head and
//! tail: stdout is compared with the same script run by `python3` directly, stderr with it too
//! once the traceback's file lines (which name the server's `/projects/…`) are set aside.

use std::path::Path;
use std::process::Command;

use crate::util::*;
use pyrun_mcp_tests::{HttpServer, StdioCommand};

const TOKEN: &str = "client-output-token";

/// Sleeps, prints 400 lines (~25 KB, past the result's 24 KiB), sleeps, prints its summary and
/// exits 3: the slow writer of issue 36.
const SUMMARY: &str = r#"import sys, time
time.sleep(0.5)
for i in range(400):
    print(f"line {i:05d} " + "x" * 50, flush=True)
time.sleep(0.5)
print("FINAL SUMMARY")
sys.exit(3)
"#;

/// 62 KB to stderr, then an exception: exit 1 and a traceback at the very end.
const RAISE: &str = r#"import sys
for i in range(1000):
    sys.stderr.write(f"warning {i:04d} " + "w" * 48 + "\n")
raise RuntimeError("the end of a long stderr")
"#;

/// A fast writer of both streams at once, with bytes that are not UTF-8 and no final newline.
const RAW: &str = r#"import sys
out = sys.stdout.buffer
for i in range(3000):
    out.write(b"row %05d caf\xc3\xa9 \xff\xfe bad " % i + b"y" * 20 + b"\n")
    if i % 500 == 0:
        sys.stderr.write("progress %d\n" % i)
        sys.stderr.write("e" * 20000 + "\n")
out.write(b"no newline at the end")
out.flush()
sys.stderr.write("last stderr line, no newline")
"#;

/// A `\r` progress bar on both streams: a model's result shows its last frame, the CLI every
/// frame.
const PROGRESS: &str = r##"import sys, time
for i in range(101):
    sys.stdout.write("\r%3d%% [%-50s]" % (i, "#" * (i // 2)))
    sys.stderr.write("\rstep %d" % i)
    if i % 25 == 0:
        sys.stdout.flush()
        time.sleep(0.3)
print()
sys.stderr.write("\n")
print("done")
"##;

fn add_scripts(projects: &Path) {
    for (name, text) in [
        ("summary.py", SUMMARY),
        ("raise_late.py", RAISE),
        ("raw_bytes.py", RAW),
        ("progress.py", PROGRESS),
    ] {
        std::fs::write(projects.join(name), text).expect("write the script");
    }
}

/// The script run by the host's `python3`: its stdout and stderr bytes and its exit code.
fn direct(projects: &Path, file: &str) -> (Vec<u8>, Vec<u8>, Option<i32>) {
    let out = Command::new("python3")
        .arg(file)
        .current_dir(projects)
        .output()
        .expect("run python3");
    (out.stdout, out.stderr, out.status.code())
}

/// Output as the server's capture presents it: text, invalid UTF-8 as U+FFFD.
fn as_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// stderr without the lines that differ by where the script ran (a traceback's `File "…"`),
/// the start-up lines a stdio server writes to the stderr it shares with the client, and the
/// client's own notes after the script's output.
fn script_stderr(text: &str) -> String {
    let mut kept = String::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with("hint: ") {
            break;
        }
        if !line.trim_start().starts_with("File \"") && !line.starts_with("pyrun-mcp") {
            kept.push_str(line);
        }
    }
    kept
}

/// `run FILE` through `target` compared with `python3 FILE`: the same stdout, byte for byte, the
/// same stderr, the same exit code.
fn run_matches_python(target: &str, http: bool, projects: &Path, file: &str) {
    let (stdout, stderr, code) = direct(projects, file);
    let mut cmd = client();
    cmd.arg("--server").arg(target).args(["run", file]);
    if http {
        cmd.env("MCP_AUTH_TOKEN", TOKEN);
    }
    let out = cmd.output().expect("run the client");
    let (cli_out, cli_err) = (as_text(&out.stdout), as_text(&out.stderr));
    assert_eq!(
        out.status.code(),
        code,
        "{file}: exit code; stderr:\n{cli_err}"
    );
    assert!(
        cli_out == as_text(&stdout),
        "{file}: the client printed {} bytes of stdout, python3 {} (as text {}); the client's \
         ends with {:?}; its stderr ends with {:?}",
        out.stdout.len(),
        stdout.len(),
        as_text(&stdout).len(),
        &cli_out[cli_out.len().saturating_sub(200)..],
        &cli_err[cli_err.len().saturating_sub(600)..],
    );
    let (cli_script, python_script) = (script_stderr(&cli_err), script_stderr(&as_text(&stderr)));
    assert!(
        cli_script == python_script,
        "{file}: stderr differs: the client's {} bytes end with {:?}, python3's {} with {:?}",
        cli_script.len(),
        &cli_script[cli_script.len().saturating_sub(300)..],
        python_script.len(),
        &python_script[python_script.len().saturating_sub(300)..],
    );
    assert!(
        !cli_err.contains("differs from what was printed"),
        "{file}: {cli_err}"
    );
}

fn every_script(target: &str, http: bool, projects: &Path) {
    add_scripts(projects);
    for file in ["summary.py", "raise_late.py", "raw_bytes.py", "progress.py"] {
        run_matches_python(target, http, projects, file);
    }
}

#[test]
fn run_prints_every_byte_over_stdio() {
    let cmd = StdioCommand::new(&[]);
    every_script(
        &command_line(&cmd.program, &cmd.args),
        false,
        cmd.projects.path(),
    );
}

#[test]
fn run_prints_every_byte_over_streamable_http() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    every_script(&server.mcp_url(), true, server.projects());
}

#[test]
fn run_prints_every_byte_over_sse() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    every_script(&server.sse_url(), true, server.projects());
}

/// Past `--max-output-bytes` the server keeps the head and the last bytes: the client prints
/// both, in order, and says on stderr how much the server dropped between them.
#[test]
fn run_says_what_the_server_dropped_past_its_capture() {
    let cmd = StdioCommand::new(&["--max-output-bytes", "65536"]);
    let projects = cmd.projects.path();
    std::fs::write(
        projects.join("flood.py"),
        "for i in range(4000):\n    print(f\"line {i:05d} \" + \"z\" * 40)\nprint(\"THE END\")\n",
    )
    .expect("write the script");
    let (stdout, _, _) = direct(projects, "flood.py");
    let out = client()
        .arg("--server")
        .arg(command_line(&cmd.program, &cmd.args))
        .args(["run", "flood.py"])
        .output()
        .expect("run the client");
    let (cli_out, cli_err) = (as_text(&out.stdout), as_text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{cli_err}");
    assert!(
        stdout.starts_with(&out.stdout[..65536]),
        "the head is the capture"
    );
    assert!(cli_out.ends_with("line 03999 zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\nTHE END\n"));
    let dropped = stdout.len() - out.stdout.len();
    assert!(
        cli_err.contains(&format!(
            "the server dropped {dropped} bytes of the script's stdout"
        )),
        "{cli_err}"
    );
    // The printed tail is the end of the real output, after the kept head.
    let tail = &out.stdout[65536..];
    assert!(stdout.ends_with(tail), "the tail is how the output ended");
}

/// The stdio server the client starts keeps its banner and log to itself unless `--verbose`
/// asks; its errors (a start it refuses) and warnings (a misspelled setting) always reach the
/// terminal.
#[test]
fn a_stdio_servers_log_shows_only_with_verbose_and_its_errors_always() {
    let cmd = StdioCommand::new(&[]);
    let target = command_line(&cmd.program, &cmd.args);
    std::fs::write(cmd.projects.path().join("hi.py"), "print('hi')\n").expect("write");
    let out = client()
        .arg("--server")
        .arg(&target)
        .args(["run", "hi.py"])
        .output()
        .expect("run the client");
    let err = as_text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(as_text(&out.stdout), "hi\n");
    assert!(!err.contains("pyrun-mcp serving"), "no banner: {err}");
    let out = client()
        .arg("--server")
        .arg(&target)
        .args(["--verbose", "run", "hi.py"])
        .output()
        .expect("run the client");
    let err = as_text(&out.stderr);
    assert!(
        err.contains("pyrun-mcp serving"),
        "the banner with --verbose: {err}"
    );
    // A warning about the server's settings (a misspelled name) is shown without --verbose.
    let out = client()
        .arg("--server")
        .arg(&target)
        .env("PYTHON_TIMOUT", "5")
        .args(["run", "hi.py"])
        .output()
        .expect("run the client");
    let err = as_text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("PYTHON_TIMEOUT"),
        "the lookalike warning: {err}"
    );
    assert!(!err.contains("pyrun-mcp serving"), "no banner: {err}");
    let broken = format!("{target} --timeout 0");
    let out = client()
        .arg("--server")
        .arg(&broken)
        .args(["run", "hi.py"])
        .output()
        .expect("run the client");
    let err = as_text(&out.stderr);
    assert_eq!(out.status.code(), Some(10), "{err}");
    assert!(err.contains("error"), "the server's refusal: {err}");
}

//! `pyrun-mcp-client run` and its stdin: `-i` (docker's) and `--stdin-file -` pass ours to the
//! script; without them ours is never read (a `while read … < list` loop keeps its lines, a pipe
//! that never closes hangs nothing) and, when it is a pipe or a file, a note says how to pass
//! it. Stdin of tens of MB goes through the server's `upload_stdin` over stdio, `/mcp` and
//! `/sse`; past a limit the error names it and its setting.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;
use pyrun_mcp_tests::{HttpServer, StdioCommand};

const TOKEN: &str = "client-stdin-token";

/// Counts its stdin's lines and bytes, and prints a digest of them.
const READ_STDIN: &str = r#"import hashlib, sys
data = sys.stdin.buffer.read()
lines = data.count(b"\n")
print("got %d lines, %d bytes, sha %s" % (lines, len(data), hashlib.sha256(data).hexdigest()[:16]))
"#;

fn add_reader(projects: &Path) {
    std::fs::write(projects.join("readstdin.py"), READ_STDIN).expect("write the script");
}

/// What `readstdin.py` prints for `data`, computed here with the host's python3.
fn expected(data: &[u8]) -> String {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(READ_STDIN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(data).expect("feed python3");
    drop(stdin);
    let out = child.wait_with_output().expect("python3 ends");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `client --server TARGET ARGS…` with `input` on its stdin (a pipe).
fn client_with_stdin(target: &str, args: &[&str], input: &[u8]) -> (Option<i32>, String, String) {
    let out = client()
        .env("MCP_AUTH_TOKEN", TOKEN)
        .arg("--server")
        .arg(target)
        .args(args)
        .write_stdin(input.to_vec())
        .output()
        .expect("run the client");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Ten lines through a pipe: not passed (with the note, once), then passed with `-i` and with
/// `--stdin-file -`.
fn pipes_are_passed_only_when_asked(target: &str, projects: &Path) {
    add_reader(projects);
    let input: Vec<u8> = (1..=10)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into();
    let (code, out, err) = client_with_stdin(target, &["run", "readstdin.py"], &input);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        expected(b""),
        "stdin not asked for: the script reads nothing"
    );
    assert_eq!(
        err.matches("was not passed to the script").count(),
        1,
        "one note on stderr: {err}"
    );
    assert!(err.contains("-i"), "the note says how: {err}");
    for flag in [&["-i"][..], &["--stdin-file", "-"]] {
        let mut args = vec!["run"];
        args.extend_from_slice(flag);
        args.push("readstdin.py");
        let (code, out, err) = client_with_stdin(target, &args, &input);
        assert_eq!(code, Some(0), "{flag:?}: {err}");
        assert_eq!(out, expected(&input), "{flag:?}");
        assert!(!err.contains("not passed"), "{flag:?}: {err}");
    }
}

/// 12 MB of text (past the 4 MiB body cap of HTTP) arrives whole, with `-i` and with a file.
fn tens_of_megabytes_arrive_whole(target: &str, projects: &Path) {
    add_reader(projects);
    let input: Vec<u8> = (0..200_000)
        .map(|i| format!("{i:08} é€ {}\n", "s".repeat(48)))
        .collect::<String>()
        .into();
    assert!(input.len() > 12_000_000, "{}", input.len());
    let want = expected(&input);
    let (code, out, err) = client_with_stdin(target, &["run", "-i", "readstdin.py"], &input);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, want, "{err}");
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(file.path(), &input).expect("write the input");
    let path = file.path().display().to_string();
    let (code, out, err) =
        client_with_stdin(target, &["run", "--stdin-file", &path, "readstdin.py"], b"");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, want, "{err}");
}

#[test]
fn stdin_is_passed_only_when_asked_over_stdio() {
    let cmd = StdioCommand::new(&[]);
    let target = command_line(&cmd.program, &cmd.args);
    pipes_are_passed_only_when_asked(&target, cmd.projects.path());
    tens_of_megabytes_arrive_whole(&target, cmd.projects.path());
}

#[test]
fn stdin_is_passed_only_when_asked_over_streamable_http() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    pipes_are_passed_only_when_asked(&server.mcp_url(), server.projects());
    tens_of_megabytes_arrive_whole(&server.mcp_url(), server.projects());
}

#[test]
fn large_stdin_arrives_whole_over_sse() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    tens_of_megabytes_arrive_whole(&server.sse_url(), server.projects());
}

/// A `while read … < list` loop that calls the client keeps every line of its list for
/// itself, and a client whose stdin is a pipe nobody closes still ends.
#[test]
fn a_read_loop_keeps_its_input_and_an_open_pipe_hangs_nothing() {
    let server = HttpServer::samples(&["--auth-token", TOKEN]);
    add_reader(server.projects());
    let list = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(list.path(), "one\ntwo\nthree\n").expect("write the list");
    let script = format!(
        "while read -r word; do echo \"[$word]\"; '{}' --server '{}' run readstdin.py; done < '{}'",
        pyrun_mcp_tests::bin_path("pyrun-mcp-client").display(),
        server.mcp_url(),
        list.path().display()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("MCP_AUTH_TOKEN", TOKEN)
        .env_remove("MCP_SERVER_URL")
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let nothing = expected(b"");
    assert_eq!(
        stdout,
        format!("[one]\n{nothing}[two]\n{nothing}[three]\n{nothing}"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Our stdin a pipe that stays open: `run` without -i ends all the same.
    let mut child = Command::new(pyrun_mcp_tests::bin_path("pyrun-mcp-client"))
        .args(["--server", &server.mcp_url(), "run", "readstdin.py"])
        .env("MCP_AUTH_TOKEN", TOKEN)
        .env_remove("MCP_SERVER_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the client");
    let _open = child.stdin.take();
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
}

/// Limits name themselves: a request over `--max-body-bytes` (`call` sends stdin in one
/// request) and a stdin over `--max-stdin-bytes`.
#[test]
fn limits_on_stdin_name_their_settings() {
    let server = HttpServer::samples(&[
        "--auth-token",
        TOKEN,
        "--max-body-bytes",
        "65536",
        "--max-stdin-bytes",
        "1000000",
    ]);
    add_reader(server.projects());
    let big = "x".repeat(100_000);
    let args_json = serde_json::json!({"file_name": "readstdin.py", "stdin": big}).to_string();
    let (code, _, err) = client_with_stdin(
        &server.mcp_url(),
        &["call", "run_python", "--args-json", &args_json],
        b"",
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("--max-body-bytes"), "{err}");
    assert!(!err.contains("the server stopped"), "{err}");

    let input = vec![b'y'; 2_000_000];
    let (code, _, err) =
        client_with_stdin(&server.mcp_url(), &["run", "-i", "readstdin.py"], &input);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--max-stdin-bytes"), "{err}");
    assert!(err.contains("1000000"), "{err}");
}

/// An endless stdin (`yes | … run -i`) is read only up to the server's `--max-stdin-bytes`: the
/// client stops, names the limit and its setting, and ends; a 3 MB file over a 1 MB limit fails
/// three times and leaves nothing staged, so a 600 kB stdin passes after them.
#[test]
fn stdin_past_the_limit_stops_reading_and_leaves_nothing_staged() {
    let server = HttpServer::samples(&["--auth-token", TOKEN, "--max-stdin-bytes", "1000000"]);
    add_reader(server.projects());

    let mut child = Command::new(pyrun_mcp_tests::bin_path("pyrun-mcp-client"))
        .args(["--server", &server.mcp_url(), "run", "-i", "readstdin.py"])
        .env("MCP_AUTH_TOKEN", TOKEN)
        .env_remove("MCP_SERVER_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the client");
    let mut endless = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let line = b"y\n".repeat(32 * 1024);
        while endless.write_all(&line).is_ok() {}
    });
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("--max-stdin-bytes"), "{err}");
    assert!(err.contains("1000000"), "{err}");
    writer.join().expect("the writer ends when the client does");

    let big = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(big.path(), vec![b'z'; 3_000_000]).expect("write the input");
    let path = big.path().display().to_string();
    for _ in 0..3 {
        let (code, _, err) = client_with_stdin(
            &server.mcp_url(),
            &["run", "--stdin-file", &path, "readstdin.py"],
            b"",
        );
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("--max-stdin-bytes"), "{err}");
    }
    let input = vec![b'w'; 600_000];
    let (code, out, err) =
        client_with_stdin(&server.mcp_url(), &["run", "-i", "readstdin.py"], &input);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, expected(&input), "{err}");
}

//! What a client is told when something fails, forced for real on the running binary: a slot's
//! cgroup removed under the server, its interpreter removed after start-up (or one its sandbox
//! cannot ask), its scratch root made unwritable, a FIFO, a folder it may not read, and the HTTP
//! bodies it writes itself. Every answer is a clear refusal (`isError: true`, with a `hint:` where
//! only the operator can fix it) and names no absolute host path, token or environment value.
//!
//! Root bypasses file modes, so the scratch and permission tests run their server as another
//! user when the tests run as root (as `escapes.rs` does).
#![cfg(target_os = "linux")]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use serde_json::{json, Value};

/// Planted in the servers' environment: no answer may carry its value.
const PLANTED: (&str, &str) = ("PYRUN_TEST_PLANTED", "planted-7d1e0c9a-not-for-clients");

/// What no answer may contain. Besides these, [`assert_tells_nothing`] refuses any absolute path
/// but the neutral `/projects/...`.
struct Secrets(Vec<String>);

impl Secrets {
    fn new() -> Self {
        Self(
            [
                "/sys/fs/cgroup",
                PLANTED.1,
                util::http::TOKEN,
                env!("CARGO_TARGET_TMPDIR"),
            ]
            .map(str::to_owned)
            .into(),
        )
    }

    fn and(mut self, path: impl AsRef<Path>) -> Self {
        self.0.push(path.as_ref().display().to_string());
        self
    }
}

/// Every string in a JSON answer.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(fields) => fields.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// The absolute paths (two components or more) in `text`, other than the neutral `/projects/...`.
fn host_paths(text: &str) -> Vec<&str> {
    let starts = |i: usize| {
        i == 0
            || matches!(
                text.as_bytes()[i - 1],
                b' ' | b'\'' | b'"' | b'(' | b'=' | b':' | b'\n' | b'`'
            )
    };
    text.match_indices('/')
        .filter(|(i, _)| starts(*i))
        .map(|(i, _)| {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| c.is_whitespace() || "'\"`),".contains(c))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|path| path.split('/').filter(|c| !c.is_empty()).count() >= 2)
        .filter(|path| !path.starts_with("/projects/"))
        .collect()
}

fn assert_tells_nothing(what: &str, answer: &str, secrets: &Secrets) {
    for secret in &secrets.0 {
        assert!(
            !answer.contains(secret.as_str()),
            "{what}: the answer carries {secret:?}:\n{answer}"
        );
    }
    let paths = host_paths(answer);
    assert!(
        paths.is_empty(),
        "{what}: the answer names host paths {paths:?}:\n{answer}"
    );
}

/// A tool result that is a refusal saying `says`, with no secret anywhere in it.
fn assert_clear_refusal(what: &str, result: &Value, says: &str, secrets: &Secrets) {
    eprintln!("{what}: {:?}", text(result));
    assert_eq!(result["isError"], true, "{what}: {result}");
    assert!(text(result).contains(says), "{what}: {result}");
    for s in strings(result) {
        assert_tells_nothing(what, s, secrets);
    }
}

fn run(server: &mut StdioServer, file: &str) -> Value {
    server.call("run_python", json!({"file_name": file}))
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The user an unprivileged server runs as when the tests run as root.
fn other_user() -> Option<u32> {
    is_root().then_some(65534)
}

/// A system interpreter every user can run (pyenv's lives under root's home).
fn system_python() -> PathBuf {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .map_or_else(pyrun_mcp_tests::python, Path::to_path_buf)
}

/// Makes `path` (recursively) the server user's, when it is another user.
fn give_to(uid: Option<u32>, path: &Path) {
    if let Some(uid) = uid {
        let status = Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(path)
            .status()
            .expect("chown runs");
        assert!(status.success());
    }
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// The server's own cgroup folders (one per v1 hierarchy it limits runs with), if any.
fn cgroup_parents(pid: u32) -> Vec<PathBuf> {
    let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let mut parents = Vec::new();
    for line in own.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controller), Some(path)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !matches!(controller, "pids" | "memory") {
            continue;
        }
        let dir = Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(path.trim_start_matches('/'));
        let prefix = format!("pyrun-mcp-{pid}-");
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                parents.push(entry.path());
            }
        }
    }
    parents
}

/// Removes the slot cgroups under `parent` (empty: no run is going).
fn remove_slot_cgroups(parent: &Path) {
    for entry in fs::read_dir(parent).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("slot-") {
            fs::remove_dir(entry.path()).unwrap();
        }
    }
}

#[test]
fn a_slot_cgroup_removed_under_the_server_is_refused_without_naming_it() {
    if !is_root() {
        eprintln!("not forced: only root may write the cgroup hierarchies here");
        return;
    }
    let (dir, _) = util::project(&[("hello.py", "print('hi')\n")]);
    let python = pyrun_mcp_tests::python();
    // Cold runs: a warm spare already sits in its cgroup (one with a process cannot be removed),
    // so it would rightly serve the run; this is about starting one.
    let mut server = StdioServer::start_with_env(
        dir.path(),
        &["--python", python.to_str().unwrap(), "--warm", "off"],
        None,
        &[PLANTED],
    );
    let first = run(&mut server, "hello.py");
    assert_eq!(first["isError"], false, "{first}");
    let parents = cgroup_parents(server.pid());
    if parents.is_empty() {
        eprintln!("not forced: this machine gives runs no cgroup of their own");
        return;
    }
    let secrets = parents
        .iter()
        .fold(Secrets::new().and(dir.path()).and(&python), Secrets::and);

    // The slot's cgroups: its runs join them through files opened when the slot was made. The
    // slot's reuse check runs after the reply: when it ran after the removal, it found the
    // cgroups gone and dropped the slot, and the next run rightly takes a new one; when it ran
    // before, the run in the old slot must be a clear refusal.
    for parent in &parents {
        remove_slot_cgroups(parent);
    }
    let result = run(&mut server, "hello.py");
    if result["isError"] == true {
        assert_clear_refusal(
            "slot cgroup removed",
            &result,
            "the sandbox could not be applied",
            &secrets,
        );
    } else {
        assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    }

    // And the server's own: a new slot's cgroups cannot be made (the error names the folder).
    for parent in &parents {
        remove_slot_cgroups(parent);
        fs::remove_dir(parent).unwrap();
    }
    let result = run(&mut server, "hello.py");
    assert_clear_refusal(
        "cgroup parent removed",
        &result,
        "the sandbox could not be applied",
        &secrets,
    );
    assert!(text(&result).contains("\nhint: "), "{result}");
}

#[test]
fn an_interpreter_removed_after_start_up_is_refused_without_naming_it() {
    for sandbox in ["standard", "off"] {
        let (dir, _) = util::project(&[("hello.py", "print('hi')\n")]);
        // Not under /tmp: a sandboxed run sees its own scratch there, not the host's.
        let bin = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let python = bin.path().join("python3");
        fs::copy(fs::canonicalize(system_python()).unwrap(), &python).unwrap();
        let mut server = StdioServer::start_with_env(
            dir.path(),
            &["--python", python.to_str().unwrap(), "--sandbox", sandbox],
            None,
            &[PLANTED],
        );
        let first = run(&mut server, "hello.py");
        assert_eq!(first["isError"], false, "{sandbox}: {first}");

        fs::rename(&python, bin.path().join("moved-away")).unwrap();
        let result = run(&mut server, "hello.py");
        let secrets = Secrets::new().and(dir.path()).and(bin.path());
        let what = format!("interpreter removed (--sandbox {sandbox})");
        assert_clear_refusal(
            &what,
            &result,
            "the Python interpreter could not be started",
            &secrets,
        );
        assert!(text(&result).contains("\nhint: "), "{result}");
    }
}

/// An interpreter removed before the sandbox's start-up probe asked it for its folders fails
/// that probe; one that says it is Python 3 (the start-up check asks `--version`) but fails every
/// question after it fails the probe every time.
#[test]
fn an_interpreter_the_sandbox_cannot_ask_is_refused_without_naming_it() {
    let (dir, _) = util::project(&[("hello.py", "print('hi')\n")]);
    let bin = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let python = bin.path().join("python3");
    fs::write(
        &python,
        "#!/bin/sh\ncase \"$1\" in --version) echo 'Python 3.11.0';; -I) exit 1;; esac\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&python, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut server = StdioServer::start_with_env(
        dir.path(),
        &[
            "--python",
            python.to_str().unwrap(),
            "--sandbox",
            "standard",
        ],
        None,
        &[PLANTED],
    );
    let result = run(&mut server, "hello.py");
    let secrets = Secrets::new().and(dir.path()).and(bin.path());
    assert_clear_refusal(
        "interpreter the probe cannot ask",
        &result,
        "the sandbox could not be set up",
        &secrets,
    );
    assert!(text(&result).contains("\nhint: "), "{result}");
}

#[test]
fn a_scratch_root_made_unwritable_is_refused_without_naming_it() {
    let (dir, _) = util::project(&[("hello.py", "print('hi')\n")]);
    let temp = tempfile::tempdir().unwrap();
    let uid = other_user();
    give_to(uid, dir.path());
    give_to(uid, temp.path());
    let python = system_python();
    let mut server = StdioServer::start_with_env(
        dir.path(),
        &["--python", python.to_str().unwrap()],
        uid,
        &[PLANTED, ("TMPDIR", temp.path().to_str().unwrap())],
    );
    // Made before the server answers; no slot in it yet. Its siblings of the same prefix are
    // the support modules' folder and (without a state folder) the artifact store.
    let prefix = format!("pyrun-mcp-{}-", server.pid());
    let scratch = fs::read_dir(temp.path())
        .unwrap()
        .flatten()
        .find(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&prefix)
                .is_some_and(|rest| !rest.starts_with("support-") && !rest.starts_with("runs-"))
        })
        .expect("the server's scratch root")
        .path();

    chmod(&scratch, 0o500);
    let result = run(&mut server, "hello.py");
    chmod(&scratch, 0o700);
    let secrets = Secrets::new()
        .and(dir.path())
        .and(temp.path())
        .and(&scratch);
    assert_clear_refusal(
        "scratch root unwritable",
        &result,
        "a scratch directory for the run could not be created",
        &secrets,
    );
    assert!(text(&result).contains("\nhint: "), "{result}");
    // Writable again, the server recovers.
    let again = run(&mut server, "hello.py");
    assert_eq!(again["structuredContent"]["stdout"], "hi\n", "{again}");
    server.close();
}

#[test]
fn a_fifo_is_refused_without_host_detail() {
    let (dir, _) = util::project(&[("hello.py", "print('hi')\n")]);
    let fifo = dir.path().join("pipe.py");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let mut server = StdioServer::start_with_env(dir.path(), &[], None, &[PLANTED]);
    let secrets = Secrets::new().and(dir.path());
    for name in ["pipe.py", "/projects/pipe.py"] {
        let result = run(&mut server, name);
        assert_clear_refusal(
            &format!("FIFO {name}"),
            &result,
            "is not a regular file",
            &secrets,
        );
    }
    let listed = server.call("list_python_files", json!({}));
    assert_eq!(listed["structuredContent"]["files"], json!(["hello.py"]));
}

#[test]
fn a_file_in_a_folder_the_server_may_not_read_is_refused_without_host_detail() {
    let (dir, _) = util::project(&[
        ("hello.py", "print('hi')\n"),
        ("secret/hidden.py", "print('hidden')\n"),
    ]);
    let uid = other_user();
    give_to(uid, dir.path());
    let secret = dir.path().join("secret");
    chmod(&secret, 0o000);
    let python = system_python();
    let mut server = StdioServer::start_with_env(
        dir.path(),
        &["--python", python.to_str().unwrap()],
        uid,
        &[PLANTED],
    );
    let secrets = Secrets::new().and(dir.path());

    let result = run(&mut server, "secret/hidden.py");
    assert_clear_refusal(
        "file in an unreadable folder",
        &result,
        "'secret/hidden.py' could not be read",
        &secrets,
    );
    let result = server.call("list_python_files", json!({"directory": "secret"}));
    assert_clear_refusal(
        "listing an unreadable folder",
        &result,
        "'secret' could not be read",
        &secrets,
    );
    let listed = server.call("list_python_files", json!({}));
    assert_eq!(listed["structuredContent"]["files"], json!(["hello.py"]));
    chmod(&secret, 0o755);
}

/// The bodies the HTTP transport writes itself (auth, Host and Origin checks, body size and time
/// limits, the session limit, the legacy message endpoint), `/health`, and a tool error over
/// `/mcp`. (The server's environment here is the test's: `util::http` plants nothing.)
#[tokio::test]
async fn http_bodies_the_server_writes_tell_no_secrets() {
    use crate::util::http::*;
    use reqwest::StatusCode;

    let projects = projects();
    let made = Command::new("mkfifo")
        .arg(projects.path().join("pipe.py"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let server = HttpServer::start(
        projects.path(),
        &[
            "--auth-token",
            TOKEN,
            "--max-sessions",
            "2",
            "--max-body-bytes",
            "1024",
            "--body-timeout",
            "1",
        ],
    );
    let wrong = "wrong-token-4c1d";
    let secrets = Secrets::new().and(projects.path()).and(wrong);
    let client = http();
    let mut bodies: Vec<(&str, StatusCode, String)> = Vec::new();

    let answer = client.post(server.url("/mcp")).send().await.unwrap();
    bodies.push(("no token", answer.status(), answer.text().await.unwrap()));
    let answer = client
        .get(server.url("/sse"))
        .headers(bearer(wrong))
        .send()
        .await
        .unwrap();
    bodies.push(("wrong token", answer.status(), answer.text().await.unwrap()));
    let answer = client
        .get(server.url("/health"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    bodies.push((
        "foreign Host",
        answer.status(),
        answer.text().await.unwrap(),
    ));
    let answer = client
        .get(server.url("/health"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    bodies.push((
        "foreign Origin",
        answer.status(),
        answer.text().await.unwrap(),
    ));
    let answer = client.get(server.url("/health")).send().await.unwrap();
    bodies.push(("health", answer.status(), answer.text().await.unwrap()));
    let padded = json!({"jsonrpc": "2.0", "id": 9, "method": "initialize",
                        "params": {"pad": "x".repeat(2048)}});
    let answer = mcp_post(&client, &server.url("/mcp"), &bearer(TOKEN), &padded).await;
    bodies.push((
        "body too large",
        answer.status(),
        answer.text().await.unwrap(),
    ));

    let mcp = McpSession::open(&server, Some(TOKEN)).await;
    let tool_error = mcp.call(&run_python(1, "pipe.py", None)).await;
    let sse = SseSession::connect(&server, Some(TOKEN)).await;
    let answer = mcp_post(
        &client,
        &server.url("/mcp"),
        &bearer(TOKEN),
        &initialize_request(2),
    )
    .await;
    bodies.push((
        "session limit",
        answer.status(),
        answer.text().await.unwrap(),
    ));
    let messages = server.url("/messages");
    for (what, url, body) in [
        ("no sessionId", messages.clone(), "{}".to_owned()),
        (
            "unknown session",
            format!("{messages}?sessionId=nope"),
            "{}".to_owned(),
        ),
        (
            "not JSON",
            sse.message_url.clone(),
            "{\"jsonrpc\": ".to_owned(),
        ),
        (
            "not JSON-RPC",
            sse.message_url.clone(),
            format!("{{\"jsonrpc\": \"2.0\", \"id\": \"{}\"}}", PLANTED.1),
        ),
    ] {
        let answer = client
            .post(url)
            .headers(bearer(TOKEN))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        bodies.push((what, answer.status(), answer.text().await.unwrap()));
    }
    bodies.push((
        "body timeout",
        StatusCode::REQUEST_TIMEOUT,
        stalled_body(&server),
    ));

    let expected = [
        ("no token", StatusCode::UNAUTHORIZED, "Unauthorized"),
        ("wrong token", StatusCode::UNAUTHORIZED, "Unauthorized"),
        (
            "foreign Host",
            StatusCode::FORBIDDEN,
            "Host header is not allowed",
        ),
        (
            "foreign Origin",
            StatusCode::FORBIDDEN,
            "Origin is not allowed",
        ),
        ("health", StatusCode::OK, "\"status\":\"ok\""),
        (
            "body too large",
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large",
        ),
        (
            "session limit",
            StatusCode::SERVICE_UNAVAILABLE,
            "2 live sessions",
        ),
        ("no sessionId", StatusCode::BAD_REQUEST, "missing sessionId"),
        ("unknown session", StatusCode::NOT_FOUND, "unknown session"),
        (
            "not JSON",
            StatusCode::BAD_REQUEST,
            "not a JSON-RPC message",
        ),
        (
            "not JSON-RPC",
            StatusCode::BAD_REQUEST,
            "not a JSON-RPC message",
        ),
        (
            "body timeout",
            StatusCode::REQUEST_TIMEOUT,
            "Request Timeout",
        ),
    ];
    assert_eq!(bodies.len(), expected.len());
    for ((what, status, body), (named, want_status, says)) in bodies.iter().zip(expected) {
        eprintln!("{what}: {status} {body:?}");
        assert_eq!((*what, *status), (named, want_status), "{body}");
        assert!(body.contains(says), "{what}: {body}");
        assert_tells_nothing(what, body, &secrets);
    }
    assert_clear_refusal(
        "tool error over /mcp",
        &tool_error["result"],
        "is not a regular file",
        &secrets,
    );
}

/// Sends a request head and part of its body, then waits for the server's answer: its body.
fn stalled_body(server: &util::http::HttpServer) -> String {
    use std::io::{Read, Write};
    let addr = server.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 200\r\n\r\n{{\"jsonrpc\":",
        util::http::TOKEN
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.set_read_timeout(Some(util::http::DEADLINE)).unwrap();
    let mut seen = Vec::new();
    let _ = stream.read_to_end(&mut seen);
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 408"), "{seen}");
    seen.split_once("\r\n\r\n")
        .map_or_else(String::new, |(_, body)| body.to_owned())
}

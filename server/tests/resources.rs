//! Project files as resources and the prompts, end to end over stdio with the real binary: what is
//! listed and what never is, paging, every path attack `run_python` refuses tried again through
//! `resources/read` (and the prompts), text and blobs, the size cap, and `list_changed` after a
//! file appears.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R', 0, 0, 0,
    1, 0, 0, 0, 1, 8, 2, 0, 0, 0, 0x90, 0x77, 0x53, 0xde, 0xff,
];
const SECRET: &str = "TOP-SECRET-CONTENT";

/// `base/p1` is the projects folder, full of things never served; `base/outside.txt`,
/// `base/p1_evil/x.py` (a sibling sharing the folder's prefix) hold secrets.
fn folder() -> (tempfile::TempDir, PathBuf) {
    let (base, projects) = TempProjects::named("p1")
        .file("hello.py", "print('hi')\n")
        .file("sub/data.csv", "a,b\n1,2\n")
        .file("sub/bug.py", "import sys\nprint(1 / int(sys.argv[1]))\n")
        .file("notes.txt", "plain notes\n")
        .file("pixel.png", PNG)
        .file(".env", SECRET)
        .file("sub/.env.local", SECRET)
        .file(".git/config", SECRET)
        .file(".venv/lib/x.py", SECRET)
        .file("venv/lib/y.py", SECRET)
        .file("__pycache__/hello.cpython-311.pyc", SECRET)
        .file(".hidden/secret.py", SECRET)
        .outside("outside.txt", SECRET)
        .outside("p1_evil/x.py", SECRET)
        .into_parts();
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        let root = projects.parent().unwrap();
        symlink(root.join("outside.txt"), projects.join("link_out.txt")).unwrap();
        symlink(root.join("missing.txt"), projects.join("dangling_out.txt")).unwrap();
        symlink(root, projects.join("parent_link")).unwrap();
        symlink(".env", projects.join("env_alias.txt")).unwrap();
        symlink(".git", projects.join("git_alias")).unwrap();
        symlink("hello.py", projects.join("alias.py")).unwrap();
    }
    (base, projects)
}

fn uri(path: &str) -> String {
    format!("pyrun://projects/{path}")
}

/// `resources/list`, every page, as (names, pages).
fn list_all(server: &mut StdioServer) -> (Vec<Value>, usize) {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let reply = server.request("resources/list", params);
        let result = &reply["result"];
        assert!(result.is_object(), "{reply}");
        pages += 1;
        all.extend(result["resources"].as_array().unwrap().iter().cloned());
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (all, pages),
        }
        assert!(pages < 1000, "the cursor never ends");
    }
}

fn names(resources: &[Value]) -> BTreeSet<String> {
    resources
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

fn read(server: &mut StdioServer, uri: &str) -> Value {
    server.request("resources/read", json!({"uri": uri}))
}

/// The error of a refused request: its message, checked to name no host path and no secret.
fn refusal(reply: &Value, base: &Path, what: &str) -> String {
    assert!(reply.get("result").is_none(), "{what} was served: {reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{what}: {reply}");
    // The caller's own text may come back; nothing else of the host may.
    let whole = reply.to_string().replace(what, "");
    assert!(
        !whole.contains(base.to_str().unwrap()),
        "{what} leaks a host path: {whole}"
    );
    assert!(!whole.contains(SECRET), "{what} leaks the secret: {whole}");
    message.to_owned()
}

#[test]
fn resources_list_names_every_served_file_and_never_a_hidden_or_protected_one() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let (resources, pages) = list_all(&mut server);
    assert_eq!(pages, 1);
    let mut expected: BTreeSet<String> = [
        "hello.py",
        "notes.txt",
        "pixel.png",
        "sub/bug.py",
        "sub/data.csv",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    if cfg!(unix) {
        expected.insert("alias.py".into()); // a link that stays inside, to a served file
    }
    assert_eq!(names(&resources), expected, "{resources:#?}");
    let hello = resources.iter().find(|r| r["name"] == "hello.py").unwrap();
    assert_eq!(hello["uri"], uri("hello.py"));
    assert_eq!(hello["mimeType"], "text/x-python");
    assert_eq!(hello["size"], 12);
    let templates = server.request("resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"], "pyrun://projects/{+path}",
        "{templates}"
    );
}

#[test]
fn resources_list_pages_with_an_opaque_cursor_and_refuses_a_forged_one() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..250 {
        let sub = if i % 2 == 0 { "even" } else { "odd" };
        let path = dir.path().join(sub).join(format!("f{i:03} x.txt"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    let mut server = StdioServer::start(dir.path(), &[]);
    let (resources, pages) = list_all(&mut server);
    assert_eq!(pages, 3);
    assert_eq!(resources.len(), 250);
    assert_eq!(names(&resources).len(), 250, "a file came twice");
    assert!(resources
        .iter()
        .any(|r| r["uri"] == "pyrun://projects/even/f000%20x.txt"));
    let forged = server.request("resources/list", json!({"cursor": "bm9wZQ"}));
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    assert!(
        forged["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cursor"),
        "{forged}"
    );
}

#[test]
fn every_path_attack_is_refused_by_resources_read_without_leaking_a_host_path() {
    let (_base, projects) = folder();
    let root = projects.parent().unwrap().to_path_buf();
    let mut server = StdioServer::start(&projects, &[]);
    let host_outside = root.join("outside.txt");
    let host_env = projects.join(".env");
    let mut attacks: Vec<(String, &str)> = vec![
        (uri("../outside.txt"), "outside"),
        (uri("sub/../../outside.txt"), "outside"),
        (uri("%2E%2E/outside.txt"), "outside"),
        (uri("..%2Foutside.txt"), "outside"),
        (uri("/etc/passwd"), "outside"),
        (uri("%2Fetc%2Fpasswd"), "outside"),
        (uri(host_outside.to_str().unwrap()), "outside"),
        (uri("../p1_evil/x.py"), "outside"),
        (uri(root.join("p1_evil/x.py").to_str().unwrap()), "outside"),
        (uri(".env"), "never served"),
        (uri("sub/.env.local"), "never served"),
        (uri(".git/config"), "never served"),
        (uri(".venv/lib/x.py"), "never served"),
        (uri("venv/lib/y.py"), "never served"),
        (uri("__pycache__/hello.cpython-311.pyc"), "never served"),
        (uri(".hidden/secret.py"), "never served"),
        (uri("sub/../.env"), "never served"),
        (uri(host_env.to_str().unwrap()), "outside"),
    ];
    if cfg!(unix) {
        attacks.extend([
            (uri("link_out.txt"), "outside"),
            (uri("dangling_out.txt"), "outside"),
            (uri("parent_link/outside.txt"), "outside"),
            (uri("parent_link/p1_evil/x.py"), "outside"),
            (uri("env_alias.txt"), "never served"),
            (uri("git_alias/config"), "never served"),
        ]);
    }
    for (attack, expected) in &attacks {
        let reply = read(&mut server, attack);
        let message = refusal(&reply, &root, attack);
        assert_eq!(reply["error"]["code"], -32602, "{attack}: {reply}");
        assert!(message.contains(expected), "{attack}: {message}");
    }
    // run_python refuses the escapes alike (hidden folders are its to run, never to serve), and
    // a link out and a dangling one get the same words.
    for attack in ["../p1_evil/x.py", "/etc/passwd"] {
        let run = server.call("run_python", json!({"file_name": attack}));
        assert_eq!(run["isError"], true, "{attack}: {run}");
    }
    if cfg!(unix) {
        let a = read(&mut server, &uri("link_out.txt"));
        let b = read(&mut server, &uri("dangling_out.txt"));
        assert_eq!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .replace("link_out", "X"),
            b["error"]["message"]
                .as_str()
                .unwrap()
                .replace("dangling_out", "X")
        );
    }
    // Not found, a folder, a foreign scheme: clear errors too.
    let missing = read(&mut server, &uri("nope.txt"));
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    let folder = read(&mut server, &uri("sub"));
    assert!(refusal(&folder, &root, "a folder").contains("folder"));
    let other = read(&mut server, "file:///etc/passwd");
    assert_eq!(other["error"]["code"], -32002, "{other}");
    // The server serves on.
    let ok = read(&mut server, &uri("hello.py"));
    assert_eq!(ok["result"]["contents"][0]["text"], "print('hi')\n", "{ok}");
}

#[test]
fn an_absolute_path_naming_the_projects_folder_gets_the_refusal_a_wrong_guess_gets() {
    let (_base, projects) = folder();
    let root = projects.parent().unwrap().to_path_buf();
    let mut server = StdioServer::start(&projects, &[]);
    let right = projects.join("notes.txt");
    let wrong = root.join("elsewhere/notes.txt");
    let shape = |input: &str, message: &str| message.replace(input, "PATH");
    let mut answers = Vec::new();
    for guess in [&right, &wrong] {
        let guess = guess.to_str().unwrap();
        let reply = read(&mut server, &uri(guess));
        assert_eq!(reply["error"]["code"], -32602, "{guess}: {reply}");
        answers.push(shape(&uri(guess), &refusal(&reply, &root, &uri(guess))));
    }
    for script in [projects.join("hello.py"), root.join("elsewhere/hello.py")] {
        let script = script.to_str().unwrap();
        let run = server.call("run_python", json!({"file_name": script}));
        assert_eq!(run["isError"], true, "{script}: {run}");
        answers.push(shape(script, run["content"][0]["text"].as_str().unwrap()));
    }
    answers.dedup();
    assert_eq!(
        answers.len(),
        1,
        "the answers tell the guesses apart: {answers:#?}"
    );
    assert!(
        answers[0].contains("outside the projects folder"),
        "{}",
        answers[0]
    );
}

#[test]
fn text_reads_as_text_and_binary_as_a_base64_blob() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let csv = read(&mut server, &uri("sub/data.csv"));
    let contents = &csv["result"]["contents"][0];
    assert_eq!(contents["text"], "a,b\n1,2\n", "{csv}");
    assert_eq!(contents["mimeType"], "text/csv");
    assert_eq!(contents["uri"], uri("sub/data.csv"));
    let png = read(&mut server, &uri("pixel.png"));
    let contents = &png["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "image/png", "{png}");
    assert!(contents.get("text").is_none());
    let blob = base64::engine::general_purpose::STANDARD
        .decode(contents["blob"].as_str().unwrap())
        .unwrap();
    assert_eq!(blob, PNG);
    std::fs::write(projects.join("raw.dat"), [0u8, 159, 146, 150, 255]).unwrap();
    let raw = read(&mut server, &uri("raw.dat"));
    assert_eq!(
        raw["result"]["contents"][0]["mimeType"], "application/octet-stream",
        "{raw}"
    );
    assert!(raw["result"]["contents"][0]["blob"].is_string());
    // A link that stays inside reads as its target; percent-encoded names decode.
    std::fs::write(projects.join("sub/with space é.txt"), "spaced").unwrap();
    let spaced = read(&mut server, &uri("sub/with%20space%20%C3%A9.txt"));
    assert_eq!(
        spaced["result"]["contents"][0]["text"], "spaced",
        "{spaced}"
    );
}

#[test]
fn a_file_over_the_size_cap_is_refused_naming_the_cap() {
    let (_base, projects) = folder();
    let big = std::fs::File::create(projects.join("big.bin")).unwrap();
    big.set_len(9 * 1024 * 1024).unwrap(); // sparse
    let mut server = StdioServer::start(&projects, &[]);
    let reply = read(&mut server, &uri("big.bin"));
    let message = refusal(&reply, projects.parent().unwrap(), "big.bin");
    assert!(message.contains("8388608"), "{message}");
    assert!(message.contains("8 MiB"), "{message}");
    let listed = list_all(&mut server).0;
    let entry = listed.iter().find(|r| r["name"] == "big.bin").unwrap();
    assert_eq!(entry["size"], 9 * 1024 * 1024);
}

#[test]
fn an_unknown_runs_artifact_uri_is_not_found_and_never_a_project_file() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    for uri in [
        "pyrun://runs/run_0123/files/x.png",
        "pyrun://runs/run_00000000000000000000000000000000/files/hello.py",
        "pyrun://runs/../projects/hello.py",
    ] {
        let reply = read(&mut server, uri);
        assert_eq!(reply["error"]["code"], -32002, "{uri}: {reply}");
        assert!(!reply.to_string().contains("print('hi')"), "{reply}");
    }
}

/// Pings until a notification with `method` arrives, or `within` passes.
fn wait_for_notification(server: &mut StdioServer, method: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if server.notifications.iter().any(|n| n["method"] == method) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        server.request("ping", json!({}));
    }
    server.notifications.iter().any(|n| n["method"] == method)
}

#[test]
fn list_changed_arrives_once_after_files_appear_or_go_and_not_for_hidden_ones() {
    const CHANGED: &str = "notifications/resources/list_changed";
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    // The watcher starts with the session; let its first walk finish.
    std::thread::sleep(Duration::from_millis(500));
    // Hidden churn and writes to an existing file change nothing listed.
    std::fs::write(projects.join(".git/index.lock"), "x").unwrap();
    std::fs::write(projects.join("__pycache__/new.pyc"), "x").unwrap();
    std::fs::write(projects.join("notes.txt"), "more notes\n").unwrap();
    assert!(
        !wait_for_notification(&mut server, CHANGED, Duration::from_millis(2500)),
        "{:?}",
        server.notifications
    );
    // A burst of new files (in a new folder too) makes one notification.
    let started = Instant::now();
    std::fs::create_dir_all(projects.join("fresh/deeper")).unwrap();
    for i in 0..20 {
        std::fs::write(projects.join(format!("fresh/deeper/n{i}.py")), "").unwrap();
    }
    assert!(
        wait_for_notification(&mut server, CHANGED, Duration::from_secs(10)),
        "no list_changed after files appeared"
    );
    let latency = started.elapsed();
    eprintln!("list_changed {} ms after the burst", latency.as_millis());
    std::thread::sleep(Duration::from_millis(1500));
    server.request("ping", json!({}));
    let count = server
        .notifications
        .iter()
        .filter(|n| n["method"] == CHANGED)
        .count();
    assert_eq!(count, 1, "{:?}", server.notifications);
    assert!(names(&list_all(&mut server).0).contains("fresh/deeper/n7.py"));
    // A file that goes, inside the folder made after the watcher started.
    server.notifications.clear();
    std::fs::remove_file(projects.join("fresh/deeper/n7.py")).unwrap();
    assert!(
        wait_for_notification(&mut server, CHANGED, Duration::from_secs(10)),
        "no list_changed after a file went"
    );
}

#[test]
fn prompts_embed_the_script_and_say_what_to_do() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let listed = server.request("prompts/list", json!({}));
    let prompts = listed["result"]["prompts"].as_array().unwrap();
    let names: Vec<_> = prompts
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["run-and-explain", "debug-script", "write-tests"],
        "{listed}"
    );
    assert_eq!(prompts[1]["arguments"][1]["name"], "args");
    assert_eq!(prompts[1]["arguments"][1]["required"], false);
    for (name, args, says) in [
        ("run-and-explain", json!({"file": "hello.py"}), "explain"),
        (
            "debug-script",
            json!({"file": "sub/bug.py", "args": "0"}),
            "`0`",
        ),
        (
            "write-tests",
            json!({"file": "/projects/hello.py"}),
            "pytest",
        ),
    ] {
        let reply = server.request("prompts/get", json!({"name": name, "arguments": args}));
        let messages = reply["result"]["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("{reply}"));
        let embedded = &messages[0]["content"];
        assert_eq!(embedded["type"], "resource", "{reply}");
        let file = args["file"]
            .as_str()
            .unwrap()
            .trim_start_matches("/projects/");
        assert_eq!(embedded["resource"]["uri"], uri(file));
        let source = std::fs::read_to_string(projects.join(file)).unwrap();
        assert_eq!(embedded["resource"]["text"], source);
        assert_eq!(embedded["resource"]["mimeType"], "text/x-python");
        let task = messages[1]["content"]["text"].as_str().unwrap();
        assert!(
            task.contains("run_python") || name == "write-tests",
            "{task}"
        );
        assert!(task.contains(says), "{task}");
        assert!(task.contains(file), "{task}");
    }
}

#[test]
fn a_bad_prompt_argument_is_a_clear_json_rpc_error() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let cases = [
        ("run-and-explain", json!({}), "'file'"),
        ("run-and-explain", json!({"file": 3}), "must be a string"),
        (
            "run-and-explain",
            json!({"file": "../p1_evil/x.py"}),
            "outside",
        ),
        ("debug-script", json!({"file": "/etc/passwd"}), "outside"),
        (
            "write-tests",
            json!({"file": ".hidden/secret.py"}),
            "never served",
        ),
        (
            "write-tests",
            json!({"file": ".venv/lib/x.py"}),
            "never served",
        ),
        (
            "write-tests",
            json!({"file": "notes.txt"}),
            "not a Python file",
        ),
        ("write-tests", json!({"file": "nope.py"}), "not found"),
        (
            "no-such-prompt",
            json!({"file": "hello.py"}),
            "run-and-explain",
        ),
    ];
    for (name, args, says) in cases {
        let reply = server.request("prompts/get", json!({"name": name, "arguments": args}));
        let what = format!("{name} {args}");
        let message = refusal(&reply, projects.parent().unwrap(), &what);
        assert!(reply["error"]["code"].is_i64(), "{what}: {reply}");
        assert!(message.contains(says), "{what}: {message}");
    }
}

/// The 2026-07-28 protocol has no `initialize`: a client opts in to `list_changed` with a
/// `subscriptions/listen` request, and hears it on that stream.
#[test]
fn a_2026_07_28_client_hears_list_changed_through_subscriptions_listen() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let (_base, projects) = folder();
    let launch =
        pyrun_mcp_tests::ServerLaunch::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"), &projects);
    let mut child = launch
        .command("stdio", None)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "listen-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let listen = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"resourcesListChanged": true}}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{listen}").unwrap();
    stdin.flush().unwrap();
    let next = |within: u64| lines.recv_timeout(Duration::from_secs(within)).ok();
    let ack = next(30).expect("an acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["notifications"]["resourcesListChanged"], true);
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(projects.join("appeared.py"), "").unwrap();
    let changed = next(10).expect("list_changed on the subscription");
    assert_eq!(
        changed["method"], "notifications/resources/list_changed",
        "{changed}"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

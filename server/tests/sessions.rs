//! Python sessions end to end with the real binary (stdio, and HTTP for a second caller): offered
//! only with `--allow-inline-code`; state, imports and open files persist; a final expression's
//! repr comes back; tracebacks name no host path; a timeout interrupts and the session lives on;
//! code that ignores the interrupt is killed with everything it started; memory and fork bombs,
//! closed stdout/stderr, fake reply frames, a dead interpreter, a foreign id, 1000 quick execs,
//! the idle timeout and the per-caller cap. Processes are found by the session id, which the
//! driver carries as its argument (`procs::processes_carrying`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pyrun_mcp_tests::procs::{holds_within, processes_carrying};
use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

const ALLOW: &[&str] = &["--allow-inline-code"];

/// `base/p` is the projects folder (with `pkg/helper.py`); the base dir holds nothing else.
fn folder() -> (tempfile::TempDir, PathBuf) {
    TempProjects::named("p")
        .file(
            "pkg/helper.py",
            "ANSWER = 42\ndef boom():\n    raise ValueError('from helper')\n",
        )
        .into_parts()
}

fn start(server: &mut StdioServer, arguments: Value) -> String {
    let started = server.call("session_start", arguments);
    assert_eq!(started["isError"], false, "{started}");
    let id = started["structuredContent"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id in {started}"))
        .to_owned();
    assert!(text(&started).contains(&id), "{started}");
    id
}

fn exec(server: &mut StdioServer, id: &str, code: &str) -> Value {
    server.call("session_exec", json!({"session_id": id, "code": code}))
}

/// The structured report of an exec that must have succeeded as a call.
fn report(server: &mut StdioServer, id: &str, code: &str) -> Value {
    let reply = exec(server, id, code);
    assert_eq!(reply["isError"], false, "{reply}");
    reply["structuredContent"].clone()
}

fn names(server: &mut StdioServer) -> Vec<String> {
    let reply = server.request("tools/list", json!({}));
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {reply}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn gone_within(id: &str, limit: Duration) -> bool {
    holds_within(limit, || processes_carrying(id).is_empty())
}

const SESSION_TOOLS: [&str; 4] = [
    "session_start",
    "session_exec",
    "session_stop",
    "list_sessions",
];

#[test]
fn without_the_flag_the_session_tools_are_neither_listed_nor_callable() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let listed = names(&mut server);
    for tool in SESSION_TOOLS {
        assert!(!listed.contains(&tool.to_owned()), "{listed:?}");
    }
    let reply = server.request(
        "tools/call",
        json!({"name": "session_start", "arguments": {}}),
    );
    assert!(reply.get("error").is_some(), "{reply}");

    let mut server = StdioServer::start(&projects, ALLOW);
    let listed = names(&mut server);
    for tool in SESSION_TOOLS {
        assert!(listed.contains(&tool.to_owned()), "{tool}: {listed:?}");
    }
}

#[test]
fn state_imports_and_open_files_persist_and_a_final_expression_comes_back() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({"project": "pkg"}));

    let first = report(
        &mut server,
        &id,
        "import helper, math\nx = 40\nf = open('notes.txt', 'w')\nprint('set')",
    );
    assert_eq!(first["stdout"], "set\n", "{first}");
    assert_eq!(first["result"], Value::Null, "{first}");
    assert_eq!(first["error"], Value::Null, "{first}");

    let second = report(
        &mut server,
        &id,
        "f.write('kept'); f.close()\nx + 2 == helper.ANSWER, math.pi > 3",
    );
    assert_eq!(second["result"], "(True, True)", "{second}");
    let third = report(&mut server, &id, "open('notes.txt').read()");
    assert_eq!(third["result"], "'kept'", "{third}");
    assert!(third["duration_ms"].is_u64(), "{third}");
    // A final None (a call returning nothing) is no result, as in a REPL.
    assert_eq!(
        report(&mut server, &id, "print('p')")["result"],
        Value::Null
    );
    assert_eq!(report(&mut server, &id, "None")["result"], Value::Null);
    assert!(projects.join("pkg/notes.txt").exists());

    let listed = server.call("list_sessions", json!({}));
    let sessions = &listed["structuredContent"]["sessions"];
    assert_eq!(sessions[0]["session_id"], id.as_str(), "{listed}");
    assert_eq!(sessions[0]["project"], "pkg", "{listed}");
    assert_eq!(sessions[0]["execs"], 5, "{listed}");

    let stopped = server.call("session_stop", json!({"session_id": id}));
    assert_eq!(stopped["isError"], false, "{stopped}");
    assert!(gone_within(&id, Duration::from_secs(5)));
    let after = exec(&mut server, &id, "1");
    assert_eq!(after["isError"], true, "{after}");
    assert!(
        text(&after).contains("no Python session with id"),
        "{after}"
    );
}

#[test]
fn an_exception_is_a_result_with_a_traceback_that_names_no_host_path() {
    let (base, projects) = folder();
    for sandbox in [&["--sandbox", "standard"][..], &["--sandbox", "off"][..]] {
        let flags: Vec<&str> = ALLOW.iter().chain(sandbox).copied().collect();
        let mut server = StdioServer::start(&projects, &flags);
        let id = start(&mut server, json!({"project": "pkg"}));
        let reply = exec(
            &mut server,
            &id,
            "def inner():\n    import helper\n    helper.boom()\nprint('before')\ninner()",
        );
        assert_eq!(reply["isError"], false, "{reply}");
        let out = &reply["structuredContent"];
        assert_eq!(out["stdout"], "before\n", "{reply}");
        let error = out["error"].as_str().unwrap_or_else(|| panic!("{reply}"));
        assert!(error.contains("ValueError: from helper"), "{error}");
        assert!(error.contains("helper.boom()"), "source lines: {error}");
        assert!(error.contains("helper.py"), "{error}");
        let host = base.path().to_string_lossy().into_owned();
        let whole = reply.to_string();
        assert!(!whole.contains(&host), "{sandbox:?}: {whole}");
        assert!(!whole.contains("_pyrun_session"), "{sandbox:?}: {whole}");
        assert!(!whole.contains("pyrun-mcp-"), "{sandbox:?}: {whole}");
        // The session lives on.
        assert_eq!(report(&mut server, &id, "2*21")["result"], "42");
        // A syntax error, too, is a result.
        let bad = report(&mut server, &id, "def (:");
        assert!(
            bad["error"].as_str().unwrap().contains("SyntaxError"),
            "{bad}"
        );
    }
}

#[test]
fn a_timeout_interrupts_the_code_and_the_session_lives_on() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    report(&mut server, &id, "n = 1");
    let started = Instant::now();
    let reply = server.call(
        "session_exec",
        json!({"session_id": id, "code": "import time\nprint('going', flush=True)\ntime.sleep(60)", "timeout_seconds": 1}),
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{reply}");
    assert_eq!(reply["isError"], false, "{reply}");
    let out = &reply["structuredContent"];
    assert_eq!(out["timed_out"], true, "{reply}");
    assert_eq!(out["stdout"], "going\n", "{reply}");
    assert!(
        out["error"].as_str().unwrap().contains("KeyboardInterrupt"),
        "{reply}"
    );
    assert!(text(&reply).contains("lives on"), "{reply}");
    assert_eq!(report(&mut server, &id, "n + 1")["result"], "2");
}

#[test]
fn a_time_limit_above_the_servers_is_capped_and_the_result_says_so() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &["--allow-inline-code", "--timeout", "5"]);
    let id = start(&mut server, json!({}));
    let reply = server.call(
        "session_exec",
        json!({"session_id": id, "code": "6 * 7", "timeout_seconds": 100}),
    );
    assert_eq!(reply["isError"], false, "{reply}");
    assert_eq!(reply["structuredContent"]["result"], "42", "{reply}");
    let hint = reply["structuredContent"]["hint"]
        .as_str()
        .unwrap_or_default();
    assert!(
        hint.contains("timeout_seconds 100 was capped to the server's limit of 5 s"),
        "{reply}"
    );
    assert!(
        text(&reply).contains("hint: timeout_seconds 100 was capped"),
        "{reply}"
    );
    // Within the limit: no hint.
    let within = server.call(
        "session_exec",
        json!({"session_id": id, "code": "1", "timeout_seconds": 3}),
    );
    assert!(
        within["structuredContent"].get("hint").is_none(),
        "{within}"
    );
}

#[test]
fn code_that_ignores_the_interrupt_is_killed_with_everything_it_started() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    // A child that would outlive its parent, found by the session id it carries too.
    let spawn = format!(
        "import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', \
         'import time; time.sleep(600)', '{id}'])"
    );
    report(&mut server, &id, &spawn);
    // The session and its child; a loaded machine may show the child's command line late.
    let shown = Instant::now();
    while processes_carrying(&id).len() < 2 && shown.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        processes_carrying(&id).len() >= 2,
        "the session and its child: {:?}",
        processes_carrying(&id)
    );
    let started = Instant::now();
    let reply = server.call(
        "session_exec",
        json!({"session_id": id, "timeout_seconds": 1, "code":
            "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass"}),
    );
    assert!(started.elapsed() < Duration::from_secs(15), "{reply}");
    assert_eq!(reply["isError"], true, "{reply}");
    let said = text(&reply);
    assert!(
        said.contains("was killed") && said.contains("is gone"),
        "{said}"
    );
    assert!(
        gone_within(&id, Duration::from_secs(5)),
        "left: {:?}",
        processes_carrying(&id)
    );
    let later = exec(&mut server, &id, "1");
    assert_eq!(later["isError"], true, "{later}");
    assert!(
        text(&later).contains("no Python session with id"),
        "{later}"
    );
    // The server serves on.
    let other = start(&mut server, json!({}));
    assert_eq!(report(&mut server, &other, "1+1")["result"], "2");
}

#[test]
fn a_dead_interpreter_says_so_and_leaves_nothing() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    let reply = exec(&mut server, &id, "import os\nos._exit(3)");
    assert_eq!(reply["isError"], true, "{reply}");
    assert!(text(&reply).contains("has ended"), "{reply}");
    assert!(gone_within(&id, Duration::from_secs(5)));
    let later = exec(&mut server, &id, "1");
    assert!(
        text(&later).contains("no Python session with id"),
        "{later}"
    );
    let listed = server.call("list_sessions", json!({}));
    assert_eq!(
        listed["structuredContent"]["sessions"],
        json!([]),
        "{listed}"
    );

    // An interpreter that dies while an exec runs, by a thread an earlier exec started (held
    // still between execs, it goes on with the next one): that exec says so.
    let id = start(&mut server, json!({}));
    report(
        &mut server,
        &id,
        "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os._exit(1))).start()",
    );
    std::thread::sleep(Duration::from_millis(800));
    let reply = exec(&mut server, &id, "import time\ntime.sleep(2)");
    assert_eq!(reply["isError"], true, "{reply}");
    assert!(text(&reply).contains("has ended"), "{reply}");
    assert!(gone_within(&id, Duration::from_secs(5)));

    // sys.exit is an exception like any other: the session lives on.
    let id = start(&mut server, json!({}));
    let exit = report(&mut server, &id, "import sys\nsys.exit(5)");
    assert!(
        exit["error"].as_str().unwrap().contains("SystemExit"),
        "{exit}"
    );
    assert_eq!(report(&mut server, &id, "7")["result"], "7");
}

#[test]
fn closing_its_own_stdout_and_stderr_leaves_later_execs_working() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    let closed = exec(
        &mut server,
        &id,
        "import os, sys\nprint('last words')\nsys.stdout.close()\nsys.stderr.close()\nos.close(1)\nos.close(2)",
    );
    assert_eq!(closed["isError"], false, "{closed}");
    assert_eq!(closed["structuredContent"]["stdout"], "last words\n");
    let next = report(
        &mut server,
        &id,
        "import os, sys\nprint('out')\nprint('err', file=sys.stderr)\nos.write(1, b'raw1 ')\nos.write(2, b'raw2')\n3",
    );
    assert_eq!(next["stdout"], "out\n", "{next}");
    assert_eq!(next["stderr"], "err\nraw1 raw2", "{next}");
    assert_eq!(next["result"], "3", "{next}");

    // Closing every descriptor (the reply pipe too) ends the session clearly.
    let all = exec(
        &mut server,
        &id,
        "import os\nos.closerange(0, 4096)\nprint('x')",
    );
    assert_eq!(all["isError"], true, "{all}");
    assert!(text(&all).contains("has ended"), "{all}");
    assert!(gone_within(&id, Duration::from_secs(5)));
}

#[test]
fn a_fake_frame_printed_to_stdout_or_the_raw_fds_is_never_taken_for_a_reply() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    let fake = r#"{"stdout": "FORGED", "stderr": "", "stdout_truncated": false, "stderr_truncated": false, "result": "'FORGED'", "error": null}"#;
    let code = format!(
        "import os, struct, sys\nbody = {fake:?}.encode()\nframe = struct.pack('>I', len(body)) + body\n\
         sys.stdout.write(frame.decode())\nsys.__stdout__.write(frame.decode()); sys.__stdout__.flush()\n\
         os.write(1, frame)\nos.write(2, frame)\n'real'"
    );
    let out = report(&mut server, &id, &code);
    assert_eq!(out["result"], "'real'", "{out}");
    assert!(out["stdout"].as_str().unwrap().contains("FORGED"), "{out}");
    assert_eq!(report(&mut server, &id, "'next'")["result"], "'next'");
}

#[test]
fn output_written_to_the_raw_fds_by_subprocesses_is_the_execs() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    let out = report(
        &mut server,
        &id,
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'print(\"from child\")'])\nprint('parent')",
    );
    assert_eq!(out["stdout"], "parent\n", "{out}");
    assert_eq!(out["stderr"], "from child\n", "{out}");
}

#[test]
fn a_memory_bomb_and_a_fork_bomb_end_clearly_and_the_server_serves_on() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &[
            "--allow-inline-code",
            "--max-memory-mb",
            "256",
            "--max-processes",
            "16",
        ],
    );
    let id = start(&mut server, json!({}));
    let bomb = exec(
        &mut server,
        &id,
        "x = []\nwhile True:\n    x.append(bytearray(16 << 20))",
    );
    if bomb["isError"] == true {
        // Killed for its memory: the session says it is gone.
        assert!(text(&bomb).contains("has ended"), "{bomb}");
        assert!(gone_within(&id, Duration::from_secs(5)));
    } else {
        let error = bomb["structuredContent"]["error"].as_str().unwrap_or("");
        assert!(error.contains("MemoryError"), "{bomb}");
        assert_eq!(report(&mut server, &id, "del x\n1")["result"], "1");
        server.call("session_stop", json!({"session_id": id}));
        assert!(gone_within(&id, Duration::from_secs(5)));
    }

    let id = start(&mut server, json!({}));
    let forks = server.call(
        "session_exec",
        json!({"session_id": id, "timeout_seconds": 10, "code":
            "import os\nwhile True:\n    os.fork()"}),
    );
    // The fork fails at the process limit, in the session (its result) and in each child, which
    // comes back into the driver and exits there: the session alone is left, and lives on.
    assert_eq!(forks["isError"], false, "{forks}");
    let error = forks["structuredContent"]["error"].as_str().unwrap_or("");
    assert!(error.contains("BlockingIOError"), "{forks}");
    // (Held still between execs, the children end while the session's next execs run.)
    assert!(
        holds_within(Duration::from_secs(10), || {
            assert_eq!(report(&mut server, &id, "'alive'")["result"], "'alive'");
            processes_carrying(&id).len() == 1
        }),
        "left: {:?}",
        processes_carrying(&id)
    );
    server.call("session_stop", json!({"session_id": id}));
    assert!(
        gone_within(&id, Duration::from_secs(10)),
        "left: {:?}",
        processes_carrying(&id)
    );
    let fresh = start(&mut server, json!({}));
    assert_eq!(report(&mut server, &fresh, "1+1")["result"], "2");
}

#[test]
fn a_thousand_quick_execs_all_answer_and_nothing_grows() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    report(&mut server, &id, "n = 0");
    let fds = |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let server_pid = server.pid();
    let before = (fds(server_pid), processes_carrying(&id).len());
    // The interpreter's own descriptors (no /proc in its view): those fstat accepts.
    let open_fds = "import os\ndef _open(fd):\n    try:\n        os.fstat(fd)\n        return True\n    except OSError:\n        return False\nsum(map(_open, range(1024)))";
    let session_fds = report(&mut server, &id, open_fds)["result"].clone();
    for i in 1..=1000u32 {
        let out = report(&mut server, &id, "n += 1\nn");
        assert_eq!(out["result"], i.to_string(), "{out}");
    }
    let after = (fds(server_pid), processes_carrying(&id).len());
    assert!(
        after.0 <= before.0 + 2,
        "server fds {before:?} -> {after:?}"
    );
    assert_eq!(
        after.1, before.1,
        "session processes {before:?} -> {after:?}"
    );
    assert_eq!(report(&mut server, &id, open_fds)["result"], session_fds);
    let listed = server.call("list_sessions", json!({}));
    assert_eq!(listed["structuredContent"]["sessions"][0]["execs"], 1003);
}

#[test]
fn an_unused_session_closes_after_the_idle_timeout() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &["--allow-inline-code", "--python-session-idle-timeout", "1"],
    );
    let id = start(&mut server, json!({}));
    assert!(!processes_carrying(&id).is_empty());
    assert!(gone_within(&id, Duration::from_secs(10)));
    let later = exec(&mut server, &id, "1");
    assert!(text(&later).contains("close after 1 s unused"), "{later}");
    // An exec longer than the idle timeout is not idle.
    let id = start(&mut server, json!({}));
    let long = report(&mut server, &id, "import time\ntime.sleep(2)\n'done'");
    assert_eq!(long["result"], "'done'", "{long}");
}

#[test]
fn the_per_caller_cap_refuses_with_a_hint_and_a_stop_makes_room() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &[
            "--allow-inline-code",
            "--max-python-sessions-per-caller",
            "2",
        ],
    );
    let first = start(&mut server, json!({}));
    start(&mut server, json!({}));
    let refused = server.call("session_start", json!({}));
    assert_eq!(refused["isError"], true, "{refused}");
    let said = text(&refused);
    assert!(said.contains("2 Python sessions open"), "{said}");
    assert!(said.contains("hint: close one with session_stop"), "{said}");
    server.call("session_stop", json!({"session_id": first}));
    start(&mut server, json!({}));
}

#[test]
fn bad_input_gets_clear_errors() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &["--allow-inline-code", "--max-code-bytes", "64"],
    );
    let outside = server.call("session_start", json!({"project": "../.."}));
    assert_eq!(outside["isError"], true, "{outside}");
    assert!(
        text(&outside).contains("outside the projects folder"),
        "{outside}"
    );
    let id = start(&mut server, json!({}));
    let long = exec(&mut server, &id, &"x".repeat(65));
    assert!(text(&long).contains("--max-code-bytes"), "{long}");
    let empty = exec(&mut server, &id, " ");
    assert!(text(&empty).contains("empty"), "{empty}");
    for bad in ["", "../../etc", "ses_\n", "SES_X"] {
        let reply = exec(&mut server, bad, "1");
        assert_eq!(reply["isError"], true, "{reply}");
        assert!(
            text(&reply).contains("no Python session with id"),
            "{reply}"
        );
    }
    let timeout = server.call(
        "session_exec",
        json!({"session_id": id, "code": "1", "timeout_seconds": -1}),
    );
    assert!(text(&timeout).contains("timeout_seconds"), "{timeout}");
}

#[test]
fn closing_the_server_kills_its_sessions() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    report(
        &mut server,
        &id,
        &format!(
            "import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', \
             'import time; time.sleep(600)', '{id}'])"
        ),
    );
    assert!(processes_carrying(&id).len() >= 2);
    let status = server.close();
    assert!(status.success(), "{status}");
    assert!(
        gone_within(&id, Duration::from_secs(5)),
        "left: {:?}",
        processes_carrying(&id)
    );
}

#[test]
fn the_audit_log_records_session_calls_without_code_or_output() {
    let (base, projects) = folder();
    let log = base.path().join("audit.jsonl");
    let log_flag = log.to_string_lossy().into_owned();
    let mut server = StdioServer::start(
        &projects,
        &["--allow-inline-code", "--audit-log", &log_flag],
    );
    let id = start(&mut server, json!({}));
    let out = report(
        &mut server,
        &id,
        "secret = 'PLANTED-CODE-VALUE'\nprint('PLANTED-OUTPUT')\nsecret.lower()",
    );
    assert_eq!(out["result"], "'planted-code-value'");
    server.call("session_stop", json!({"session_id": id}));
    drop(server);
    let written = std::fs::read_to_string(&log).unwrap();
    assert!(written.contains("\"session_exec\""), "{written}");
    assert!(written.contains("\"session_start\""), "{written}");
    for planted in ["PLANTED", "planted", "secret"] {
        assert!(!written.contains(planted), "{planted} in {written}");
    }
}

/// Over HTTP: a session outlives its MCP session (the same caller reconnects), and another
/// caller (an OAuth client) gets the same words as for an id that never existed.
#[tokio::test]
async fn a_session_outlives_a_reconnect_and_is_unknown_to_another_caller() {
    use pyrun_mcp_tests::http::{request, result_text, McpSession};
    use pyrun_mcp_tests::oauth::{approve, exchange_code, register_client};

    const TOKEN: &str = "sessions-test-token-0123456789";
    const OWNER: &str = "owner password for sessions";
    let (_base, projects) = folder();
    let server = pyrun_mcp_tests::ServerLaunch::new(
        pyrun_mcp_tests::bin_path("pyrun-mcp-server"),
        &projects,
    )
    .args(["--auth-token", TOKEN, "--allow-inline-code"])
    .args(["--oauth", "--oauth-owner-password", OWNER])
    .http();
    let call = |id: u64, tool: &str, arguments: Value| {
        request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    };

    let first = McpSession::open(&server, Some(TOKEN)).await;
    let started = first.call(&call(1, "session_start", json!({}))).await;
    let session_id = started["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let set = first
        .call(&call(
            2,
            "session_exec",
            json!({"session_id": session_id, "code": "x = 41"}),
        ))
        .await;
    assert_eq!(set["result"]["isError"], false, "{set}");
    drop(first);

    let second = McpSession::open(&server, Some(TOKEN)).await;
    let read = second
        .call(&call(
            3,
            "session_exec",
            json!({"session_id": session_id, "code": "x + 1"}),
        ))
        .await;
    assert_eq!(
        read["result"]["structuredContent"]["result"], "42",
        "{read}"
    );

    let redirect = "http://127.0.0.1:9/callback";
    let client_id = register_client(&server, "other caller", redirect).await;
    let code = approve(&server, &client_id, redirect, OWNER).await;
    let tokens = exchange_code(&server, &client_id, redirect, &code).await;
    let other_token = tokens["access_token"].as_str().expect("an access token");
    let other = McpSession::open(&server, Some(other_token)).await;
    let unknown_id = "ses_0123456789abcdef0123456789abcdef";
    for tool in ["session_exec", "session_stop"] {
        let foreign = other
            .call(&call(
                4,
                tool,
                json!({"session_id": session_id, "code": "x"}),
            ))
            .await;
        let unknown = other
            .call(&call(
                5,
                tool,
                json!({"session_id": unknown_id, "code": "x"}),
            ))
            .await;
        assert_eq!(foreign["result"]["isError"], true, "{foreign}");
        assert_eq!(
            result_text(&foreign).replace(&session_id, "ID"),
            result_text(&unknown).replace(unknown_id, "ID"),
        );
    }
    let listed = other.call(&call(6, "list_sessions", json!({}))).await;
    assert_eq!(
        listed["result"]["structuredContent"]["sessions"],
        json!([]),
        "{listed}"
    );
    // Untouched by the other caller.
    let still = second
        .call(&call(
            7,
            "session_exec",
            json!({"session_id": session_id, "code": "x"}),
        ))
        .await;
    assert_eq!(
        still["result"]["structuredContent"]["result"], "41",
        "{still}"
    );
}

#[test]
fn sessions_have_a_pool_of_their_own_and_the_server_cap_refuses_with_a_hint() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &[
            "--allow-inline-code",
            "--max-concurrent",
            "1",
            "--max-python-sessions",
            "1",
        ],
    );
    let id = start(&mut server, json!({}));
    // An exec under way holds no run permit: the one run slot is free for run_python_code.
    let busy = server.start_request(
        "tools/call",
        json!({"name": "session_exec", "arguments": {"session_id": id, "code": "import time\ntime.sleep(6)\n'slept'"}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let run = server.call("run_python_code", json!({"code": "print('ran')"}));
    assert_eq!(run["structuredContent"]["stdout"], "ran\n", "{run}");
    // Had the exec held the one permit, the run would have waited for its 6 s.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let slept = server.response(busy);
    assert_eq!(
        slept["result"]["structuredContent"]["result"], "'slept'",
        "{slept}"
    );

    let refused = server.call("session_start", json!({}));
    assert_eq!(refused["isError"], true, "{refused}");
    let said = text(&refused);
    assert!(
        said.contains("1 Python sessions are open on this server"),
        "{said}"
    );
    assert!(said.contains("--max-python-sessions"), "{said}");
}

#[test]
fn output_is_capped_per_stream_like_a_runs() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &["--allow-inline-code", "--max-output-bytes", "1000"],
    );
    let id = start(&mut server, json!({}));
    let out = report(
        &mut server,
        &id,
        "import os, sys\nprint('o' * 5000)\nprint('e' * 300, file=sys.stderr)\nos.write(2, b'r' * 5000)\n'x' * 5000",
    );
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1000, "{out}");
    assert_eq!(out["stdout_truncated"], true);
    let stderr = out["stderr"].as_str().unwrap();
    assert_eq!(stderr.len(), 1000, "{out}");
    assert!(stderr.starts_with(&"e".repeat(300)), "{out}");
    assert_eq!(out["stderr_truncated"], true);
    assert!(out["result"].as_str().unwrap().len() <= 1000, "{out}");
    // The next exec starts afresh.
    let next = report(&mut server, &id, "print('small')");
    assert_eq!(next["stdout"], "small\n", "{next}");
    assert_eq!(next["stderr"], "", "{next}");
    assert_eq!(next["stdout_truncated"], false);
}

#[test]
fn a_cancelled_exec_is_interrupted_and_the_session_lives_on() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({}));
    report(&mut server, &id, "state = 'kept'");
    let call = server.start_request(
        "tools/call",
        json!({"name": "session_exec", "arguments": {"session_id": id, "code": "import time\ntime.sleep(60)"}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    server.notify(
        "notifications/cancelled",
        json!({"requestId": call, "reason": "test"}),
    );
    assert_eq!(report(&mut server, &id, "state")["result"], "'kept'");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// The host's own `git status` in `dir` (any repository trusted, none above `stop` looked for).
fn host_git_status(dir: &std::path::Path, stop: &std::path::Path) {
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status"])
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", stop)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(std::process::Stdio::null())
        .output();
}

/// A session's code may plant a repository the user's own `git` would run (a `core.fsmonitor`),
/// and start a thread that plants it again whenever it is gone: each exec's end moves what the
/// session made to the quarantine (and says so), and between execs the session is held still,
/// so nothing it left running plants anything while nobody looks.
#[test]
fn what_a_session_plants_goes_after_each_exec_and_nothing_it_left_running_plants_between() {
    let (base, projects) = folder();
    let marker = base.path().join("ran");
    let mut server = StdioServer::start(&projects, ALLOW);
    let id = start(&mut server, json!({"project": "pkg"}));
    let code = format!(
        r#"
import os, threading, time
CONFIG = "[core]\n\tbare = false\n\tfsmonitor = touch {marker}; echo\n"
def plant(at):
    os.makedirs(at + "/objects", exist_ok=True)
    os.makedirs(at + "/refs/heads", exist_ok=True)
    with open(at + "/config", "w") as f: f.write(CONFIG)
    with open(at + "/HEAD", "w") as f: f.write("ref: refs/heads/main\n")
plant("sub/.git")
def again():
    while True:
        try:
            plant("later/.git")
        except OSError:
            pass
        time.sleep(0.02)
threading.Thread(target=again, daemon=True).start()
time.sleep(0.2)
"#,
        marker = marker.display()
    );
    let reply = exec(&mut server, &id, &code);
    assert_eq!(reply["isError"], false, "{reply}");
    let said = reply["structuredContent"]["quarantined"].to_string();
    for planted in ["pkg/sub/.git", "pkg/later/.git"] {
        assert!(said.contains(planted), "{planted} not moved: {reply}");
    }
    assert!(text(&reply).contains("quarantine"), "{reply}");
    // Between execs: held still, the thread plants nothing.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        !projects.join("pkg/later/.git").exists() && !projects.join("pkg/sub/.git").exists(),
        "a session planted between execs"
    );
    for dir in ["pkg/sub", "pkg/later"] {
        let dir = projects.join(dir);
        if dir.is_dir() {
            host_git_status(&dir, &projects);
        }
    }
    assert!(
        !marker.exists(),
        "the host's git ran what the session planted"
    );
    // The next exec lets it go on: the thread plants again, and that goes after the exec.
    let out = report(&mut server, &id, "time.sleep(0.2)");
    assert!(
        out["quarantined"].to_string().contains("pkg/later/.git"),
        "{out}"
    );
    assert!(!projects.join("pkg/later/.git").exists());
    assert_eq!(report(&mut server, &id, "1 + 1")["result"], "2");
}

//! Refusals that explain themselves, through the real server: a run that failed on the network
//! the server keeps off, or on a resource limit, gets a `hint` naming the setting (in its text and
//! its structured content); a `timeout_seconds` above the server's limit is said to be capped;
//! a run killed by a signal says which.

use serde_json::{json, Value};

use pyrun_mcp_tests::StdioServer;

use crate::util;

/// Runs `code` as `main.py` on a server started with `flags`; the tool result.
fn run(code: &str, flags: &[&str], arguments: Value) -> Value {
    let (dir, _) = util::project(&[("main.py", code)]);
    let mut server = StdioServer::start(dir.path(), flags);
    let mut arguments = arguments;
    arguments["file_name"] = json!("main.py");
    server.call("run_python", arguments)
}

fn text(result: &Value) -> String {
    pyrun_mcp_tests::stdio::text(result).to_owned()
}

/// The structured hint, which the text repeats on `hint:` lines.
fn hint(result: &Value) -> String {
    let hint = result["structuredContent"]["hint"]
        .as_str()
        .unwrap_or_else(|| panic!("no hint: {result}"))
        .to_owned();
    for line in hint.lines() {
        assert!(
            text(result).contains(&format!("hint: {line}")),
            "the text lacks the hint {line:?}: {result}"
        );
    }
    hint
}

#[cfg(target_os = "linux")]
#[test]
fn a_run_that_fails_on_the_network_that_is_off_names_allow_network() {
    let code = "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=5)\n";
    let result = run(code, &[], json!({}));
    assert_eq!(result["isError"], json!(false), "{result}");
    let hint = hint(&result);
    assert!(
        hint.contains("network is off") && hint.contains("--allow-network"),
        "{hint}"
    );
    // A failure that is not the network's gets no such hint; nor does output that only mentions
    // a refused connection in a run that went well.
    let result = run("raise ValueError('boom')\n", &[], json!({}));
    assert!(
        result["structuredContent"].get("hint").is_none(),
        "{result}"
    );
    let result = run("print('Connection refused')\n", &[], json!({}));
    assert!(
        result["structuredContent"].get("hint").is_none(),
        "{result}"
    );
}

#[test]
fn a_run_out_of_memory_names_the_memory_limit_and_its_setting() {
    let result = run(
        "b = bytearray(512 * 1024 * 1024)\n",
        &["--max-memory-mb", "128"],
        json!({}),
    );
    let hint = hint(&result);
    assert!(
        hint.contains("128 MB") && hint.contains("--max-memory-mb"),
        "{hint}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_run_out_of_processes_names_the_process_limit_and_its_setting() {
    let code = "import threading, time\n\
                threads = [threading.Thread(target=time.sleep, args=(2,)) for _ in range(40)]\n\
                [t.start() for t in threads]\n";
    let result = run(code, &["--max-processes", "8"], json!({}));
    let hint = hint(&result);
    assert!(
        hint.contains("8 processes") && hint.contains("--max-processes"),
        "{hint}"
    );
}

#[cfg(unix)]
#[test]
fn a_file_over_the_size_limit_names_the_limit_and_its_setting() {
    let code = "import os\n\
                with open(os.path.join(os.environ['PYRUN_OUTPUT_DIR'], 'big.bin'), 'wb') as f:\n\
                \x20   f.write(b'x' * (3 * 1024 * 1024))\n";
    let result = run(code, &["--max-file-size-mb", "1"], json!({}));
    let hint = hint(&result);
    assert!(
        hint.contains("1 MB per file") && hint.contains("--max-file-size-mb"),
        "{hint}"
    );
}

#[test]
fn output_over_the_cap_names_the_output_limit_and_its_setting() {
    let result = run(
        "print('x' * 5000)\n",
        &["--max-output-bytes", "1000"],
        json!({}),
    );
    let hint = hint(&result);
    assert!(
        hint.contains("1000 bytes") && hint.contains("--max-output-bytes"),
        "{hint}"
    );
}

#[test]
fn a_timeout_above_the_servers_limit_is_said_capped_and_the_timeout_names_the_setting() {
    let result = run(
        "import time\ntime.sleep(30)\n",
        &["--timeout", "2"],
        json!({"timeout_seconds": 100}),
    );
    assert_eq!(
        result["structuredContent"]["timed_out"],
        json!(true),
        "{result}"
    );
    let said = hint(&result);
    assert!(
        said.contains("timeout_seconds 100 was capped to the server's limit of 2 s"),
        "{said}"
    );
    assert!(
        said.contains("time limit of 2 s") && said.contains("--timeout (PYTHON_TIMEOUT)"),
        "{said}"
    );
    // A run that ends in time still says its timeout was capped.
    let result = run(
        "print('quick')\n",
        &["--timeout", "5"],
        json!({"timeout_seconds": 60}),
    );
    assert!(
        hint(&result).contains("capped to the server's limit of 5 s"),
        "{result}"
    );
    // Within the limit: nothing to say.
    let result = run(
        "print('quick')\n",
        &["--timeout", "5"],
        json!({"timeout_seconds": 3}),
    );
    assert!(
        result["structuredContent"].get("hint").is_none(),
        "{result}"
    );
}

#[cfg(unix)]
#[test]
fn a_run_killed_by_a_signal_names_the_signal() {
    let result = run(
        "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
        &[],
        json!({}),
    );
    assert!(
        text(&result).contains("[Process was killed by signal SIGSEGV (11)]"),
        "{result}"
    );
    // The client names it from the structured result.
    assert_eq!(result["structuredContent"]["signal"], json!(11), "{result}");
}

#[test]
fn a_background_run_whose_timeout_was_capped_says_so_when_it_starts() {
    let (dir, _) = util::project(&[("main.py", "print('hi')\n")]);
    let mut server = StdioServer::start(dir.path(), &["--background-timeout", "5"]);
    let started = server.call(
        "start_python",
        json!({"file_name": "main.py", "timeout_seconds": 100}),
    );
    assert_eq!(started["isError"], json!(false), "{started}");
    let expected =
        "timeout_seconds 100 was capped to the server's limit of 5 s (--background-timeout";
    assert!(
        started["structuredContent"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains(expected)),
        "{started}"
    );
    assert!(
        text(&started).contains(&format!("hint: {expected}")),
        "{started}"
    );
}

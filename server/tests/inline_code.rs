//! `run_python_code` end to end over stdio with the real binary: offered only with
//! `--allow-inline-code`; the code runs from the run's scratch (never the projects folder) under
//! the same sandbox, limits and result shape as `run_python`; bad code is a clear tool error.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

const ALLOW: &[&str] = &["--allow-inline-code"];

/// `base/p` is the projects folder (with `data/input.txt`, `data/helper.py`, `hello.py`);
/// `base/canary.txt` lies outside it.
fn folder() -> (tempfile::TempDir, PathBuf) {
    TempProjects::named("p")
        .file("data/input.txt", "forty-two\n")
        .file("data/helper.py", "ANSWER = 42\n")
        .file("hello.py", "print('hi')\n")
        .outside("canary.txt", "CANARY-OUTSIDE")
        .into_parts()
}

fn code(server: &mut StdioServer, arguments: Value) -> Value {
    server.call("run_python_code", arguments)
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

/// Every file below `dir`, relative.
fn files_below(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    found.sort();
    found
}

#[test]
fn without_the_flag_the_tool_is_neither_listed_nor_callable() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let listed = names(&mut server);
    assert!(listed.contains(&"run_python".to_owned()), "{listed:?}");
    assert!(
        !listed.contains(&"run_python_code".to_owned()),
        "{listed:?}"
    );
    let reply = server.request(
        "tools/call",
        json!({"name": "run_python_code", "arguments": {"code": "print('RAN')"}}),
    );
    assert!(!reply.to_string().contains("RAN"), "{reply}");
    let error = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        error.contains("not found") || error.contains("unknown"),
        "{reply}"
    );
    // The same refusal as any tool the server does not have.
    let other = server.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(reply["error"]["code"], other["error"]["code"], "{other}");
}

#[test]
fn with_the_flag_the_tool_is_listed_with_run_pythons_result_shape() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let reply = server.request("tools/list", json!({}));
    let tools = reply["result"]["tools"].as_array().unwrap();
    let find = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();
    let inline = find("run_python_code");
    assert_eq!(
        inline["inputSchema"]["required"],
        json!(["code"]),
        "{inline}"
    );
    for arg in ["code", "project", "args", "stdin", "timeout_seconds"] {
        assert!(
            inline["inputSchema"]["properties"].get(arg).is_some(),
            "{arg}: {inline}"
        );
    }
    assert_eq!(inline["outputSchema"], find("run_python")["outputSchema"]);
}

#[test]
fn code_runs_with_its_args_and_stdin_and_returns_output_and_exit_code() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let source = "import sys\nprint('args', sys.argv[1:])\nprint('in', sys.stdin.read().strip())\n\
                  print('oops', file=sys.stderr)\nsys.exit(3)\n";
    let result = code(
        &mut server,
        json!({"code": source, "args": ["a b", "c"], "stdin": "fed"}),
    );
    assert_eq!(result["isError"], false, "{result}");
    let report = &result["structuredContent"];
    assert_eq!(report["stdout"], "args ['a b', 'c']\nin fed\n", "{result}");
    assert_eq!(report["stderr"], "oops\n", "{result}");
    assert_eq!(report["exit_code"], 3, "{result}");
    assert_eq!(report["timed_out"], false);
    assert!(
        text(&result).ends_with("[Process exited with code 3]"),
        "{result}"
    );
    // The same layers protect it as a run_python of a file.
    let file = server.call("run_python", json!({"file_name": "hello.py"}));
    assert_eq!(
        report["sandbox"], file["structuredContent"]["sandbox"],
        "{file}"
    );
    // Files left in PYRUN_OUTPUT_DIR come back as artifacts, as for run_python.
    let made = code(
        &mut server,
        json!({"code": "import os\nopen(os.path.join(os.environ['PYRUN_OUTPUT_DIR'], 'r.txt'), 'w').write('x')\n"}),
    );
    assert_eq!(
        made["structuredContent"]["artifacts"][0]["name"], "r.txt",
        "{made}"
    );
}

#[test]
fn project_is_the_working_directory_and_where_imports_look_first() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let source = "import helper\nprint(open('input.txt').read().strip(), helper.ANSWER)\n";
    let result = code(&mut server, json!({"code": source, "project": "data"}));
    assert_eq!(text(&result), "forty-two 42\n", "{result}");
    // The neutral form and the folder itself work too.
    let result = code(
        &mut server,
        json!({"code": "print(open('data/input.txt').read().strip())", "project": ""}),
    );
    assert_eq!(text(&result), "forty-two\n", "{result}");
    // Without a project: its own empty scratch, where the projects folder's files are not.
    let result = code(
        &mut server,
        json!({"code": "import os\nprint(os.path.exists('hello.py'), os.path.exists('data'))"}),
    );
    assert_eq!(text(&result), "False False\n", "{result}");
}

#[test]
fn a_project_outside_the_folder_is_refused_as_list_python_files_refuses_it() {
    let (_base, projects) = folder();
    let root = projects.parent().unwrap().to_path_buf();
    let mut server = StdioServer::start(&projects, ALLOW);
    let probes = [
        "..".to_owned(),
        "../p/../..".to_owned(),
        "/etc".to_owned(),
        root.display().to_string(),
        "missing".to_owned(),
        "hello.py".to_owned(),
        "data\0x".to_owned(),
    ];
    for probe in &probes {
        let ran = code(
            &mut server,
            json!({"code": "print('RAN')", "project": probe}),
        );
        let listed = server.call("list_python_files", json!({"directory": probe}));
        assert_eq!(ran["isError"], true, "{probe}: {ran}");
        assert_eq!(listed["isError"], true, "{probe}: {listed}");
        assert_eq!(text(&ran), text(&listed), "{probe}");
        assert!(
            !text(&ran).contains(root.to_str().unwrap()) || probe.contains(root.to_str().unwrap()),
            "{ran}"
        );
    }
}

#[test]
fn the_code_never_lands_in_the_projects_folder() {
    let (_base, projects) = folder();
    let before = files_below(&projects);
    let mut server = StdioServer::start(&projects, ALLOW);
    let source =
        "import os, sys\nprint(os.path.dirname(os.path.abspath(sys.argv[0])) == os.getcwd())\n\
                  print(sorted(os.listdir('.')))\n";
    for project in [json!(null), json!(""), json!("data")] {
        let result = code(&mut server, json!({"code": source, "project": project}));
        assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
        let out = result["structuredContent"]["stdout"].as_str().unwrap();
        // The code's own file lies in the scratch, not in the folder it works in.
        let (beside, listed) = if project.is_null() {
            ("True", true)
        } else {
            ("False", false)
        };
        assert!(out.starts_with(beside), "{project}: {out}");
        assert_eq!(out.contains("_pyrun_inline.py"), listed, "{project}: {out}");
    }
    assert_eq!(files_below(&projects), before);
}

#[test]
fn oversized_empty_and_nul_code_are_clear_tool_errors() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &["--allow-inline-code", "--max-code-bytes", "100"],
    );
    let at_cap = format!("print(1){}", " ".repeat(92));
    assert_eq!(at_cap.len(), 100);
    let ran = code(&mut server, json!({"code": at_cap}));
    assert_eq!(text(&ran), "1\n", "{ran}");
    let over = code(&mut server, json!({"code": format!("{at_cap} ")}));
    assert_eq!(over["isError"], true, "{over}");
    assert!(
        text(&over).contains("101 bytes, more than the 100 bytes"),
        "{over}"
    );
    assert!(text(&over).contains("--max-code-bytes"), "{over}");
    for (bad, says) in [("", "empty"), ("  \n", "empty"), ("print(1)\0", "NUL byte")] {
        let refused = code(&mut server, json!({"code": bad}));
        assert_eq!(refused["isError"], true, "{bad:?}: {refused}");
        assert!(text(&refused).contains(says), "{bad:?}: {refused}");
    }
    let wrong_type = code(&mut server, json!({"code": 42}));
    assert_eq!(wrong_type["isError"], true, "{wrong_type}");
    let missing = code(&mut server, json!({}));
    assert_eq!(missing["isError"], true, "{missing}");
    let bad_timeout = code(&mut server, json!({"code": "1", "timeout_seconds": 0}));
    assert_eq!(bad_timeout["isError"], true, "{bad_timeout}");
    // The server serves on.
    assert_eq!(text(&code(&mut server, json!({"code": "print(2)"}))), "2\n");
}

#[test]
fn code_that_never_ends_is_killed_at_its_timeout() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, ALLOW);
    let started = Instant::now();
    let result = code(
        &mut server,
        json!({"code": "print('going', flush=True)\nwhile True: pass", "timeout_seconds": 1}),
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let report = &result["structuredContent"];
    assert_eq!(report["timed_out"], true, "{result}");
    assert_eq!(report["exit_code"], Value::Null, "{result}");
    assert_eq!(report["stdout"], "going\n", "{result}");
    assert!(text(&result).contains("[Timed out after 1 s]"), "{result}");
    assert_eq!(text(&code(&mut server, json!({"code": "print(3)"}))), "3\n");
}

fn assert_traceback_is_neutral(extra: &[&str]) {
    let (base, projects) = folder();
    let mut args = ALLOW.to_vec();
    args.extend_from_slice(extra);
    let mut server = StdioServer::start(&projects, &args);
    for project in [json!(null), json!("data")] {
        let result = code(
            &mut server,
            json!({"code": "x = 1\n1 / 0\n", "project": project}),
        );
        let stderr = result["structuredContent"]["stderr"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(stderr.contains("ZeroDivisionError"), "{stderr}");
        assert!(stderr.contains("_pyrun_inline.py\", line 2"), "{stderr}");
        for host in [
            base.path().to_str().unwrap(),
            projects.to_str().unwrap(),
            "pyrun-mcp-",
        ] {
            assert!(!stderr.contains(host), "{host} in {stderr}");
            assert!(!text(&result).contains(host), "{host} in {result}");
        }
    }
}

#[test]
fn a_traceback_names_no_host_path() {
    assert_traceback_is_neutral(&[]);
}

#[test]
fn a_traceback_names_no_host_path_with_the_sandbox_off_either() {
    assert_traceback_is_neutral(&["--sandbox", "off"]);
}

#[test]
fn the_sandbox_still_applies_to_inline_code() {
    let (base, projects) = folder();
    let root = dunce::canonicalize(base.path()).unwrap();
    let canary = root.join("canary.txt");
    let escape = root.join("escape.txt");
    let mut server = StdioServer::start(&projects, ALLOW);
    let source = format!(
        "def attempt(name, f):\n    try:\n        f()\n        print(name, 'DONE')\n    except OSError as e:\n        print(name, 'REFUSED')\n\
         attempt('read_canary', lambda: print(open({canary:?}).read()))\n\
         attempt('write_outside', lambda: open({escape:?}, 'w').write('x'))\n\
         attempt('write_home', lambda: open('/home/pyrun_inline_escape', 'w').write('x'))\n",
        canary = canary.to_str().unwrap(),
        escape = escape.to_str().unwrap(),
    );
    for project in [json!(null), json!("data")] {
        let result = code(&mut server, json!({"code": source, "project": project}));
        let out = result["structuredContent"]["stdout"].as_str().unwrap();
        assert_eq!(
            out, "read_canary REFUSED\nwrite_outside REFUSED\nwrite_home REFUSED\n",
            "{result}"
        );
        let layers = result["structuredContent"]["sandbox"].as_array().unwrap();
        assert!(!layers.is_empty(), "{result}");
    }
    assert!(!escape.exists());
    assert!(!Path::new("/home/pyrun_inline_escape").exists());
}

#[test]
fn the_audit_log_records_the_call_and_the_code_size_never_the_code() {
    let (_base, projects) = folder();
    let state = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(
        &projects,
        &[
            "--allow-inline-code",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
    );
    let source = "print('INLINE-SECRET-7c1')\n";
    let result = code(
        &mut server,
        json!({"code": source, "args": ["ARG-SECRET-9"]}),
    );
    assert_eq!(text(&result), "INLINE-SECRET-7c1\n", "{result}");
    let refused = code(&mut server, json!({"code": "", "project": "data"}));
    assert_eq!(refused["isError"], true);
    drop(server);
    let log = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert!(!log.contains("SECRET"), "{log}");
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert_eq!(lines[0]["tool"], "run_python_code");
    assert_eq!(lines[0]["code_bytes"], source.len());
    assert_eq!(lines[0]["arg_count"], 1);
    assert_eq!(lines[0]["exit_code"], 0);
    assert_eq!(lines[0]["refused"], false);
    assert_eq!(lines[1]["code_bytes"], 0);
    assert_eq!(lines[1]["refused"], true);
}

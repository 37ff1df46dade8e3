//! The Wine smoke's stand-in interpreter (`scripts/windows/python.c`) answers everything the
//! server asks an interpreter at start and at a run's start. The Wine smoke
//! (`scripts/test-windows.sh`) is too slow for every change, and it went red unseen once: the
//! server gained a start-up question (`--version`) the stand-in could not answer. Here the same C
//! file, built for this machine, is the real server's `--python`: the server must come up, list
//! its tools and files, and run a script through it, and the stand-in must have been asked
//! nothing it had no answer for (it notes each such question in `unanswered.txt` beside itself).
//! Without a C compiler (`CC`, else `cc`) the test says so and passes.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pyrun_mcp_tests::paths::bin_path;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::{ServerLaunch, TempProjects};
use serde_json::json;

/// The stand-in's source in the repository.
const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/windows/python.c");

/// The stand-in built for this machine as `DIR/python`, or `None` (said on stderr) when no C
/// compiler is there.
fn build_standin(dir: &Path) -> Option<PathBuf> {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = dir.join("python");
    let built = Command::new(&cc)
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(SOURCE)
        .stdin(Stdio::null())
        .output();
    match built {
        Err(e) => {
            eprintln!(
                "SKIPPED: no C compiler ({}: {e}); set CC to one to check the Wine smoke's \
                 stand-in interpreter against the server's start-up questions",
                cc.to_string_lossy()
            );
            None
        }
        Ok(done) => {
            assert!(
                done.status.success(),
                "{} could not build scripts/windows/python.c: {}",
                cc.to_string_lossy(),
                String::from_utf8_lossy(&done.stderr)
            );
            Some(out)
        }
    }
}

#[test]
fn the_wine_smokes_stand_in_interpreter_answers_every_question_the_server_asks() {
    let tools = tempfile::tempdir().unwrap();
    let Some(python) = build_standin(tools.path()) else {
        return;
    };
    // The smoke's own script: its arguments and lines echoed, its exit code obeyed.
    let projects = TempProjects::named("p").file(
        "app/hello.py",
        "print(\"hello from windows\")\n#standin exit 3\n",
    );
    // As the smoke starts it (no warm runs: Windows has none), its stderr kept for the message.
    let log = tools.path().join("server.log");
    let mut cmd = ServerLaunch::new(bin_path("pyrun-mcp-server"), projects.path())
        .args(["--warm", "off", "--python"])
        .args([&python])
        .command("stdio", None);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
    let child = cmd.spawn().expect("start the server");
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut server = StdioServer::attach(child).unwrap_or_else(|e| {
        panic!(
            "the server did not come up with the stand-in as its interpreter: {e}\nits stderr:\n{}",
            server_log()
        )
    });

    let tools_list = server.request("tools/list", json!({}));
    let names: Vec<&str> = tools_list["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"run_python"), "{tools_list}");
    let files = server.call("list_python_files", json!({}));
    assert!(text(&files).contains("app/hello.py"), "{files}");
    let run = server.call(
        "run_python",
        json!({"file_name": "app/hello.py", "args": ["one", "two words"]}),
    );
    let structured = &run["structuredContent"];
    let stdout = structured["stdout"].as_str().unwrap_or_default();
    assert_eq!(
        structured["exit_code"],
        json!(3),
        "{run}\nserver stderr:\n{}",
        server_log()
    );
    assert!(
        stdout.contains("ARGV two words") && stdout.contains("hello from windows"),
        "{run}"
    );
    server.close();

    let unanswered = std::fs::read_to_string(tools.path().join("unanswered.txt"));
    assert!(
        unanswered.is_err(),
        "the server asked the stand-in what it cannot answer: teach scripts/windows/python.c \
         the answer (and run scripts/test-windows.sh):\n{}",
        unanswered.unwrap_or_default()
    );
}

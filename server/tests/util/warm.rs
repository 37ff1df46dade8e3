//! Attacks tried against both ways a run starts: cold (`--warm off`: the interpreter started
//! for the run) and warm (the run handed to an interpreter the server started ahead of it, in
//! the run's own sandbox). A warm attempt first makes the server start a spare for the folder
//! (a harmless call of the same kind), waits until that spare waits for its job, then makes the
//! hostile call and asserts its result says `"warm": true`: a test cannot pass warm by
//! accident of a cold start.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use pyrun_mcp_tests::stdio::StdioServer;
use serde_json::{json, Value};

/// The longest wait for a spare to get ready (it imports the stdlib defaults: well under a
/// second on an idle machine).
const SPARE_READY_WITHIN: Duration = Duration::from_secs(10);

/// The harmless script a warm attempt runs first in the payload's folder.
pub const WARMUP_FILE: &str = "_warmup.py";

/// How the attacked run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `--warm off`: every run's interpreter is started for it.
    Cold,
    /// The run is handed to a spare started ahead of it.
    Warm,
}

impl Start {
    /// Both, cold first.
    pub const BOTH: [Start; 2] = [Start::Cold, Start::Warm];

    /// `extra` with `--warm off` for a cold server.
    pub fn flags<'a>(self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut flags = extra.to_vec();
        if self == Start::Cold {
            flags.extend(["--warm", "off"]);
        }
        flags
    }

    /// A stdio server on `projects` that starts runs this way.
    pub fn server(self, projects: &Path, extra: &[&str]) -> StdioServer {
        StdioServer::start(projects, &self.flags(extra))
    }

    /// Like [`Start::server`], the server running as `uid` when given.
    pub fn server_as(self, projects: &Path, extra: &[&str], uid: Option<u32>) -> StdioServer {
        StdioServer::start_as(projects, &self.flags(extra), uid)
    }

    /// `run_python` of `file` (relative to the projects folder `projects`) with `args`. Warm:
    /// a harmless script of the same folder runs first ([`WARMUP_FILE`], written there when
    /// missing), and the result must say warm.
    pub fn run(
        self,
        server: &mut StdioServer,
        projects: &Path,
        file: &str,
        args: &[&str],
    ) -> Value {
        self.call(
            server,
            "run_python",
            json!({"file_name": file, "args": args}),
            json!({"file_name": warmup_beside(projects, file)}),
        )
    }

    /// `tool` with `arguments`; warm: `warmup` (a harmless call of the same kind, folder and
    /// caller) first, then a wait for the spare it left, and the result must say warm.
    pub fn call(
        self,
        server: &mut StdioServer,
        tool: &str,
        arguments: Value,
        warmup: Value,
    ) -> Value {
        if self == Start::Warm {
            warm_up(server, warmup);
        }
        let result = server.call(tool, arguments);
        self.check(&result["structuredContent"], &result);
        result
    }

    /// Asserts a result's structured content says this start (`warm` true only when warm).
    pub fn check(self, structured: &Value, whole: &Value) {
        assert_eq!(
            structured["warm"].as_bool(),
            Some(self == Start::Warm),
            "the run did not start {self:?}: {whole}"
        );
    }
}

/// Makes `server` start a spare of `warmup`'s kind — `run_python`'s arguments, or
/// `run_python_code`'s (with `code`) — and waits until a new one waits for its job.
pub fn warm_up(server: &mut StdioServer, warmup: Value) {
    let warmup_tool = if warmup.get("code").is_some() {
        "run_python_code"
    } else {
        "run_python"
    };
    let before = waiting_spares(server.pid());
    let result = server.call(warmup_tool, warmup.clone());
    assert_eq!(result["isError"], false, "the warm-up failed: {result}");
    // Another key's spare may get ready meanwhile: only one of this kind counts, once the
    // server has read its READY (it keeps the spare in the same step, without waiting).
    let ready = pyrun_mcp_tests::procs::holds_within(SPARE_READY_WITHIN, || {
        waiting_spares(server.pid())
            .difference(&before)
            .any(|&pid| of_kind(pid, &warmup) && ready_was_read(pid))
    });
    assert!(
        ready,
        "no warm interpreter got ready within {SPARE_READY_WITHIN:?} after {warmup}"
    );
}

/// Waits (bounded) until the server holds a spare ready for runs like `call` (see [`of_kind`])
/// whose READY it has read; false when none got ready in time. A test that knows a run of the
/// kind happened (so a spare is on its way) calls this instead of repeating the run until warm.
pub fn wait_for_spare(server: u32, call: &Value) -> bool {
    pyrun_mcp_tests::procs::holds_within(SPARE_READY_WITHIN, || {
        waiting_spares(server)
            .into_iter()
            .any(|pid| of_kind(pid, call) && ready_was_read(pid))
    })
}

/// Whether the spare `pid` serves runs like `call` (`run_python`'s or `run_python_code`'s
/// arguments): its working folder as runs see it, and for inline code in a project, that folder
/// first on its `PYTHONPATH` (a script's spare has only the support folder there).
pub fn of_kind(pid: u32, call: &Value) -> bool {
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let python_path = environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"PYTHONPATH="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    let first_import = python_path.split(':').next().unwrap_or("");
    let (wanted, inline) = match (call["file_name"].as_str(), call["project"].as_str()) {
        (Some(file), _) => {
            let folder = Path::new(file).parent().unwrap_or(Path::new(""));
            (Path::new("/projects").join(folder), false)
        }
        (None, Some(project)) => (Path::new("/projects").join(project), true),
        (None, None) => return cwd == Path::new("/tmp"),
    };
    let wanted = wanted.to_string_lossy();
    let wanted = wanted.trim_end_matches('/');
    cwd == Path::new(wanted) && (first_import == wanted) == inline
}

/// Whether the server has read all the spare `pid` wrote on its stdout (its READY): the pipe,
/// opened again through /proc without reading from it, holds nothing.
fn ready_was_read(pid: u32) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/1"));
    let read = pipe.is_ok_and(|pipe| rustix::io::ioctl_fionread(&pipe).is_ok_and(|n| n == 0));
    if read {
        // The server's task keeps the spare right after that read, in the same step.
        std::thread::sleep(Duration::from_millis(50));
    }
    read
}

/// The harmless script beside `file` (written on the host when missing), relative to the
/// projects folder.
pub fn warmup_beside(projects: &Path, file: &str) -> String {
    let folder = Path::new(file).parent().unwrap_or(Path::new(""));
    let warmup = folder.join(WARMUP_FILE);
    let host = projects.join(&warmup);
    if !host.exists() {
        std::fs::write(&host, "pass\n").unwrap();
    }
    warmup.to_str().unwrap().to_owned()
}

/// The warm interpreters under the server that wait for their job: the driver, asleep in a read
/// of its job pipe or held stopped there, two levels down (the server, the run's pid 1, the
/// interpreter).
pub fn waiting_spares(server: u32) -> BTreeSet<u32> {
    descendants(server)
        .into_iter()
        .filter(|&pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let driver = String::from_utf8_lossy(&cmdline).contains("_pyrun_warm.py");
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            let waits = wchan.contains("pipe_read") || wchan.contains("do_signal_stop");
            driver && waits && pyrun_mcp_tests::procs::alive(pid)
        })
        .collect()
}

/// Every live process below `pid` (children of all its threads, recursively).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut stack = vec![pid];
    while let Some(parent) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                stack.push(child);
            }
        }
    }
    found
}

/// Waits (bounded) until no process is left under `server` but its waiting spares, and returns
/// what else is there.
pub fn left_besides_spares(server: u32, within: Duration) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let spares = waiting_spares(server);
        let mut spare_trees: BTreeSet<u32> = BTreeSet::new();
        for pid in descendants(server) {
            if spares.contains(&pid) || descendants(pid).iter().any(|d| spares.contains(d)) {
                spare_trees.insert(pid);
            }
        }
        let others: Vec<u32> = descendants(server)
            .into_iter()
            .filter(|pid| !spare_trees.contains(pid) && pyrun_mcp_tests::procs::alive(*pid))
            .collect();
        if others.is_empty() || start.elapsed() > within {
            return others;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

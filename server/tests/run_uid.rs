//! A root server's runs, background runs and sessions hold no kernel uid 0: they run under a
//! kernel uid of their own, files they make in the projects folder belong to the folder's owner,
//! and a file of another user there stays out of their reach. Tried through the real binary;
//! the run's processes are found from outside by a marker of the test's own in their command
//! lines, and no other process is touched.
#![cfg(target_os = "linux")]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::util::warm::{self, Start};
use pyrun_mcp_tests::stdio::StdioServer;
use serde_json::{json, Value};

/// Filesystems whose folders cannot be idmapped: there, the server keeps today's behaviour.
const NO_IDMAP: [u64; 3] = [
    0x794c_7630, /* overlayfs */
    0x6969,      /* nfs */
    0x0102_1997, /* 9p */
];

/// Why this test cannot prove anything here, if it cannot.
fn cannot_prove(projects: &Path) -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("the server does not run as root");
    }
    let fs = rustix::fs::statfs(projects).ok()?;
    NO_IDMAP
        .contains(&(fs.f_type as u64))
        .then_some("the projects folder's filesystem cannot be idmapped")
}

/// Prints what the run is and may do, then waits for `stop` beside it (a background run holds
/// its processes for the test to look at).
const PROBE: &str = r#"
import json, os, sys, time
def attempt(f):
    try:
        return f()
    except OSError as e:
        return "errno %d" % e.errno
with open("made-" + sys.argv[2] + ".txt", "w") as f:
    f.write("made")
print(json.dumps({
    "uid": os.getuid(),
    "groups": os.getgroups(),
    "mine": attempt(lambda: open("mine.txt").read()),
    "other": attempt(lambda: open("other.txt").read()),
    "tmp": attempt(lambda: open("/tmp/t.txt", "w").write("t")),
    "shm": attempt(lambda: open("/dev/shm/s", "w").write("s")),
}), flush=True)
if sys.argv[3] == "wait":
    for _ in range(400):
        if os.path.exists("stop"):
            break
        time.sleep(0.05)
"#;

/// The parent of `pid` as the host sees it.
fn parent_of(pid: &str) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_default()
}

/// Kernel uids (real, effective, saved, fs) of `pid`.
fn kernel_uids(pid: &str) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:").map(str::to_string))
        .map(|ids| ids.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Every live process whose command line contains `needle`, and its parent as the host sees
/// it (the run's pid 1) unless that is the server.
fn run_processes(needle: &str, server: u32) -> Vec<String> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if pid.parse::<u32>().is_err() {
            continue;
        }
        let line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&line)
            .replace('\0', " ")
            .contains(needle)
        {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_string));
        pids.push(pid);
        if let Some(parent) = parent.filter(|p| *p != server.to_string() && *p != "1") {
            pids.push(parent);
        }
    }
    pids
}

fn report(result: &Value) -> Value {
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
    let line = stdout.lines().find(|l| l.starts_with('{')).unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no report in {result}: {e}"))
}

fn assert_confined(report: &Value, what: &str) {
    assert_eq!(report["uid"], json!(65534), "{what}: {report}");
    assert_eq!(report["groups"], json!([]), "{what}: {report}");
    assert_eq!(report["mine"], json!("the owner's"), "{what}: {report}");
    assert_eq!(report["other"], json!("errno 13"), "{what}: {report}");
    assert_eq!(report["tmp"], json!(1), "{what}: {report}");
    assert_eq!(report["shm"], json!(1), "{what}: {report}");
}

fn assert_made_by_owner(project: &Path, marker: &str) {
    let made = std::fs::metadata(project.join(format!("made-{marker}.txt")))
        .unwrap_or_else(|e| panic!("{marker} made no file: {e}"));
    let owner = std::fs::metadata(project).expect("the project");
    assert_eq!(
        (made.uid(), made.gid()),
        (owner.uid(), owner.gid()),
        "{marker}'s file does not belong to the folder's owner"
    );
}

#[test]
fn a_root_servers_runs_and_sessions_have_a_kernel_uid_of_their_own_and_make_the_folder_owners_files(
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("app");
    std::fs::create_dir(&project).expect("app/");
    if let Some(why) = cannot_prove(dir.path()) {
        eprintln!("SKIP: {why}");
        return;
    }
    std::fs::write(project.join("probe.py"), PROBE).expect("probe.py");
    std::fs::write(project.join("mine.txt"), "the owner's").expect("mine.txt");
    std::fs::set_permissions(
        project.join("mine.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod mine.txt");
    // Another user's secret inside the run's own project: "others" to the run.
    let other = project.join("other.txt");
    std::fs::write(&other, "another user's secret").expect("other.txt");
    std::os::unix::fs::chown(&other, Some(12345), Some(12345)).expect("chown other.txt");
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    for start in Start::BOTH {
        let marker = format!("pyrun-kuid-{stamp}-{start:?}");
        let _ = std::fs::remove_file(project.join("stop"));
        let mut server = start.server(dir.path(), &["--allow-inline-code"]);
        let warmup = json!({"file_name": warm::warmup_beside(dir.path(), "app/probe.py")});

        let plain = start.call(
            &mut server,
            "run_python",
            json!({"file_name": "app/probe.py", "args": ["--marker", "plain", "no"]}),
            warmup.clone(),
        );
        let layers = plain["structuredContent"]["sandbox"].to_string();
        assert!(layers.contains("run-uid"), "no run-uid layer: {plain}");
        assert_confined(&report(&plain), "a run");
        assert_made_by_owner(&project, "plain");

        // A background run waits: its processes are looked at from outside. A warm run's
        // interpreter carries the driver's command line, not the script's: it is the spare that
        // waited for the run, and the run's pid 1 its parent.
        let mut spare = Vec::new();
        if start == Start::Warm {
            warm::warm_up(&mut server, warmup.clone());
            for pid in warm::waiting_spares(server.pid()) {
                if warm::of_kind(pid, &warmup) {
                    spare.push(pid.to_string());
                    spare.push(parent_of(&pid.to_string()));
                }
            }
            assert_eq!(spare.len(), 2, "one spare for app/: {spare:?}");
        }
        let started = server.call(
            "start_python",
            json!({"file_name": "app/probe.py", "args": ["--marker", marker, "wait"]}),
        );
        assert!(started["isError"] != json!(true), "{started}");
        let deadline = Instant::now() + Duration::from_secs(20);
        let made = project.join(format!("made-{marker}.txt"));
        while !made.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut pids = Vec::new();
        while pids.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            pids = match start {
                Start::Cold => run_processes(&marker, server.pid()),
                Start::Warm => spare.clone(),
            };
        }
        let uids: Vec<(String, Vec<String>)> = pids
            .iter()
            .map(|pid| (pid.clone(), kernel_uids(pid)))
            .collect();
        std::fs::write(project.join("stop"), "").expect("stop");
        assert!(pids.len() >= 2, "the run's pid 1 and interpreter: {pids:?}");
        for (pid, ids) in &uids {
            assert_eq!(ids.len(), 4, "{pid}: {uids:?}");
            assert!(
                ids.iter().all(|id| id != "0" && *id == ids[0]),
                "a run's process holds kernel uid 0 or mixed ids: {uids:?}"
            );
        }
        assert_made_by_owner(&project, &marker);
        // Those were the run's processes: it ran as `start` says.
        let run_id = started["structuredContent"]["run_id"]
            .as_str()
            .unwrap_or("");
        let ended = loop {
            let state = server.call("get_run", json!({"run_id": run_id, "wait_seconds": 10}));
            let status = state["structuredContent"]["status"].as_str().unwrap_or("");
            if !matches!(status, "running" | "queued") || Instant::now() > deadline {
                break state;
            }
        };
        start.check(&ended["structuredContent"], &ended);

        // A session's interpreter: the same uid, the same reach.
        let session = server.call("session_start", json!({"project": "app"}));
        let id = session["structuredContent"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {session}"))
            .to_string();
        let code = "import sys\nsys.argv = ['probe.py', '--marker', 'session', 'no']\n\
                    exec(open('probe.py').read())\n";
        let reply = server.call("session_exec", json!({"session_id": id, "code": code}));
        assert_confined(&report(&reply), "a session");
        assert_made_by_owner(&project, "session");
        server.call("session_stop", json!({"session_id": id}));
        server.close();
    }
}

#[test]
fn a_root_servers_install_runs_under_the_runs_uid_and_its_venv_belongs_to_the_folders_owner() {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("app");
    std::fs::create_dir(&project).expect("app/");
    if let Some(why) = cannot_prove(dir.path()) {
        eprintln!("SKIP: {why}");
        return;
    }
    let index = pyrun_mcp_tests::PackageIndex::start();
    let url = index.url();
    // pip (not uv): its steps take long enough to be seen from outside.
    let mut server = StdioServer::start(
        dir.path(),
        &["--allow-install", "--uv", "off", "--package-index", &url],
    );
    let venv = project.join(".venv");
    let needle = venv.to_string_lossy().into_owned();
    let id = server.start_request(
        "tools/call",
        json!({"name": "install_packages",
               "arguments": {"project": "app", "packages": ["pyrunalpha"]}}),
    );
    // Every installer process seen while the install lasts, with its kernel uids.
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !venv.join("lib").exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    while Instant::now() < deadline && seen.len() < 4 {
        for pid in run_processes(&needle, server.pid()) {
            let ids = kernel_uids(&pid);
            if !ids.is_empty() && !seen.iter().any(|(p, _)| *p == pid) {
                seen.push((pid, ids));
            }
        }
        if site_has_alpha(&venv) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let reply = server.response(id);
    let report = &reply["result"]["structuredContent"];
    assert_eq!(report["ok"], true, "{reply}");
    let layers = report["sandbox"].to_string();
    assert!(layers.contains("run-uid"), "no run-uid layer: {reply}");
    assert!(!seen.is_empty(), "no installer process seen");
    for (pid, ids) in &seen {
        assert!(
            ids.iter().all(|id| id != "0" && *id == ids[0]),
            "installer process {pid} holds kernel uid 0 or mixed ids: {seen:?}"
        );
    }
    assert!(site_has_alpha(&venv), "{reply}");
    let owner = std::fs::metadata(&project).expect("the project");
    for made in [venv.clone(), venv.join("pyvenv.cfg")] {
        let meta = std::fs::metadata(&made).expect("the venv");
        assert_eq!(
            (meta.uid(), meta.gid()),
            (owner.uid(), owner.gid()),
            "{} does not belong to the folder's owner",
            made.display()
        );
    }
}

fn site_has_alpha(venv: &Path) -> bool {
    std::fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|python| python.path().join("site-packages/pyrunalpha").exists())
}

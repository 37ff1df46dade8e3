//! `install_packages` end to end over stdio with the real binary, hermetic: the harness's
//! [`PackageIndex`] builds two tiny pure-Python wheels (one depending on the other) and an sdist,
//! and serves them as a PEP 503 simple index from a loopback server that counts every request.
//! Installs go through the pip fallback (and uv when `PYRUN_TEST_UV` names one, or `uv` is on PATH); requirements that
//! smuggle options, URLs or shell syntax are refused before anything runs (the index sees no
//! request, no `.venv` appears); a down index, a missing package and an sdist without
//! `--allow-sdist` are clear tool errors with nothing left running; a run still cannot write the
//! `.venv`; without `--allow-install` the tool does not exist. A project's `uv.lock`, locked by
//! the real uv against the test's index, is synced and a run imports its packages; locks with
//! git, URL or path sources, another index or downloads off the index are refused before anything
//! runs, and without uv a lock is a clear error. (The install profile's port rule is
//! tried for real in `sandbox/tests/escape_suite.rs`.)
#![cfg(target_os = "linux")] // installs need the Linux sandbox

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pyrun_mcp_tests::procs::processes_naming;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::{free_port, PackageIndex, TempProjects};
use serde_json::{json, Value};

/// `base/p` is the projects folder with the project `app` (`app/requirements.txt`,
/// `app/write_venv.py`); `base/outside` lies outside it.
fn folder() -> (tempfile::TempDir, PathBuf) {
    TempProjects::named("p")
        .file(
            "app/requirements.txt",
            "# the beta package, pinned\n\npyrunbeta==1.0  # comment\n",
        )
        .file(
            "app/use_alpha.py",
            "import pyrunalpha\nprint(pyrunalpha.VALUE)\n",
        )
        .file(
            "app/write_venv.py",
            "import os\n\
             try:\n    open('.venv/planted.py', 'w').write('x')\n    print('WROTE')\n\
             except OSError as e:\n    print('REFUSED', e.errno)\n",
        )
        .outside_dir("outside")
        .into_parts()
}

fn start(projects: &Path, index: &str, extra: &[&str]) -> StdioServer {
    let mut args = vec!["--allow-install", "--package-index", index];
    args.extend_from_slice(extra);
    StdioServer::start(projects, &args)
}

fn install(server: &mut StdioServer, arguments: Value) -> Value {
    server.call("install_packages", arguments)
}

fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}

/// The uv the tests may use: `PYRUN_TEST_UV`, else `uv` on PATH; `None` says why not.
fn test_uv() -> Option<PathBuf> {
    if let Some(uv) = std::env::var_os("PYRUN_TEST_UV") {
        return Some(PathBuf::from(uv));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("uv"))
        .find(|uv| uv.is_file())
}

/// The venv's site-packages folder (`lib/python3.X/site-packages`).
fn site_packages(venv: &Path) -> PathBuf {
    let lib = venv.join("lib");
    let version = std::fs::read_dir(&lib)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .unwrap_or_else(|| panic!("no python folder in {}", lib.display()));
    version.path().join("site-packages")
}

/// Installs the wheel and its dependency with `extra` flags; checks the venv, a reuse from a
/// requirements file, and that a run still cannot write the venv. Returns the first install's
/// duration.
fn installs_a_wheel_and_its_dependency(extra: &[&str], installer: &str) -> Duration {
    let index = PackageIndex::start();
    let (_base, projects) = folder();
    let mut server = start(&projects, &index.url(), extra);
    // Before the install the project has no venv: the server's interpreter runs, without the package.
    let before = server.call("run_python", json!({"file_name": "app/use_alpha.py"}));
    assert_eq!(before["structuredContent"]["exit_code"], 1, "{before}");
    assert_eq!(
        before["structuredContent"]["python"]["venv"],
        Value::Null,
        "{before}"
    );
    let started = Instant::now();
    let reply = server.request(
        "tools/call",
        json!({"name": "install_packages", "_meta": {"progressToken": "install-1"},
               "arguments": {"project": "app", "packages": ["pyrunalpha"]}}),
    );
    let took = started.elapsed();
    let result = reply["result"].clone();
    assert!(!is_error(&result), "{result}");
    let report = &result["structuredContent"];
    assert_eq!(report["ok"], true, "{result}");
    assert_eq!(report["installer"], installer, "{result}");
    assert_eq!(report["venv"], "app/.venv", "{result}");
    assert_eq!(report["created_venv"], true, "{result}");
    assert!(
        report["sandbox"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "landlock-tcp-ports"),
        "{result}"
    );
    let shown = result.to_string();
    assert!(
        !shown.contains(projects.to_str().unwrap()),
        "a host path reached the client: {shown}"
    );
    // The caller followed it: progress every second, with the installer's last line.
    let progress: Vec<&Value> = server
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    if took > Duration::from_secs(3) {
        let message = progress
            .last()
            .and_then(|n| n["params"]["message"].as_str())
            .unwrap_or_else(|| panic!("no progress in {took:?}: {:?}", server.notifications));
        assert!(message.starts_with("installing into 'app' ("), "{message}");
        assert!(!message.contains(projects.to_str().unwrap()), "{message}");
    }

    let venv = projects.join("app/.venv");
    let site = site_packages(&venv);
    assert!(site.join("pyrunalpha/__init__.py").is_file(), "{result}");
    assert!(site.join("pyrunbeta/__init__.py").is_file(), "{result}");
    let out = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", "import pyrunalpha; print(pyrunalpha.VALUE)"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "alpha+beta",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Again, from the project's requirements file: the venv is reused.
    let again = install(
        &mut server,
        json!({"project": "app", "requirements": "requirements.txt"}),
    );
    assert!(!is_error(&again), "{again}");
    eprintln!(
        "FIGURE {installer}: one wheel into the existing venv in {} ms",
        again["structuredContent"]["duration_ms"]
    );
    assert_eq!(again["structuredContent"]["created_venv"], false, "{again}");
    assert_eq!(
        again["structuredContent"]["requirements"],
        json!(["pyrunbeta==1.0"]),
        "{again}"
    );

    // Runs of the project now use the venv the install made, and list its packages.
    let after = server.call("run_python", json!({"file_name": "app/use_alpha.py"}));
    assert_eq!(
        after["structuredContent"]["stdout"], "alpha+beta\n",
        "{after}"
    );
    assert_eq!(
        after["structuredContent"]["python"]["venv"], "app/.venv",
        "{after}"
    );
    let listed = server.call("list_packages", json!({"project": "app"}));
    let names: Vec<&str> = listed["structuredContent"]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"pyrunalpha") && names.contains(&"pyrunbeta"),
        "{listed}"
    );

    // A run of the project cannot write its venv.
    let run = server.call("run_python", json!({"file_name": "app/write_venv.py"}));
    let stdout = run["structuredContent"]["stdout"].as_str().unwrap_or("");
    assert!(stdout.starts_with("REFUSED"), "{run}");
    assert!(!venv.join("planted.py").exists());
    assert!(index.requests() > 0);
    took
}

#[test]
fn pip_installs_a_wheel_and_its_dependency_into_the_projects_venv() {
    let took = installs_a_wheel_and_its_dependency(&["--uv", "off"], "pip");
    eprintln!(
        "FIGURE pip: venv + two wheels in {:.2} s",
        took.as_secs_f64()
    );
}

#[test]
fn uv_installs_a_wheel_and_its_dependency_into_the_projects_venv() {
    let Some(uv) = test_uv() else {
        eprintln!(
            "SKIP uv: no uv here (set PYRUN_TEST_UV, as scripts/test.sh does, or put uv on PATH); \
             the pip fallback is tested"
        );
        return;
    };
    let uv = uv.to_string_lossy().into_owned();
    let took = installs_a_wheel_and_its_dependency(&["--uv", &uv], "uv");
    eprintln!(
        "FIGURE uv: venv + two wheels in {:.2} s",
        took.as_secs_f64()
    );
}

#[test]
fn smuggled_options_urls_paths_and_shell_syntax_are_refused_before_anything_runs() {
    let index = PackageIndex::start();
    let (base, projects) = folder();
    std::fs::write(
        projects.join("app/evil.txt"),
        "pyrunbeta\n# fine\n--index-url http://127.0.0.1:1/simple\n",
    )
    .unwrap();
    std::fs::write(projects.join("app/evil2.txt"), "-r requirements.txt\n").unwrap();
    std::fs::write(base.path().join("outside.txt"), "pyrunbeta\n").unwrap();
    let mut server = start(&projects, &index.url(), &["--uv", "off"]);
    for package in [
        "--index-url=http://127.0.0.1:1/simple",
        "-e .",
        "-r requirements.txt",
        "pyrunalpha @ http://127.0.0.1:1/x.whl",
        "../outside",
        "/etc/passwd",
        "pyrunalpha; python_version > '3'",
        "pyrunalpha && touch /tmp/pwned",
        "pyrunalpha | sh",
        "$(id)",
        "`id`",
        "pyrunalpha\n--extra-index-url http://127.0.0.1:1",
        "pyrunalpha\0",
        "",
    ] {
        // The bad one after a good one: nothing of the call runs.
        let result = install(
            &mut server,
            json!({"project": "app", "packages": ["pyrunbeta", package]}),
        );
        assert!(is_error(&result), "{package:?} accepted: {result}");
        assert!(
            result["structuredContent"].is_null(),
            "{package:?}: {result}"
        );
    }
    let file = install(
        &mut server,
        json!({"project": "app", "requirements": "evil.txt"}),
    );
    assert!(is_error(&file), "{file}");
    assert!(text(&file).contains("line 3"), "{file}");
    assert!(text(&file).contains("option"), "{file}");
    let nested = install(
        &mut server,
        json!({"project": "app", "requirements": "evil2.txt"}),
    );
    assert!(text(&nested).contains("line 1"), "{nested}");
    for outside in ["../../outside.txt", "/etc/passwd", "../requirements.txt"] {
        let result = install(
            &mut server,
            json!({"project": "app", "requirements": outside}),
        );
        assert!(is_error(&result), "{outside}: {result}");
    }
    let nothing = install(&mut server, json!({"project": "app"}));
    assert!(text(&nothing).contains("nothing to install"), "{nothing}");
    let outside = install(
        &mut server,
        json!({"project": "..", "packages": ["pyrunbeta"]}),
    );
    assert!(is_error(&outside), "{outside}");

    // A .venv that is a link (to a folder outside) is never installed through.
    std::fs::create_dir_all(projects.join("linked")).unwrap();
    std::os::unix::fs::symlink(base.path().join("outside"), projects.join("linked/.venv")).unwrap();
    let linked = install(
        &mut server,
        json!({"project": "linked", "packages": ["pyrunbeta"]}),
    );
    assert!(text(&linked).contains("symbolic link"), "{linked}");
    assert_eq!(
        std::fs::read_dir(base.path().join("outside"))
            .unwrap()
            .count(),
        0
    );

    assert_eq!(
        index.requests(),
        0,
        "the index was asked: {:?}",
        index.paths()
    );
    assert!(!projects.join("app/.venv").exists(), "a venv was made");
}

#[test]
fn a_missing_package_and_an_sdist_without_allow_sdist_are_clear_errors_with_pip() {
    missing_and_sdist_are_clear_errors(&["--uv", "off"]);
}

#[test]
fn a_missing_package_and_an_sdist_without_allow_sdist_are_clear_errors_with_uv() {
    let Some(uv) = test_uv() else {
        eprintln!("SKIP uv: no uv here (set PYRUN_TEST_UV or put uv on PATH)");
        return;
    };
    missing_and_sdist_are_clear_errors(&["--uv", uv.to_str().unwrap()]);
}

fn missing_and_sdist_are_clear_errors(extra: &[&str]) {
    let index = PackageIndex::start();
    let (_base, projects) = folder();
    let mut server = start(&projects, &index.url(), extra);
    let missing = install(
        &mut server,
        json!({"project": "app", "packages": ["pyrunmissing"]}),
    );
    assert!(is_error(&missing), "{missing}");
    let report = &missing["structuredContent"];
    assert_eq!(report["ok"], false, "{missing}");
    assert_ne!(report["exit_code"], 0, "{missing}");
    let tail = report["output_tail"].as_str().unwrap();
    assert!(tail.contains("pyrunmissing"), "{missing}");
    // It fails while fetching, before the project's venv is even made.
    assert!(
        text(&missing).contains("failed while fetching the packages"),
        "{missing}"
    );
    assert!(!projects.join("app/.venv").exists(), "{missing}");
    assert!(!missing.to_string().contains(projects.to_str().unwrap()));

    // Only an sdist exists: refused without --allow-sdist, nothing built.
    let sdist = install(
        &mut server,
        json!({"project": "app", "packages": ["pyrunsdist"]}),
    );
    assert!(is_error(&sdist), "{sdist}");
    assert!(!index.served_an_sdist(), "the sdist was downloaded");
    // Refused while fetching: no venv was made for it.
    let venv = projects.join("app/.venv");
    assert!(!venv.exists(), "{sdist}");
    assert!(processes_naming(venv.to_str().unwrap()).is_empty());
}

#[test]
fn a_down_index_is_a_clear_error_and_leaves_nothing_running() {
    // A port that was just free: nothing listens on it.
    let port = free_port();
    let (_base, projects) = folder();
    let url = format!("http://127.0.0.1:{port}/simple/");
    let mut server = start(&projects, &url, &["--uv", "off", "--install-timeout", "60"]);
    let result = install(
        &mut server,
        json!({"project": "app", "packages": ["pyrunalpha"]}),
    );
    assert!(is_error(&result), "{result}");
    assert_eq!(result["structuredContent"]["ok"], false, "{result}");
    assert!(
        text(&result).contains("failed while fetching the packages"),
        "{result}"
    );
    // pip's own words for a refused connection, after its retries.
    let tail = result["structuredContent"]["output_tail"].as_str().unwrap();
    assert!(
        tail.contains("Connection refused") || tail.contains("NewConnectionError"),
        "{result}"
    );
    // Every installer's argv names the venv (the server's names only the projects folder).
    let leftovers = processes_naming(projects.join("app/.venv").to_str().unwrap());
    assert!(leftovers.is_empty(), "left running: {leftovers:?}");
    // The server serves on.
    let listed = server.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}

#[test]
fn an_install_past_its_timeout_is_killed_with_its_whole_tree() {
    let index = PackageIndex::start();
    let (_base, projects) = folder();
    let mut server = start(
        &projects,
        &index.url(),
        &["--uv", "off", "--install-timeout", "1"],
    );
    let started = Instant::now();
    let result = install(
        &mut server,
        json!({"project": "app", "packages": ["pyrunalpha"]}),
    );
    assert!(started.elapsed() < Duration::from_secs(15), "{result}");
    assert!(is_error(&result), "{result}");
    assert_eq!(result["structuredContent"]["timed_out"], true, "{result}");
    assert!(text(&result).contains("--install-timeout"), "{result}");
    let leftovers = processes_naming(projects.join("app/.venv").to_str().unwrap());
    assert!(leftovers.is_empty(), "left running: {leftovers:?}");
    // A venv whose making was cut short is not left to be taken for a good one.
    assert!(!projects.join("app/.venv").exists());
}

#[test]
fn a_cancelled_install_is_killed_with_its_whole_tree() {
    let index = PackageIndex::start();
    let (_base, projects) = folder();
    let mut server = start(&projects, &index.url(), &["--uv", "off"]);
    let id = server.start_request(
        "tools/call",
        json!({"name": "install_packages",
               "arguments": {"project": "app", "packages": ["pyrunalpha"]}}),
    );
    let venv = projects.join("app/.venv");
    let needle = venv.to_str().unwrap().to_owned();
    // Cancelled while the venv is being made (pip's fallback takes seconds for it). The fetch
    // before it makes a venv of its own and runs pip: on a loaded 2-core machine (the whole suite
    // at once) that alone took more than 20 s.
    let deadline = Instant::now() + Duration::from_secs(90);
    while processes_naming(&needle).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !processes_naming(&needle).is_empty(),
        "the install never started"
    );
    server.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_naming(&needle).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let leftovers = processes_naming(&needle);
    assert!(leftovers.is_empty(), "left running: {leftovers:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while venv.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!venv.exists(), "the half-made venv was left");
    // The server serves on, and the project takes a new install.
    let listed = server.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}

/// A run plants a `.venv` (there was none) whose `.pth` runs code in whatever interpreter starts
/// from it, then an install into that project starts it. The planted code runs, but only in the
/// install's step without the network: neither the index's port (open to the fetch step) nor a
/// canary port of the test's own, nothing of the projects folder readable, no other project's
/// cache or venv writable.
const PLANT_VENV: &str = r#"
import os, sys
lib = f".venv/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
os.makedirs(lib)
os.makedirs(".venv/bin")
os.symlink(sys.executable, ".venv/bin/python")
home = os.path.dirname(sys.executable)
open(".venv/pyvenv.cfg", "w").write(f"home = {home}\ninclude-system-site-packages = false\n")
open(f"{lib}/planted.pth", "w").write("import pyrun_planted\n")
open(f"{lib}/pyrun_planted.py", "w").write(f"""
import os, socket, sys
seen = []
try:
    socket.create_connection(("127.0.0.1", {sys.argv[1]}), timeout=3).close()
    seen.append("canary reached")
except OSError as e:
    seen.append("canary refused")
try:
    socket.create_connection(("127.0.0.1", {sys.argv[3]}), timeout=3).close()
    seen.append("index reached")
except OSError as e:
    seen.append("index refused")
for path in ({sys.argv[2]!r} + "/other/secret.txt", {sys.argv[2]!r} + "/other/planted.txt"):
    try:
        open(path, "a").close()
        seen.append("touched " + path)
    except OSError:
        seen.append("refused " + path)
# Landlock does not govern modes, times or lookups: only the install's own file view does.
outside = {sys.argv[4]!r}
for name, attack in (("chmod", lambda: os.chmod(outside, 0o666)),
                     ("utime", lambda: os.utime(outside, (0, 0))),
                     ("stat", lambda: os.stat(outside)),
                     ("stat-home", lambda: os.stat(os.path.expanduser("~root")))):
    try:
        attack()
        seen.append(name + " worked")
    except OSError as e:
        seen.append(name + " refused")
# Printed: the failed install puts the venv back, so a file there would be gone.
print("REPORT: " + "; ".join(seen))
""")
print("PLANTED")
"#;

#[test]
fn code_planted_in_a_venv_runs_only_inside_the_install_profile() {
    let index = PackageIndex::start();
    let canary = TcpListener::bind("127.0.0.1:0").unwrap();
    canary.set_nonblocking(true).unwrap();
    let (base, projects) = folder();
    std::fs::create_dir_all(projects.join("other")).unwrap();
    std::fs::write(projects.join("other/secret.txt"), "SECRET").unwrap();
    std::fs::write(projects.join("app/plant.py"), PLANT_VENV).unwrap();
    // A file of the server's user outside the projects folder: mode 0600, a known mtime.
    let outside = base.path().join("outside/owned.txt");
    std::fs::write(&outside, "mine").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mtime = std::fs::metadata(&outside).unwrap().modified().unwrap();
    // The planted venv must stay for the install to find it (by default it is quarantined).
    let mut server = start(
        &projects,
        &index.url(),
        &["--uv", "off", "--allow-protected-writes"],
    );
    let canary_port = canary.local_addr().unwrap().port().to_string();
    let index_port = index
        .url()
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next().map(str::to_owned))
        .unwrap();
    let run = server.call(
        "run_python",
        json!({"file_name": "app/plant.py",
               "args": [canary_port, projects.to_str().unwrap(), index_port,
                        outside.to_str().unwrap()]}),
    );
    assert!(
        run["structuredContent"]["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("PLANTED"),
        "{run}"
    );
    let result = install(
        &mut server,
        json!({"project": "app", "packages": ["pyrunbeta"]}),
    );
    // The planted venv has no pip: the install fails, after the planted code ran.
    assert!(is_error(&result), "{result}");
    let report = result["structuredContent"]["output_tail"]
        .as_str()
        .unwrap_or("")
        .lines()
        .find_map(|line| line.strip_prefix("REPORT: "))
        .unwrap_or_else(|| panic!("the planted code did not run: {result}"))
        .to_owned();
    assert!(report.contains("canary refused"), "{report}");
    assert!(report.contains("index refused"), "{report}");
    assert!(!report.contains("index reached"), "{report}");
    assert!(!report.contains("canary reached"), "{report}");
    assert!(!report.contains("touched"), "{report}");
    for attack in ["chmod", "utime", "stat", "stat-home"] {
        assert!(report.contains(&format!("{attack} refused")), "{report}");
    }
    let after = std::fs::metadata(&outside).unwrap();
    assert_eq!(after.permissions().mode() & 0o7777, 0o600, "{report}");
    assert_eq!(after.modified().unwrap(), mtime, "{report}");
    assert!(canary.accept().is_err(), "the canary port was reached");
    assert!(!projects.join("other/planted.txt").exists());
    assert_eq!(
        std::fs::read_to_string(projects.join("other/secret.txt")).unwrap(),
        "SECRET"
    );
}

/// The project's pyproject for a sync: it needs `pyrunalpha`; its `[tool.uv]` names an index
/// that does not exist (the server never gives the project's pyproject to uv).
const SYNC_PYPROJECT: &str = "[project]\nname = \"app\"\nversion = \"0.1.0\"\n\
    requires-python = \">=3.8\"\ndependencies = [\"pyrunalpha\"]\n\n\
    [tool.uv]\nindex-url = \"http://127.0.0.1:1/simple/\"\n";

/// `uv lock` of `project` against `index`, run by the test itself (outside the server).
fn uv_lock(uv: &Path, project: &Path, index: &str) {
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(uv)
        .args(["--no-config", "--color", "never", "--no-progress", "lock"])
        .args(["--index-url", index, "--no-python-downloads", "--python"])
        .arg(pyrun_mcp_tests::python())
        .arg("--cache-dir")
        .arg(cache.path())
        .current_dir(project)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "uv lock failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn uv_syncs_a_projects_uv_lock_from_the_index_and_a_run_imports_its_packages() {
    let Some(uv) = test_uv() else {
        eprintln!("SKIP uv sync: no uv here (set PYRUN_TEST_UV or put uv on PATH)");
        return;
    };
    let index = PackageIndex::start();
    let (base, projects) = folder();
    let app = projects.join("app");
    std::fs::write(app.join("pyproject.toml"), SYNC_PYPROJECT).unwrap();
    uv_lock(&uv, &app, &index.url());
    let lock = std::fs::read_to_string(app.join("uv.lock")).unwrap();
    assert!(lock.contains("pyrunbeta"), "{lock}");
    // The server's temp folder holds a workspace that claims every folder below it (the
    // install's scratch among them) with a lock of its own: uv must not take it for the sync's.
    let tmp = base.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::write(
        tmp.join("pyproject.toml"),
        "[project]\nname = \"planted\"\nversion = \"1\"\n\
         [tool.uv.workspace]\nmembers = [\"*\", \"*/*\"]\n",
    )
    .unwrap();
    std::fs::write(tmp.join("uv.lock"), "version = 1\n").unwrap();
    let asked_before = index.paths().len();
    let uv_arg = [
        "--allow-install",
        "--package-index",
        &index.url(),
        "--uv",
        uv.to_str().unwrap(),
    ];
    let mut server = StdioServer::start_with_env(
        &projects,
        &uv_arg,
        None,
        &[("TMPDIR", tmp.to_str().unwrap())],
    );

    let result = install(&mut server, json!({"project": "app"}));
    assert!(!is_error(&result), "{result}");
    let report = &result["structuredContent"];
    assert_eq!(report["synced_lock"], true, "{result}");
    assert_eq!(report["created_venv"], true, "{result}");
    assert_eq!(report["venv"], "app/.venv", "{result}");
    assert_eq!(
        report["requirements"],
        json!(["pyrunalpha==1.0", "pyrunbeta==1.0"]),
        "{result}"
    );
    assert!(
        text(&result).contains("synced the project's uv.lock"),
        "{result}"
    );
    assert!(
        !result.to_string().contains(projects.to_str().unwrap()),
        "{result}"
    );
    // Frozen: the wheels the lock names were fetched, the index was not asked to resolve again.
    let asked: Vec<String> = index.paths()[asked_before..].to_vec();
    assert!(
        !asked.is_empty() && asked.iter().all(|p| p.starts_with("/files/")),
        "{asked:?}"
    );

    let run = server.call("run_python", json!({"file_name": "app/use_alpha.py"}));
    assert_eq!(run["structuredContent"]["stdout"], "alpha+beta\n", "{run}");
    assert_eq!(
        run["structuredContent"]["python"]["venv"], "app/.venv",
        "{run}"
    );

    // Again: the venv is reused and already in sync.
    let again = install(&mut server, json!({"project": "app"}));
    assert!(!is_error(&again), "{again}");
    assert_eq!(again["structuredContent"]["created_venv"], false, "{again}");

    // A lock whose only distribution is an sdist: without --allow-sdist nothing is built.
    let sdist_lock = format!(
        "version = 1\nrevision = 3\nrequires-python = \">=3.8\"\n\n\
         [[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = {{ virtual = \".\" }}\n\
         dependencies = [{{ name = \"pyrunsdist\" }}]\n\n\
         [[package]]\nname = \"pyrunsdist\"\nversion = \"1.0\"\n\
         source = {{ registry = \"{}\" }}\n\
         sdist = {{ url = \"http://127.0.0.1:{}/files/pyrunsdist-1.0.tar.gz\" }}\n",
        index.url(),
        index.port()
    );
    std::fs::write(app.join("uv.lock"), sdist_lock).unwrap();
    let sdist = install(&mut server, json!({"project": "app"}));
    assert!(is_error(&sdist), "{sdist}");
    assert!(
        text(&sdist).contains("failed while fetching the uv.lock's packages"),
        "{sdist}"
    );
    assert!(
        sdist["structuredContent"]["output_tail"]
            .as_str()
            .unwrap_or("")
            .contains("pyrunsdist"),
        "{sdist}"
    );
    assert!(!index.served_an_sdist(), "the sdist was downloaded");
    eprintln!("sdist refused: {}", text(&sdist));
    assert!(!site_packages(&app.join(".venv"))
        .join("pyrunsdist")
        .exists());
}

/// A lock of the project whose last package comes from `source` (with `downloads`).
fn lock_with(index: &str, source: &str, downloads: &str) -> String {
    format!(
        "version = 1\nrevision = 3\nrequires-python = \">=3.8\"\n\n\
         [[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = {{ virtual = \".\" }}\n\
         dependencies = [{{ name = \"pyrunbeta\" }}, {{ name = \"evil\" }}]\n\n\
         [[package]]\nname = \"pyrunbeta\"\nversion = \"1.0\"\n\
         source = {{ registry = \"{index}\" }}\n\n\
         [[package]]\nname = \"evil\"\nversion = \"1.0\"\nsource = {source}\n{downloads}\n"
    )
}

#[test]
fn a_lock_with_git_url_or_path_sources_another_index_or_foreign_downloads_is_refused_before_anything_runs(
) {
    let index = PackageIndex::start();
    let (_base, projects) = folder();
    let app = projects.join("app");
    std::fs::write(app.join("pyproject.toml"), SYNC_PYPROJECT).unwrap();
    // The lock is refused before uv would start: any executable stands in for it.
    let mut server = start(&projects, &index.url(), &["--uv", "/bin/true"]);
    let url = index.url();
    let registry = format!("{{ registry = \"{url}\" }}");
    let cases = [
        (
            "git",
            r#"{ git = "https://github.com/x/evil?rev=main#0123" }"#.to_owned(),
            String::new(),
        ),
        (
            "url",
            r#"{ url = "https://example.org/evil-1.0.tar.gz" }"#.to_owned(),
            String::new(),
        ),
        (
            "path",
            r#"{ path = "/tmp/evil-1.0-py3-none-any.whl" }"#.to_owned(),
            String::new(),
        ),
        (
            "directory",
            r#"{ directory = "../evil" }"#.to_owned(),
            String::new(),
        ),
        (
            "another package index",
            r#"{ registry = "https://pypi.org/simple" }"#.to_owned(),
            String::new(),
        ),
        (
            "downloads from outside",
            registry.clone(),
            r#"wheels = [{ url = "http://169.254.169.254/evil-1.0-py3-none-any.whl" }]"#.to_owned(),
        ),
        (
            "downloads from outside",
            registry.clone(),
            r#"wheels = [{ path = "/tmp/evil-1.0-py3-none-any.whl" }]"#.to_owned(),
        ),
    ];
    for (why, source, downloads) in cases {
        std::fs::write(app.join("uv.lock"), lock_with(&url, &source, &downloads)).unwrap();
        let result = install(&mut server, json!({"project": "app"}));
        assert!(is_error(&result), "{source} accepted: {result}");
        assert!(result["structuredContent"].is_null(), "{result}");
        let said = text(&result);
        assert!(said.contains("package 'evil'"), "{said}");
        assert!(said.contains(why), "{why}: {said}");
    }
    // A pyproject of another project than the lock's.
    std::fs::write(app.join("uv.lock"), lock_with(&url, &registry, "")).unwrap();
    std::fs::write(app.join("pyproject.toml"), "[project]\nname = \"other\"\n").unwrap();
    let other = install(&mut server, json!({"project": "app"}));
    assert!(
        text(&other).contains("names the project 'other'"),
        "{other}"
    );
    std::fs::remove_file(app.join("pyproject.toml")).unwrap();
    let missing = install(&mut server, json!({"project": "app"}));
    assert!(text(&missing).contains("no pyproject.toml"), "{missing}");
    std::fs::write(app.join("uv.lock"), "version = [").unwrap();
    let broken = install(&mut server, json!({"project": "app"}));
    assert!(text(&broken).contains("not valid TOML"), "{broken}");

    assert_eq!(
        index.requests(),
        0,
        "the index was asked: {:?}",
        index.paths()
    );
    assert!(!app.join(".venv").exists(), "a venv was made");
}

#[test]
fn syncing_a_lock_without_uv_is_a_clear_error() {
    let index = PackageIndex::start();
    let (_base, projects) = folder();
    let app = projects.join("app");
    std::fs::write(app.join("pyproject.toml"), SYNC_PYPROJECT).unwrap();
    let url = index.url();
    let registry = format!("{{ registry = \"{url}\" }}");
    std::fs::write(app.join("uv.lock"), lock_with(&url, &registry, "")).unwrap();
    let mut server = start(&projects, &url, &["--uv", "off"]);
    let result = install(&mut server, json!({"project": "app"}));
    assert!(is_error(&result), "{result}");
    let said = text(&result);
    assert!(said.contains("needs uv"), "{said}");
    assert!(said.contains("name the packages"), "{said}");
    assert_eq!(index.requests(), 0);
    assert!(!app.join(".venv").exists());
}

#[test]
fn without_the_flag_the_tool_is_neither_listed_nor_callable() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let reply = server.request("tools/list", json!({}));
    let names: Vec<&str> = reply["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"run_python"), "{names:?}");
    assert!(!names.contains(&"install_packages"), "{names:?}");
    let call = server.request(
        "tools/call",
        json!({"name": "install_packages", "arguments": {"project": "app", "packages": ["x"]}}),
    );
    assert!(call.get("error").is_some(), "{call}");
    assert!(!projects.join("app/.venv").exists());

    let mut on = StdioServer::start(&projects, &["--allow-install"]);
    let reply = on.request("tools/list", json!({}));
    assert!(
        reply.to_string().contains("\"install_packages\""),
        "{reply}"
    );
}

//! `install_packages` when an install goes wrong, through the real binary over stdio, hermetic
//! (the harness's loopback [`PackageIndex`], plus wheels and sdists each test builds): a wheel
//! of 3 GiB of zeros (a few MB deflated), a wheel refused for a path leaving the venv, and a set
//! of small files over `--max-install-mb` (also in a wheel whose end record lies about its
//! entries) each leave the project's `.venv` exactly as it was
//! (paths and sizes compared); `--allow-sdist` builds a local sdist; a hostile build backend
//! reads no host file, reaches no other port, writes nothing outside its scratch (the host is
//! checked afterwards), and one that writes past the budget is stopped.
#![cfg(target_os = "linux")] // installs need the Linux sandbox

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::{PackageIndex, TempProjects};
use serde_json::{json, Value};

/// Builds the test's distributions into `sys.argv[1]`: wheels of zeros, paths and many files,
/// and sdists with an in-tree PEP 517 backend (no build requirement: the index has none).
const DISTS: &str = r#"
import io, os, sys, tarfile, zipfile
out = sys.argv[1]
CHUNK = bytes(1 << 20)

def wheel(name, entries):
    info = f"{name}-1.0.dist-info"
    path = os.path.join(out, f"{name}-1.0-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        record = []
        for p, body in entries:
            if isinstance(body, int):
                with z.open(p, "w", force_zip64=True) as f:
                    left = body
                    while left:
                        n = min(left, len(CHUNK))
                        f.write(CHUNK[:n])
                        left -= n
            else:
                z.writestr(p, body)
            record.append(f"{p},,")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: pyrun-test\n"
                   "Root-Is-Purelib: true\nTag: py3-none-any\n")
        record += [f"{info}/METADATA,,", f"{info}/WHEEL,,", f"{info}/RECORD,,"]
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")

wheel("pyrunbomb", [("pyrunbomb/__init__.py", "X = 1\n"), ("pyrunbomb/zeros.bin", 3 << 30)])
wheel("pyrunescape", [("pyrunescape/__init__.py", "X = 1\n"),
                      ("pyrunescape/data.txt", "x" * 1000),
                      ("../../../../escaped.txt", "escaped\n")])
# Files of the venv's root (the wheel's data scheme) aimed at the install's own snapshot: a file
# put back with the venv, a forged marker, and a folder where a finished snapshot goes.
wheel("pyrunsnap", [("pyrunsnap/__init__.py", "X = 1\n"),
                    ("pyrunsnap-1.0.data/data/.pyrun-install/before/planted.txt", "planted\n"),
                    ("pyrunsnap-1.0.data/data/.pyrun-install/MOVED", ""),
                    ("pyrunsnap-1.0.data/data/.pyrun-discard/x", "x\n")])
wheel("pyrunmany", [("pyrunmany/__init__.py", "X = 1\n")]
      + [(f"pyrunmany/f{i}.bin", 1 << 20) for i in range(120)])
wheel("pyrunlying", [("pyrunlying/__init__.py", "X = 1\n")]
      + [(f"pyrunlying/f{i}.bin", 1 << 20) for i in range(120)])
# Its end record lies: no entries. Python's zipfile (pip) reads every entry anyway (it walks
# the directory's stated size, found just before the end record).
path = os.path.join(out, "pyrunlying-1.0-py3-none-any.whl")
data = bytearray(open(path, "rb").read())
end = data.rfind(b"PK\x05\x06")
data[end + 8:end + 12] = bytes(4)
open(path, "wb").write(bytes(data))

BACKEND = '''
import json, os, socket, zipfile
NAME = %(name)r

def get_requires_for_build_wheel(config_settings=None):
    return []

def attempt(job):
    try:
        job()
        return "DONE"
    except OSError as e:
        import errno
        return errno.errorcode.get(e.errno, str(e.errno))
    except Exception as e:
        return type(e).__name__

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tried = {}
%(attack)s
    fn = f"{NAME}-1.0-py3-none-any.whl"
    info = f"{NAME}-1.0.dist-info"
    with zipfile.ZipFile(os.path.join(wheel_directory, fn), "w") as z:
        z.writestr(f"{NAME}/__init__.py", "TRIED = " + json.dumps(tried) + "\\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: 1.0\\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\\nGenerator: pyrun-test\\n"
                   "Root-Is-Purelib: true\\nTag: py3-none-any\\n")
        z.writestr(f"{info}/RECORD", f"{NAME}/__init__.py,,\\n{info}/METADATA,,\\n"
                   f"{info}/WHEEL,,\\n{info}/RECORD,,\\n")
    return fn
'''

def sdist(name, attack="    pass"):
    files = {
        f"{name}-1.0/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{name}-1.0/pyproject.toml": "[build-system]\nrequires = []\n"
            "build-backend = \"backend\"\nbackend-path = [\".\"]\n",
        f"{name}-1.0/backend.py": BACKEND % {"name": name, "attack": attack},
    }
    with tarfile.open(os.path.join(out, f"{name}-1.0.tar.gz"), "w:gz") as t:
        for p, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(p)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))

sdist("pyrunbuilt")
sdist("pyrunhostile", HOSTILE_ATTACK)
sdist("pyrunfat", """
    for i in range(200):
        with open(f"fat-{i}.bin", "wb") as f:
            f.write(bytes(1 << 20))
    import time
    time.sleep(60)
""")
"#;

/// The hostile backend's attempts (indented into `build_wheel`): each recorded in `tried`.
fn hostile_attack(secret: &Path, trap_port: u16, outside: &Path, projects: &Path) -> String {
    format!(
        "    tried['read_secret'] = attempt(lambda: open({secret:?}).read())\n\
         \x20   tried['connect_other_port'] = attempt(lambda: socket.create_connection(('127.0.0.1', {trap_port}), timeout=5))\n\
         \x20   tried['write_outside'] = attempt(lambda: open({outside:?} + '/planted.txt', 'w').write('x'))\n\
         \x20   tried['write_project'] = attempt(lambda: open({project:?} + '/planted.py', 'w').write('x'))\n\
         \x20   tried['write_venv'] = attempt(lambda: open({venv:?} + '/planted.pth', 'w').write('x'))\n\
         \x20   tried['unix_socket'] = attempt(lambda: socket.socket(socket.AF_UNIX).connect('/run/systemd/private'))\n\
         \x20   tried['list_projects'] = attempt(lambda: os.listdir({projects:?}))\n",
        secret = secret.to_str().unwrap(),
        outside = outside.to_str().unwrap(),
        project = projects.join("app").to_str().unwrap(),
        venv = projects.join("app/.venv").to_str().unwrap(),
        projects = projects.to_str().unwrap(),
    )
}

/// Every path under `dir` with its kind and size (symlinks by their target), sorted: what
/// "left as it was" is compared by.
///
/// A finished install's snapshot is set aside as `.pyrun-discard` and removed after the call
/// answered (seconds for a large venv): the listing waits for it to go, so that it is never
/// counted as a change (nor kept for ever: it must go within a minute).
fn listing(dir: &Path) -> BTreeMap<String, String> {
    let discard = dir.join(".pyrun-discard");
    let deadline = Instant::now() + Duration::from_secs(60);
    while discard.symlink_metadata().is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let to = std::fs::read_link(&path).unwrap();
                out.insert(rel, format!("link {}", to.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                walk(root, &path, out);
            } else {
                out.insert(rel, format!("file {}", meta.len()));
            }
        }
    }
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out
}

/// What changed between two listings, for a readable failure.
fn changes(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, what) in after {
        match before.get(path) {
            None => out.push(format!("+ {path} ({what})")),
            Some(was) if was != what => out.push(format!("~ {path} ({was} -> {what})")),
            _ => {}
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        out.push(format!("- {path}"));
    }
    out
}

fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}

/// `base/p` with the projects `app` and `fresh`; `base/outside` beside it.
fn folder() -> (tempfile::TempDir, PathBuf) {
    TempProjects::named("p")
        .file("app/main.py", "print('app')\n")
        .file("fresh/main.py", "print('fresh')\n")
        .outside_dir("outside")
        .into_parts()
}

/// An index serving the harness's packages and this module's (`attack`: the hostile
/// backend's lines, ASCII).
fn index_with_dists(attack: &str) -> PackageIndex {
    let index = PackageIndex::start();
    index.add(&format!("HOSTILE_ATTACK = {attack:?}\n{DISTS}"));
    index
}

#[test]
fn failed_installs_leave_the_venv_exactly_as_it_was() {
    let index = index_with_dists("    pass");
    let (_base, projects) = folder();
    // The budget by its environment variable: a server that knows no budget ignores it.
    let mut server = StdioServer::start_with_env(
        &projects,
        &["--allow-install", "--package-index", &index.url()],
        None,
        &[("PYRUN_MAX_INSTALL_MB", "64")],
    );
    let good = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunalpha"]}),
    );
    assert!(!is_error(&good), "{good}");
    let venv = projects.join("app/.venv");
    let before = listing(&venv);
    assert!(before.len() > 20, "{before:?}");

    // 3 GiB of zeros, a few MB on the wire: refused before anything is unpacked.
    let started = Instant::now();
    let bomb = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunbomb"]}),
    );
    assert!(is_error(&bomb), "{bomb}");
    let after = listing(&venv);
    assert_eq!(
        before,
        after,
        "the bomb changed the venv: {:?}",
        changes(&before, &after)
    );
    assert!(text(&bomb).contains("--max-install-mb"), "{bomb}");
    eprintln!("FIGURE the bomb refused in {:?}", started.elapsed());

    // A path leaving the venv: pip refuses it after writing the package's first files.
    let escape = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunescape"]}),
    );
    assert!(is_error(&escape), "{escape}");
    let after = listing(&venv);
    assert_eq!(
        before,
        after,
        "the refused wheel changed the venv: {:?}",
        changes(&before, &after)
    );
    assert!(!projects.join("app/escaped.txt").exists());

    // 120 files of 1 MiB, each far below the per-file limit, 120 MiB in all: over the budget.
    let many = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunmany"]}),
    );
    assert!(is_error(&many), "{many}");
    let shown = text(&many);
    assert!(
        shown.contains("--max-install-mb") && shown.contains("PYRUN_MAX_INSTALL_MB"),
        "{many}"
    );
    let after = listing(&venv);
    assert_eq!(
        before,
        after,
        "the set over budget changed the venv: {:?}",
        changes(&before, &after)
    );

    // The same set in a wheel whose end record says it holds nothing: pip unpacks it within
    // one look of the watchdog, so the step's end is looked at too.
    let lying = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunlying"]}),
    );
    assert!(is_error(&lying), "{lying}");
    assert!(text(&lying).contains("--max-install-mb"), "{lying}");
    let after = listing(&venv);
    assert_eq!(
        before,
        after,
        "the lying wheel changed the venv: {:?}",
        changes(&before, &after)
    );

    // A project without a venv keeps none when its first install fails.
    let fresh = server.call(
        "install_packages",
        json!({"project": "fresh", "packages": ["pyrunescape"]}),
    );
    assert!(is_error(&fresh), "{fresh}");
    assert!(
        !projects.join("fresh/.venv").exists(),
        "{:?}",
        listing(&projects.join("fresh/.venv"))
    );

    // The venv still works, and the next install into it succeeds.
    let again = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunbeta"]}),
    );
    assert!(!is_error(&again), "{again}");
}

#[test]
fn allow_sdist_builds_a_local_sdist_and_a_hostile_backend_is_refused_everything_outside() {
    let base = tempfile::tempdir().unwrap();
    let secret = base.path().join("secret.txt");
    std::fs::write(&secret, "the host's secret\n").unwrap();
    let trap = TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let (_projects_base, projects) = folder();
    let outside = projects.parent().unwrap().join("outside");
    let attack = hostile_attack(
        &secret,
        trap.local_addr().unwrap().port(),
        &outside,
        &projects,
    );
    let index = index_with_dists(&attack);
    let mut server = StdioServer::start_with_env(
        &projects,
        &[
            "--allow-install",
            "--allow-sdist",
            "--package-index",
            &index.url(),
        ],
        None,
        &[("PYRUN_MAX_INSTALL_MB", "64")],
    );

    // A local sdist with its own in-tree backend builds, and a run imports it.
    let built = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunbuilt"]}),
    );
    assert!(!is_error(&built), "{built}");
    assert!(index.served_an_sdist());

    // The hostile one builds too, having been refused everything outside its scratch.
    let hostile = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunhostile"]}),
    );
    assert!(!is_error(&hostile), "{hostile}");
    let venv = projects.join("app/.venv");
    let module = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages/pyrunhostile/__init__.py"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("pyrunhostile not installed: {hostile}"));
    let source = std::fs::read_to_string(module).unwrap();
    let tried: BTreeMap<String, String> =
        serde_json::from_str(source.trim().trim_start_matches("TRIED = ")).unwrap();
    eprintln!("the hostile backend: {tried:?}");
    for name in [
        "read_secret",
        "connect_other_port",
        "write_outside",
        "write_project",
        "write_venv",
        "unix_socket",
        "list_projects",
    ] {
        let got = tried.get(name).map(String::as_str);
        assert!(
            got.is_some() && got != Some("DONE"),
            "{name} was not refused: {tried:?}"
        );
    }
    // The host afterwards: nothing planted, nothing reached.
    assert!(!outside.join("planted.txt").exists());
    assert!(!projects.join("app/planted.py").exists());
    assert!(!venv.join("planted.pth").exists());
    assert!(
        trap.accept().is_err(),
        "the backend reached the test's port"
    );
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "the host's secret\n"
    );
    assert!(!hostile.to_string().contains("the host's secret"));

    // A backend that writes past the budget while building is stopped, and leaves the venv.
    let before = listing(&venv);
    let started = Instant::now();
    let fat = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunfat"]}),
    );
    let took = started.elapsed();
    assert!(is_error(&fat), "{fat}");
    assert!(text(&fat).contains("--max-install-mb"), "{fat}");
    assert!(
        took < Duration::from_secs(45),
        "stopped only after {took:?}: {fat}"
    );
    let after = listing(&venv);
    assert_eq!(before, after, "{:?}", changes(&before, &after));
}

/// A `.pth` planted in the venv (by the test, as a run of another folder could): while an
/// install's snapshot exists and `slow-once` is in the venv, it adds a file and sleeps, so that
/// the server can be killed in the middle of the install step.
const SLOW_PTH: &str = "import os, sys, time; p = sys.prefix; \
    (open(os.path.join(p, 'lib', 'added_by_step'), 'w').write('x'), time.sleep(120)) \
    if os.path.exists(os.path.join(p, 'slow-once')) \
    and os.path.exists(os.path.join(p, '.pyrun-install', 'COMPLETE')) else None\n";

#[test]
fn an_install_step_cut_short_by_a_killed_server_is_undone_by_the_next_install() {
    let index = index_with_dists("    pass");
    let (_base, projects) = folder();
    let args = [
        "--allow-install",
        "--uv",
        "off",
        "--package-index",
        &index.url(),
    ];
    let mut server = StdioServer::start(&projects, &args);
    let good = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunalpha"]}),
    );
    assert!(!is_error(&good), "{good}");
    let venv = projects.join("app/.venv");
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap();
    std::fs::write(site.join("zz_slow.pth"), SLOW_PTH).unwrap();
    std::fs::write(venv.join("slow-once"), "").unwrap();
    let mut before = listing(&venv);
    before.remove("slow-once");

    // The install step starts, adds a file, and the server dies under it.
    server.start_request(
        "tools/call",
        json!({"name": "install_packages",
               "arguments": {"project": "app", "packages": ["pyrunbeta"]}}),
    );
    let added = venv.join("lib/added_by_step");
    let deadline = Instant::now() + Duration::from_secs(90);
    while !added.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(added.exists(), "the install step never started");
    let killed = std::process::Command::new("kill")
        .args(["-9", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    drop(server);
    assert!(venv.join(".pyrun-install/COMPLETE").exists());
    // Only what the test itself planted goes, so that the next install runs at full speed.
    std::fs::remove_file(venv.join("slow-once")).unwrap();
    std::fs::remove_file(venv.join(".pyrun-install/before/slow-once")).unwrap();

    // The next server's first install into the project puts the venv back before its step.
    let mut server = StdioServer::start(&projects, &args);
    let again = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunbeta"]}),
    );
    assert!(!is_error(&again), "{again}");
    let after = listing(&venv);
    assert_eq!(before, after, "{:?}", changes(&before, &after));
}

/// The install step writes the venv's root (a wheel's data files land there), where the snapshot
/// it would be put back from lies: the step's view holds the snapshot read-only, so a wheel can
/// neither plant a file that the putting back brings into the venv nor forge its markers.
#[test]
fn an_install_step_cannot_write_the_snapshot_its_venv_is_put_back_from() {
    let index = index_with_dists("    pass");
    let (_base, projects) = folder();
    let mut server = StdioServer::start(
        &projects,
        &["--allow-install", "--package-index", &index.url()],
    );
    let good = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunalpha"]}),
    );
    assert!(!is_error(&good), "{good}");
    let venv = projects.join("app/.venv");
    let before = listing(&venv);
    // With a wheel that fails (a path out of the venv), so that the venv is put back.
    let attack = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunsnap", "pyrunescape"]}),
    );
    assert!(is_error(&attack), "{attack}");
    let after = listing(&venv);
    assert_eq!(
        before,
        after,
        "the venv was not put back as it was: {:?}: {attack}",
        changes(&before, &after)
    );
    assert!(!venv.join("planted.txt").exists(), "{attack}");
    // And later installs work.
    let again = server.call(
        "install_packages",
        json!({"project": "app", "packages": ["pyrunbeta"]}),
    );
    assert!(!is_error(&again), "{again}");
}

/// The install roots in `temp`, by name.
fn install_roots(temp: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = std::fs::read_dir(temp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pyrun-mcp-install-"))
        })
        .collect();
    roots.sort();
    roots
}

/// A server killed with SIGKILL cannot remove its install root (its pip/uv cache, tens of MB
/// after a few installs); the next server to start removes it, and never a live server's.
#[test]
fn the_install_root_a_killed_server_left_is_removed_by_the_next_one() {
    let temp = tempfile::tempdir().unwrap();
    let tmpdir = temp.path().to_str().unwrap();
    let (_base, projects) = folder();
    let env = [("TMPDIR", tmpdir)];
    let mut killed = StdioServer::start_with_env(&projects, &["--allow-install"], None, &env);
    let _ = killed.request("tools/list", json!({}));
    let left = install_roots(temp.path());
    assert_eq!(left.len(), 1, "{left:?}");
    std::fs::write(left[0].join("cached-wheel"), vec![0u8; 1 << 20]).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &killed.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    drop(killed);
    assert!(left[0].join("cached-wheel").exists());

    let live = StdioServer::start_with_env(&projects, &["--allow-install"], None, &env);
    let deadline = Instant::now() + Duration::from_secs(30);
    while left[0].exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!left[0].exists(), "the killed server's install root stayed");
    let now = install_roots(temp.path());
    assert_eq!(now.len(), 1, "{now:?}");

    // A third server leaves the second's root: its server lives.
    let third = StdioServer::start_with_env(&projects, &["--allow-install"], None, &env);
    std::thread::sleep(Duration::from_millis(500));
    assert!(now[0].is_dir(), "a live server's install root was removed");
    assert_eq!(install_roots(temp.path()).len(), 2);
    drop((live, third));
}

//! Project environments end to end over stdio with the real binary: a run uses the nearest
//! checked virtual environment (`.venv/` or `venv/`), its packages and compiled extensions load,
//! results name it; a venv a script forged, a broken one, one whose interpreter is gone or not
//! allowed is a clear tool error and nothing of it runs; `list_packages` reads what an
//! environment has. Unix only: venvs are found from argv\[0\] there; on Windows runs use
//! `--python` as before.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::python;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

/// `base/p` is the projects folder (holding `files`); `base` is outside it.
fn folder(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    TempProjects::named("p").files(files).into_parts()
}

/// `major.minor` and the full version of `python`.
fn version_of(python: &Path) -> (String, String) {
    let out = Command::new(python)
        .args([
            "-I",
            "-c",
            "import sys, platform; print('%d.%d' % sys.version_info[:2]); print(platform.python_version())",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    (
        lines.next().unwrap().to_owned(),
        lines.next().unwrap().to_owned(),
    )
}

/// A real venv made by `python -m venv` at `dir`; its site-packages folder.
fn make_venv(python: &Path, dir: &Path) -> PathBuf {
    let status = Command::new(python)
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success(), "python -m venv failed");
    let site = dir
        .join("lib")
        .join(format!("python{}", version_of(python).0))
        .join("site-packages");
    assert!(site.is_dir(), "{}", site.display());
    site
}

fn run(server: &mut StdioServer, file: &str) -> Value {
    server.call("run_python", json!({"file_name": file}))
}

fn assert_refused(result: &Value, wanted: &[&str], projects: &Path) {
    assert_eq!(result["isError"], true, "{result}");
    let said = text(result);
    for part in wanted {
        assert!(said.contains(part), "{part:?} not in: {said}");
    }
    assert!(said.contains("\nhint: "), "{said}");
    let host = projects.parent().unwrap().to_str().unwrap();
    assert!(
        !said.contains(host),
        "a host path reached the client: {said}"
    );
}

/// The attack of the issue: a script writes `sub/.venv/pyvenv.cfg` whose `home` is a folder it
/// filled with its own "python"; the next run in `sub` (and a listing) is refused, and that
/// program never runs, sandboxed or not.
#[test]
fn a_venv_a_script_forged_is_refused_and_its_program_never_runs() {
    const FORGE: &str = r##"
import os, sys
host_evil, marker = sys.argv[1], sys.argv[2]
os.makedirs("sub/.venv", exist_ok=True)
os.makedirs("sub/evil", exist_ok=True)
for name in ("python", "python3", "python3.11"):
    with open(os.path.join("sub/evil", name), "w") as f:
        f.write("#!/bin/sh\necho ran > %s\n" % marker)
    try:
        os.chmod(os.path.join("sub/evil", name), 0o755)
    except OSError as e:
        print("chmod", e)
home = host_evil if sys.argv[3] == "host" else os.path.abspath("sub/evil")
with open("sub/.venv/pyvenv.cfg", "w") as f:
    f.write("home = %s\nversion = %d.%d.0\n" % ((home,) + sys.version_info[:2]))
print("forged", home)
"##;
    for mode in ["standard", "off"] {
        for home in ["host", "view"] {
            let (base, projects) =
                folder(&[("forge.py", FORGE), ("sub/victim.py", "print('victim')\n")]);
            let marker = base.path().join("MARKER");
            // The forged venv lies in another folder than the forging script and must stay:
            // by default the script could not write it, and it would be quarantined.
            let mut server = StdioServer::start(
                &projects,
                &[
                    "--sandbox",
                    mode,
                    "--write-scope",
                    "all",
                    "--allow-protected-writes",
                ],
            );
            let forged = server.call(
                "run_python",
                json!({"file_name": "forge.py", "args": [
                    projects.join("sub/evil").to_str().unwrap(),
                    marker.to_str().unwrap(),
                    home,
                ]}),
            );
            assert_eq!(forged["structuredContent"]["exit_code"], 0, "{forged}");
            assert!(projects.join("sub/.venv/pyvenv.cfg").is_file());

            let result = run(&mut server, "sub/victim.py");
            let why = if home == "host" {
                "lies inside the projects folder"
            } else if mode == "off" {
                // Without a view the run wrote the host path too.
                "lies inside the projects folder"
            } else {
                // The run wrote `/projects/sub/evil`, which is nothing on the host.
                "no longer exists"
            };
            assert_refused(&result, &["'sub/.venv' is refused", why], &projects);
            let listed = server.call("list_packages", json!({"project": "sub"}));
            assert_refused(&listed, &["'sub/.venv' is refused"], &projects);
            // Inline code in `sub` would use it too (the flag is off: the tool is unknown, so
            // nothing to try here); a run elsewhere is not affected.
            let elsewhere = run(&mut server, "forge.py");
            assert_eq!(elsewhere["isError"], false, "{elsewhere}");
            std::thread::sleep(Duration::from_millis(200));
            assert!(
                !marker.exists(),
                "the forged interpreter ran ({mode}, {home})"
            );
        }
    }
}

/// A venv on the run's path is read-only to it: no file written, changed, renamed or removed.
#[test]
fn a_script_cannot_change_the_venv_it_runs_in() {
    const TAMPER: &str = r#"
import os, glob
site = glob.glob(".venv/lib/python*/site-packages")[0]
attempts = {
    "append cfg": lambda: open(".venv/pyvenv.cfg", "a").write("home = /tmp\n"),
    "new module": lambda: open(os.path.join(site, "planted.py"), "w").write("x = 1\n"),
    "remove cfg": lambda: os.remove(".venv/pyvenv.cfg"),
    "rename venv": lambda: os.rename(".venv", "moved"),
    "chmod cfg": lambda: os.chmod(".venv/pyvenv.cfg", 0o777),
}
for name, attempt in attempts.items():
    try:
        attempt()
        print(name, "DONE")
    except OSError as e:
        print(name, "refused", e.errno)
"#;
    let (_base, projects) = folder(&[("tamper.py", TAMPER)]);
    let site = make_venv(&python(), &projects.join(".venv"));
    let before = std::fs::read(projects.join(".venv/pyvenv.cfg")).unwrap();
    let mut server = StdioServer::start(&projects, &[]);
    let result = run(&mut server, "tamper.py");
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap();
    assert!(!stdout.contains("DONE"), "{stdout}");
    assert_eq!(stdout.matches("refused").count(), 5, "{stdout}");
    assert_eq!(result["structuredContent"]["python"]["venv"], ".venv");
    assert_eq!(
        std::fs::read(projects.join(".venv/pyvenv.cfg")).unwrap(),
        before
    );
    assert!(!site.join("planted.py").exists());
}

/// Broken `pyvenv.cfg`s and a venv whose base interpreter is gone: clear tool errors, and the
/// server serves on.
#[test]
fn a_broken_venv_or_one_whose_interpreter_is_gone_is_a_clear_error() {
    let (base, projects) = folder(&[
        ("garbage/run.py", "print(1)\n"),
        ("binary/run.py", "print(1)\n"),
        ("relative/run.py", "print(1)\n"),
        ("gone/run.py", "print(1)\n"),
        ("fine.py", "print('fine')\n"),
    ]);
    let cfg = |dir: &str, bytes: &[u8]| {
        std::fs::create_dir_all(projects.join(dir).join(".venv")).unwrap();
        std::fs::write(projects.join(dir).join(".venv/pyvenv.cfg"), bytes).unwrap();
    };
    cfg("garbage", b"this is not a pyvenv.cfg\n[section]\n");
    cfg("binary", b"home = \xff\xfe\n");
    cfg("relative", b"home = bin\n");
    // An interpreter that was there when the venv was made, and is gone now.
    let gone = base.path().join("old-python/bin");
    std::fs::create_dir_all(&gone).unwrap();
    cfg("gone", format!("home = {}\n", gone.display()).as_bytes());
    std::fs::remove_dir_all(base.path().join("old-python")).unwrap();

    let mut server = StdioServer::start(&projects, &[]);
    let cases = [
        ("garbage/run.py", "'garbage/.venv' is refused: its pyvenv.cfg has no `home"),
        ("binary/run.py", "'binary/.venv' is refused: its pyvenv.cfg is not UTF-8 text"),
        ("relative/run.py", "not an absolute path"),
        ("gone/run.py", "'gone/.venv' is refused: its base interpreter (`home` in its pyvenv.cfg) no longer exists"),
    ];
    for (file, wanted) in cases {
        assert_refused(&run(&mut server, file), &[wanted], &projects);
    }
    let fine = run(&mut server, "fine.py");
    assert_eq!(fine["structuredContent"]["stdout"], "fine\n", "{fine}");
    assert_eq!(fine["structuredContent"]["python"]["venv"], Value::Null);
}

/// The name of a C extension module of `python`'s stdlib that is a file (`.so`), if any.
fn stdlib_extension(python: &Path) -> Option<PathBuf> {
    let out = Command::new(python)
        .args([
            "-I",
            "-c",
            "import importlib\n\
             for n in ('_bisect', 'array', '_json', '_csv'):\n    \
                 f = getattr(importlib.import_module(n), '__file__', '') or ''\n    \
                 if f.endswith('.so'):\n        print(f); break",
        ])
        .output()
        .unwrap();
    let path = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// A real venv made with `python -m venv`: a module of its site-packages is imported, a compiled
/// extension in it loads (the venv is not `noexec`, unlike the rest of the projects folder), and
/// the result names the venv and the version.
#[test]
fn a_real_venvs_modules_and_compiled_extensions_load_and_the_result_names_it() {
    const MAIN: &str = r#"
import sys, importlib.util, glob, os
import venvmod, subprocess
print("value", venvmod.VALUE)
print("prefix", sys.prefix)
# A child started as sys.executable (the venv's bin/python) is in the venv too.
child = subprocess.run([sys.executable, "-c", "import venvmod; print(venvmod.VALUE)"],
                       capture_output=True, text=True)
print("child", child.stdout.strip() or child.stderr)
def load(path):
    name = os.path.basename(path).split(".")[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.__name__
for where in sorted(glob.glob("/projects/app/.venv/lib/*/site-packages/ext/*.so") + glob.glob("/projects/app/plain/*.so")):
    try:
        print("loaded", "venv" if "/.venv/" in where else "plain", load(where))
    except ImportError as e:
        print("refused", "venv" if "/.venv/" in where else "plain", e)
"#;
    let python = python();
    let (_base, projects) = folder(&[("app/main.py", MAIN), ("top.py", "print('top')\n")]);
    let site = make_venv(&python, &projects.join("app/.venv"));
    std::fs::write(site.join("venvmod.py"), "VALUE = 'from the venv'\n").unwrap();
    let extension = stdlib_extension(&python);
    if let Some(so) = &extension {
        let name = so.file_name().unwrap();
        std::fs::create_dir_all(site.join("ext")).unwrap();
        std::fs::copy(so, site.join("ext").join(name)).unwrap();
        std::fs::create_dir_all(projects.join("app/plain")).unwrap();
        std::fs::copy(so, projects.join("app/plain").join(name)).unwrap();
    } else {
        eprintln!("no stdlib C extension as a file: the extension check is skipped");
    }
    let mut server = StdioServer::start(&projects, &["--allow-inline-code"]);
    let result = run(&mut server, "app/main.py");
    let report = &result["structuredContent"];
    assert_eq!(report["exit_code"], 0, "{result}");
    let stdout = report["stdout"].as_str().unwrap();
    assert!(stdout.contains("value from the venv\n"), "{stdout}");
    assert!(stdout.contains("child from the venv\n"), "{stdout}");
    assert_eq!(
        report["python"],
        json!({"version": version_of(&python).1, "venv": "app/.venv"}),
        "{result}"
    );
    let layers: Vec<&str> = report["sandbox"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if layers.contains(&"mount-ns") {
        assert!(stdout.contains("prefix /projects/app/.venv\n"), "{stdout}");
        if extension.is_some() {
            assert!(
                stdout.contains("loaded venv "),
                "the venv's extension must load: {stdout}"
            );
            // The same file elsewhere in the projects folder is not executable (noexec).
            assert!(stdout.contains("refused plain "), "{stdout}");
        }
    }
    // A run elsewhere uses the server's interpreter; inline code in the project, the venv.
    let top = run(&mut server, "top.py");
    assert_eq!(
        top["structuredContent"]["python"]["venv"],
        Value::Null,
        "{top}"
    );
    let inline = server.call(
        "run_python_code",
        json!({"code": "import venvmod; print(venvmod.VALUE)", "project": "app"}),
    );
    assert_eq!(
        inline["structuredContent"]["stdout"], "from the venv\n",
        "{inline}"
    );
    assert_eq!(inline["structuredContent"]["python"]["venv"], "app/.venv");
}

/// Copies the folder `from` into `to`, recursively (links as links).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&source, &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source).unwrap(), &target).unwrap();
        } else {
            std::fs::copy(&source, &target).unwrap();
        }
    }
}

/// The issue's example: numpy (compiled extensions, BLAS) imported from a project's venv under
/// every layer, and listed from its egg-info. Debian's numpy is copied into the venv; skipped
/// where there is none (or it does not suit the server's interpreter).
#[test]
fn numpy_in_a_venv_imports_and_is_listed() {
    let debian = Path::new("/usr/lib/python3/dist-packages");
    let python = python();
    let suits = Command::new(&python)
        .args([
            "-I",
            "-c",
            "import sys; sys.path.insert(0, '/usr/lib/python3/dist-packages'); import numpy",
        ])
        .status()
        .is_ok_and(|s| s.success());
    let Some(info) = std::fs::read_dir(debian).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("numpy-") && n.ends_with(".egg-info"))
    }) else {
        eprintln!("no Debian numpy: skipped");
        return;
    };
    if !suits {
        eprintln!(
            "Debian's numpy does not import with {}: skipped",
            python.display()
        );
        return;
    }
    let (_base, projects) = folder(&[(
        "np.py",
        "import numpy
print(numpy.__file__)
print(int(numpy.arange(6).reshape(2, 3).sum()))
",
    )]);
    let site = make_venv(&python, &projects.join(".venv"));
    copy_tree(&debian.join("numpy"), &site.join("numpy"));
    copy_tree(&debian.join(&info), &site.join(&info));
    let mut server = StdioServer::start(&projects, &[]);
    let result = run(&mut server, "np.py");
    let report = &result["structuredContent"];
    assert_eq!(report["exit_code"], 0, "{result}");
    let stdout = report["stdout"].as_str().unwrap();
    assert!(stdout.ends_with("15\n"), "{stdout}");
    assert!(
        stdout.contains("/.venv/lib/"),
        "numpy came from elsewhere: {stdout}"
    );
    let listed = server.call("list_packages", json!({}));
    let packages = listed["structuredContent"]["packages"].as_array().unwrap();
    assert!(
        packages
            .iter()
            .any(|p| p["name"] == "numpy" && p["version"].as_str().is_some_and(|v| !v.is_empty())),
        "{listed}"
    );
}

/// Nested projects: the venv nearest the script wins (`.venv` before `venv` at one level), with
/// the sandbox on or off.
#[test]
fn the_nearest_venv_wins() {
    let python = python();
    let (_base, projects) = folder(&[
        ("top.py", "import where; print(where.NAME)\n"),
        ("sub/deep/s.py", "import where; print(where.NAME)\n"),
        ("other/o.py", "import where; print(where.NAME)\n"),
    ]);
    for (dir, name) in [
        (".venv", "top"),
        ("sub/.venv", "sub"),
        ("other/venv", "other"),
    ] {
        let site = make_venv(&python, &projects.join(dir));
        std::fs::write(site.join("where.py"), format!("NAME = '{name}'\n")).unwrap();
    }
    // With the sandbox off too: runs see host paths, argv[0] is the venv's on the host.
    for mode in ["standard", "off"] {
        let mut server = StdioServer::start(&projects, &["--sandbox", mode]);
        for (file, printed, venv) in [
            ("top.py", "top\n", ".venv"),
            ("sub/deep/s.py", "sub\n", "sub/.venv"),
            ("other/o.py", "other\n", "other/venv"),
        ] {
            let result = run(&mut server, file);
            let report = &result["structuredContent"];
            assert_eq!(report["stdout"], printed, "{mode}: {result}");
            assert_eq!(report["python"]["venv"], venv, "{mode}: {result}");
        }
    }
}

/// An interpreter other than the server's (`/usr/bin/python3`, a pyenv version) whose folder
/// differs from the server's, if this machine has one.
fn other_interpreter() -> Option<PathBuf> {
    let ours = dunce::canonicalize(python()).ok()?;
    let mut candidates = vec![PathBuf::from("/usr/bin/python3")];
    if let Ok(entries) = std::fs::read_dir("/root/.pyenv/versions") {
        let mut versions: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("bin/python3"))
            .collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev());
    }
    candidates.into_iter().find(|c| {
        dunce::canonicalize(c).is_ok_and(|real| real.parent() != ours.parent())
            && Command::new(c)
                .args(["-c", "import sys; assert sys.version_info >= (3, 8)"])
                .status()
                .is_ok_and(|s| s.success())
    })
}

/// A venv made with another interpreter is refused unless the operator allows that interpreter
/// (`--allow-python`, `PYRUN_ALLOW_PYTHON`); allowed, it runs with that interpreter's version.
#[test]
fn another_interpreters_venv_runs_only_when_allowed() {
    let Some(other) = other_interpreter() else {
        eprintln!("no second interpreter on this machine: skipped");
        return;
    };
    let (_base, projects) = folder(&[("main.py", "import othermod; print(othermod.X)\n")]);
    let site = make_venv(&other, &projects.join(".venv"));
    std::fs::write(site.join("othermod.py"), "X = 'other'\n").unwrap();
    let mut server = StdioServer::start(&projects, &[]);
    assert_refused(
        &run(&mut server, "main.py"),
        &["'.venv' is refused", "--allow-python"],
        &projects,
    );
    drop(server);
    let other_text = other.to_str().unwrap();
    let flag = ["--allow-python", other_text];
    let variable = [("PYRUN_ALLOW_PYTHON", other_text)];
    for by_variable in [false, true] {
        let mut server = if by_variable {
            StdioServer::start_with_env(&projects, &[], None, &variable)
        } else {
            StdioServer::start(&projects, &flag)
        };
        let result = run(&mut server, "main.py");
        assert_eq!(result["structuredContent"]["stdout"], "other\n", "{result}");
        assert_eq!(
            result["structuredContent"]["python"],
            json!({"version": version_of(&other).1, "venv": ".venv"})
        );
    }
}

fn dist_info(site: &Path, name: &str, version: &str) {
    let dir = site.join(format!("{}-{version}.dist-info", name.replace('-', "_")));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA description.\n"),
    )
    .unwrap();
}

/// `list_packages`: a venv's own packages (sorted, one per name), the server interpreter's when
/// there is no venv (the same names `importlib.metadata` finds), and the path refusals of
/// `list_python_files`.
#[test]
fn list_packages_reads_a_venvs_metadata_or_the_interpreters() {
    let python = python();
    let (_base, projects) = folder(&[("app/main.py", ""), ("plain/x.py", ""), ("file.py", "")]);
    let site = make_venv(&python, &projects.join("app/.venv"));
    dist_info(&site, "zeta", "2.0");
    dist_info(&site, "Alpha-Pkg", "1.0.3");
    dist_info(&site, "mid", "0.1");
    std::fs::write(site.join("loose.py"), "").unwrap();
    let mut server = StdioServer::start(&projects, &[]);

    let listed = server.call("list_packages", json!({"project": "app"}));
    assert_eq!(listed["isError"], false, "{listed}");
    assert_eq!(
        listed["structuredContent"],
        json!({
            "python": {"version": version_of(&python).1, "venv": "app/.venv"},
            "packages": [
                {"name": "Alpha-Pkg", "version": "1.0.3"},
                {"name": "mid", "version": "0.1"},
                {"name": "zeta", "version": "2.0"},
            ],
        })
    );
    assert!(
        text(&listed).contains("Alpha-Pkg==1.0.3\nmid==0.1\nzeta==2.0"),
        "{listed}"
    );

    // No venv: the interpreter's own, as importlib.metadata sees them.
    let plain = server.call("list_packages", json!({"project": "plain"}));
    assert_eq!(
        plain["structuredContent"]["python"]["venv"],
        Value::Null,
        "{plain}"
    );
    let names = |value: &Value| -> Vec<String> {
        let mut names: Vec<String> = value["structuredContent"]["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| normalize(p["name"].as_str().unwrap()))
            .collect();
        names.sort();
        names
    };
    let out = Command::new(&python)
        .args([
            "-I",
            "-c",
            "import importlib.metadata as m\n\
             print('\\n'.join(d.metadata['Name'] for d in m.distributions() if d.metadata['Name']))",
        ])
        .output()
        .unwrap();
    let mut expected: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(normalize)
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(names(&plain), expected);
    let root = server.call("list_packages", json!({}));
    assert_eq!(names(&root), expected);

    // Bad projects: the refusals of list_python_files, word for word.
    for bad in ["../outside", "nope", "file.py", "/etc"] {
        let listed = server.call("list_packages", json!({"project": bad}));
        let files = server.call("list_python_files", json!({"directory": bad}));
        assert_eq!(listed["isError"], true, "{listed}");
        assert_eq!(text(&listed), text(&files), "{bad}");
    }
}

/// PEP 503 normalization.
fn normalize(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// `list_packages` of a venv with 200 packages: every one, once, sorted by name (its speed is
/// measured by the bench, `list_packages, 200 packages`, not here).
#[test]
fn list_packages_lists_two_hundred_packages_sorted() {
    let (_base, projects) = folder(&[]);
    let site = make_venv(&python(), &projects.join(".venv"));
    for i in (0..200).rev() {
        dist_info(&site, &format!("package-{i:03}"), "1.0");
    }
    let mut server = StdioServer::start(&projects, &[]);
    let listed = server.call("list_packages", json!({}));
    assert_eq!(listed["isError"], false, "{listed}");
    let names: Vec<String> = listed["structuredContent"]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = (0..200).map(|i| format!("package-{i:03}")).collect();
    assert_eq!(names, expected);
}

/// The tools' schemas: `list_packages` is listed; run results declare `python`.
#[test]
fn the_schemas_declare_python_and_list_packages() {
    let (_base, projects) = folder(&[]);
    let mut server = StdioServer::start(&projects, &[]);
    let reply = server.request("tools/list", json!({}));
    let tools = reply["result"]["tools"].as_array().unwrap();
    let find = |name: &str| tools.iter().find(|t| t["name"] == name).cloned();
    let run_python = find("run_python").unwrap();
    assert!(
        run_python["outputSchema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("python")),
        "{run_python}"
    );
    let list = find("list_packages").expect("list_packages is always listed");
    assert!(
        list["inputSchema"]["properties"].get("project").is_some(),
        "{list}"
    );
    assert_eq!(list["annotations"]["readOnlyHint"], true, "{list}");
}

/// The refusal of another interpreter's venv says which Python the venv wants (its version, and
/// its interpreter's name as its pyvenv.cfg has it) and which the server runs — versions and file
/// names, never a folder — and the setting that allows it; `config --allow-venv-pythons` writes
/// that `--allow-python` into the snippet, whose server then runs the venv (`config` without it
/// says which venv it found).
#[test]
fn a_refused_venv_names_both_interpreters_and_config_allows_its_base() {
    let Some(other) = other_interpreter() else {
        eprintln!("no second interpreter on this machine: skipped");
        return;
    };
    let (base, projects) = folder(&[("main.py", "import othermod; print(othermod.X)\n")]);
    let site = make_venv(&other, &projects.join(".venv"));
    std::fs::write(site.join("othermod.py"), "X = 'other'\n").unwrap();
    let (_, wants) = version_of(&other);
    let (_, runs) = version_of(&python());
    let mut server = StdioServer::start(&projects, &[]);
    let result = run(&mut server, "main.py");
    drop(server);
    let wants_said = format!("is Python {wants} (python");
    let runs_said = format!("it runs Python {runs} (");
    assert_refused(
        &result,
        &[
            &wants_said,
            &runs_said,
            "--allow-python PATH (PYRUN_ALLOW_PYTHON)",
            "--allow-venv-pythons",
        ],
        &projects,
    );
    let config = |extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
        pyrun_mcp_tests::scrub_env(&mut cmd)
            .arg("--projects-dir")
            .arg(&projects)
            .arg("--state-dir")
            .arg(base.path().join("state"))
            .args(["config", "cursor"])
            .args(extra)
            .output()
            .unwrap()
    };
    let said = config(&[]);
    assert!(said.status.success(), "{said:?}");
    let notes = String::from_utf8_lossy(&said.stderr);
    assert!(
        notes.contains(&format!("the venv .venv wants Python {wants}"))
            && notes.contains("--allow-venv-pythons"),
        "{notes}"
    );
    assert!(!String::from_utf8_lossy(&said.stdout).contains("--allow-python"));
    let allowing = config(&["--allow-venv-pythons"]);
    assert!(allowing.status.success(), "{allowing:?}");
    let snippet: Value = serde_json::from_slice(&allowing.stdout).unwrap();
    let entry = &snippet["mcpServers"]["pyrun"];
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--allow-python"), "{args:?}");
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    pyrun_mcp_tests::scrub_env(&mut cmd)
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut server = StdioServer::attach(cmd.spawn().unwrap()).unwrap();
    let result = run(&mut server, "main.py");
    assert_eq!(result["structuredContent"]["stdout"], "other\n", "{result}");
}

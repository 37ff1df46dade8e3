//! Starting `pyrun-mcp-server` for a test or the bench: over HTTP on `127.0.0.1:0` (the address read
//! from its `listening on` line), over stdio with a JSON-RPC driver, or as the command line a stdio
//! client spawns itself. Settings come only from the flags given: the environment is scrubbed of
//! every server variable and the server runs from its projects folder, so no `.env` of the
//! developer's is read; its state folder (the audit log, OAuth's store) is a private temporary
//! one unless the test names one, so no test writes into the developer's data folder.

use std::ffi::OsString;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::env::scrub_env;
use crate::paths::{bin_path, projects_copy};
use crate::process::RunningChild;
use crate::stdio::StdioServer;

/// How long a server may take to print its `listening on` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a server did not come up: what it wrote to stderr says the rest.
#[derive(Debug)]
pub struct StartError(pub String);

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// Everything a process wrote to stderr so far, one line each, filled by a thread that reads for
/// as long as the process runs (so it never blocks on a full pipe).
pub type Log = Arc<Mutex<String>>;

/// Waits until `child` (stderr piped) prints a line containing `listening on URL` and returns the URL
/// (no trailing slash) and its stderr log, which keeps filling. Used for our server and for any
/// other that prints the same line (the FastMCP test server).
pub fn wait_for_listening(child: &mut Child, limit: Duration) -> Result<(String, Log), StartError> {
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| StartError("stderr was not piped".into()))?;
    let log = Log::default();
    let sink = Arc::clone(&log);
    let (found, addr) = mpsc::channel();
    std::thread::spawn(move || {
        let mut found = Some(found);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut log) = sink.lock() {
                log.push_str(&line);
                log.push('\n');
            }
            if let Some(url) = line.split("listening on ").nth(1) {
                if let Some(found) = found.take() {
                    let _ = found.send(url.trim().trim_end_matches('/').to_owned());
                }
            }
        }
    });
    match addr.recv_timeout(limit) {
        Ok(url) => Ok((url, log)),
        Err(_) => {
            let _ = child.kill();
            let status = child.wait().ok();
            std::thread::sleep(Duration::from_millis(100));
            Err(StartError(format!(
                "no `listening on` line within {limit:?} (exit status: {status:?}); stderr:\n{}",
                log.lock().map(|l| l.clone()).unwrap_or_default()
            )))
        }
    }
}

/// How to start one `pyrun-mcp-server`: the binary, the projects folder, extra flags and
/// environment; then [`http`](Self::http), [`stdio`](Self::stdio) or [`command`](Self::command).
pub struct ServerLaunch {
    binary: PathBuf,
    projects: Option<PathBuf>,
    current_dir: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    uid: Option<u32>,
    /// A private copy of the samples the server serves, removed with the server.
    owned_projects: Option<tempfile::TempDir>,
    /// The `--state-dir` given unless the test gives one, removed with the server.
    state: Option<tempfile::TempDir>,
}

impl ServerLaunch {
    /// `binary --projects-dir PROJECTS`, run from `projects`, with no server variable inherited.
    /// Relative paths are taken from the current directory (the server runs from another).
    pub fn new(binary: impl Into<PathBuf>, projects: &Path) -> Self {
        let absolute = |path: PathBuf| std::path::absolute(&path).unwrap_or(path);
        Self {
            binary: absolute(binary.into()),
            projects: Some(absolute(projects.to_path_buf())),
            current_dir: None,
            args: Vec::new(),
            env: Vec::new(),
            uid: None,
            owned_projects: None,
            state: tempfile::Builder::new()
                .prefix("pyrun-state-")
                .tempdir()
                .ok(),
        }
    }

    /// The workspace's built server on a private copy of `python_projects/`.
    pub fn samples() -> Self {
        Self::samples_of(bin_path("pyrun-mcp-server"))
    }

    /// Another build of the server (e.g. the conformance one) on a private copy of the samples.
    pub fn samples_of(binary: PathBuf) -> Self {
        let copy = projects_copy();
        let mut launch = Self::new(binary, copy.path());
        launch.owned_projects = Some(copy);
        launch
    }

    /// No `--projects-dir` flag: the test gives the folder its own way (or tests its absence).
    pub fn without_projects_flag(mut self) -> Self {
        self.projects = None;
        self
    }

    /// The working directory (default: the projects folder).
    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.current_dir = Some(dir.to_path_buf());
        self
    }

    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The server's log filter (`PYRUN_LOG`), with plain (uncoloured) output.
    pub fn log(self, filter: &str) -> Self {
        self.env("PYRUN_LOG", filter).env("NO_COLOR", "1")
    }

    /// Runs the server as `uid` (and the same gid): the caller, root, has made the folder theirs.
    pub fn uid(mut self, uid: u32) -> Self {
        self.uid = Some(uid);
        self
    }

    /// The command: `binary --transport TRANSPORT [--bind BIND] [--projects-dir P] [--state-dir
    /// TEMP] ARGS…`, the environment scrubbed, stdin null, stdout and stderr left for the caller
    /// to set. The temporary state folder lives as long as this launch (or the server it starts).
    pub fn command(&self, transport: &str, bind: Option<&str>) -> Command {
        let mut cmd = Command::new(&self.binary);
        scrub_env(&mut cmd);
        #[cfg(unix)]
        if let Some(uid) = self.uid {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid);
        }
        #[cfg(not(unix))]
        assert!(self.uid.is_none(), "another user's server is a Unix test");
        cmd.args(["--transport", transport]);
        if let Some(bind) = bind {
            cmd.args(["--bind", bind]);
        }
        if let Some(projects) = &self.projects {
            cmd.arg("--projects-dir").arg(projects);
        }
        if let Some(state) = self.state.as_ref().filter(|_| !self.names_state_dir()) {
            cmd.arg("--state-dir").arg(state.path());
            #[cfg(unix)]
            if let Some(uid) = self.uid {
                let _ = std::os::unix::fs::chown(state.path(), Some(uid), Some(uid));
            }
        }
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        if let Some(dir) = self.current_dir.as_ref().or(self.projects.as_ref()) {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// True when the test gives the state folder itself (flag or variable).
    fn names_state_dir(&self) -> bool {
        let flag = |a: &OsString| {
            let a = a.to_string_lossy();
            a == "--state-dir" || a.starts_with("--state-dir=")
        };
        self.args.iter().any(flag) || self.env.iter().any(|(k, _)| k == "PYRUN_STATE_DIR")
    }

    /// Starts it over HTTP on a free loopback port; panics with its stderr if it does not come up.
    pub fn http(self) -> HttpServer {
        self.try_http().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts it over HTTP on a free loopback port and waits for its address.
    pub fn try_http(self) -> Result<HttpServer, StartError> {
        self.try_http_prepared(|_| {})
    }

    /// Like [`ServerLaunch::http`], with `prepare` applied to the command last (e.g. a `pre_exec`
    /// that hands the server a descriptor).
    pub fn http_prepared(self, prepare: impl FnOnce(&mut Command)) -> HttpServer {
        self.try_http_prepared(prepare)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_http_prepared(
        self,
        prepare: impl FnOnce(&mut Command),
    ) -> Result<HttpServer, StartError> {
        let mut cmd = self.command("http", Some("127.0.0.1:0"));
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        prepare(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| StartError(format!("start {}: {e}", self.binary.display())))?;
        let (base, log) = wait_for_listening(&mut child, START_TIMEOUT)
            .map_err(|e| StartError(format!("{}: {e}", self.binary.display())))?;
        Ok(HttpServer {
            base,
            child: RunningChild(child),
            log,
            projects: self.projects.clone().unwrap_or_default(),
            _owned: self.owned_projects.into_iter().chain(self.state).collect(),
        })
    }

    /// Starts it over HTTP on a free loopback port with its stdout and stderr as `outputs` says
    /// (for tests of what it does when they fail); up once `/health`'s port accepts.
    pub fn http_with_outputs(self, outputs: Outputs) -> HttpServer {
        let port = crate::net::free_port();
        let mut cmd = self.command("http", Some(&format!("127.0.0.1:{port}")));
        let (stdout, stderr) = outputs.stdio();
        cmd.stdout(stdout).stderr(stderr);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.binary.display()));
        let log = match outputs {
            // Read until the banner is out, then the reader goes away (both pipes closed).
            Outputs::ClosedLater => {
                let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
                let mut lines = BufReader::new(stderr.expect("piped stderr")).lines();
                assert!(
                    lines.any(|l| l.is_ok_and(|l| l.contains("listening on "))),
                    "the server ended before its banner"
                );
                drop((stdout, lines));
                Log::default()
            }
            Outputs::Read => {
                let (_, log) =
                    wait_for_listening(&mut child, START_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
                log
            }
            Outputs::ClosedFromStart | Outputs::Full => Log::default(),
        };
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the server ended before it listened ({status}); outputs {outputs:?}");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server never listened"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        HttpServer {
            base: format!("http://127.0.0.1:{port}"),
            child: RunningChild(child),
            log,
            projects: self.projects.clone().unwrap_or_default(),
            _owned: self.owned_projects.into_iter().chain(self.state).collect(),
        }
    }

    /// Starts it over stdio and completes the initialize handshake.
    pub fn stdio(self) -> StdioServer {
        self.try_stdio().unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_stdio(self) -> Result<StdioServer, StartError> {
        let mut cmd = self.command("stdio", None);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| StartError(format!("start {}: {e}", self.binary.display())))?;
        let owned = self.owned_projects.into_iter().chain(self.state).collect();
        StdioServer::handshake(child, owned)
    }
}

/// Where a server's stdout and stderr go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputs {
    /// Pipes the test reads for as long as the server runs (stdout: null).
    Read,
    /// Pipes whose reader goes away once the server is up: every later write is `EPIPE`.
    ClosedLater,
    /// Pipes whose reader was gone before the server started.
    ClosedFromStart,
    /// `/dev/full`: every write is `ENOSPC`.
    Full,
}

impl Outputs {
    pub const ALL: [Outputs; 4] = [
        Outputs::Read,
        Outputs::ClosedLater,
        Outputs::ClosedFromStart,
        Outputs::Full,
    ];

    /// The server's stdout and stderr.
    pub fn stdio(self) -> (Stdio, Stdio) {
        match self {
            Outputs::Read => (Stdio::null(), Stdio::piped()),
            Outputs::ClosedLater => (Stdio::piped(), Stdio::piped()),
            Outputs::ClosedFromStart => {
                let (reader, writer) = std::io::pipe().expect("a pipe");
                drop(reader);
                let second = writer.try_clone().expect("a pipe's second end");
                (writer.into(), second.into())
            }
            Outputs::Full => {
                let full = || {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open("/dev/full")
                        .expect("/dev/full")
                };
                (full().into(), full().into())
            }
        }
    }
}

/// A `pyrun-mcp-server --transport http` on `127.0.0.1:<free port>`, stopped when dropped (SIGTERM,
/// then SIGKILL).
pub struct HttpServer {
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base: String,
    child: RunningChild,
    log: Log,
    projects: PathBuf,
    /// The projects copy and state folder it owns, removed with it.
    _owned: Vec<tempfile::TempDir>,
}

impl HttpServer {
    /// The workspace's server over HTTP on `projects` plus `extra` flags, logging at `info`.
    pub fn start(projects: &Path, extra: &[&str]) -> HttpServer {
        Self::start_logging(projects, extra, "info")
    }

    /// Like [`HttpServer::start`], with the given `PYRUN_LOG` filter.
    pub fn start_logging(projects: &Path, extra: &[&str], log: &str) -> HttpServer {
        ServerLaunch::new(bin_path("pyrun-mcp-server"), projects)
            .args(extra)
            .log(log)
            .http()
    }

    /// The workspace's server over HTTP on a private copy of `python_projects/`, plus `args`.
    pub fn samples(args: &[&str]) -> HttpServer {
        ServerLaunch::samples().args(args).http()
    }

    /// `BASE` + `path`, e.g. `url("/health")`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The Streamable HTTP endpoint, `…/mcp`.
    pub fn mcp_url(&self) -> String {
        self.url("/mcp")
    }

    /// The legacy HTTP+SSE endpoint, `…/sse`.
    pub fn sse_url(&self) -> String {
        self.url("/sse")
    }

    /// The projects folder it serves.
    pub fn projects(&self) -> &Path {
        &self.projects
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Waits for the process to exit (after a signal), returning whether it did in time.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        self.child.wait_exit(within)
    }

    /// Everything the server wrote to stderr so far (its logs), for assertions and their messages.
    pub fn logs(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// The command line a stdio client spawns: `pyrun-mcp-server --transport stdio --projects-dir COPY`.
///
/// The server inherits the client's environment, so the client must not carry the test's: the
/// harness's client launchers (`python_client`, `inspector_cli`, the real-client tests'
/// `pyrun-mcp-client` helpers) scrub every server setting from it ([`scrub_env`]), as
/// [`ServerLaunch`] does for the servers it starts.
pub struct StdioCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The projects folder it serves (removed on drop).
    pub projects: tempfile::TempDir,
    /// Its `--state-dir` (removed on drop).
    _state: tempfile::TempDir,
}

impl StdioCommand {
    pub fn new(extra: &[&str]) -> StdioCommand {
        let projects = projects_copy();
        let state = tempfile::Builder::new()
            .prefix("pyrun-state-")
            .tempdir()
            .expect("a temporary state folder");
        let mut args = vec![
            "--transport".to_owned(),
            "stdio".to_owned(),
            "--projects-dir".to_owned(),
            projects.path().display().to_string(),
            "--state-dir".to_owned(),
            state.path().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        StdioCommand {
            program: bin_path("pyrun-mcp-server"),
            args,
            projects,
            _state: state,
        }
    }
}

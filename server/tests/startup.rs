//! What the server does to itself before serving, seen from outside the real binary: inherited
//! descriptors sealed against runs, the open-file limit raised, and a `.env` inside the projects
//! folder (which scripts can write) never read.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::{HttpServer, ServerLaunch};

const DEADLINE: Duration = Duration::from_secs(30);

/// The binary over HTTP on a free port (the harness's [`HttpServer`]), run from `cwd`.
struct Running(HttpServer);

impl Running {
    /// Starts the binary from `cwd` with `args`, no setting of the test's environment, and
    /// `prepare` applied to the command.
    fn start(cwd: &Path, args: &[&str], prepare: impl FnOnce(&mut Command)) -> Self {
        let launch = ServerLaunch::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"), cwd)
            .without_projects_flag()
            .current_dir(cwd)
            .args(args)
            .env("NO_COLOR", "1");
        Self(launch.http_prepared(prepare))
    }

    /// `GET /health`'s body (which waits for the sandbox probe), and the log up to then.
    fn health(&mut self) -> String {
        let addr = self.0.base.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        write!(
            stream,
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        // The probe's log lines are written before /health answers.
        std::thread::sleep(Duration::from_millis(100));
        response
    }

    /// Every stderr line so far, the ones before `listening on` included.
    fn log(&self) -> String {
        self.0.logs()
    }
}

/// The `flags:` of a descriptor of a process, from `/proc/PID/fdinfo/FD` (octal).
#[cfg(target_os = "linux")]
fn fd_flags(pid: u32, fd: i32) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"))
        .unwrap_or_else(|e| panic!("fd {fd} of {pid}: {e}"));
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .expect("a flags: line");
    u32::from_str_radix(flags.trim(), 8).unwrap()
}

/// (soft, hard) of `Max open files` in `/proc/PID/limits`.
#[cfg(target_os = "linux")]
fn open_files_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files line");
    let mut words = line["Max open files".len()..].split_whitespace();
    (
        words.next().unwrap().to_owned(),
        words.next().unwrap().to_owned(),
    )
}

#[cfg(target_os = "linux")]
#[test]
#[allow(unsafe_code)] // a careless supervisor's leaked fd can only be made between fork and exec
fn an_inherited_descriptor_is_sealed_and_the_open_file_limit_raised() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    const INHERITED: i32 = 7;
    let projects = tempfile::tempdir().unwrap();
    // A file the test opened (close-on-exec, as std opens everything) becomes fd 7 of the server
    // without the flag, as a careless supervisor would pass it; the soft limit starts low.
    let leaked = tempfile::tempfile().unwrap();
    let leaked_fd = leaked.as_raw_fd();
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    let low = hard.map_or(256, |h| h.min(256)).saturating_sub(1);
    let mut server = Running::start(
        projects.path(),
        &["--projects-dir", "."],
        |command| unsafe {
            // SAFETY: dup2 and setrlimit are async-signal-safe; no allocation between fork and exec.
            command.pre_exec(move || {
                if libc::dup2(leaked_fd, INHERITED) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let limit = libc::rlimit {
                    rlim_cur: low,
                    rlim_max: hard.unwrap_or(libc::RLIM_INFINITY),
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        },
    );
    let pid = server.0.pid();
    let flags = fd_flags(pid, INHERITED);
    assert_ne!(
        flags & libc::O_CLOEXEC as u32,
        0,
        "fd {INHERITED} of the server would reach its runs (flags {flags:o})"
    );
    let (soft, hard) = open_files_limit(pid);
    assert_eq!(soft, hard, "the soft open-file limit was not raised");
    assert!(server.health().starts_with("HTTP/1.1 200"));
    drop(leaked);
}

#[test]
fn a_dotenv_inside_the_projects_folder_is_ignored_and_said_so() {
    let projects = tempfile::tempdir().unwrap();
    std::fs::write(projects.path().join(".env"), "PYRUN_SANDBOX=off\n").unwrap();
    // Served from the folder itself, the most common way to end up with a .env inside it.
    let mut server = Running::start(projects.path(), &["--projects-dir", "."], |_| {});
    let health = server.health();
    let log = server.log();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(log.contains(".env IGNORED"), "no warning on stderr:\n{log}");
    assert!(
        !log.contains("SANDBOX OFF"),
        "the .env turned the sandbox off:\n{log}"
    );
}

#[test]
fn a_dotenv_beside_the_projects_folder_still_applies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("projects")).unwrap();
    std::fs::write(dir.path().join(".env"), "PYRUN_SANDBOX=off\n").unwrap();
    let mut server = Running::start(dir.path(), &["--projects-dir", "projects"], |_| {});
    server.health();
    let log = server.log();
    assert!(!log.contains(".env IGNORED"), "{log}");
    assert!(log.contains("SANDBOX OFF"), "the .env was not read:\n{log}");
}

/// An empty variable is an unset one: an assistant that passes the optional settings a user left
/// blank (`PYTHON_BIN=""`, `PYRUN_SANDBOX=""`) gets the defaults, not a refusal to start.
#[test]
fn empty_setting_variables_mean_their_defaults() {
    let projects = tempfile::tempdir().unwrap();
    std::fs::write(projects.path().join("hello.py"), "print('hi')\n").unwrap();
    let mut server =
        pyrun_mcp_tests::ServerLaunch::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"), projects.path())
            .env("PYTHON_BIN", "")
            .env("PYRUN_SANDBOX", "")
            .env("PYTHON_TIMEOUT", "")
            .stdio();
    let result = server.call("run_python", serde_json::json!({"file_name": "hello.py"}));
    assert_eq!(result["isError"], serde_json::json!(false), "{result}");
    let layers = result["structuredContent"]["sandbox"].to_string();
    assert!(
        layers.contains("rlimits"),
        "the default sandbox applies: {layers}"
    );
}

/// A `.env` line that cannot be read (an unquoted value with spaces, as a passphrase often is)
/// stops the server, naming the file, the line and the variable, never the value: the token and
/// the sandbox mode after it would otherwise be dropped, and the server would listen without them.
#[test]
fn a_dotenv_line_that_cannot_be_read_stops_the_server_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("projects")).unwrap();
    std::fs::write(
        dir.path().join(".env"),
        "GREETING=hello world\nMCP_AUTH_TOKEN=tok-after-the-bad-line\nPYRUN_SANDBOX=strict\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
    pyrun_mcp_tests::scrub_env(&mut cmd)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .args([
            "--projects-dir",
            "projects",
            "--transport",
            "http",
            "--bind",
            "127.0.0.1:0",
        ]);
    let out = pyrun_mcp_tests::run_bounded(&mut cmd, DEADLINE);
    assert!(
        !out.timed_out,
        "the server started and served:\n{}",
        out.stderr
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let said = &out.stderr;
    assert!(said.contains(".env line 1 cannot be read"), "{said}");
    assert!(
        said.contains("GREETING") && said.contains("hint: quote"),
        "{said}"
    );
    assert!(!said.contains("listening on"), "{said}");
    assert!(
        !said.contains("hello world") && !said.contains("tok-after-the-bad-line"),
        "a value reached the log: {said}"
    );
}

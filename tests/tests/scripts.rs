//! The user scripts in `scripts/`: bash passes shellcheck and runs end to end on loopback (setup,
//! start-server, smoke-test, start-tunnel against a stand-in ngrok agent, stop-tunnel,
//! stop-server; nothing left running); every bash script has a PowerShell twin that parses.
#![cfg(unix)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pyrun_mcp_tests::procs::{alive, read_pid};
use pyrun_mcp_tests::{
    bin_path, free_port, python, run_bounded, sample_projects, scrub_env, target_dir,
    workspace_root, Output,
};

const LIMIT: Duration = Duration::from_secs(120);
/// The user-facing scripts; each has a `.sh` and a `.ps1` with the same name and flags.
const SCRIPTS: [&str; 7] = [
    "setup",
    "bundle",
    "start-server",
    "stop-server",
    "start-tunnel",
    "stop-tunnel",
    "smoke-test",
];

/// A throw-away checkout: the scripts, `.env.example` and a copy of the samples, so the scripts'
/// `.env` and `.run/` never touch the repository.
fn sandbox_root() -> tempfile::TempDir {
    let root = tempfile::Builder::new()
        .prefix("pyrun-scripts-")
        .tempdir()
        .unwrap();
    let scripts = root.path().join("scripts");
    std::fs::create_dir(&scripts).unwrap();
    for entry in std::fs::read_dir(workspace_root().join("scripts")).unwrap() {
        let path = entry.unwrap().path();
        // The scripts themselves; `scripts/windows/` holds the Wine test's C sources.
        if path.is_file() {
            std::fs::copy(&path, scripts.join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(
        workspace_root().join(".env.example"),
        root.path().join(".env.example"),
    )
    .unwrap();
    let projects = root.path().join("python_projects");
    std::fs::create_dir(&projects).unwrap();
    for entry in std::fs::read_dir(sample_projects()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, projects.join(path.file_name().unwrap())).unwrap();
        }
    }
    root
}

/// `bash ROOT/scripts/NAME.sh ARGS` with the debug binaries and a clean environment.
fn script(root: &Path, name: &str, args: &[&str], path_prefix: Option<&Path>) -> Output {
    let mut cmd = Command::new("bash");
    // No server setting of the developer's (the scripts start servers), nor the client's URL.
    scrub_env(&mut cmd)
        .env_remove("MCP_SERVER_URL")
        .arg(root.join("scripts").join(format!("{name}.sh")))
        .args(args)
        .current_dir(root)
        .env("PYRUN_SERVER_BIN", bin_path("pyrun-mcp-server"))
        .env("PYRUN_CLIENT_BIN", bin_path("pyrun-mcp-client"))
        // The server's state (the audit log) stays in the throw-away checkout.
        .env("PYRUN_STATE_DIR", root.join(".state"));
    if let Some(prefix) = path_prefix {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", prefix.display()));
    }
    run_bounded(&mut cmd, LIMIT)
}

/// Kills what a failed test left behind (only the pids the scripts recorded).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for file in ["server.pid", "ngrok.pid"] {
            let pid = std::fs::read_to_string(self.0.join(".run").join(file));
            if let Some(pid) = pid.ok().and_then(|p| p.trim().parse::<u32>().ok()) {
                if alive(pid) {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                }
            }
        }
    }
}

/// A stand-in for the ngrok agent: serves its local API (`/api/tunnels`) the way ngrok v3 does,
/// for the address it was asked to forward, and records its arguments. One process named `ngrok`
/// (a script run by its interpreter directly), as stop-tunnel checks the name.
fn fake_ngrok(dir: &Path, api_port: u16) {
    // The real interpreter (a shebang cannot name a shim script).
    let python = python();
    let agent = format!(
        r#"#!{python}
import http.server, json, sys
open({args:?}, "w").write("\n".join(sys.argv[1:]) + "\n")
addr = sys.argv[2]
body = json.dumps({{"tunnels": [
    {{"name": "command_line (http)", "public_url": "http://fake-1234.ngrok-free.app", "proto": "http",
      "config": {{"addr": "http://" + addr, "inspect": True}}}},
    {{"name": "command_line", "public_url": "https://fake-1234.ngrok-free.app", "proto": "https",
      "config": {{"addr": "http://" + addr, "inspect": True}}}}], "uri": "/api/tunnels"}}).encode()
class Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/tunnels" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", {api_port}), Api).serve_forever()
"#,
        python = python.display(),
        args = dir.join("ngrok.args").display().to_string(),
    );
    let path = dir.join("ngrok");
    std::fs::write(&path, agent).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn setup_creates_env_with_a_fresh_token_and_never_overwrites_it() {
    let root = sandbox_root();
    let out = script(root.path(), "setup", &["--skip-build"], None);
    assert!(out.success(), "{}", out.describe());
    let env = std::fs::read_to_string(root.path().join(".env")).unwrap();
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("MCP_AUTH_TOKEN="))
        .expect("a token line");
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.path().join(".env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o077,
        0,
        "a .env with a token must be private: {mode:o}"
    );

    let again = script(root.path(), "setup", &["--skip-build"], None);
    assert!(again.success(), "{}", again.describe());
    assert!(again.stdout.contains("kept"), "{}", again.describe());
    assert_eq!(
        std::fs::read_to_string(root.path().join(".env")).unwrap(),
        env
    );
}

#[test]
fn start_smoke_test_tunnel_and_stop_on_loopback() {
    let root = sandbox_root();
    let run = root.path().join(".run");
    let _cleanup = Cleanup(root.path().to_path_buf());
    std::fs::write(
        root.path().join(".env"),
        "MCP_BIND=127.0.0.1:0\nMCP_AUTH_TOKEN=scripts-test-token-42\n",
    )
    .unwrap();

    let start = script(root.path(), "start-server", &[], None);
    assert!(start.success(), "{}", start.describe());
    assert!(start.stdout.contains("/mcp"), "{}", start.describe());
    let server_pid = read_pid(&run.join("server.pid"));
    assert!(alive(server_pid));
    let again = script(root.path(), "start-server", &[], None);
    assert!(
        again.stdout.contains("already running"),
        "{}",
        again.describe()
    );

    let smoke = script(root.path(), "smoke-test", &[], None);
    assert!(smoke.success(), "{}", smoke.describe());
    assert!(
        smoke.stdout.contains("smoke test passed"),
        "{}",
        smoke.describe()
    );
    // Without hello_world.py it runs what the server lists, or the file it is given.
    let projects = root.path().join("python_projects");
    std::fs::remove_file(projects.join("hello_world.py")).unwrap();
    std::fs::write(projects.join("aaa_first.py"), "print('first')\n").unwrap();
    let listed = script(root.path(), "smoke-test", &[], None);
    assert!(listed.success(), "{}", listed.describe());
    assert!(
        listed.stdout.contains("ok  run aaa_first.py"),
        "{}",
        listed.describe()
    );
    std::fs::write(projects.join("zzz_last.py"), "print('last')\n").unwrap();
    let given = script(root.path(), "smoke-test", &["--file", "zzz_last.py"], None);
    assert!(given.success(), "{}", given.describe());
    assert!(
        given.stdout.contains("ok  run zzz_last.py"),
        "{}",
        given.describe()
    );
    let failing = script(
        root.path(),
        "smoke-test",
        &["--file", "error_test.py"],
        None,
    );
    assert!(
        !failing.success(),
        "a failing file passed: {}",
        failing.describe()
    );
    let wrong = script(root.path(), "smoke-test", &["--token", "wrong"], None);
    assert!(
        !wrong.success(),
        "a wrong token passed: {}",
        wrong.describe()
    );

    // start-tunnel with a stand-in agent: reads the https URL for our port from the agent's API.
    let bin = tempfile::tempdir().unwrap();
    let api_port = free_port();
    fake_ngrok(bin.path(), api_port);
    let api = format!("http://127.0.0.1:{api_port}");
    let tunnel = script(
        root.path(),
        "start-tunnel",
        &["--api", &api],
        Some(bin.path()),
    );
    assert!(tunnel.success(), "{}", tunnel.describe());
    let public = "https://fake-1234.ngrok-free.app/mcp";
    assert!(tunnel.stdout.contains(public), "{}", tunnel.describe());
    assert!(
        tunnel
            .stdout
            .contains("\"Authorization\": \"Bearer scripts-test-token-42\""),
        "the configs carry the token: {}",
        tunnel.describe()
    );
    assert_eq!(
        std::fs::read_to_string(run.join("tunnel.url"))
            .unwrap()
            .trim(),
        public
    );
    let server_url = std::fs::read_to_string(run.join("server.url")).unwrap();
    let port = server_url.trim().rsplit(':').next().unwrap().to_owned();
    let args = std::fs::read_to_string(bin.path().join("ngrok.args")).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args[..2], ["http", &format!("127.0.0.1:{port}")]);
    let host_header = format!("localhost:{port}");
    assert!(args.contains(&host_header.as_str()), "{args:?}");
    let agent_pid = read_pid(&run.join("ngrok.pid"));
    let stop = script(root.path(), "stop-tunnel", &[], Some(bin.path()));
    assert!(stop.success(), "{}", stop.describe());
    assert!(!alive(agent_pid), "the agent survived stop-tunnel");

    let stop = script(root.path(), "stop-server", &[], None);
    assert!(stop.success(), "{}", stop.describe());
    assert!(!alive(server_pid), "the server survived stop-server");
    assert!(!run.join("server.pid").exists());
    let twice = script(root.path(), "stop-server", &[], None);
    assert!(
        twice.success() && twice.stdout.contains("not running"),
        "{}",
        twice.describe()
    );
}

#[test]
fn start_tunnel_refuses_a_server_without_a_token() {
    let root = sandbox_root();
    let _cleanup = Cleanup(root.path().to_path_buf());
    std::fs::write(root.path().join(".env"), "MCP_BIND=127.0.0.1:0\n").unwrap();
    let start = script(root.path(), "start-server", &[], None);
    assert!(start.success(), "{}", start.describe());
    let bin = tempfile::tempdir().unwrap();
    fake_ngrok(bin.path(), free_port());
    let tunnel = script(root.path(), "start-tunnel", &[], Some(bin.path()));
    assert!(!tunnel.success(), "{}", tunnel.describe());
    assert!(
        tunnel.stderr.contains("does not require a token"),
        "{}",
        tunnel.describe()
    );
    assert!(
        !bin.path().join("ngrok.args").exists(),
        "the agent was started"
    );
    let stop = script(root.path(), "stop-server", &[], None);
    assert!(stop.success(), "{}", stop.describe());
}

/// `start-tunnel --oauth` (for Claude's connectors) publishes only a fixed domain, and only a
/// server that offers OAuth sign-in for it (`start-server --oauth -- --public-url …`).
#[test]
fn start_tunnel_with_oauth_needs_a_fixed_domain_and_a_server_that_offers_it() {
    let root = sandbox_root();
    let _cleanup = Cleanup(root.path().to_path_buf());
    let bin = tempfile::tempdir().unwrap();
    fake_ngrok(bin.path(), free_port());
    let tunnel = script(root.path(), "start-tunnel", &["--oauth"], Some(bin.path()));
    assert!(!tunnel.success(), "{}", tunnel.describe());
    assert!(tunnel.stderr.contains("--domain"), "{}", tunnel.describe());

    std::fs::write(
        root.path().join(".env"),
        "MCP_BIND=127.0.0.1:0\nMCP_AUTH_TOKEN=scripts-test-token-42\n",
    )
    .unwrap();
    let start = script(root.path(), "start-server", &[], None);
    assert!(start.success(), "{}", start.describe());
    let domain = "fake-1234.ngrok-free.app";
    let args = ["--oauth", "--domain", domain];
    let tunnel = script(root.path(), "start-tunnel", &args, Some(bin.path()));
    assert!(!tunnel.success(), "{}", tunnel.describe());
    assert!(
        tunnel.stderr.contains("does not offer OAuth") && tunnel.stderr.contains("--public-url"),
        "{}",
        tunnel.describe()
    );
    assert!(
        !bin.path().join("ngrok.args").exists(),
        "the agent was started"
    );
    let stop = script(root.path(), "stop-server", &[], None);
    assert!(stop.success(), "{}", stop.describe());
}

/// shellcheck from Debian: found, or installed with apt-get when running as root.
fn shellcheck() -> PathBuf {
    let found = || {
        ["/usr/bin/shellcheck", "/usr/local/bin/shellcheck"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    };
    if let Some(path) = found() {
        return path;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    assert!(
        root,
        "shellcheck is not installed and this test is not root: sudo apt-get install -y shellcheck"
    );
    for args in [&["update"][..], &["install", "-y", "shellcheck"][..]] {
        if found().is_none() {
            let _ = Command::new("apt-get")
                .args(["-o", "DPkg::Lock::Timeout=300"])
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output();
        }
    }
    found().expect("apt-get install shellcheck")
}

#[test]
fn bash_scripts_pass_shellcheck() {
    let dir = workspace_root().join("scripts");
    let mut cmd = Command::new(shellcheck());
    cmd.arg("-x").current_dir(&dir);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sh") {
            cmd.arg(path.file_name().unwrap());
        }
    }
    let out = run_bounded(&mut cmd, LIMIT);
    assert!(out.success(), "{}", out.describe());
}

/// A venv with tree-sitter's PowerShell grammar (PyPI), made once under target/test-deps/.
fn powershell_parser() -> PathBuf {
    let home = target_dir().join("test-deps").join("ps-parse");
    std::fs::create_dir_all(&home).unwrap();
    let lock = File::create(home.join(".lock")).unwrap();
    lock.lock().unwrap();
    let python = home.join("venv/bin/python");
    let ready = home.join(".ready");
    if !ready.exists() {
        let venv = run_bounded(
            Command::new(pyrun_mcp_tests::python())
                .args(["-m", "venv"])
                .arg(home.join("venv")),
            LIMIT,
        );
        assert!(venv.success(), "{}", venv.describe());
        let pip = run_bounded(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "-q",
                "tree-sitter>=0.23",
                "tree-sitter-powershell>=0.25",
            ]),
            Duration::from_secs(300),
        );
        assert!(pip.success(), "{}", pip.describe());
        std::fs::write(&ready, "").unwrap();
    }
    python
}

const PARSE_CHECK: &str = r#"
import sys, tree_sitter_powershell as tsp
from tree_sitter import Language, Parser
parser = Parser(Language(tsp.language()))
bad = 0
for path in sys.argv[1:]:
    source = open(path, "rb").read()
    stack = [parser.parse(source).root_node]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            bad += 1
            line = node.start_point[0] + 1
            print(f"{path}:{line}: cannot parse: {source[node.start_byte:node.end_byte][:80]!r}")
        stack.extend(node.children)
# The checker itself must be able to fail.
broken = parser.parse(b"if ($x { Write-Output 'no closing paren' ")
if not broken.root_node.has_error:
    print("the parser accepts broken PowerShell: check is void"); bad += 1
sys.exit(1 if bad else 0)
"#;

#[test]
fn every_bash_script_has_a_powershell_twin_that_parses() {
    let dir = workspace_root().join("scripts");
    let mut files = Vec::new();
    for name in SCRIPTS.iter().chain(["common"].iter()) {
        assert!(dir.join(format!("{name}.sh")).is_file(), "{name}.sh");
        let ps1 = dir.join(format!("{name}.ps1"));
        assert!(ps1.is_file(), "{name}.sh has no PowerShell twin {name}.ps1");
        files.push(ps1);
    }
    let out = run_bounded(
        Command::new(powershell_parser())
            .args(["-c", PARSE_CHECK])
            .args(&files),
        LIMIT,
    );
    assert!(out.success(), "{}", out.describe());
}

/// Without the ngrok agent, start-tunnel advises the built-in tunnel only as this server binary
/// has it (a default build does not: it says how to build one), never a loop between the two.
#[test]
fn start_tunnel_without_the_agent_gives_advice_that_works_with_this_server() {
    let root = sandbox_root();
    let out = script(root.path(), "start-tunnel", &["--port", "1"], None);
    if which_ngrok() {
        eprintln!("not tried: an ngrok agent is on PATH");
        return;
    }
    assert!(!out.success(), "{}", out.describe());
    let version = Command::new(bin_path("pyrun-mcp-server"))
        .arg("--version")
        .output()
        .unwrap();
    let built_in = String::from_utf8_lossy(&version.stdout).contains("tunnel: built in");
    if built_in {
        assert!(
            out.stderr.contains("use the server's built-in tunnel"),
            "{}",
            out.describe()
        );
    } else {
        assert!(
            out.stderr.contains("--features pyrun-mcp-server/tunnel")
                && !out.stderr.contains("use the server's built-in tunnel"),
            "{}",
            out.describe()
        );
    }
}

fn which_ngrok() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("ngrok").is_file()))
}

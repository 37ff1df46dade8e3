//! Settings: the only module that reads flags, the environment and `.env`. Parsing happens in two
//! stages: clap validates the text (no I/O), then [`Cli::resolve`] checks the world (the folder
//! exists, the interpreter runs) and produces the plain [`Config`] the rest of the server receives.
//! Precedence: flag > environment > `.env` > default.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::integrations::{Assistant, BadUrl, RemoteUrl, Target};

/// Upper bound for `--timeout`: a day. Anything longer is almost surely a typo.
const MAX_TIMEOUT_SECS: u64 = 86_400;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// JSON-RPC over standard input/output (Claude Desktop, Claude Code, Cursor...).
    Stdio,
    /// Streamable HTTP on /mcp and legacy HTTP+SSE on /sse.
    Http,
}

/// Run the Python files of one projects folder for MCP clients, safely.
#[derive(Debug, Parser)]
#[command(name = "pyrun-mcp-server", version, about, long_about = None)]
pub struct Cli {
    /// How clients connect.
    #[arg(long, env = "MCP_TRANSPORT", value_enum, default_value_t = Transport::Http)]
    pub transport: Transport,

    /// The folder whose .py files may run; nothing outside it can.
    #[arg(long, env = "PYTHON_PROJECTS_DIR", default_value = "./python_projects")]
    pub projects_dir: PathBuf,

    /// Longest a run may take, in seconds (1 to 86400); a tool call may ask for less, never more.
    #[arg(long, env = "PYTHON_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_SECS))]
    pub timeout: u64,

    /// Python interpreter [default: `python3` on PATH (`python` on Windows), resolved once at start-up].
    #[arg(long, env = "PYTHON_BIN")]
    pub python: Option<PathBuf>,

    /// Output kept per stream (stdout, stderr), in bytes; the rest is counted and dropped.
    #[arg(long, env = "PYRUN_MAX_OUTPUT_BYTES", default_value_t = 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    pub max_output_bytes: u64,

    /// Runs at once; further calls wait their turn [default: 2 x CPUs].
    #[arg(long, env = "PYRUN_MAX_CONCURRENT", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_concurrent: Option<u64>,

    /// Also pass this environment variable to scripts (repeatable; comma-separated in the variable).
    #[arg(
        long = "pass-env",
        env = "PYRUN_PASS_ENV",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub pass_env: Vec<String>,

    #[command(flatten)]
    pub tunnel: TunnelCli,

    #[command(subcommand)]
    pub command: Option<Subcommand>,
}

/// What to do instead of serving.
#[derive(Debug, clap::Subcommand)]
pub enum Subcommand {
    /// Print the snippet that connects an AI assistant to this server (stdio, or --url for a
    /// running server reached over HTTP).
    Config {
        #[arg(value_enum)]
        assistant: Assistant,
        /// The server's URL (`https://…/mcp` or `…/sse`; a bare base gets `/mcp`) [default: stdio,
        /// the assistant starts this binary itself].
        #[arg(long)]
        url: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TunnelProvider {
    /// ngrok (https://ngrok.com), opened in-process; needs NGROK_AUTHTOKEN.
    Ngrok,
}

/// Settings of `--tunnel`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Public URL (tunnel)")]
pub struct TunnelCli {
    /// Give the HTTP server a public https URL (needs a build with the `tunnel` feature, an auth
    /// token, and NGROK_AUTHTOKEN); the URLs are printed on stderr.
    #[arg(long, env = "MCP_TUNNEL", value_enum)]
    pub tunnel: Option<TunnelProvider>,

    /// ngrok authtoken (https://dashboard.ngrok.com/get-started/your-authtoken); prefer the
    /// variable or .env to the flag, which other users can see.
    #[arg(
        long,
        env = "NGROK_AUTHTOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub ngrok_authtoken: Option<String>,

    /// A domain reserved in your ngrok account, e.g. pyrun.ngrok.app [default: a random one].
    #[arg(long, env = "MCP_TUNNEL_DOMAIN", value_name = "DOMAIN")]
    pub tunnel_domain: Option<String>,

    /// Write the public `…/mcp` URL to this file once the tunnel is open.
    #[arg(long, env = "MCP_URL_FILE", value_name = "FILE")]
    pub url_file: Option<PathBuf>,

    /// The ngrok service to connect to (for tests) [default: ngrok's].
    #[arg(long, env = "NGROK_SERVER_ADDR", hide = true)]
    pub ngrok_server_addr: Option<String>,
}

/// Everything the server needs, validated and resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub transport: Transport,
    /// As given (for messages); the canonical folder lives in `paths::ProjectRoot`.
    pub projects_dir: PathBuf,
    pub timeout: Duration,
    pub python: PathBuf,
    pub max_output_bytes: usize,
    pub max_concurrent: usize,
    pub pass_env: Vec<String>,
    /// The public URL to open, if any (`--tunnel`).
    pub tunnel: Option<TunnelConfig>,
}

/// How to open the tunnel, validated: an auth token is set for the server.
#[derive(Clone)]
pub struct TunnelConfig {
    pub provider: TunnelProvider,
    pub authtoken: String,
    pub domain: Option<String>,
    pub url_file: Option<PathBuf>,
    pub server_addr: Option<String>,
}

impl std::fmt::Debug for TunnelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelConfig")
            .field("provider", &self.provider)
            .field("authtoken", &"<set>")
            .field("domain", &self.domain)
            .field("url_file", &self.url_file)
            .field("server_addr", &self.server_addr)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("projects folder '{0}' does not exist or is not a directory\nhint: pass --projects-dir DIR or set PYTHON_PROJECTS_DIR")]
    ProjectsDir(String),
    #[error("no Python interpreter found: {0}\nhint: install Python 3, or pass --python PATH / set PYTHON_BIN")]
    NoPython(String),
    #[error("--pass-env '{0}' is not a valid variable name")]
    BadEnvName(String),
    #[error(
        "--tunnel needs the HTTP transport\nhint: drop --transport stdio (or MCP_TRANSPORT=stdio)"
    )]
    TunnelNeedsHttp,
    #[error("refusing to open a public URL without an auth token: anyone could run your scripts\nhint: set MCP_AUTH_TOKEN in .env (scripts/setup makes one) or pass --auth-token TOKEN")]
    TunnelWithoutAuthToken,
    #[error("--tunnel ngrok needs an ngrok authtoken\nhint: copy yours from https://dashboard.ngrok.com/get-started/your-authtoken into NGROK_AUTHTOKEN (environment or .env)")]
    NoNgrokAuthtoken,
    #[error("--tunnel-domain '{0}' is not a domain name\nhint: give the bare name reserved in your ngrok account, e.g. pyrun.ngrok.app (no scheme, no path)")]
    BadTunnelDomain(String),
    #[error("cannot tell where this server binary is: {0}")]
    NoOwnPath(String),
    #[error(transparent)]
    BadUrl(#[from] BadUrl),
}

impl Cli {
    /// Loads `.env` from the current directory (the real environment wins), then parses the flags.
    pub fn load() -> Self {
        // A missing .env is normal; a malformed one is reported by clap's view of the environment.
        let _ = dotenvy::dotenv();
        Self::parse()
    }

    /// Second stage: checks the folder and the interpreter and resolves defaults.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        if !self.projects_dir.is_dir() {
            return Err(ConfigError::ProjectsDir(
                self.projects_dir.display().to_string(),
            ));
        }
        for name in &self.pass_env {
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(ConfigError::BadEnvName(name.clone()));
            }
        }
        let tunnel = self.resolve_tunnel()?;
        let python = resolve_python(self.python.as_deref())?;
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Ok(Config {
            tunnel,
            transport: self.transport,
            projects_dir: self.projects_dir,
            timeout: Duration::from_secs(self.timeout),
            python,
            max_output_bytes: usize::try_from(self.max_output_bytes).unwrap_or(usize::MAX),
            max_concurrent: self
                .max_concurrent
                .map_or(2 * cpus, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            pass_env: self.pass_env,
        })
    }

    /// A public URL is opened only over HTTP, with an auth token, and with ngrok's own token.
    fn resolve_tunnel(&self) -> Result<Option<TunnelConfig>, ConfigError> {
        let Some(provider) = self.tunnel.tunnel else {
            return Ok(None);
        };
        if self.transport != Transport::Http {
            return Err(ConfigError::TunnelNeedsHttp);
        }
        if self.auth_token().is_none() {
            return Err(ConfigError::TunnelWithoutAuthToken);
        }
        let authtoken = self
            .tunnel
            .ngrok_authtoken
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(ConfigError::NoNgrokAuthtoken)?;
        let domain = self.tunnel.tunnel_domain.as_deref().map(str::trim);
        if let Some(domain) = domain.filter(|d| !is_domain(d)) {
            return Err(ConfigError::BadTunnelDomain(domain.to_owned()));
        }
        Ok(Some(TunnelConfig {
            provider,
            authtoken: authtoken.to_owned(),
            domain: domain.map(str::to_owned),
            url_file: self.tunnel.url_file.clone(),
            server_addr: self.tunnel.ngrok_server_addr.clone(),
        }))
    }

    /// The token HTTP clients must send, if one is configured.
    fn auth_token(&self) -> Option<String> {
        std::env::var("MCP_AUTH_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
    }

    /// For `config ASSISTANT [--url URL]`: where the assistant reaches this server.
    pub fn integration_target(&self, url: Option<&str>) -> Result<Target, ConfigError> {
        if let Some(url) = url {
            return Ok(Target::Remote {
                url: RemoteUrl::parse(url)?,
                token: self.auth_token(),
            });
        }
        let server = std::env::current_exe()
            .and_then(dunce::canonicalize)
            .map_err(|e| ConfigError::NoOwnPath(e.to_string()))?;
        let projects_dir = dunce::canonicalize(&self.projects_dir)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| ConfigError::ProjectsDir(self.projects_dir.display().to_string()))?;
        Ok(Target::Stdio {
            server,
            projects_dir,
            // Assistants start servers with a bare PATH: name the interpreter when it is known.
            python: resolve_python(self.python.as_deref()).ok(),
        })
    }
}

/// A bare DNS name with at least one dot: `pyrun.ngrok.app`.
fn is_domain(name: &str) -> bool {
    name.contains('.')
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Resolves the interpreter once, so a version-manager shim (pyenv, asdf: a shell script costing
/// ~100 ms) is not paid on every run. A native executable found directly is the interpreter itself
/// and is used as found (a venv's `bin/python` must keep its path); anything else (a shim script, a
/// Windows app alias) is asked for `sys.executable`.
pub fn resolve_python(given: Option<&Path>) -> Result<PathBuf, ConfigError> {
    let default = if cfg!(windows) { "python" } else { "python3" };
    let candidate = given.unwrap_or(Path::new(default));
    match locate(candidate) {
        Some(found) if is_native_executable(&found) => {
            Ok(std::path::absolute(&found).unwrap_or(found))
        }
        _ => ask_interpreter(candidate),
    }
}

/// The file a command name or path refers to, searching PATH for a bare name.
fn locate(candidate: &Path) -> Option<PathBuf> {
    if candidate.components().count() > 1 || candidate.is_absolute() {
        return candidate.is_file().then(|| candidate.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(candidate))
        .find(|p| p.is_file())
}

/// ELF (Linux) or Mach-O (macOS) magic: a real program, not a script. Windows always asks.
fn is_native_executable(path: &Path) -> bool {
    use std::io::Read;
    if cfg!(windows) {
        return false;
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    read.is_ok()
        && matches!(
            magic,
            [0x7f, b'E', b'L', b'F']
                | [0xcf, 0xfa, 0xed, 0xfe]
                | [0xce, 0xfa, 0xed, 0xfe]
                | [0xca, 0xfe, 0xba, 0xbe]
        )
}

/// Starts the interpreter once to learn its real path.
fn ask_interpreter(candidate: &Path) -> Result<PathBuf, ConfigError> {
    let output = Command::new(candidate)
        .args(["-c", "import sys; print(sys.executable)"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| ConfigError::NoPython(format!("'{}': {e}", candidate.display())))?;
    if !output.status.success() {
        return Err(ConfigError::NoPython(format!(
            "'{}' exited with {}",
            candidate.display(),
            output.status
        )));
    }
    let reported = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let path = PathBuf::from(&reported);
    if reported.is_empty() || !path.is_file() {
        // Embedded or unusual interpreters may not know their path: keep what worked.
        return Ok(candidate.to_path_buf());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("pyrun-mcp-server").chain(args.iter().copied()))
    }

    #[test]
    fn rejects_zero_and_absurd_timeouts() {
        assert!(parse(&["--timeout", "0"]).is_err());
        assert!(parse(&["--timeout", "86401"]).is_err());
        assert!(parse(&["--timeout", "-3"]).is_err());
        assert_eq!(parse(&["--timeout", "5"]).unwrap().timeout, 5);
    }

    #[test]
    fn missing_projects_dir_names_flag_and_variable() {
        let cli = parse(&["--projects-dir", "/definitely/not/here"]).unwrap();
        let msg = cli.resolve().unwrap_err().to_string();
        assert!(msg.contains("--projects-dir") && msg.contains("PYTHON_PROJECTS_DIR"));
    }

    #[test]
    fn bad_python_is_a_clear_error() {
        let err = resolve_python(Some(Path::new("/no/such/python"))).unwrap_err();
        assert!(err.to_string().contains("--python"));
    }

    #[cfg(unix)]
    #[test]
    fn a_shim_script_is_resolved_to_the_real_interpreter() {
        use std::os::unix::fs::PermissionsExt;
        let real = resolve_python(None).expect("python3 installed");
        assert!(is_native_executable(&real), "{}", real.display());
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join("python3");
        std::fs::write(
            &shim,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", real.display()),
        )
        .unwrap();
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        let resolved = resolve_python(Some(&shim)).unwrap();
        assert_ne!(resolved, shim);
        assert!(is_native_executable(&resolved));
    }

    #[test]
    fn bad_pass_env_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cli = parse(&[
            "--projects-dir",
            dir.path().to_str().unwrap(),
            "--pass-env",
            "A=B",
        ])
        .unwrap();
        assert!(matches!(cli.resolve(), Err(ConfigError::BadEnvName(_))));
    }
}

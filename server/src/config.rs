//! Settings: the only module that reads flags, the environment and `.env`. Parsing happens in two
//! stages: clap validates the text (no I/O), then [`Cli::resolve`] checks the world (the folder
//! exists, the interpreter runs) and produces the plain [`Config`] the rest of the server receives.
//! Precedence: flag > environment > `.env` > default. A `.env` that lies inside the projects folder
//! is never read: scripts can write there.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory, Parser, ValueEnum};

use crate::integrations::{Assistant, BadUrl, RemoteUrl, Target};
use pyrun_sandbox::{resolve_python, ResourceLimits, SandboxMode};

include!("env_vars.rs");

/// Upper bound for `--timeout`: a day. Anything longer is almost surely a typo.
const MAX_TIMEOUT_SECS: u64 = 86_400;
/// The settings file, read from the working directory only.
const DOTENV: &str = ".env";
/// The variable (and `.env` key) that names the projects folder.
const PROJECTS_DIR_VAR: &str = "PYTHON_PROJECTS_DIR";

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
    pub http: HttpCli,

    #[command(flatten)]
    pub sandbox: SandboxCli,

    #[command(flatten)]
    pub tunnel: TunnelCli,

    #[command(subcommand)]
    pub command: Option<Subcommand>,
}

/// How every run is confined (see README, "Security model").
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxCli {
    /// Isolation of runs: `standard` applies every layer the machine supports, `strict` refuses to
    /// start unless all are available, `off` gives scripts all the rights of the server.
    #[arg(long = "sandbox", env = "PYRUN_SANDBOX", default_value_t = SandboxMode::Standard,
          value_parser = sandbox_mode_parser())]
    pub mode: SandboxMode,

    /// Let scripts open TCP/UDP sockets (UNIX sockets stay closed).
    #[arg(long, env = "PYRUN_ALLOW_NETWORK")]
    pub allow_network: bool,

    /// Scripts may read the projects folder but not change it; they write only to their scratch
    /// folder ($HOME, $TMPDIR). Implied by --sandbox strict.
    #[arg(long, env = "PYRUN_READ_ONLY_PROJECTS")]
    pub read_only_projects: bool,

    /// Memory of a run in MiB (address space per process; the whole run where a memory cgroup
    /// exists). 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_MEMORY_MB", default_value_t = 2048)]
    pub max_memory_mb: u64,

    /// CPU seconds per process of a run; never less than --timeout. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_CPU_SECS", default_value_t = 300)]
    pub max_cpu_secs: u64,

    /// Largest file a run may write, in MiB. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_FILE_SIZE_MB", default_value_t = 1024)]
    pub max_file_size_mb: u64,

    /// Open files per process of a run. 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_OPEN_FILES", default_value_t = 1024)]
    pub max_open_files: u64,

    /// Processes and threads of a run (a fork bomb stops here). 0 = unlimited.
    #[arg(long, env = "PYRUN_MAX_PROCESSES", default_value_t = 64)]
    pub max_processes: u64,
}

/// Settings of `--transport http`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "HTTP transport")]
pub struct HttpCli {
    /// Address to listen on; port 0 picks a free port (the actual address is printed on stderr).
    #[arg(
        long,
        env = "MCP_BIND",
        default_value = "127.0.0.1:8000",
        value_name = "ADDR:PORT"
    )]
    pub bind: SocketAddr,

    /// Require `Authorization: Bearer TOKEN` on every route but /health.
    #[arg(
        long,
        env = "MCP_AUTH_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub auth_token: Option<String>,

    /// Also accept this Host (and Origin), e.g. a tunnel's hostname; loopback names are always
    /// accepted (repeatable; comma-separated in the variable).
    #[arg(
        long = "allowed-host",
        env = "MCP_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "HOST[:PORT]"
    )]
    pub allowed_hosts: Vec<String>,

    /// Serve a non-loopback address without a token (only behind something else that authenticates).
    #[arg(long, env = "MCP_ALLOW_UNAUTHENTICATED", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_unauthenticated: bool,

    /// Live sessions at once (Streamable HTTP and SSE together); more get 503.
    #[arg(long, env = "MCP_MAX_SESSIONS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_sessions: u64,

    /// Seconds after which a session without any message is closed.
    #[arg(long, env = "MCP_SESSION_IDLE_TIMEOUT", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_SECS * 7))]
    pub session_idle_timeout: u64,

    /// Largest request body, in bytes.
    #[arg(long, env = "MCP_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=(1 << 30)))]
    pub max_body_bytes: u64,

    /// Seconds a request gets to send its whole body, counted from its head; a slower one gets 408.
    #[arg(long, env = "MCP_BODY_TIMEOUT", default_value_t = 30, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout: u64,

    /// Open connections at once (idle keep-alive ones and SSE streams count); more are closed at once.
    #[arg(long, env = "MCP_MAX_CONNECTIONS", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
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
    pub http: HttpConfig,
    pub sandbox: SandboxConfig,
    /// The public URL to open, if any (`--tunnel`).
    pub tunnel: Option<TunnelConfig>,
}

/// How runs are confined, validated.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub mode: SandboxMode,
    pub allow_network: bool,
    /// Runs may not change the projects folder (`--read-only-projects`, or `strict`).
    pub read_only_projects: bool,
    pub limits: ResourceLimits,
}

/// How `--transport http` serves, validated.
#[derive(Clone)]
pub struct HttpConfig {
    pub bind: SocketAddr,
    pub auth_token: Option<String>,
    /// Hosts accepted besides the loopback names, as `host` or `host:port`.
    pub allowed_hosts: Vec<String>,
    /// True when a non-loopback address is served without a token on purpose.
    pub unauthenticated_public: bool,
    pub max_sessions: usize,
    pub session_idle_timeout: Duration,
    pub max_body_bytes: usize,
    /// Time a request gets to send its whole body.
    pub body_timeout: Duration,
    pub max_connections: usize,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("bind", &self.bind)
            .field("auth_token", &self.auth_token.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("unauthenticated_public", &self.unauthenticated_public)
            .field("max_sessions", &self.max_sessions)
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .finish()
    }
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
    #[error("{0}\nhint: install Python 3, or pass --python PATH / set PYTHON_BIN")]
    NoPython(#[from] pyrun_sandbox::PythonError),
    #[error("--pass-env '{0}' is not a valid variable name")]
    BadEnvName(String),
    #[error("refusing to serve {0} without authentication: anyone who reaches it could run your scripts\nhint: set a token with --auth-token TOKEN or MCP_AUTH_TOKEN (e.g. MCP_AUTH_TOKEN=$(openssl rand -hex 32)), or bind 127.0.0.1; pass --allow-unauthenticated only if something in front of the server authenticates")]
    UnauthenticatedPublicBind(SocketAddr),
    #[error("the auth token must be 1 to 1024 visible ASCII characters without spaces\nhint: MCP_AUTH_TOKEN=$(openssl rand -hex 32)")]
    BadAuthToken,
    #[error("--allowed-host '{0}' is not a host name\nhint: give a bare host or host:port such as abc.trycloudflare.com (no scheme, no path)")]
    BadAllowedHost(String),
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
    /// Loads `.env` from the current directory (the real environment wins) unless it lies inside
    /// the projects folder, then parses the flags. Call before any thread starts (it sets
    /// variables); log the returned [`Dotenv`] once logging is set up.
    pub fn load() -> (Self, Dotenv) {
        let dotenv = Dotenv::read(Path::new(DOTENV), |from_file| {
            // Which folder would be served with the file applied: flag > environment > file >
            // default. Flags are parsed here without the file (clap exits on --help or a bad flag,
            // as the parse below would).
            let matches = Self::command().get_matches();
            let given = matches.get_one::<PathBuf>("projects_dir").cloned();
            match (matches.value_source("projects_dir"), from_file) {
                (Some(ValueSource::DefaultValue) | None, Some(dir)) => Some(PathBuf::from(dir)),
                _ => given,
            }
        });
        dotenv.apply();
        (Self::parse(), dotenv)
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
        let http = self.http.resolve(self.transport)?;
        let python = resolve_python(self.python.as_deref())?;
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let sandbox = self.sandbox.resolve(self.timeout);
        Ok(Config {
            transport: self.transport,
            projects_dir: self.projects_dir,
            timeout: Duration::from_secs(self.timeout),
            python,
            max_output_bytes: usize::try_from(self.max_output_bytes).unwrap_or(usize::MAX),
            max_concurrent: self
                .max_concurrent
                .map_or(2 * cpus, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            pass_env: self.pass_env,
            http,
            sandbox,
            tunnel,
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
        self.http
            .auth_token
            .clone()
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

impl SandboxCli {
    fn resolve(self, timeout_secs: u64) -> SandboxConfig {
        const MIB: u64 = 1 << 20;
        let cpu_secs = match self.max_cpu_secs {
            0 => 0,
            n => n.max(timeout_secs),
        };
        SandboxConfig {
            mode: self.mode,
            allow_network: self.allow_network,
            read_only_projects: self.read_only_projects || self.mode == SandboxMode::Strict,
            limits: ResourceLimits {
                memory_bytes: self.max_memory_mb.saturating_mul(MIB),
                cpu_secs,
                file_size_bytes: self.max_file_size_mb.saturating_mul(MIB),
                open_files: self.max_open_files,
                processes: self.max_processes,
            },
        }
    }
}

impl HttpCli {
    /// Validates the HTTP settings; a public address needs a token unless opted out explicitly.
    fn resolve(self, transport: Transport) -> Result<HttpConfig, ConfigError> {
        if let Some(token) = &self.auth_token {
            let visible = token.bytes().all(|b| b.is_ascii_graphic());
            if token.is_empty() || token.len() > 1024 || !visible {
                return Err(ConfigError::BadAuthToken);
            }
        }
        let mut allowed_hosts = Vec::with_capacity(self.allowed_hosts.len() + 1);
        for host in self
            .allowed_hosts
            .iter()
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
        {
            if !is_host_and_port(host) {
                return Err(ConfigError::BadAllowedHost(host.to_owned()));
            }
            allowed_hosts.push(host.to_owned());
        }
        let ip = self.bind.ip();
        let public = !ip.is_loopback();
        if public && !ip.is_unspecified() {
            // Clients that reach a specific address name it in their Host header.
            allowed_hosts.push(ip.to_string());
        }
        if transport == Transport::Http
            && public
            && self.auth_token.is_none()
            && !self.allow_unauthenticated
        {
            return Err(ConfigError::UnauthenticatedPublicBind(self.bind));
        }
        Ok(HttpConfig {
            bind: self.bind,
            unauthenticated_public: public && self.auth_token.is_none(),
            auth_token: self.auth_token,
            allowed_hosts,
            max_sessions: usize::try_from(self.max_sessions).unwrap_or(usize::MAX),
            session_idle_timeout: Duration::from_secs(self.session_idle_timeout),
            max_body_bytes: usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX),
            body_timeout: Duration::from_secs(self.body_timeout),
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
        })
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address; no scheme, path or user.
fn is_host_and_port(entry: &str) -> bool {
    if entry.parse::<std::net::Ipv6Addr>().is_ok() {
        return true;
    }
    let (host_ok, port) = match entry.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, after)) => (v6.parse::<std::net::Ipv6Addr>().is_ok(), after),
            None => return false,
        },
        None => {
            let (host, after) = entry.find(':').map_or((entry, ""), |i| entry.split_at(i));
            let name_ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            (name_ok, after)
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok());
    host_ok && port_ok
}

/// What start-up did with `.env`: the entries are read without applying them, the projects folder
/// they would select is resolved, and the whole file is ignored when it lies inside that folder
/// (a script could have written it: `PYRUN_SANDBOX=off`, a token, another interpreter...).
#[derive(Debug)]
pub enum Dotenv {
    /// No `.env` in the working directory.
    Absent,
    /// Read, and applied below the real environment.
    Loaded {
        file: PathBuf,
        entries: Vec<(String, String)>,
        /// The first line dotenvy could not parse (the lines before it are kept).
        malformed: Option<String>,
    },
    /// Found inside the projects folder, so not read into the environment at all.
    IgnoredInsideProjects { file: PathBuf, projects: PathBuf },
}

impl Dotenv {
    /// Reads `file` if it exists. `projects_for` gets the file's `PYTHON_PROJECTS_DIR` (if any)
    /// and returns the projects folder the server would serve with the file applied.
    fn read(file: &Path, projects_for: impl FnOnce(Option<&str>) -> Option<PathBuf>) -> Self {
        if !file.is_file() {
            return Self::Absent;
        }
        let (entries, malformed) = match dotenvy::from_path_iter(file) {
            Ok(iter) => {
                let mut entries = Vec::new();
                let mut malformed = None;
                for item in iter {
                    match item {
                        Ok(entry) => entries.push(entry),
                        Err(e) => {
                            malformed = Some(e.to_string());
                            break;
                        }
                    }
                }
                (entries, malformed)
            }
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let from_file = entries
            .iter()
            .rev()
            .find(|(key, _)| key == PROJECTS_DIR_VAR)
            .map(|(_, value)| value.as_str());
        if let Some(projects) = projects_for(from_file).and_then(|p| dunce::canonicalize(p).ok()) {
            if lies_inside(file, &projects) {
                return Self::IgnoredInsideProjects {
                    file: file.to_path_buf(),
                    projects,
                };
            }
        }
        Self::Loaded {
            file: file.to_path_buf(),
            entries,
            malformed,
        }
    }

    /// Sets each entry that the real environment does not already set (the environment wins).
    fn apply(&self) {
        if let Self::Loaded { entries, .. } = self {
            for (key, value) in entries {
                if std::env::var_os(key).is_none() {
                    std::env::set_var(key, value);
                }
            }
        }
    }

    /// Reports what happened, once tracing is set up.
    pub fn log(&self) {
        match self {
            Self::Absent => {}
            Self::Loaded {
                file, malformed, ..
            } => {
                let file = file.display();
                match malformed {
                    None => tracing::debug!(%file, "settings read from .env"),
                    Some(error) => tracing::warn!(
                        %file,
                        %error,
                        "part of .env could not be read; the lines before the error were applied"
                    ),
                }
            }
            Self::IgnoredInsideProjects { file, projects } => tracing::warn!(
                file = %file.display(),
                projects = %projects.display(),
                ".env IGNORED: it lies inside the projects folder, where scripts can write it; \
                 none of its settings apply. Move it out of the folder (e.g. start the server \
                 from the folder's parent), or set the variables in the environment"
            ),
        }
    }
}

/// Whether `file` is inside `projects` (canonical), by where it is or by where it points.
fn lies_inside(file: &Path, projects: &Path) -> bool {
    let folder = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let located = dunce::canonicalize(folder)
        .ok()
        .zip(file.file_name())
        .map(|(folder, name)| folder.join(name));
    let target = dunce::canonicalize(file).ok();
    [located, target]
        .into_iter()
        .flatten()
        .any(|path| path.starts_with(projects))
}

/// `--sandbox`: one of the sandbox's own mode names (listed in `--help` and in errors).
fn sandbox_mode_parser() -> impl clap::builder::TypedValueParser<Value = SandboxMode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(SandboxMode::NAMES)
        .try_map(|s| s.parse::<SandboxMode>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("pyrun-mcp-server").chain(args.iter().copied()))
    }

    fn resolve_http(args: &[&str]) -> Result<HttpConfig, ConfigError> {
        parse(args).unwrap().http.resolve(Transport::Http)
    }

    #[test]
    fn public_bind_needs_a_token_or_an_explicit_opt_out() {
        let err = resolve_http(&["--bind", "0.0.0.0:8000"]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("--auth-token") && msg.contains("MCP_AUTH_TOKEN"),
            "{msg}"
        );
        assert!(resolve_http(&["--bind", "0.0.0.0:8000", "--auth-token", "t0k"]).is_ok());
        let open = resolve_http(&["--bind", "0.0.0.0:8000", "--allow-unauthenticated"]).unwrap();
        assert!(open.unauthenticated_public);
        assert!(
            !resolve_http(&["--bind", "127.0.0.1:0"])
                .unwrap()
                .unauthenticated_public
        );
        assert!(resolve_http(&["--bind", "[::1]:0"]).is_ok());
        // stdio never listens, so the HTTP address does not matter there.
        let stdio = parse(&["--bind", "0.0.0.0:8000"]).unwrap().http;
        assert!(stdio.resolve(Transport::Stdio).is_ok());
    }

    #[test]
    fn bad_tokens_and_hosts_are_refused_with_a_hint() {
        for token in ["", "has space", "tab\there"] {
            let err = resolve_http(&["--auth-token", token]).unwrap_err();
            assert!(matches!(err, ConfigError::BadAuthToken), "{token:?}");
        }
        for host in [
            "https://x.example",
            "x.example/path",
            "user@x.example",
            "x:port",
            "[zz]",
        ] {
            let err = resolve_http(&["--allowed-host", host]).unwrap_err();
            assert!(err.to_string().contains("--allowed-host"), "{host:?}");
        }
        let ok = resolve_http(&[
            "--allowed-host",
            "abc.trycloudflare.com,tunnel.example:8443,[fe80::1]:80,fe80::2",
        ])
        .unwrap();
        assert_eq!(ok.allowed_hosts.len(), 4);
    }

    #[test]
    fn a_specific_public_address_is_an_allowed_host() {
        let config = resolve_http(&["--bind", "192.0.2.7:8000", "--auth-token", "t"]).unwrap();
        assert_eq!(config.allowed_hosts, ["192.0.2.7"]);
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

    /// Every variable named in this file's clap attributes or read by name here or in main.rs.
    fn variables_read_in(source: &str) -> Vec<String> {
        let patterns = ["env = \"", "var_os(\"", "var(\"", "try_from_env(\""];
        let mut names = Vec::new();
        for pattern in patterns {
            for (at, _) in source.match_indices(pattern) {
                let rest = &source[at + pattern.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && rest[name.len()..].starts_with('"') {
                    names.push(name);
                }
            }
        }
        names
    }

    #[test]
    fn env_vars_lists_every_variable_the_server_reads() {
        let read: Vec<String> = [include_str!("config.rs"), include_str!("main.rs")]
            .into_iter()
            .flat_map(variables_read_in)
            .filter(|name| name != "PATH")
            .collect();
        assert!(
            read.len() >= 20,
            "the scan found too few variables: {read:?}"
        );
        for name in &read {
            assert!(
                ENV_VARS.contains(&name.as_str()),
                "{name} is read by the server but missing from ENV_VARS (server/src/env_vars.rs)"
            );
        }
        // Every clap variable is really one of the server's (no stale entry hides a typo).
        let cli = Cli::command();
        let mut declared: Vec<String> = Vec::new();
        let mut commands = vec![&cli];
        while let Some(command) = commands.pop() {
            declared.extend(
                command
                    .get_arguments()
                    .filter_map(|a| a.get_env())
                    .map(|e| e.to_string_lossy().into_owned()),
            );
            commands.extend(command.get_subcommands());
        }
        for name in &declared {
            assert!(read.contains(name), "{name} was not found by the scan");
        }
    }

    #[test]
    fn new_http_limits_have_defaults_and_bounds() {
        let http = resolve_http(&[]).unwrap();
        assert_eq!(http.body_timeout, Duration::from_secs(30));
        assert_eq!(http.max_connections, 512);
        let http = resolve_http(&["--body-timeout", "2", "--max-connections", "8"]).unwrap();
        assert_eq!(http.body_timeout, Duration::from_secs(2));
        assert_eq!(http.max_connections, 8);
        assert!(parse(&["--body-timeout", "0"]).is_err());
        assert!(parse(&["--max-connections", "0"]).is_err());
    }

    fn dotenv_in(dir: &Path, text: &str) -> PathBuf {
        let file = dir.join(".env");
        std::fs::write(&file, text).unwrap();
        file
    }

    #[test]
    fn a_dotenv_inside_the_projects_folder_is_ignored_whole() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        let file = dotenv_in(&projects, "PYRUN_SANDBOX=off\nMCP_AUTH_TOKEN=x\n");
        let read = Dotenv::read(&file, |_| Some(projects.clone()));
        assert!(
            matches!(read, Dotenv::IgnoredInsideProjects { .. }),
            "{read:?}"
        );
        // The same file beside the folder is read.
        let file = dotenv_in(dir.path(), "PYRUN_SANDBOX=off\n");
        match Dotenv::read(&file, |_| Some(projects.clone())) {
            Dotenv::Loaded {
                entries, malformed, ..
            } => {
                assert_eq!(entries, [("PYRUN_SANDBOX".into(), "off".into())]);
                assert_eq!(malformed, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_folder_a_dotenv_names_counts_and_so_does_a_link_into_it() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        // `.env` says the folder is the directory it lies in: ignored.
        let file = dotenv_in(dir.path(), "PYTHON_PROJECTS_DIR=.\n");
        let read = Dotenv::read(&file, |from_file| {
            assert_eq!(from_file, Some("."));
            Some(dir.path().to_path_buf())
        });
        assert!(matches!(read, Dotenv::IgnoredInsideProjects { .. }));
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().unwrap();
            let inner = dotenv_in(&projects, "PYRUN_SANDBOX=off\n");
            let link = outside.path().join(".env");
            std::os::unix::fs::symlink(&inner, &link).unwrap();
            let read = Dotenv::read(&link, |_| Some(projects.clone()));
            assert!(
                matches!(read, Dotenv::IgnoredInsideProjects { .. }),
                "{read:?}"
            );
        }
    }

    #[test]
    fn sandbox_defaults_to_standard_without_network() {
        let cli = parse(&[]).unwrap();
        let sandbox = cli.sandbox.resolve(30);
        assert_eq!(sandbox.mode, SandboxMode::Standard);
        assert!(!sandbox.allow_network);
        assert!(!sandbox.read_only_projects);
        assert_eq!(sandbox.limits, ResourceLimits::default());
    }

    #[test]
    fn sandbox_flags_are_read_and_cpu_covers_the_timeout() {
        let cli = parse(&[
            "--sandbox",
            "strict",
            "--allow-network",
            "--max-memory-mb",
            "512",
            "--max-cpu-secs",
            "10",
        ])
        .unwrap();
        let sandbox = cli.sandbox.resolve(60);
        assert_eq!(sandbox.mode, SandboxMode::Strict);
        assert!(sandbox.allow_network);
        assert_eq!(sandbox.limits.memory_bytes, 512 << 20);
        assert_eq!(sandbox.limits.cpu_secs, 60);
        assert!(
            sandbox.read_only_projects,
            "strict implies --read-only-projects"
        );
        let cli = parse(&["--read-only-projects"]).unwrap();
        assert!(cli.sandbox.resolve(30).read_only_projects);
        assert!(parse(&["--sandbox", "loose"]).is_err());
    }
}

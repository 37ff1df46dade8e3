//! Settings: the only module that reads flags, the environment and `.env`. Parsing happens in two
//! stages: clap validates the text (no I/O), then [`Cli::resolve`] checks the world (the folder
//! exists, the interpreter runs) and produces the plain [`Config`] the rest of the server receives.
//! Precedence: flag > environment > `.env` > default. A `.env` that lies inside the projects folder
//! is never read: scripts can write there.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};

use crate::integrations::{Assistant, BadUrl, RemoteUrl, Target};
use crate::oauth::cimd::FetchPolicy;
use pyrun_run::python_env::resolve_python;

mod artifacts;
mod audit;
mod background;
mod broad;
mod dotenv;
mod given;
mod grammar;
mod home;
mod http;
mod inline;
mod install;
mod interpreter;
mod lookalikes;
mod oauth;
mod oauth_test;
mod origin;
mod python_env;
mod runpod;
mod runs;
mod sandbox;
mod sessions;
mod state;
mod tunnel;
mod venv_bases;
mod warm;

pub use artifacts::{ArtifactArgs, ArtifactConfig};
pub use audit::AuditArgs;
pub use background::{BackgroundArgs, BackgroundConfig};
pub use dotenv::Dotenv;
use dotenv::DOTENV;
pub use given::GivenSetting;
use home::expand_home;
pub use http::{HttpArgs, HttpConfig};
pub use inline::{InlineArgs, InlineConfig};
pub use install::{InstallArgs, InstallConfig};
pub use lookalikes::Lookalike;
pub use oauth::{OAuthArgs, OAuthConfig};
pub use oauth_test::OAuthTestArgs;
pub use origin::{BadVariable, Origins};
pub use python_env::PythonEnvArgs;
pub use runpod::{RunPodArgs, RunPodConfig, RunPodPoll};
pub use runs::RunArgs;
pub use sandbox::{SandboxArgs, SandboxConfig};
pub use sessions::{SessionArgs, SessionConfig};
pub use state::StateArgs;
pub use tunnel::{TunnelArgs, TunnelConfig, TunnelProvider};
pub use venv_bases::ForeignVenv;
pub use warm::WarmArgs;

include!("env_vars.rs");

/// Upper bound for `--timeout`: a day. Anything longer is almost surely a typo.
const MAX_TIMEOUT_SECS: u64 = 86_400;
/// `--version`: the version and whether the in-process tunnel is built in (scripts/start-tunnel
/// reads it to give advice that works with this binary).
const LONG_VERSION: &str = if cfg!(feature = "tunnel") {
    concat!(env!("CARGO_PKG_VERSION"), " (tunnel: built in)")
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (tunnel: not built in)")
};
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
#[command(name = "pyrun-mcp-server", version, long_version = LONG_VERSION, about, long_about = None)]
pub struct Cli {
    /// How clients connect.
    #[arg(long, env = "MCP_TRANSPORT", value_enum, default_value_t = Transport::Http)]
    pub transport: Transport,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub background: BackgroundArgs,

    #[command(flatten)]
    pub http: HttpArgs,

    #[command(flatten)]
    pub sandbox: SandboxArgs,

    #[command(flatten)]
    pub tunnel: TunnelArgs,

    #[command(flatten)]
    pub state: StateArgs,

    #[command(flatten)]
    pub oauth: OAuthArgs,

    #[command(flatten)]
    pub audit: AuditArgs,

    #[command(flatten)]
    pub oauth_test: OAuthTestArgs,

    #[command(flatten)]
    pub artifacts: ArtifactArgs,

    #[command(flatten)]
    pub inline: InlineArgs,

    #[command(flatten)]
    pub install: InstallArgs,

    #[command(flatten)]
    pub python_env: PythonEnvArgs,

    #[command(flatten)]
    pub sessions: SessionArgs,

    #[command(flatten)]
    pub warm: WarmArgs,

    #[command(flatten)]
    pub runpod: RunPodArgs,

    #[command(subcommand)]
    pub command: Option<Subcommand>,

    /// Where each setting came from, for the messages of [`Cli::resolve`] (`None`: not read by
    /// [`Cli::load`], as in unit tests).
    #[arg(skip)]
    pub origins: Option<Origins>,

    /// The settings given (not defaults), for `config`'s snippet; filled by [`Cli::parse_args`].
    #[arg(skip)]
    pub given: Vec<GivenSetting>,
}

/// What to do instead of serving.
#[derive(Debug, clap::Subcommand)]
pub enum Subcommand {
    /// Print the snippet that connects an AI assistant to this server (stdio, or --url for a
    /// running server reached over HTTP; claude-ai: the custom connector, --url required).
    Config {
        #[arg(value_enum)]
        assistant: Assistant,
        /// The server's URL (`https://…/mcp` or `…/sse`; a bare base gets `/mcp`) [default: stdio,
        /// the assistant starts this binary itself].
        #[arg(long)]
        url: Option<String>,
        /// Look at the projects folder's venvs and add `--allow-python` to the snippet for each
        /// base interpreter this server would not run otherwise (without it, they are only said).
        #[arg(long)]
        allow_venv_pythons: bool,
    },
    /// Manage the clients that connected through OAuth (`--oauth`).
    Oauth {
        #[command(subcommand)]
        action: OAuthAction,
    },
}

/// `oauth …`: works on the state folder while the server runs (or not).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum OAuthAction {
    /// Show the clients: name, client id, created, last used, and whether revoked.
    List,
    /// Cut one client off at once: its tokens stop working on the next request.
    Revoke {
        /// The client id `oauth list` shows.
        client_id: String,
    },
    /// Clear the wrong-secret delays of the consent page.
    Unlock,
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
    /// Output a result shows per stream (head and tail) before it cuts the middle.
    pub max_result_output_bytes: usize,
    /// The largest stdin a run is given (inline or staged).
    pub max_stdin_bytes: usize,
    pub max_concurrent: usize,
    pub pass_env: Vec<String>,
    /// Background runs: their limits and retention.
    pub background: BackgroundConfig,
    pub http: HttpConfig,
    pub sandbox: SandboxConfig,
    /// The public URL to open, if any (`--tunnel`).
    pub tunnel: Option<TunnelConfig>,
    /// Where lasting state is kept (`--state-dir`), absolute, outside the projects folder; not
    /// made until a feature needs it. `None`: no data folder on this machine and none given.
    pub state_dir: Option<PathBuf>,
    /// `--oauth`: the server is its own OAuth authorization server.
    pub oauth: Option<OAuthConfig>,
    /// Where each tool call is recorded (`--audit-log`), absolute; `None`: off.
    pub audit_log: Option<PathBuf>,
    /// How OAuth Client ID Metadata Documents are fetched (the production policy unless the
    /// hidden test setting is given).
    pub cimd: FetchPolicy,
    /// What runs' artifacts may cost (inline pictures, disk).
    pub artifacts: ArtifactConfig,
    /// `run_python_code`: whether it is offered, and the most code a call may send.
    pub inline: InlineConfig,
    /// `install_packages`: whether it is offered, the index, uv, sdists, the time limit.
    pub install: InstallConfig,
    /// `--allow-python`: interpreters besides `python` a project's venv may be made with,
    /// resolved.
    pub allow_python: Vec<PathBuf>,
    /// Python sessions (offered with inline code): how many, and how long an unused one lives.
    pub sessions: SessionConfig,
    /// Warm runs: on or off, how many interpreters wait, for how long, what they preload.
    pub warm: pyrun_run::warm::WarmSettings,
    /// `--runpod-endpoint`: the RunPod backend; `None`: runs are local only.
    pub runpod: Option<RunPodConfig>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}\nhint: see docs/runpod.md")]
    RunPod(String),
    #[error("--preload '{0}' is not a module name\nhint: give module names separated by commas, e.g. --preload numpy,pandas (PYRUN_PRELOAD)")]
    Preload(String),
    /// Another error's message, naming the variable its value came from instead of the flag.
    #[error("{0}")]
    FromVariable(String),
    #[error("projects folder '{0}' does not exist or is not a directory\nhint: pass --projects-dir DIR or set PYTHON_PROJECTS_DIR")]
    ProjectsDir(String),
    /// Not a `#[source]`: the message already holds the cause, which `{:#}` would repeat after
    /// the hint.
    #[error("{0}\nhint: install Python 3, or pass --python PATH / set PYTHON_BIN")]
    NoPython(pyrun_run::python_env::PythonError),
    #[error("the interpreter '{python}' cannot run scripts: {answer}\nhint: pyrun-mcp needs Python 3.8 or later; pass --python PATH or set PYTHON_BIN to one (e.g. /usr/bin/python3)")]
    NotPython3 { python: String, answer: String },
    #[error("refusing to serve {folder} ({what}) as the projects folder: every file in it would be readable, and writable, by the scripts run\nhint: pass --projects-dir DIR (PYTHON_PROJECTS_DIR) naming the folder that holds your scripts; if you mean it, add --allow-broad-projects-dir (PYRUN_ALLOW_BROAD_PROJECTS_DIR=1)")]
    BroadProjectsDir { folder: String, what: &'static str },
    #[error("--allow-python '{0}' cannot be used: {1}\nhint: give the path of a Python interpreter (PYRUN_ALLOW_PYTHON takes a list separated like PATH)")]
    AllowPython(String, String),
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
    #[error("refusing to open a public URL without an auth token: anyone could run your scripts\nhint: set MCP_AUTH_TOKEN in .env ({}) or pass --auth-token TOKEN", crate::app::source_tree::pick("scripts/setup makes one", "e.g. MCP_AUTH_TOKEN=$(openssl rand -hex 32)"))]
    TunnelWithoutAuthToken,
    #[error("--tunnel ngrok needs an ngrok authtoken\nhint: copy yours from https://dashboard.ngrok.com/get-started/your-authtoken into NGROK_AUTHTOKEN (environment or .env)")]
    NoNgrokAuthtoken,
    #[error("--tunnel-domain '{0}' is not a domain name\nhint: give the bare name reserved in your ngrok account, e.g. pyrun.ngrok.app (no scheme, no path)")]
    BadTunnelDomain(String),
    #[error("cannot tell where this server binary is: {0}")]
    NoOwnPath(String),
    #[error(transparent)]
    BadUrl(#[from] BadUrl),
    #[error("config claude-ai needs the server's public URL\nhint: pass --url https://YOUR-DOMAIN/mcp (the tunnel's or proxy's https URL of a server run with --oauth)")]
    ConnectorNeedsUrl,
    #[error("cannot use the state folder {0}\nhint: pass --state-dir DIR or set PYRUN_STATE_DIR")]
    StateDir(String),
    #[error("the state folder '{}' overlaps the projects folder, where scripts can write\nhint: pass a --state-dir (PYRUN_STATE_DIR) outside the projects folder", .0.display())]
    StateDirOverlapsProjects(PathBuf),
    #[error(
        "--oauth needs the HTTP transport\nhint: drop --transport stdio (or MCP_TRANSPORT=stdio)"
    )]
    OAuthNeedsHttp,
    #[error("--oauth needs an owner secret for its consent page\nhint: set MCP_OAUTH_OWNER_PASSWORD (or --oauth-owner-password), or an auth token (MCP_AUTH_TOKEN)")]
    OAuthNoOwnerSecret,
    #[error("the owner password must be 8 to 256 characters without control characters\nhint: pick a phrase you can type on a phone, e.g. four random words")]
    BadOwnerPassword,
    #[error("--public-url '{0}' cannot be used: {1}\nhint: give the public origin, e.g. https://pyrun.ngrok.app")]
    BadPublicUrl(String, &'static str),
    #[error("--oauth needs a state folder to keep its clients and tokens\nhint: pass --state-dir DIR or set PYRUN_STATE_DIR")]
    OAuthNeedsStateDir,
    #[error("--oauth on a non-loopback address needs the URL clients reach it at\nhint: pass --public-url https://… (MCP_PUBLIC_URL), or use --tunnel")]
    OAuthNeedsPublicUrl,
    #[error("PYRUN_OAUTH_TEST_METADATA_CA (--oauth-test-metadata-ca) is for tests on a loopback address only\nhint: unset it, or drop --tunnel and bind 127.0.0.1")]
    TestSettingInPublic,
    #[error(
        "cannot use the audit log {0}\nhint: pass --audit-log PATH (or off) or set PYRUN_AUDIT_LOG"
    )]
    AuditLog(String),
    #[error(transparent)]
    BadUv(#[from] install::BadUv),
    #[error("the audit log '{}' lies inside the projects folder, where scripts can write\nhint: pass an --audit-log (PYRUN_AUDIT_LOG) outside it, or off", .0.display())]
    AuditLogInsideProjects(PathBuf),
}

// Not `#[from]`, which would make the error its own source: `{:#}` would say it twice, once
// after the hint.
impl From<pyrun_run::python_env::PythonError> for ConfigError {
    fn from(error: pyrun_run::python_env::PythonError) -> Self {
        Self::NoPython(error)
    }
}

impl Cli {
    /// Loads `.env` from the current directory (the real environment wins) unless it lies inside
    /// the projects folder, then parses the flags. Call before any thread starts (it sets
    /// variables); log the returned [`Dotenv`] once logging is set up. A bad flag, `--help` and
    /// `--version` exit here as clap does; a variable's bad value is returned, naming the variable
    /// and where it was set.
    pub fn load() -> (Result<Self, BadVariable>, Dotenv) {
        unset_empty_settings();
        let typed: Vec<OsString> = std::env::args_os().collect();
        let dotenv = Dotenv::read(Path::new(DOTENV), |from_file| {
            // Which folder would be served with the file applied: flag > environment > file >
            // default. Flags are parsed here without the file; a bad variable is said below.
            let matches = match Self::command_line().try_get_matches_from(&typed) {
                Ok(matches) => matches,
                Err(error) => {
                    // Said after the file is applied, with its line if it set the variable.
                    if let Err(error) =
                        origin::explain(error, &Self::command_line(), &typed, |_| None)
                    {
                        error.exit()
                    }
                    return None;
                }
            };
            let given = matches.get_one::<PathBuf>("projects_dir").cloned();
            match (matches.value_source("projects_dir"), from_file) {
                (Some(ValueSource::DefaultValue) | None, Some(dir)) => Some(expand_home(dir)),
                _ => given,
            }
        });
        let from_dotenv: Vec<(String, Option<usize>)> = dotenv
            .apply()
            .iter()
            .map(|key| (key.clone(), dotenv.line_of_key(key)))
            .collect();
        let parsed = Self::parse_args(&typed).or_else(|error| {
            let line_in_dotenv = |variable: &str| {
                from_dotenv
                    .iter()
                    .find(|(key, _)| key == variable)
                    .map(|(_, line)| *line)
            };
            match origin::explain(error, &Self::command_line(), &typed, line_in_dotenv) {
                Ok(bad) => Err(bad),
                Err(error) => error.exit(),
            }
        });
        let parsed = parsed.map(|mut cli| {
            cli.origins = Some(Origins::new(typed, from_dotenv));
            cli
        });
        (parsed, dotenv)
    }

    /// The command line as parsed: clap's derive, with every setting global (given before or after
    /// a subcommand: `config claude-code --timeout 120` keeps it) and every on/off flag reading
    /// the one grammar of booleans after `=` (`--allow-network=0`; the flag alone means on), as
    /// its variable and `.env` do.
    pub fn command_line() -> clap::Command {
        Self::command().mut_args(|arg| {
            let arg = arg.global(true);
            if !matches!(arg.get_action(), clap::ArgAction::SetTrue) {
                return arg;
            }
            arg.action(clap::ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .default_value("false")
                .hide_default_value(true)
                .value_name("BOOL")
                .value_parser(grammar::boolean())
        })
    }

    /// Parses `args` (the program's name first) with [`Cli::command_line`], keeping which
    /// settings were given.
    pub fn parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let command = Self::command_line();
        let matches = command.clone().try_get_matches_from(args)?;
        let mut cli = Self::from_arg_matches(&matches)?;
        cli.given = given::given(&matches, &command);
        Ok(cli)
    }

    /// Second stage: checks the folder and the interpreter and resolves defaults. A refused
    /// value that came from a variable is said with the variable and where it was set.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let origins = self.origins.clone();
        self.resolve_checked().map_err(|error| {
            origins
                .and_then(|o| o.reword(&error.to_string(), &Self::command()))
                .map_or(error, ConfigError::FromVariable)
        })
    }

    fn resolve_checked(self) -> Result<Config, ConfigError> {
        let run = self.run;
        run.validate()?;
        let tunnel_domain = self
            .tunnel
            .tunnel
            .map(|_| self.tunnel.tunnel_domain.as_deref());
        let oauth = self
            .oauth
            .resolve(self.transport, self.http.auth_token(), tunnel_domain)?;
        let tunnel = self.tunnel.resolve(
            self.transport,
            self.http.auth_token().is_some() || oauth.is_some(),
        )?;
        let state_dir = self.state.resolve(&run.projects_dir)?;
        let audit_log = self
            .audit
            .resolve(state_dir.as_deref(), &run.projects_dir)?;
        if oauth.is_some() && state_dir.is_none() {
            return Err(ConfigError::OAuthNeedsStateDir);
        }
        let mut http = self.http.resolve(self.transport, oauth.is_some())?;
        if let Some(oauth) = &oauth {
            match oauth.public_url.as_deref().and_then(oauth::origin_host) {
                Some(host) => http.allowed_hosts.push(host),
                None if tunnel.is_none() && !http.bind.ip().is_loopback() => {
                    return Err(ConfigError::OAuthNeedsPublicUrl)
                }
                None => {}
            }
        }
        let python = resolve_python(run.python.as_deref())?;
        interpreter::check_version(&python)?;
        let allow_python = self.python_env.resolve()?;
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let background = self.background.resolve(cpus);
        // A process's CPU limit is never below the longest wall time a run may take.
        let sandbox = self
            .sandbox
            .resolve(run.timeout.max(self.background.background_timeout));
        let install = self.install.resolve(&run.projects_dir)?;
        let test_ca = self.oauth_test.oauth_test_metadata_ca.is_some();
        if test_ca && (tunnel.is_some() || !http.bind.ip().is_loopback()) {
            return Err(ConfigError::TestSettingInPublic);
        }
        Ok(Config {
            transport: self.transport,
            projects_dir: run.projects_dir,
            timeout: Duration::from_secs(run.timeout),
            python,
            max_output_bytes: usize::try_from(run.max_output_bytes).unwrap_or(usize::MAX),
            max_result_output_bytes: usize::try_from(run.max_result_output_bytes)
                .unwrap_or(usize::MAX),
            max_stdin_bytes: usize::try_from(run.max_stdin_bytes).unwrap_or(usize::MAX),
            max_concurrent: run
                .max_concurrent
                .map_or(2 * cpus, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            pass_env: run.pass_env,
            background,
            http,
            sandbox,
            tunnel,
            state_dir,
            oauth,
            audit_log,
            cimd: self.oauth_test.fetch_policy(),
            artifacts: self.artifacts.resolve(),
            inline: self.inline.resolve(),
            install,
            allow_python,
            sessions: self.sessions.resolve(),
            warm: self.warm.resolve()?,
            runpod: self.runpod.resolve()?,
        })
    }

    /// For `oauth …`: the state folder the server would use.
    pub fn state_dir(&self) -> Result<PathBuf, ConfigError> {
        self.state
            .resolve(&self.run.projects_dir)?
            .ok_or(ConfigError::OAuthNeedsStateDir)
    }

    /// For `config ASSISTANT [--url URL]`: where the assistant reaches this server, and notes
    /// for the person (what was left out of the snippet and why, the venvs found). Claude's
    /// connectors reach only a URL. A stdio snippet carries every setting given here but the
    /// secrets and the HTTP-only ones; with `allow_venv_pythons`, `--allow-python` for each venv
    /// base interpreter of the projects folder the server would not run otherwise.
    pub fn integration_target(
        &self,
        assistant: Assistant,
        url: Option<&str>,
        allow_venv_pythons: bool,
    ) -> Result<(Target, Vec<String>), ConfigError> {
        if let Some(url) = url {
            let mut notes = Vec::new();
            let flags: Vec<&str> = self.given.iter().map(|s| s.flag.as_str()).collect();
            if !flags.is_empty() && assistant != Assistant::ClaudeAi {
                notes.push(format!(
                    "note: {} not in the snippet: the server's settings apply where it runs",
                    flags.join(", ")
                ));
            }
            let target = Target::Remote {
                url: RemoteUrl::parse(url)?,
                token: self.http.auth_token(),
            };
            return Ok((target, notes));
        }
        if assistant == Assistant::ClaudeAi {
            return Err(ConfigError::ConnectorNeedsUrl);
        }
        let server = std::env::current_exe()
            .and_then(dunce::canonicalize)
            .map_err(|e| ConfigError::NoOwnPath(e.to_string()))?;
        let projects_dir = dunce::canonicalize(&self.run.projects_dir)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| ConfigError::ProjectsDir(self.run.projects_dir.display().to_string()))?;
        // Assistants start servers with a bare PATH: name the interpreter when it is known.
        let python = resolve_python(self.run.python.as_deref()).ok();
        let (mut settings, mut notes) = snippet_settings(&self.given);
        if let Some(python) = &python {
            let allowed = self.python_env.resolve().unwrap_or_default();
            let foreign = venv_bases::foreign_venvs(&projects_dir, python, &allowed);
            for venv in foreign {
                let wants = format!("the venv {} wants {}", venv.venv, venv.wants);
                match (&venv.interpreter, allow_venv_pythons) {
                    (Some(interpreter), true) => {
                        let path = interpreter.display().to_string();
                        if !settings
                            .windows(2)
                            .any(|w| w[0] == "--allow-python" && w[1] == path)
                        {
                            settings.extend(["--allow-python".to_owned(), path.clone()]);
                        }
                        notes.push(format!("note: {wants}: added --allow-python {path}"));
                    }
                    (Some(interpreter), false) => notes.push(format!(
                        "note: {wants}, which this server would refuse (it runs {}); rerun with \
                         --allow-venv-pythons to add --allow-python {}",
                        python.display(),
                        interpreter.display()
                    )),
                    (None, _) => notes.push(format!(
                        "note: {wants}, which this server would refuse; its `home` holds no \
                         python3 to allow: recreate it with {}",
                        python.display()
                    )),
                }
            }
        }
        let target = Target::Stdio {
            server,
            projects_dir,
            python,
            settings,
        };
        Ok((target, notes))
    }
}

/// The words a stdio snippet gives of the settings `given`, and notes on what it left out: the
/// HTTP-only settings (the assistant speaks stdio) and the secrets (their variables named, with
/// where to set them).
fn snippet_settings(given: &[GivenSetting]) -> (Vec<String>, Vec<String>) {
    let mut words = Vec::new();
    let (mut http_only, mut secrets) = (Vec::new(), Vec::new());
    for setting in given {
        if setting.http_only {
            http_only.push(setting.flag.as_str());
        } else if setting.secret {
            secrets.push(setting.variable.as_deref().unwrap_or(setting.flag.as_str()));
        } else {
            words.extend(setting.words.iter().cloned());
        }
    }
    // Read apart from the flags: the RunPod backend needs its key wherever the server runs.
    let runpod = given.iter().any(|s| s.flag == "--runpod-endpoint");
    if runpod && std::env::var_os("RUNPOD_API_KEY").is_some() {
        secrets.push("RUNPOD_API_KEY");
    }
    let mut notes = Vec::new();
    if !http_only.is_empty() {
        notes.push(format!(
            "note: left out {}: only --transport http uses them, and the assistant starts this \
             server over stdio",
            http_only.join(", ")
        ));
    }
    for variable in secrets {
        notes.push(format!(
            "note: {variable} is set here but not written into the snippet (a secret): set it \
             in the environment the assistant starts the server with (Claude Code: `claude mcp \
             add -e {variable}=…`; the JSON files: \"env\": {{\"{variable}\": \"…\"}} beside \
             \"args\")"
        ));
    }
    (words, notes)
}

/// The names in `.env` and the environment that look like a setting but are none, to warn about
/// once logging is set up.
pub fn lookalikes(dotenv: &Dotenv) -> Vec<Lookalike> {
    let environment = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok());
    lookalikes::lookalikes(&dotenv.names(), environment)
}

/// An empty setting variable means unset (its default applies), not an empty value: an assistant
/// that passes an optional setting the user left blank (`PYTHON_BIN=""`, as MCP Bundles do) must
/// not make the server refuse to start. Call while the process is one thread.
fn unset_empty_settings() {
    for name in ENV_VARS {
        if std::env::var_os(name).is_some_and(|value| value.is_empty()) {
            std::env::remove_var(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyrun_sandbox::{ResourceLimits, SandboxMode};

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::parse_args(std::iter::once("pyrun-mcp-server").chain(args.iter().copied()))
    }

    fn resolve_http(args: &[&str]) -> Result<HttpConfig, ConfigError> {
        parse(args).unwrap().http.resolve(Transport::Http, false)
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
        assert!(stdio.resolve(Transport::Stdio, false).is_ok());
    }

    #[test]
    fn a_callers_share_of_sessions_is_half_with_oauth_and_never_above_the_whole() {
        let share = |args: &[&str], oauth: bool| {
            let http = parse(args).unwrap().http.resolve(Transport::Http, oauth);
            let http = http.unwrap();
            (http.max_sessions, http.max_sessions_per_caller)
        };
        assert_eq!(share(&[], true), (64, 32));
        assert_eq!(share(&["--max-sessions", "5"], true), (5, 3));
        assert_eq!(share(&["--max-sessions", "1"], true), (1, 1));
        // One caller only (the static token, or none): the share is the whole.
        assert_eq!(share(&["--max-sessions", "5"], false), (5, 5));
        assert_eq!(
            share(
                &["--max-sessions", "8", "--max-sessions-per-caller", "2"],
                false
            ),
            (8, 2)
        );
        assert_eq!(
            share(
                &["--max-sessions", "8", "--max-sessions-per-caller", "20"],
                true
            ),
            (8, 8)
        );
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
        assert_eq!(parse(&["--timeout", "5"]).unwrap().run.timeout, 5);
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

    /// Every variable named in the config modules' clap attributes or read by name there or in
    /// main.rs.
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
        let read: Vec<String> = [
            include_str!("mod.rs"),
            include_str!("runs.rs"),
            include_str!("http.rs"),
            include_str!("sandbox.rs"),
            include_str!("state.rs"),
            include_str!("oauth.rs"),
            include_str!("audit.rs"),
            include_str!("background.rs"),
            include_str!("tunnel.rs"),
            include_str!("oauth_test.rs"),
            include_str!("artifacts.rs"),
            include_str!("inline.rs"),
            include_str!("install.rs"),
            include_str!("python_env.rs"),
            include_str!("sessions.rs"),
            include_str!("warm.rs"),
            include_str!("runpod.rs"),
            include_str!("dotenv.rs"),
            include_str!("../main.rs"),
        ]
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
                "{name} is read by the server but missing from ENV_VARS (server/src/config/env_vars.rs)"
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
    fn the_test_metadata_ca_is_hidden_and_only_relaxes_the_policy_when_given() {
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("oauth-test-metadata-ca"), "{help}");
        let given = parse(&["--oauth-test-metadata-ca", "/tmp/ca.pem"]).unwrap();
        assert_eq!(
            given.oauth_test.fetch_policy().test_metadata_ca,
            Some(PathBuf::from("/tmp/ca.pem"))
        );
        assert_eq!(
            parse(&[]).unwrap().oauth_test.fetch_policy(),
            FetchPolicy::default()
        );
        assert!(parse(&["--oauth-test-metadata-ca", ""]).is_err());
    }

    #[test]
    fn allowed_interpreters_are_resolved_and_a_missing_one_is_named() {
        let cli = parse(&["--allow-python", "/no/such/python3"]).unwrap();
        let err = cli.python_env.resolve().unwrap_err().to_string();
        assert!(err.contains("--allow-python '/no/such/python3'"), "{err}");
        assert!(err.contains("hint: "), "{err}");
        let real = resolve_python(None).unwrap();
        let given = real.to_str().unwrap();
        let cli = parse(&["--allow-python", given, "--allow-python", given]).unwrap();
        assert_eq!(cli.python_env.resolve().unwrap(), vec![real]);
        assert!(parse(&[]).unwrap().python_env.resolve().unwrap().is_empty());
    }

    #[test]
    fn new_http_limits_have_defaults_and_bounds() {
        let http = resolve_http(&[]).unwrap();
        assert_eq!(http.body_timeout, Duration::from_secs(10));
        assert_eq!(http.max_connections, 512);
        assert_eq!(http.max_unauthenticated_per_address, 64);
        let http = resolve_http(&[
            "--body-timeout",
            "2",
            "--max-connections",
            "8",
            "--max-unauthenticated-per-address",
            "3",
        ])
        .unwrap();
        assert_eq!(http.body_timeout, Duration::from_secs(2));
        assert_eq!(http.max_connections, 8);
        assert_eq!(http.max_unauthenticated_per_address, 3);
        assert!(parse(&["--body-timeout", "0"]).is_err());
        assert!(parse(&["--max-connections", "0"]).is_err());
        assert!(parse(&["--max-unauthenticated-per-address", "0"]).is_err());
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
            Dotenv::Loaded { entries, .. } => {
                assert_eq!(entries, [("PYRUN_SANDBOX".into(), "off".into())]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dotenv_line_that_cannot_be_read_refuses_the_whole_file_naming_the_line_and_no_value() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        let file = dotenv_in(
            dir.path(),
            "# settings\nPYRUN_TEST_DOTENV_GREETING=hello\nOWNER_SECRET=correct horse battery\nMCP_AUTH_TOKEN=t0k\n",
        );
        let read = Dotenv::read(&file, |_| Some(projects.clone()));
        match &read {
            Dotenv::Malformed { line, key, .. } => {
                assert_eq!((*line, key.as_deref()), (Some(3), Some("OWNER_SECRET")));
            }
            other => panic!("{other:?}"),
        }
        let said = read.refusal().unwrap();
        assert!(
            said.contains("line 3") && said.contains("OWNER_SECRET"),
            "{said}"
        );
        assert!(said.contains("hint: quote"), "{said}");
        assert!(!said.contains("horse") && !said.contains("t0k"), "{said}");
        // Nothing of it applies.
        read.apply();
        let greeting = "PYRUN_TEST_DOTENV_GREETING";
        assert!(std::env::var_os(greeting).is_none());
        // Inside the projects folder (a script could have written it) the file is ignored whole, as
        // ever: a run cannot stop the next start of the server with a broken line.
        let planted = dotenv_in(&projects, "A=b c\n");
        let read = Dotenv::read(&planted, |_| Some(projects.clone()));
        assert!(
            matches!(read, Dotenv::IgnoredInsideProjects { .. }),
            "{read:?}"
        );
        assert!(read.refusal().is_none());
        // A well-formed file is no refusal.
        let fine = dotenv_in(dir.path(), "PYRUN_TEST_DOTENV_GREETING=\"hello world\"\n");
        assert!(Dotenv::read(&fine, |_| Some(projects.clone()))
            .refusal()
            .is_none());
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

    #[test]
    fn the_state_folder_defaults_to_the_data_folder_and_never_overlaps_the_projects() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("projects");
        std::fs::create_dir(&projects).unwrap();
        let projects_arg = projects.to_str().unwrap();
        let state = |extra: &[&str]| {
            let mut args = vec!["--projects-dir", projects_arg];
            args.extend_from_slice(extra);
            parse(&args).unwrap().state.resolve(&projects)
        };
        // Default: the platform's data folder (here: the test's HOME or XDG_DATA_HOME).
        if let Some(data) = dirs::data_dir() {
            assert_eq!(state(&[]).unwrap(), Some(data.join("pyrun-mcp")));
        }
        let outside = dir.path().join("state");
        let outside_arg = outside.to_str().unwrap();
        assert_eq!(
            state(&["--state-dir", outside_arg]).unwrap(),
            Some(outside.clone())
        );
        assert!(!outside.exists(), "made before a feature needs it");
        // Inside the folder (not yet existing, and through `..`), or the folder itself, or
        // a parent of it: refused, naming the flag and the variable.
        let inside = format!("{}/a/../state", projects.display());
        for bad in [inside.as_str(), projects_arg, dir.path().to_str().unwrap()] {
            let err = state(&["--state-dir", bad]).unwrap_err().to_string();
            assert!(
                err.contains("--state-dir") && err.contains("PYRUN_STATE_DIR"),
                "{bad}: {err}"
            );
        }
        // The default inside the folder (a user serving their whole home) is no error: no
        // state folder then, and the features that need one say so.
        let home_projects = parse(&["--projects-dir", "/"]).unwrap();
        assert_eq!(home_projects.state.resolve(Path::new("/")).unwrap(), None);
        // A relative folder is made absolute (the server may change its folder later).
        let relative = state(&["--state-dir", "some-state"]).unwrap().unwrap();
        assert!(relative.is_absolute(), "{}", relative.display());
    }
}

//! Command-line types (clap derive). Parsing only: validation and I/O happen in the modules that use them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::EXIT_CODES_HELP;

/// Talk to an MCP server from a shell or a CI job: list its tools, call them, run a Python file.
///
/// TARGET is an http(s) URL ending in /mcp (Streamable HTTP) or /sse (legacy HTTP+SSE), a base
/// URL such as the server prints (http://127.0.0.1:8765: /mcp is tried, then /sse), or a
/// command line that starts a stdio server, e.g.
/// "pyrun-mcp-server --transport stdio --projects-dir ./python_projects" (split like a shell
/// would, never run through one).
#[derive(Debug, Parser)]
#[command(name = "pyrun-mcp-client", version, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Server URL or stdio server command line.
    #[arg(
        long,
        short = 's',
        env = "MCP_SERVER_URL",
        value_name = "TARGET",
        global = true
    )]
    pub server: Option<String>,

    /// How to talk to TARGET; `auto` picks by the URL path (/sse → sse, other URLs → http,
    /// anything else → stdio).
    #[arg(long, value_enum, default_value_t = TransportChoice::Auto, global = true)]
    pub transport: TransportChoice,

    /// Bearer token sent as `Authorization: Bearer TOKEN` (HTTP and SSE only).
    #[arg(long, env = "MCP_AUTH_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,

    /// Extra HTTP header, `Name: value`; repeatable (e.g. 'ngrok-skip-browser-warning: 1').
    #[arg(
        long = "header",
        short = 'H',
        value_name = "NAME: VALUE",
        global = true
    )]
    pub headers: Vec<String>,

    /// Machine-readable JSON on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Say more: which endpoint a base URL led to; `tools`: whole descriptions and input schemas.
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    /// Give up after this long (connect plus the call): seconds, or with a unit (500ms, 90s, 5m,
    /// 1h); the call is cancelled on the server.
    #[arg(long, value_name = "DURATION", global = true, value_parser = duration_secs)]
    pub timeout: Option<f64>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportChoice {
    Auto,
    Http,
    Sse,
    Stdio,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the server's tools with one-line descriptions (whole descriptions and input
    /// schemas with --verbose).
    Tools,
    /// Call any tool and print its text content (the whole result with --json).
    Call(CallArgs),
    /// Run a Python file with run_python: its stdout to stdout, its stderr to stderr, and its exit
    /// code as ours (124 if it timed out).
    Run(RunArgs),
    /// List the Python files the server can run (list_python_files).
    Files {
        /// Only this subdirectory of the projects folder.
        dir: Option<String>,
    },
    /// Measure the round-trip time of a few pings.
    Ping {
        /// How many pings.
        #[arg(long, short = 'n', default_value_t = 5)]
        count: u32,
    },
    /// A small menu: run a file, list files, list tools, quit (the default on a terminal).
    Interactive,
    /// List your background runs on the server, newest first (list_runs; needs an HTTP target).
    Runs,
    /// Print a background run's output: what is there so far, or all of it as it arrives with
    /// --follow, then exit with the run's exit code like `run`, or 75 while it still runs
    /// (needs an HTTP target).
    Logs(LogsArgs),
    /// Stop a background run and its whole process tree (cancel_run; needs an HTTP target).
    Cancel {
        /// The run id `run --detach` printed (`runs` lists them).
        run_id: String,
    },
    /// Run Python code sent in the call (run_python_code; the server needs
    /// --allow-inline-code), reported as `run` reports a file: output, then its exit code as ours.
    Code(CodeArgs),
    /// Python sessions that keep their variables between calls (session_start, session_exec,
    /// session_stop, list_sessions; the server needs --allow-inline-code). Across invocations
    /// they need an HTTP target; over stdio, use the `interactive` menu's session.
    #[command(subcommand)]
    Session(SessionCommand),
    /// Install packages into a project's .venv (install_packages; the server needs
    /// --allow-install): the installer's last lines, exit 1 when it failed.
    Install(InstallArgs),
    /// List the packages of a project's environment (list_packages), `name==version` a line.
    Packages {
        /// A folder of the projects folder; the folder itself when omitted.
        project: Option<String>,
    },
    /// List the server's resources (for pyrun-mcp: the project files, as pyrun://projects/…).
    Resources,
    /// Read one resource: text to stdout, or any content to a file with -o.
    Read {
        /// The resource URI, e.g. pyrun://projects/hello_world.py or an artifact's
        /// pyrun://runs/RUN_ID/files/NAME.
        uri: String,
        /// Write the content to FILE instead of stdout (`-` is stdout).
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List the server's prompts with their arguments.
    Prompts,
    /// Get one prompt, filled in with its arguments, and print its messages.
    Prompt {
        /// Prompt name, e.g. run-and-explain.
        name: String,
        /// Prompt argument as key=value (values are strings); repeatable.
        #[arg(long = "arg", short = 'a', value_name = "KEY=VALUE")]
        args: Vec<String>,
    },
}

impl Command {
    /// The subcommands that work on runs kept by a server, which a stdio server started by this
    /// client cannot keep: it ends when the client does.
    pub fn needs_lasting_server(&self) -> Option<&'static str> {
        match self {
            Self::Runs => Some("runs"),
            Self::Logs(_) => Some("logs"),
            Self::Cancel { .. } => Some("cancel"),
            Self::Run(args) if args.detach => Some("run --detach"),
            Self::Session(_) => Some("session"),
            _ => None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Start a session; prints its id on stdout (`sid=$(pyrun-mcp-client session start)`).
    Start {
        /// A folder of the projects folder to work in; its own scratch folder when omitted.
        #[arg(long)]
        project: Option<String>,
    },
    /// Run code in a session: its stdout to stdout, its stderr and any traceback to stderr, the
    /// repr of a final expression on stdout; exit 1 when it raised, 124 when it timed out.
    Exec(SessionExecArgs),
    /// Stop a session and everything it started.
    Stop {
        /// The id `session start` printed (`session list` lists them).
        session_id: String,
    },
    /// List your open sessions.
    List,
}

#[derive(Debug, Args)]
pub struct SessionExecArgs {
    /// The id `session start` printed.
    pub session_id: String,
    #[command(flatten)]
    pub source: CodeSource,
    /// The code's own time limit in seconds, enforced by the server (exit 124 when hit).
    #[arg(long, value_name = "SECONDS")]
    pub script_timeout: Option<f64>,
}

/// Where code comes from: the command line, or a file (`-`: our stdin).
#[derive(Debug, Args)]
pub struct CodeSource {
    /// The Python source, e.g. 'print(1 + 1)'.
    #[arg(value_name = "CODE", required_unless_present = "file")]
    pub code: Option<String>,
    /// Read the source from this file instead (`-` reads our stdin).
    #[arg(long, short = 'f', value_name = "PATH", conflicts_with = "code")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CodeArgs {
    #[command(flatten)]
    pub source: CodeSource,
    /// A folder of the projects folder to run in; its own scratch folder when omitted.
    #[arg(long)]
    pub project: Option<String>,
    /// Arguments for the code (its sys.argv[1:]), after `--`.
    #[arg(last = true, value_name = "-- ARGS")]
    pub args: Vec<String>,
    /// Pass this command's stdin to the code (docker's -i).
    #[arg(short = 'i', long = "stdin", conflicts_with = "stdin_file")]
    pub stdin: bool,
    /// Feed this file to the code's stdin (`-` reads our own stdin, as -i does).
    #[arg(long, value_name = "PATH")]
    pub stdin_file: Option<PathBuf>,
    /// The code's own time limit in seconds, enforced by the server (exit 124 when hit).
    #[arg(long, value_name = "SECONDS")]
    pub script_timeout: Option<u64>,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The project folder (relative to the projects folder) whose .venv gets the packages.
    pub project: String,
    /// Requirements, e.g. 'requests>=2' numpy; with none and no -r, the project's uv.lock is synced.
    pub packages: Vec<String>,
    /// A requirements file of the project (relative to it), read by the server.
    #[arg(long, short = 'r', value_name = "FILE")]
    pub requirements: Option<String>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The run id `run --detach` printed (`runs` lists them).
    pub run_id: String,
    /// Keep printing output as it arrives until the run ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Once the run has ended, save its artifacts under DIR (see `run --save-artifacts`).
    #[arg(long, value_name = "DIR")]
    pub save_artifacts: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// Tool name.
    pub tool: String,
    /// Argument as key=value; the value is parsed as JSON unless the tool's schema says string.
    #[arg(long = "arg", short = 'a', value_name = "KEY=VALUE")]
    pub args: Vec<String>,
    /// All arguments as one JSON object (`--arg` entries override its keys).
    #[arg(long, value_name = "JSON")]
    pub args_json: Option<String>,
    /// Save every resource the result links to (the run's artifacts) under DIR, read with
    /// resources/read; names that would leave DIR are refused.
    #[arg(long, value_name = "DIR")]
    pub save_artifacts: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Python file, relative to the server's projects folder.
    pub file: String,
    /// Arguments for the script; those that start with `-` go after `--`
    /// (`run train.py 10 -- --epochs 3`).
    #[arg(value_name = "ARGS")]
    pub script_args: Vec<String>,
    /// Arguments for the script after `--`, taken as they are.
    #[arg(last = true, value_name = "-- ARGS", hide = true)]
    pub args: Vec<String>,
    /// Pass this command's stdin to the script (docker's -i): read to its end before the run
    /// starts. Without it (or --stdin-file) the script's stdin is empty and ours is never read.
    #[arg(short = 'i', long = "stdin", conflicts_with = "stdin_file")]
    pub stdin: bool,
    /// Feed this file to the script's stdin (`-` reads our own stdin, as -i does). Any size: past
    /// 512 KiB it is sent in pieces (upload_stdin), up to the server's --max-stdin-bytes.
    #[arg(long, value_name = "PATH")]
    pub stdin_file: Option<PathBuf>,
    /// The script's stdin as text (the interactive menu's), when no --stdin-file is given.
    #[arg(skip)]
    pub stdin_text: Option<String>,
    /// The script's own time limit, enforced by the server (exit 124 when hit): whole seconds, or
    /// with a unit (90s, 5m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = whole_secs)]
    pub script_timeout: Option<u64>,
    /// Start the run in the background (start_python), print its run id and exit at once; follow
    /// it with `logs RUN_ID --follow` (needs an HTTP target).
    #[arg(long, conflicts_with = "save_artifacts")]
    pub detach: bool,
    /// Save the run's artifacts (the files it wrote into PYRUN_OUTPUT_DIR) under DIR; names that
    /// would leave DIR are refused.
    #[arg(long, value_name = "DIR")]
    pub save_artifacts: Option<PathBuf>,
}

/// `--timeout`: the settings' one duration grammar (`pyrun_api::grammar`), as the server reads its
/// own; in seconds.
fn duration_secs(text: &str) -> Result<f64, pyrun_api::grammar::BadValue> {
    pyrun_api::grammar::duration(text).map(|d| d.as_secs_f64())
}

/// `--script-timeout`: a duration in whole seconds, at least one.
fn whole_secs(text: &str) -> Result<u64, pyrun_api::grammar::BadValue> {
    pyrun_api::grammar::seconds(text, 1, u64::MAX)
}

//! The client's typed errors, each with the exit code it maps to and a hint a person can act on.

use std::time::Duration;

/// Exit codes of `pyrun-mcp-client`, documented in the README and in `--help`.
///
/// `run` exits with the script's own exit code when the script ran; these codes are used when it
/// did not (or, for 124 and 130, when the client stopped it).
pub mod exit_code {
    /// A tool reported an error (`isError`), or an unexpected local failure.
    pub const FAILURE: u8 = 1;
    /// Bad command line (unknown flag, malformed `--header`, no `--server`).
    pub const USAGE: u8 = 2;
    /// Could not reach the server: connection refused, DNS, server command not found or exited.
    pub const CONNECT: u8 = 10;
    /// HTTP 401: no token or a wrong token.
    pub const UNAUTHORIZED: u8 = 11;
    /// HTTP 403 or 421: the server refused this Host or Origin.
    pub const FORBIDDEN: u8 = 12;
    /// TLS handshake or certificate failure.
    pub const TLS: u8 = 13;
    /// The URL answered, but not as an MCP endpoint (HTML page, 404, wrong content type), or
    /// the `--server` command does not speak MCP on stdio.
    pub const NOT_MCP: u8 = 14;
    /// The server broke the MCP protocol or closed the connection mid-call.
    pub const PROTOCOL: u8 = 15;
    /// The server has no tool (or prompt) of that name.
    pub const UNKNOWN_TOOL: u8 = 16;
    /// The tool (or prompt) arguments were rejected (locally or by the server).
    pub const BAD_ARGUMENTS: u8 = 17;
    /// `logs` without `--follow`: the run has not ended yet (EX_TEMPFAIL: ask again later).
    pub const STILL_RUNNING: u8 = 75;
    /// `--timeout` expired, or (for `run`) the script hit its time limit.
    pub const TIMEOUT: u8 = 124;
    /// Interrupted by Ctrl-C; the call was cancelled on the server.
    pub const INTERRUPTED: u8 = 130;
}

/// One line per exit code, shown at the end of `--help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    success (for `run`, and `logs` of a run that ended: the script's own exit code,
       124 if it timed out, 1 if it was cancelled or killed)
  1    the tool reported an error; the server refused a read, a prompt or a run id;
       an artifact could not be saved
  2    bad command line (also: runs, logs, cancel, run --detach given a stdio server)
  10   cannot connect (refused, DNS, server command missing or exited)
  11   401 Unauthorized (pass --token or set MCP_AUTH_TOKEN)
  12   403/421 Host or Origin not allowed by the server
  13   TLS failure
  14   not an MCP endpoint (HTML page such as a tunnel warning, 404, wrong content type), or a
       --server command that is not an MCP stdio server (it serves HTTP, never answers)
  15   MCP protocol error, or the connection was lost during a call (the server
       stopped or the network dropped; what arrived before is printed)
  16   unknown tool or prompt
  17   bad tool or prompt arguments (also: a request larger than the server's
       --max-body-bytes, HTTP 413)
  75   `logs` without --follow: the run is still queued or running
  124  timeout (--timeout, or the script's time limit for `run` and `logs`)
  130  interrupted (Ctrl-C); the call is cancelled on the server";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Usage(String),

    #[error("cannot connect to {target}: {reason}")]
    Connect { target: String, reason: String },

    #[error("{url} answered 401 Unauthorized")]
    Unauthorized { url: String, token_sent: bool },

    #[error("{url} answered {status}: this Host or Origin is not allowed")]
    Forbidden { url: String, status: u16 },

    #[error("TLS failure talking to {url}: {reason}")]
    Tls { url: String, reason: String },

    #[error("{url} is not an MCP endpoint: it answered with {what}")]
    NotMcp { url: String, what: String },

    /// A `--server` command that started but does not speak MCP on its stdin and stdout.
    #[error("{command} is not an MCP stdio server: {what}")]
    NotStdioServer { command: String, what: String },

    #[error("MCP protocol error: {0}")]
    Protocol(String),

    /// The server went away (stopped, crashed, the network dropped) while a request waited.
    #[error("lost the connection to the server during `{during}`{}", .reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    ConnectionLost {
        during: String,
        reason: Option<String>,
    },

    /// HTTP 413: one request's body passed the server's limit; `reason` is the server's word.
    #[error("the server refused the `{during}` request as too large (HTTP 413): {reason}")]
    TooLarge { during: String, reason: String },

    #[error("the server has no tool named `{name}`")]
    UnknownTool {
        name: String,
        available: Vec<String>,
    },

    #[error("bad arguments for tool `{tool}`: {reason}")]
    BadArguments { tool: String, reason: String },

    #[error("the tool `{tool}` reported an error: {message}")]
    ToolFailed { tool: String, message: String },

    #[error("the server has no prompt named `{name}`")]
    UnknownPrompt {
        name: String,
        available: Vec<String>,
    },

    #[error("bad arguments for prompt `{prompt}`: {reason}")]
    BadPromptArguments { prompt: String, reason: String },

    /// Runs live in the server: a stdio server this client starts ends when the client does.
    #[error("`{command}` needs an HTTP server: runs live in a server, and a stdio server started by this client ends with it")]
    NeedsHttp { command: &'static str },

    #[error("the server does not offer {what} ({server} declared none)")]
    NotOffered { what: &'static str, server: String },

    /// A JSON-RPC error answered to a resource read or a prompt: not found, refused, too large.
    #[error("the server refused to {what}: {reason}")]
    Refused { what: String, reason: String },

    #[error("run {run_id} could not start: {reason}")]
    RunFailed { run_id: String, reason: String },

    /// Some artifacts were not saved (the others were); each entry says which and why.
    #[error("{} artifact(s) not saved:\n  {}", .0.len(), .0.join("\n  "))]
    ArtifactsNotSaved(Vec<String>),

    #[error("timed out after {} s", .0.as_secs_f64())]
    Timeout(Duration),

    #[error("interrupted; the call was cancelled")]
    Interrupted,

    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl ClientError {
    /// A result with `isError`, carrying its text content as the message.
    pub fn tool_failed(tool: &str, result: &rmcp::model::CallToolResult) -> Self {
        let message: Vec<&str> = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| t.text.trim())
            .collect();
        Self::ToolFailed {
            tool: tool.into(),
            message: message.join("\n"),
        }
    }

    pub fn exit_code(&self) -> u8 {
        use exit_code::*;
        match self {
            Self::Usage(_) => USAGE,
            Self::Connect { .. } => CONNECT,
            Self::Unauthorized { .. } => UNAUTHORIZED,
            Self::Forbidden { .. } => FORBIDDEN,
            Self::Tls { .. } => TLS,
            Self::NotMcp { .. } | Self::NotStdioServer { .. } => NOT_MCP,
            Self::Protocol(_) | Self::ConnectionLost { .. } => PROTOCOL,
            Self::UnknownTool { .. } => UNKNOWN_TOOL,
            Self::BadArguments { .. } | Self::TooLarge { .. } => BAD_ARGUMENTS,
            Self::ToolFailed { .. }
            | Self::Io { .. }
            | Self::NotOffered { .. }
            | Self::Refused { .. }
            | Self::RunFailed { .. }
            | Self::ArtifactsNotSaved(_) => FAILURE,
            Self::NeedsHttp { .. } => USAGE,
            Self::UnknownPrompt { .. } => UNKNOWN_TOOL,
            Self::BadPromptArguments { .. } => BAD_ARGUMENTS,
            Self::Timeout(_) => TIMEOUT,
            Self::Interrupted => INTERRUPTED,
        }
    }

    /// What the person can do about it, printed as a `hint:` line on stderr.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Connect { target, .. } if target.starts_with("http") => Some(format!(
                "is the server running and listening at {target}? Start it with \
                 `pyrun-mcp-server --transport http --bind HOST:PORT`, or check the URL"
            )),
            Self::Connect { .. } => Some(
                "run the server command yourself to see why it does not start; \
                 a URL must start with http:// or https://"
                    .into(),
            ),
            Self::Unauthorized {
                token_sent: false, ..
            } => Some("the server wants a bearer token: pass --token or set MCP_AUTH_TOKEN".into()),
            Self::Unauthorized {
                token_sent: true, ..
            } => Some(
                "the server rejected the token: check --token / MCP_AUTH_TOKEN against the \
                 server's MCP_AUTH_TOKEN"
                    .into(),
            ),
            Self::Forbidden { url, .. } => Some(format!(
                "the server refused the Host or Origin of this request; start it with \
                 `--allowed-host {}` (or connect through an allowed name)",
                host_of(url)
            )),
            Self::Tls { .. } => Some(
                "check http:// versus https:// and that the server's certificate is valid \
                 for this host"
                    .into(),
            ),
            Self::NotMcp { what, .. } if what.contains("HTML") => Some(
                "a tunnel's warning or offline page? For ngrok add \
                 `--header 'ngrok-skip-browser-warning: 1'`; check that the tunnel is up and \
                 the URL ends in /mcp (Streamable HTTP) or /sse (legacy SSE)"
                    .into(),
            ),
            Self::NotMcp { .. } => Some(
                "check the URL path: /mcp for Streamable HTTP, /sse for legacy SSE \
                 (or force one with --transport)"
                    .into(),
            ),
            Self::NotStdioServer { .. } => Some(
                "start it with `--transport stdio` (pyrun-mcp-server serves HTTP unless told \
                 so), or start it yourself and give --server its URL"
                    .into(),
            ),
            Self::UnknownTool { available, .. } if !available.is_empty() => {
                Some(format!("available tools: {}", available.join(", ")))
            }
            Self::BadArguments { .. } => {
                Some("see the tool's input schema with `pyrun-mcp-client tools --verbose`".into())
            }
            Self::UnknownPrompt { available, .. } if !available.is_empty() => {
                Some(format!("available prompts: {}", available.join(", ")))
            }
            Self::BadPromptArguments { .. } => {
                Some("see the prompts' arguments with `pyrun-mcp-client prompts`".into())
            }
            Self::NeedsHttp { .. } => Some(
                "start the server over HTTP (`pyrun-mcp-server --transport http`) and pass \
                 --server http://HOST:PORT/mcp; its runs outlive this client"
                    .into(),
            ),
            Self::ToolFailed { message, .. } if message.starts_with("no run with id") => {
                Some("`pyrun-mcp-client runs` lists the runs the server keeps for you".into())
            }
            Self::Timeout(_) => Some("raise --timeout, or leave it out for no limit".into()),
            Self::TooLarge { .. } => Some(
                "the server's limit is --max-body-bytes (MCP_MAX_BODY_BYTES, 4 MiB unless set); \
                 `run -i` and `run --stdin-file` send a large stdin in pieces"
                    .into(),
            ),
            Self::ConnectionLost { .. } => Some(
                "the server stopped or the network dropped; the output above is what arrived \
                 before (a background run may go on in a server that is still up: \
                 `pyrun-mcp-client runs`)"
                    .into(),
            ),
            _ => None,
        }
    }
}

fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "HOST".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_code_is_distinct() {
        let errors = [
            ClientError::Usage(String::new()),
            ClientError::Connect {
                target: String::new(),
                reason: String::new(),
            },
            ClientError::Unauthorized {
                url: String::new(),
                token_sent: false,
            },
            ClientError::Forbidden {
                url: String::new(),
                status: 403,
            },
            ClientError::Tls {
                url: String::new(),
                reason: String::new(),
            },
            ClientError::NotMcp {
                url: String::new(),
                what: String::new(),
            },
            ClientError::Protocol(String::new()),
            ClientError::UnknownTool {
                name: String::new(),
                available: vec![],
            },
            ClientError::BadArguments {
                tool: String::new(),
                reason: String::new(),
            },
            ClientError::ToolFailed {
                tool: String::new(),
                message: String::new(),
            },
            ClientError::Timeout(Duration::from_secs(1)),
            ClientError::Interrupted,
        ];
        let codes: std::collections::BTreeSet<u8> = errors.iter().map(|e| e.exit_code()).collect();
        assert_eq!(codes.len(), errors.len());
        for code in codes {
            assert!(
                EXIT_CODES_HELP.contains(&format!("  {code} ")),
                "exit code {code} is not documented in --help"
            );
        }
    }

    #[test]
    fn errors_of_runs_resources_and_prompts_keep_the_documented_codes() {
        let cases = [
            (ClientError::NeedsHttp { command: "logs" }, 2),
            (
                ClientError::UnknownPrompt {
                    name: "x".into(),
                    available: vec![],
                },
                16,
            ),
            (
                ClientError::BadPromptArguments {
                    prompt: "x".into(),
                    reason: String::new(),
                },
                17,
            ),
            (
                ClientError::Refused {
                    what: "read x".into(),
                    reason: String::new(),
                },
                1,
            ),
            (
                ClientError::RunFailed {
                    run_id: "r".into(),
                    reason: String::new(),
                },
                1,
            ),
            (ClientError::ArtifactsNotSaved(vec!["a".into()]), 1),
            (
                ClientError::NotOffered {
                    what: "prompts",
                    server: String::new(),
                },
                1,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(error.exit_code(), code, "{error}");
        }
        let stdio = ClientError::NeedsHttp { command: "logs" };
        assert!(stdio
            .hint()
            .unwrap_or_default()
            .contains("--transport http"));
    }

    #[test]
    fn forbidden_hint_names_the_host_to_allow() {
        let err = ClientError::Forbidden {
            url: "https://abc.ngrok.app/mcp".into(),
            status: 403,
        };
        assert!(err
            .hint()
            .unwrap_or_default()
            .contains("--allowed-host abc.ngrok.app"));
    }
}

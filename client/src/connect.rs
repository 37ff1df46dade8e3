//! Turns `--server`/`--transport`/`--token`/`--header` into a connected MCP session over stdio,
//! Streamable HTTP or legacy SSE, and connection failures into typed errors.

mod diagnose;
mod sse;

use std::process::Stdio;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

use crate::cli::TransportChoice;
use crate::error::ClientError;
use crate::handler::Notifier;

pub(crate) use diagnose::chain as error_chain;

pub type McpSession = RunningService<RoleClient, Notifier>;

/// Where the server is and how to talk to it; built without I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A program to spawn; talk JSON-RPC over its stdin/stdout.
    Stdio {
        argv: Vec<String>,
    },
    StreamableHttp {
        url: Url,
    },
    Sse {
        url: Url,
    },
}

impl Target {
    /// `…/sse` URLs are legacy SSE, other http(s) URLs Streamable HTTP, anything else a command
    /// line (split like a POSIX shell would; never run through a shell). `choice` overrides.
    pub fn detect(server: &str, choice: TransportChoice) -> Result<Self, ClientError> {
        let looks_like_url = server.starts_with("http://") || server.starts_with("https://");
        let parse_url = || {
            Url::parse(server)
                .map_err(|e| ClientError::Usage(format!("invalid server URL `{server}`: {e}")))
        };
        match choice {
            TransportChoice::Stdio => Self::command(server),
            TransportChoice::Http => Ok(Self::StreamableHttp { url: parse_url()? }),
            TransportChoice::Sse => Ok(Self::Sse { url: parse_url()? }),
            TransportChoice::Auto if looks_like_url => {
                let url = parse_url()?;
                if url.path().trim_end_matches('/').ends_with("/sse") {
                    Ok(Self::Sse { url })
                } else {
                    Ok(Self::StreamableHttp { url })
                }
            }
            TransportChoice::Auto => Self::command(server),
        }
    }

    fn command(line: &str) -> Result<Self, ClientError> {
        let words = if cfg!(windows) {
            split_windows(line)
        } else {
            shlex::split(line)
        };
        match words {
            Some(argv) if !argv.is_empty() => Ok(Self::Stdio { argv }),
            Some(_) => Err(ClientError::Usage(
                "the server command line is empty".into(),
            )),
            None => Err(ClientError::Usage(format!(
                "cannot split the server command line `{line}` (unbalanced quotes?)"
            ))),
        }
    }

    /// How the target is named in messages (a URL, or the command's program).
    pub fn display(&self) -> String {
        match self {
            Self::Stdio { argv } => format!("`{}`", argv.join(" ")),
            Self::StreamableHttp { url } | Self::Sse { url } => url.to_string(),
        }
    }
}

/// Windows paths are full of backslashes, so there they stay literal: only whitespace separates
/// words and only matching `"` or `'` group them. `None` on an unclosed quote.
fn split_windows(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    words.extend(word);
    Some(words)
}

/// HTTP credentials and extra headers, validated up front.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    token: Option<String>,
    /// `--header`s only.
    headers: HeaderMap,
    /// `--header`s plus `Authorization: Bearer …`, for requests we make ourselves.
    all_headers: HeaderMap,
}

impl HttpOptions {
    /// Validates `Name: value` header strings.
    pub fn new(token: Option<String>, raw_headers: &[String]) -> Result<Self, ClientError> {
        let mut headers = HeaderMap::new();
        for raw in raw_headers {
            let (name, value) = raw.split_once(':').ok_or_else(|| {
                ClientError::Usage(format!("--header `{raw}` is not of the form `Name: value`"))
            })?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|e| ClientError::Usage(format!("bad header name in `{raw}`: {e}")))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|e| ClientError::Usage(format!("bad header value in `{raw}`: {e}")))?;
            headers.append(name, value);
        }
        let token = token.filter(|t| !t.is_empty());
        let mut all_headers = headers.clone();
        if let Some(token) = &token {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ClientError::Usage("the token contains characters not allowed in a header".into())
            })?;
            all_headers.insert(http::header::AUTHORIZATION, value);
        }
        Ok(Self {
            token,
            headers,
            all_headers,
        })
    }
}

/// Connects and performs the MCP initialize handshake.
pub async fn connect(
    target: &Target,
    http: &HttpOptions,
    handler: Notifier,
) -> Result<McpSession, ClientError> {
    match target {
        Target::Stdio { argv } => connect_stdio(target, argv, handler).await,
        Target::StreamableHttp { url } => connect_streamable(target, url, http, handler).await,
        Target::Sse { url } => {
            let client = http_client(url)?;
            let transport =
                sse::SseTransport::open(client, url.clone(), http.all_headers.clone()).await?;
            handler
                .serve(transport)
                .await
                .map_err(|e| init_error(target, e, http.token.is_some()))
        }
    }
}

async fn connect_stdio(
    target: &Target,
    argv: &[String],
    handler: Notifier,
) -> Result<McpSession, ClientError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| ClientError::Usage("the server command line is empty".into()))?;
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    // pyrun-mcp-server logs at info by default; keep the user's terminal for the script's output
    // unless they asked for server logs. Other servers ignore the variable.
    if std::env::var_os("PYRUN_LOG").is_none() {
        command.env("PYRUN_LOG", "warn");
    }
    // Own process group: a terminal's Ctrl-C reaches only us, and we cancel the call cleanly
    // before closing the server's stdin.
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(windows)]
    command.creation_flags(0x0000_0200); // CREATE_NEW_PROCESS_GROUP
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| ClientError::Connect {
            target: target.display(),
            reason: format!("cannot start `{program}`: {e}"),
        })?;
    handler.serve(transport).await.map_err(|e| match e {
        ClientInitializeError::ConnectionClosed(_)
        | ClientInitializeError::TransportError { .. } => ClientError::Connect {
            target: target.display(),
            reason: format!(
                "the server process exited before initializing ({})",
                diagnose::chain(&e)
            ),
        },
        other => ClientError::Protocol(diagnose::chain(&other)),
    })
}

async fn connect_streamable(
    target: &Target,
    url: &Url,
    http: &HttpOptions,
    handler: Notifier,
) -> Result<McpSession, ClientError> {
    let client = http_client(url)?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(
        http.headers
            .iter()
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect(),
    );
    if let Some(token) = &http.token {
        config = config.auth_header(token.clone());
    }
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
    match handler.serve(transport).await {
        Ok(session) => Ok(session),
        Err(e) => {
            // rmcp's errors say what failed but not always why: one plain request tells
            // "refused" from "401" from "an HTML page".
            let probed = diagnose::probe_streamable(&client, url, &http.all_headers).await;
            Err(probed.unwrap_or_else(|| init_error(target, e, http.token.is_some())))
        }
    }
}

fn init_error(target: &Target, err: ClientInitializeError, token_sent: bool) -> ClientError {
    diagnose::from_error_chain(&target.display(), &err, token_sent)
        .unwrap_or_else(|| ClientError::Protocol(diagnose::chain(&err)))
}

fn http_client(url: &Url) -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("pyrun-mcp-client/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ClientError::Tls {
            url: url.to_string(),
            reason: diagnose::chain(&e),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(s: &str) -> Target {
        match Target::detect(s, TransportChoice::Auto) {
            Ok(t) => t,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn url_path_picks_the_transport() {
        assert!(matches!(
            detect("http://127.0.0.1:8000/mcp"),
            Target::StreamableHttp { .. }
        ));
        assert!(matches!(
            detect("https://x.ngrok.app/mcp/"),
            Target::StreamableHttp { .. }
        ));
        assert!(matches!(
            detect("http://127.0.0.1:8000/sse"),
            Target::Sse { .. }
        ));
        assert!(matches!(
            detect("https://x.example/api/sse/"),
            Target::Sse { .. }
        ));
        assert!(matches!(
            detect("http://127.0.0.1:8000/"),
            Target::StreamableHttp { .. }
        ));
    }

    #[test]
    fn anything_else_is_a_command_split_like_a_shell() {
        let target = detect(r#"pyrun-mcp-server --projects-dir "my projects" --transport stdio"#);
        assert_eq!(
            target,
            Target::Stdio {
                argv: vec![
                    "pyrun-mcp-server".into(),
                    "--projects-dir".into(),
                    "my projects".into(),
                    "--transport".into(),
                    "stdio".into()
                ]
            }
        );
        // Shell syntax is not interpreted: `;` stays an argument.
        assert_eq!(
            detect("echo a; rm -rf x"),
            Target::Stdio {
                argv: ["echo", "a;", "rm", "-rf", "x"].map(String::from).to_vec()
            }
        );
    }

    #[test]
    fn windows_command_lines_keep_backslashes() {
        let words = split_windows(r#"C:\bin\server.exe --dir 'C:\My Projects' --x "a b" """#);
        let expected = [
            r"C:\bin\server.exe",
            "--dir",
            r"C:\My Projects",
            "--x",
            "a b",
            "",
        ];
        assert_eq!(words, Some(expected.map(String::from).to_vec()));
        assert_eq!(split_windows("a 'b"), None);
    }

    #[test]
    fn transport_flag_overrides_the_path() {
        let t = Target::detect("http://127.0.0.1:1/custom", TransportChoice::Sse);
        assert!(matches!(t, Ok(Target::Sse { .. })));
        assert!(matches!(
            Target::detect("not a url", TransportChoice::Http),
            Err(ClientError::Usage(_))
        ));
        assert!(matches!(
            Target::detect("a 'b", TransportChoice::Auto),
            Err(ClientError::Usage(_))
        ));
    }

    #[test]
    fn headers_are_validated() {
        let ok = HttpOptions::new(Some("t".into()), &["ngrok-skip-browser-warning: 1".into()]);
        let headers = ok.map(|o| o.all_headers).unwrap_or_default();
        assert_eq!(
            headers
                .get("ngrok-skip-browser-warning")
                .map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        assert_eq!(
            headers.get("authorization").map(|v| v.as_bytes()),
            Some(&b"Bearer t"[..])
        );
        assert!(matches!(
            HttpOptions::new(Some("line\nbreak".into()), &[]),
            Err(ClientError::Usage(_))
        ));
        assert!(matches!(
            HttpOptions::new(None, &["no-colon".into()]),
            Err(ClientError::Usage(_))
        ));
        assert!(matches!(
            HttpOptions::new(None, &["bad name: x".into()]),
            Err(ClientError::Usage(_))
        ));
    }
}

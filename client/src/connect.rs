//! Turns `--server`/`--transport`/`--token`/`--header` into a connected MCP session over stdio,
//! Streamable HTTP or legacy SSE, and connection failures into typed errors.

mod diagnose;
mod sse;
mod stdio;

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};

use crate::cli::TransportChoice;
use crate::error::ClientError;
use crate::handler::Notifier;

pub(crate) use diagnose::{chain as error_chain, root_cause};
pub use stdio::ServerLog;

pub type McpSession = RunningService<RoleClient, Notifier>;

/// Tries to resume a broken SSE stream before giving up (see [`reconnect_policy`]).
const RECONNECT_TRIES: usize = 2;

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
    /// A URL with no path, as the server prints it: `/mcp` is tried, then `/sse`.
    Base {
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
                let path = url.path().trim_end_matches('/');
                if path.is_empty() && url.query().is_none() {
                    Ok(Self::Base { url })
                } else if path.ends_with("/sse") {
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
            Self::StreamableHttp { url } | Self::Sse { url } | Self::Base { url } => {
                url.to_string()
            }
        }
    }

    /// The target and how it is spoken to, for `--verbose`.
    pub fn describe(&self) -> String {
        match self {
            Self::Stdio { .. } => format!("{} (stdio)", self.display()),
            Self::StreamableHttp { url } => format!("{url} (Streamable HTTP)"),
            Self::Sse { url } => format!("{url} (legacy SSE)"),
            Self::Base { url } => url.to_string(),
        }
    }

    /// A base URL's endpoints in the order they are tried.
    fn endpoints(base: &Url) -> [Target; 2] {
        let at = |path: &str| {
            let mut url = base.clone();
            url.set_path(path);
            url
        };
        [
            Self::StreamableHttp { url: at("/mcp") },
            Self::Sse { url: at("/sse") },
        ]
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

/// Connects and performs the MCP initialize handshake; returns the session and the target it
/// reached (for a base URL, the endpoint that answered).
pub async fn connect(
    target: &Target,
    http: &HttpOptions,
    handler: Notifier,
    server_log: ServerLog,
) -> Result<(McpSession, Target), ClientError> {
    if let Target::Stdio { argv } = target {
        let session = stdio::connect(target, argv, handler, server_log).await?;
        return Ok((session, target.clone()));
    }
    let Target::Base { url } = target else {
        let session = connect_to(target, http, handler).await?;
        return Ok((session, target.clone()));
    };
    let [mcp, sse] = Target::endpoints(url);
    match connect_to(&mcp, http, handler.clone()).await {
        Ok(session) => Ok((session, mcp)),
        // Only "nothing MCP there" moves on: a refused connection or a token problem would
        // be the same at /sse.
        Err(ClientError::NotMcp { .. }) => match connect_to(&sse, http, handler).await {
            Ok(session) => Ok((session, sse)),
            Err(ClientError::NotMcp { what, .. }) => Err(ClientError::NotMcp {
                url: url.to_string(),
                what: format!("{what} at /sse, and not as MCP at /mcp either"),
            }),
            Err(other) => Err(other),
        },
        Err(other) => Err(other),
    }
}

async fn connect_to(
    target: &Target,
    http: &HttpOptions,
    handler: Notifier,
) -> Result<McpSession, ClientError> {
    match target {
        Target::Stdio { argv } => stdio::connect(target, argv, handler, ServerLog::Errors).await,
        Target::StreamableHttp { url } | Target::Base { url } => {
            connect_streamable(target, url, http, handler).await
        }
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
    config.retry_config = Arc::new(reconnect_policy());
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

/// How often a broken SSE stream is resumed before the call fails. rmcp's default retries for
/// ever with a doubling pause, so a server that went away left a call (or `logs --follow`)
/// waiting with no end; a few quick tries still bridge a proxy that dropped an idle stream.
fn reconnect_policy() -> ExponentialBackoff {
    let mut policy = ExponentialBackoff::default();
    policy.max_times = Some(RECONNECT_TRIES);
    policy.base_duration = Duration::from_millis(250);
    policy.max_delay = Some(Duration::from_secs(2));
    policy
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
            detect("http://127.0.0.1:8000/api"),
            Target::StreamableHttp { .. }
        ));
    }

    #[test]
    fn a_base_url_tries_mcp_then_sse() {
        for base in ["http://127.0.0.1:8765", "http://127.0.0.1:8765/"] {
            let Target::Base { url } = detect(base) else {
                panic!("{base} is not read as a base URL");
            };
            let [first, second] = Target::endpoints(&url);
            assert_eq!(
                first.describe(),
                "http://127.0.0.1:8765/mcp (Streamable HTTP)"
            );
            assert_eq!(second.describe(), "http://127.0.0.1:8765/sse (legacy SSE)");
        }
        // A query string is not a base: the URL is taken as given.
        assert!(matches!(
            detect("https://x.example/?key=1"),
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

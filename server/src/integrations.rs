//! `pyrun-mcp-server config ASSISTANT [--url URL]`: the exact snippet that connects Claude Desktop,
//! Claude Code, Cursor or Cline to this server — locally (the assistant starts this binary over
//! stdio) or remotely (Streamable HTTP or SSE with the bearer header) — or, for Claude's custom
//! connectors (claude.ai, Desktop › Connectors, mobile), the URL to paste and the steps around it
//! (they sign in with OAuth, never a header). Pure text; no I/O here.

use std::path::PathBuf;

use serde_json::{json, Value};

/// The name the server gets in each assistant's list.
const SERVER_NAME: &str = "pyrun";
/// Stands for the token when this machine does not know it.
pub const TOKEN_PLACEHOLDER: &str = "<MCP_AUTH_TOKEN>";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Assistant {
    /// Claude Desktop: claude_desktop_config.json.
    ClaudeDesktop,
    /// Claude Code: a `claude mcp add …` command.
    ClaudeCode,
    /// Cursor: ~/.cursor/mcp.json or .cursor/mcp.json.
    Cursor,
    /// Cline (VS Code): cline_mcp_settings.json.
    Cline,
    /// Claude's custom connectors (claude.ai, Claude Desktop's Settings › Connectors, the mobile
    /// apps): the URL to paste and the steps; needs --url and a server run with --oauth.
    ClaudeAi,
}

/// How the assistant reaches the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The assistant starts this binary itself and talks over stdio.
    Stdio {
        /// Absolute path of this server binary.
        server: PathBuf,
        /// Absolute path of the projects folder.
        projects_dir: PathBuf,
        /// Absolute path of the interpreter, when known: assistants start with a bare PATH.
        python: Option<PathBuf>,
        /// The other settings given to `config` (flags, environment, `.env`), as flags and
        /// values; never a secret.
        settings: Vec<String>,
    },
    /// A running server at a URL (`…/mcp` or `…/sse`).
    Remote {
        url: RemoteUrl,
        token: Option<String>,
    },
}

/// A checked `http(s)://…/mcp` or `…/sse` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteUrl(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--url '{0}' is not an http(s) URL of the server\nhint: give the public base URL or its endpoint, e.g. https://abc.ngrok-free.app/mcp (Streamable HTTP) or …/sse (legacy SSE)")]
pub struct BadUrl(pub String);

impl RemoteUrl {
    /// Accepts `https://host[:port][/mcp|/sse]`; a bare base URL gets `/mcp`.
    pub fn parse(text: &str) -> Result<Self, BadUrl> {
        let bad = || BadUrl(text.to_owned());
        let trimmed = text.trim().trim_end_matches('/');
        let (scheme, rest) = trimmed.split_once("://").ok_or_else(bad)?;
        if !matches!(scheme, "http" | "https") {
            return Err(bad());
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let authority_ok = !authority.is_empty()
            && authority.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
            });
        if !authority_ok || trimmed.chars().any(|c| c.is_whitespace() || c == '"') {
            return Err(bad());
        }
        if path.is_empty() {
            return Ok(Self(format!("{trimmed}/mcp")));
        }
        Ok(Self(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Legacy HTTP+SSE when the path ends in `/sse`; otherwise Streamable HTTP.
    pub fn is_sse(&self) -> bool {
        self.0.ends_with("/sse")
    }
}

/// What to show: the snippet on stdout, the hints on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub text: String,
    pub hints: Vec<String>,
}

/// Claude Desktop installs MCP Bundles with a double click: no config file to edit.
const BUNDLE_HINT: &str = "hint: the easy way is the MCP Bundle: scripts/bundle.sh (Windows: \
                           scripts\\bundle.ps1) builds dist/pyrun-mcp-*.mcpb; double-click it \
                           and pick the projects folder";

/// The same from a release download, which ships the bundle beside the archives, not the script.
const BUNDLE_HINT_RELEASE: &str = "hint: the easy way is the MCP Bundle: download \
                                   pyrun-mcp-*.mcpb from the same release page; double-click \
                                   it and pick the projects folder";

/// Stands for the connector URL when none was given (`config` refuses that before it asks).
const URL_PLACEHOLDER: &str = "https://<your-public-host>/mcp";

/// The snippet that connects `assistant` to `target`.
pub fn snippet(assistant: Assistant, target: &Target) -> Snippet {
    if assistant == Assistant::ClaudeAi {
        return connector(match target {
            Target::Remote { url, .. } => url.as_str(),
            Target::Stdio { .. } => URL_PLACEHOLDER,
        });
    }
    let mut hints = vec![where_it_goes(assistant).to_owned()];
    let text = match target {
        Target::Stdio { .. } => {
            let (command, args) = stdio_command(target);
            match assistant {
                Assistant::ClaudeCode => {
                    let mut words = vec!["claude", "mcp", "add", SERVER_NAME, "--"]
                        .into_iter()
                        .map(str::to_owned)
                        .collect::<Vec<_>>();
                    words.push(quote(&command));
                    words.extend(args.iter().map(|a| quote(a)));
                    words.join(" ")
                }
                Assistant::Cline => servers(json!({
                    "command": command, "args": args, "disabled": false, "autoApprove": []
                })),
                Assistant::ClaudeDesktop => {
                    hints.push(
                        crate::app::source_tree::pick(BUNDLE_HINT, BUNDLE_HINT_RELEASE).to_owned(),
                    );
                    servers(json!({ "command": command, "args": args }))
                }
                // (Claude's connectors were answered above.)
                Assistant::Cursor | Assistant::ClaudeAi => {
                    servers(json!({ "command": command, "args": args }))
                }
            }
        }
        Target::Remote { url, token } => {
            let bearer = format!("Bearer {}", token.as_deref().unwrap_or(TOKEN_PLACEHOLDER));
            match token {
                Some(_) => hints.push(
                    "note: the snippet contains your MCP_AUTH_TOKEN; keep the file private"
                        .to_owned(),
                ),
                None => hints.push(format!(
                    "hint: MCP_AUTH_TOKEN is not set here (environment or .env): replace \
                     {TOKEN_PLACEHOLDER} with the token the server was started with"
                )),
            }
            remote(assistant, url, &bearer, &mut hints)
        }
    };
    Snippet { text, hints }
}

fn remote(assistant: Assistant, url: &RemoteUrl, bearer: &str, hints: &mut Vec<String>) -> String {
    let transport = if url.is_sse() { "sse" } else { "http" };
    match assistant {
        Assistant::ClaudeCode => format!(
            "claude mcp add --transport {transport} {SERVER_NAME} {} --header {}",
            quote(url.as_str()),
            quote(&format!("Authorization: {bearer}"))
        ),
        // (Claude's connectors were answered in `snippet`.)
        Assistant::Cursor | Assistant::ClaudeAi => servers(json!({
            "url": url.as_str(), "headers": { "Authorization": bearer }
        })),
        Assistant::Cline => servers(json!({
            "type": if url.is_sse() { "sse" } else { "streamableHttp" },
            "url": url.as_str(),
            "headers": { "Authorization": bearer },
            "disabled": false,
            "autoApprove": []
        })),
        Assistant::ClaudeDesktop => {
            hints.push(
                "note: Claude Desktop's config file starts local commands only; the mcp-remote \
                 bridge (npm, needs Node.js) carries the header to the URL"
                    .to_owned(),
            );
            let mode = if url.is_sse() {
                "sse-only"
            } else {
                "http-only"
            };
            // The header goes through an env variable: a space inside args breaks on Windows.
            servers(json!({
                "command": "npx",
                "args": [
                    "-y", "mcp-remote", url.as_str(), "--transport", mode,
                    "--header", "Authorization:${PYRUN_AUTH_HEADER}"
                ],
                "env": { "PYRUN_AUTH_HEADER": bearer }
            }))
        }
    }
}

/// A custom connector in Claude: the URL on stdout (what gets pasted), the steps on stderr. The
/// token is never shown: connectors sign in with OAuth, and the consent page asks for the secret.
fn connector(url: &str) -> Snippet {
    let mut hints = vec![where_it_goes(Assistant::ClaudeAi).to_owned()];
    if !url.starts_with("https://") {
        hints.push(
            "warning: Claude connects from Anthropic's cloud and needs a public https URL; \
             127.0.0.1 and plain http cannot work (give the tunnel's or proxy's URL)"
                .to_owned(),
        );
    }
    if url.ends_with("/sse") {
        hints.push(format!(
            "hint: connectors speak Streamable HTTP best: paste {}/mcp instead of the legacy …/sse",
            url.trim_end_matches("/sse")
        ));
    }
    hints.extend(
        [
            "the server: run it with --oauth and a fixed public URL, e.g. \
             `pyrun-mcp-server --tunnel ngrok --tunnel-domain YOUR-NAME.ngrok-free.app --oauth` \
             (ngrok's free static domain; a random one changes at each start and disconnects \
             Claude), or --public-url URL behind a proxy of your own",
            "claude.ai or Claude Desktop: Settings › Connectors › Add custom connector; name: \
             pyrun; URL: the line above (no client id or secret needed); Add, then Connect",
            "the mobile apps: connectors added on claude.ai or Desktop appear there for the same \
             account (Team/Enterprise: an owner adds it under Admin settings › Connectors first)",
            "Connect opens this server's consent page in the browser: it names the client \
             (Claude) and asks for the owner password (--oauth-owner-password / \
             MCP_OAUTH_OWNER_PASSWORD) or, when none is set, the server's MCP_AUTH_TOKEN; Approve",
            "afterwards: `pyrun-mcp-server oauth list` shows the connection, `oauth revoke \
             CLIENT_ID` cuts it off at once, `oauth unlock` clears the wait after wrong \
             passwords; each run is a line in the audit log (audit.jsonl in the state folder)",
        ]
        .into_iter()
        .enumerate()
        .map(|(n, step)| format!("{}. {step}", n + 1)),
    );
    Snippet {
        text: url.to_owned(),
        hints,
    }
}

/// The command line an assistant runs to start this server over stdio.
fn stdio_command(target: &Target) -> (String, Vec<String>) {
    let Target::Stdio {
        server,
        projects_dir,
        python,
        settings,
    } = target
    else {
        return (String::new(), Vec::new());
    };
    let mut args = vec![
        "--transport".to_owned(),
        "stdio".to_owned(),
        "--projects-dir".to_owned(),
        projects_dir.display().to_string(),
    ];
    if let Some(python) = python {
        args.push("--python".to_owned());
        args.push(python.display().to_string());
    }
    args.extend(settings.iter().cloned());
    (server.display().to_string(), args)
}

/// `{"mcpServers": {"pyrun": entry}}`, pretty-printed.
fn servers(entry: Value) -> String {
    let whole = json!({ "mcpServers": { SERVER_NAME: entry } });
    serde_json::to_string_pretty(&whole).unwrap_or_else(|_| whole.to_string())
}

fn where_it_goes(assistant: Assistant) -> &'static str {
    match assistant {
        Assistant::ClaudeDesktop => {
            "hint: merge into claude_desktop_config.json (Settings > Developer > Edit Config; macOS: \
             ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\), then restart \
             Claude Desktop"
        }
        Assistant::ClaudeCode => {
            "hint: run this command (add `--scope user` after `add` for every project); \
             `claude mcp list` shows it"
        }
        Assistant::Cursor => {
            "hint: merge into ~/.cursor/mcp.json (all projects) or .cursor/mcp.json (one project)"
        }
        Assistant::Cline => {
            "hint: merge into cline_mcp_settings.json (Cline > MCP Servers > Configure MCP Servers)"
        }
        Assistant::ClaudeAi => "hint: paste this URL as a custom connector in Claude, as follows",
    }
}

/// One shell word: bare when safe, else single-quoted (POSIX shells; PowerShell on Windows).
fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
    if safe {
        return word.to_owned();
    }
    if cfg!(windows) {
        format!("'{}'", word.replace('\'', "''"))
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Assistant; 4] = [
        Assistant::ClaudeDesktop,
        Assistant::ClaudeCode,
        Assistant::Cursor,
        Assistant::Cline,
    ];

    /// A real binary and folder, so "points at files that exist" can be checked.
    fn stdio_target(projects: &std::path::Path) -> Target {
        Target::Stdio {
            server: std::env::current_exe().unwrap(),
            projects_dir: projects.to_path_buf(),
            python: None,
            settings: vec!["--timeout".to_owned(), "120".to_owned()],
        }
    }

    fn entry(text: &str) -> Value {
        let parsed: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        parsed["mcpServers"][SERVER_NAME].clone()
    }

    /// The words a POSIX shell makes of the Claude Code command (a `claude` function records them).
    #[cfg(unix)]
    fn shell_words(command: &str) -> Vec<String> {
        let script = format!("claude() {{ printf '%s\\0' \"$@\"; }}\n{command}");
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}: {out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .split('\0')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn stdio_snippets_parse_and_point_at_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path().join("my projects 'quoted'");
        std::fs::create_dir(&projects).unwrap();
        let target = stdio_target(&projects);
        for assistant in ALL {
            let snippet = snippet(assistant, &target);
            let (command, args): (String, Vec<String>) = if assistant == Assistant::ClaudeCode {
                #[cfg(not(unix))]
                continue;
                #[cfg(unix)]
                {
                    let words = shell_words(&snippet.text);
                    assert_eq!(words[..5], ["mcp", "add", SERVER_NAME, "--", &words[4]]);
                    (words[4].clone(), words[5..].to_vec())
                }
            } else {
                let entry = entry(&snippet.text);
                let args = entry["args"].as_array().unwrap();
                let args = args.iter().map(|a| a.as_str().unwrap().to_owned());
                (
                    entry["command"].as_str().unwrap().to_owned(),
                    args.collect(),
                )
            };
            assert!(std::path::Path::new(&command).is_file(), "{command}");
            let at = args.iter().position(|a| a == "--projects-dir").unwrap();
            assert!(std::path::Path::new(&args[at + 1]).is_dir(), "{args:?}");
            assert_eq!(args[..2], ["--transport", "stdio"]);
            assert_eq!(args[args.len() - 2..], ["--timeout", "120"]);
            assert!(!snippet.hints.is_empty());
            // Claude Desktop's users hear of the bundle, the easy way; nobody else does.
            let bundle = snippet.hints.iter().any(|h| h.contains(".mcpb"));
            assert_eq!(
                bundle,
                assistant == Assistant::ClaudeDesktop,
                "{assistant:?}"
            );
        }
    }

    #[test]
    fn remote_snippets_carry_the_url_and_bearer_header() {
        let url = RemoteUrl::parse("https://abc.ngrok-free.app").unwrap();
        assert_eq!(url.as_str(), "https://abc.ngrok-free.app/mcp");
        let target = Target::Remote {
            url: url.clone(),
            token: Some("s3cret".to_owned()),
        };
        let cursor = entry(&snippet(Assistant::Cursor, &target).text);
        assert_eq!(cursor["url"], url.as_str());
        assert_eq!(cursor["headers"]["Authorization"], "Bearer s3cret");
        let cline = entry(&snippet(Assistant::Cline, &target).text);
        assert_eq!(cline["type"], "streamableHttp");
        assert_eq!(cline["headers"]["Authorization"], "Bearer s3cret");
        let desktop = entry(&snippet(Assistant::ClaudeDesktop, &target).text);
        assert_eq!(desktop["command"], "npx");
        assert_eq!(desktop["args"][2], url.as_str());
        assert_eq!(desktop["env"]["PYRUN_AUTH_HEADER"], "Bearer s3cret");
        #[cfg(unix)]
        {
            let code = shell_words(&snippet(Assistant::ClaudeCode, &target).text);
            let expected = [
                "mcp",
                "add",
                "--transport",
                "http",
                SERVER_NAME,
                url.as_str(),
                "--header",
                "Authorization: Bearer s3cret",
            ];
            assert_eq!(code, expected);
        }

        let sse = Target::Remote {
            url: RemoteUrl::parse("http://127.0.0.1:8000/sse/").unwrap(),
            token: None,
        };
        let cline = snippet(Assistant::Cline, &sse);
        assert!(cline.hints.iter().any(|h| h.contains("MCP_AUTH_TOKEN")));
        let cline = entry(&cline.text);
        assert_eq!(cline["type"], "sse");
        assert_eq!(cline["url"], "http://127.0.0.1:8000/sse");
        assert_eq!(
            cline["headers"]["Authorization"],
            format!("Bearer {TOKEN_PLACEHOLDER}")
        );
    }

    #[test]
    fn a_claude_connector_is_the_url_to_paste_and_the_steps_but_never_the_token() {
        let target = Target::Remote {
            url: RemoteUrl::parse("https://pyrun.ngrok-free.app").unwrap(),
            token: Some("s3cret-token".to_owned()),
        };
        let connector = snippet(Assistant::ClaudeAi, &target);
        assert_eq!(connector.text, "https://pyrun.ngrok-free.app/mcp");
        let hints = connector.hints.join("\n");
        for needed in [
            "--oauth",
            "--tunnel-domain",
            "Settings › Connectors",
            "Add custom connector",
            "mobile",
            "MCP_OAUTH_OWNER_PASSWORD",
            "MCP_AUTH_TOKEN",
            "oauth revoke",
        ] {
            assert!(hints.contains(needed), "{needed} missing:\n{hints}");
        }
        assert!(!hints.contains("s3cret-token") && !connector.text.contains("s3cret-token"));
        assert!(!hints.contains("warning"), "{hints}");

        // Loopback or plain http cannot be reached by Claude; a legacy /sse URL gets the /mcp one.
        let local = Target::Remote {
            url: RemoteUrl::parse("http://127.0.0.1:8000/sse").unwrap(),
            token: None,
        };
        let hints = snippet(Assistant::ClaudeAi, &local).hints.join("\n");
        assert!(
            hints.contains("warning: Claude connects from Anthropic's cloud"),
            "{hints}"
        );
        assert!(hints.contains("http://127.0.0.1:8000/mcp"), "{hints}");
    }

    #[test]
    fn bad_urls_are_refused_with_the_value() {
        for bad in [
            "abc.ngrok-free.app",
            "ftp://x.example/mcp",
            "https:///mcp",
            "https://x y/mcp",
        ] {
            let err = RemoteUrl::parse(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        let kept = RemoteUrl::parse("https://h.example:8443/base/mcp").unwrap();
        assert_eq!(kept.as_str(), "https://h.example:8443/base/mcp");
    }
}

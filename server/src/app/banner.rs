//! The start-up banner on stderr, for the person who started the server: where clients connect
//! (the `/mcp` and `/sse` URLs, not only the base), the projects folder, a loopback server without
//! a token, the Host names a non-loopback one accepts, `--oauth`'s connector URL, and, once the sandbox is probed, the platform's protection in one line.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use super::stderr;
use super::{protection, App};

/// The lines said when the HTTP listener is bound. The first stays `pyrun-mcp listening on URL`:
/// scripts and tests read the address from it.
pub fn listening(app: &App, addr: SocketAddr) {
    stderr::line(&format!("pyrun-mcp listening on http://{addr}"));
    // 0.0.0.0 is no address to connect to: this machine's own clients use loopback.
    let reach = if addr.ip().is_unspecified() {
        SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let base = format!("http://{reach}");
    stderr::line(&format!(
        "  connect MCP clients to {base}/mcp (Streamable HTTP) or {base}/sse (legacy SSE)"
    ));
    stderr::line(&format!(
        "  projects folder: {}",
        app.engine.root().path().display()
    ));
    let http = &app.config.http;
    if http.bind.ip().is_loopback() && http.auth_token.is_none() && app.oauth.is_none() {
        stderr::line(
            "  no auth token: any program of any user on this machine can run these scripts; \
             set MCP_AUTH_TOKEN (or --auth-token) to require one",
        );
    }
    if !http.bind.ip().is_loopback() {
        // DNS-rebinding protection answers 403 to any other Host, this machine's LAN name and
        // address included: say so before the first client meets it.
        let hosts: Vec<&str> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .chain(http.allowed_hosts.iter().map(String::as_str))
            .collect();
        stderr::line(&format!(
            "  accepted Host names: {}; a request naming another (this machine's LAN name or \
             address, e.g. http://192.168.1.20:{}) gets 403: add it with --allowed-host NAME \
             (MCP_ALLOWED_HOSTS, comma-separated)",
            hosts.join(", "),
            addr.port()
        ));
    }
    if let Some(url) = app
        .config
        .oauth
        .as_ref()
        .and_then(|o| o.public_url.as_deref())
    {
        stderr::line(&format!(
            "  Claude connector URL (Settings > Connectors > Add custom connector): {}/mcp",
            url.trim_end_matches('/')
        ));
    }
}

/// Over stdio, where stderr is the log a client may keep: the projects folder.
pub fn stdio(app: &App) {
    stderr::line(&format!(
        "pyrun-mcp serving over stdio; projects folder: {}",
        app.engine.root().path().display()
    ));
}

/// Says the platform's protection once the sandbox is probed (not starting the probe early).
pub fn protection_when_probed(app: Arc<App>) {
    tokio::spawn(async move {
        let probed = app.engine.runner().sandbox().probed().await;
        say_protection(&protection::summary_of(&app.config, Some(&probed)));
    });
}

fn say_protection(line: &str) {
    stderr::line(&format!("pyrun-mcp protection: {line}"));
}

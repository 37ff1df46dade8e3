//! Which redirect URIs a client may register: https anywhere, or http to this machine's
//! loopback (native and CLI clients listen there). Nothing that could run script in a browser
//! (`javascript:`, `data:`), no fragment (RFC 6749 §3.1.2), nothing longer than a URL needs.

use url::Url;

/// Longest redirect URI accepted.
pub const MAX_LEN: usize = 2000;

/// Why a redirect URI is refused (the registration error's description).
pub fn check(uri: &str) -> Result<(), &'static str> {
    if uri.len() > MAX_LEN {
        return Err("a redirect_uri is longer than 2000 characters");
    }
    if uri.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("a redirect_uri contains spaces or control characters");
    }
    let url = Url::parse(uri).map_err(|_| "a redirect_uri is not an absolute URL")?;
    if url.fragment().is_some() || uri.contains('#') {
        return Err("a redirect_uri must not have a fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a redirect_uri must not carry user information");
    }
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if is_loopback(&url) => Ok(()),
        "http" => Err("a redirect_uri must be https, or http to a loopback address"),
        _ => Err("a redirect_uri must be https, or http to a loopback address"),
    }
}

/// True when the URL's host is this machine's loopback (`localhost`, 127.0.0.0/8, `::1`).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A URL's `host[:port]` (the port only when it is not the scheme's default).
pub fn host_and_port(uri: &str) -> Option<String> {
    let url = Url::parse(uri).ok()?;
    let host = url.host_str()?.to_owned();
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

/// The host (and port) people are shown for a URL on the consent page.
pub fn display_host(uri: &str) -> String {
    host_and_port(uri).unwrap_or_else(|| "(unknown)".to_owned())
}

/// The origin a redirect goes to, for the consent page's `form-action` policy.
pub fn origin(uri: &str) -> Option<String> {
    let url = Url::parse(uri).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_and_loopback_callbacks_are_accepted() {
        for uri in [
            "https://claude.ai/api/mcp/auth_callback",
            "https://claude.com/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost:8080/cb?x=1",
            "http://[::1]:9000/cb",
        ] {
            assert_eq!(check(uri), Ok(()), "{uri}");
        }
    }

    #[test]
    fn scripts_fragments_and_plain_http_are_refused() {
        for uri in [
            "javascript:alert(1)",
            "JaVaScRiPt:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "https://claude.ai/cb#frag",
            "https://claude.ai/cb#",
            "http://claude.ai/cb",
            "http://127.0.0.1.evil.example/cb",
            "http://10.0.0.1/cb",
            "https://user:pw@claude.ai/cb",
            "file:///etc/passwd",
            "cursor://anysphere.cursor-retrieval/oauth",
            "/relative/path",
            "https://claude.ai/cb with space",
            "",
        ] {
            assert!(check(uri).is_err(), "{uri}");
        }
        assert!(check(&format!("https://claude.ai/{}", "a".repeat(MAX_LEN))).is_err());
    }

    #[test]
    fn the_page_shows_hosts_and_the_policy_gets_origins() {
        assert_eq!(
            display_host("https://claude.ai/api/mcp/auth_callback"),
            "claude.ai"
        );
        assert_eq!(display_host("http://127.0.0.1:5000/cb"), "127.0.0.1:5000");
        assert_eq!(
            origin("http://127.0.0.1:5000/cb").as_deref(),
            Some("http://127.0.0.1:5000")
        );
        assert_eq!(
            origin("https://claude.ai/x").as_deref(),
            Some("https://claude.ai")
        );
    }
}

//! `--oauth`: the server as its own OAuth authorization server, for Claude's connectors; and
//! `--public-url`, where clients reach it (the issuer and the resource are fixed by it).

use url::Url;

use super::{ConfigError, Transport};
use crate::oauth::redirect_uri::{host_and_port, is_loopback};
use crate::oauth::OwnerSecret;

/// Settings of `--oauth`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "OAuth (Claude's connectors)")]
pub struct OAuthArgs {
    /// Be an OAuth 2.1 authorization server, so claude.ai, Claude Desktop's and the mobile apps'
    /// connectors can connect (they accept OAuth, not a static token); the owner approves each
    /// client on a consent page. The static token keeps working.
    #[arg(long, env = "MCP_OAUTH")]
    pub oauth: bool,

    /// The server's public base URL, e.g. https://pyrun.ngrok.app: the OAuth issuer, and `/mcp`
    /// under it the protected resource [default: the tunnel's URL, else http://BIND for a
    /// loopback address].
    #[arg(long, env = "MCP_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// The secret the owner types on the consent page (8 characters or more; something you can
    /// type on a phone) [default: the auth token, MCP_AUTH_TOKEN]. Kept only as an Argon2id hash.
    #[arg(
        long,
        env = "MCP_OAUTH_OWNER_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub oauth_owner_password: Option<String>,
}

/// `--oauth`, validated.
#[derive(Clone, Debug)]
pub struct OAuthConfig {
    /// `--public-url` as an origin (`https://host[:port]`); `None`: decided once the server
    /// listens (the tunnel's URL, or the loopback address).
    pub public_url: Option<String>,
    pub owner: OwnerSecret,
}

impl OAuthArgs {
    /// Checks the settings. `auth_token` stands in for the owner password; `tunnel_domain` says
    /// whether a tunnel keeps its URL across restarts.
    pub(super) fn resolve(
        &self,
        transport: Transport,
        auth_token: Option<String>,
        tunnel: Option<Option<&str>>,
    ) -> Result<Option<OAuthConfig>, ConfigError> {
        let public_url = self
            .public_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(public_origin)
            .transpose()?;
        if !self.oauth {
            if public_url.is_some() {
                tracing::warn!("--public-url (MCP_PUBLIC_URL) has no effect without --oauth");
            }
            return Ok(None);
        }
        if transport != Transport::Http {
            return Err(ConfigError::OAuthNeedsHttp);
        }
        let owner = match (&self.oauth_owner_password, auth_token) {
            (Some(password), _) => {
                let ok = (8..=256).contains(&password.chars().count())
                    && !password.chars().any(char::is_control);
                if !ok {
                    return Err(ConfigError::BadOwnerPassword);
                }
                OwnerSecret {
                    secret: password.clone(),
                    is_password: true,
                }
            }
            (None, Some(token)) => OwnerSecret {
                secret: token,
                is_password: false,
            },
            (None, None) => return Err(ConfigError::OAuthNoOwnerSecret),
        };
        if public_url.is_none() && tunnel == Some(None) {
            tracing::warn!(
                "--oauth with a RANDOM tunnel domain: every restart gets a new URL, so every \
                 connected client loses its tokens and must be added again; reserve a free \
                 static domain in ngrok and pass --tunnel-domain (MCP_TUNNEL_DOMAIN)"
            );
        }
        Ok(Some(OAuthConfig { public_url, owner }))
    }
}

/// `--public-url` as the issuer: https (or http on a loopback address), an origin without path,
/// query, fragment or user.
fn public_origin(given: &str) -> Result<String, ConfigError> {
    let bad = |why: &'static str| ConfigError::BadPublicUrl(given.to_owned(), why);
    let url = Url::parse(given).map_err(|_| bad("not an absolute URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("it carries user information"));
    }
    if url.query().is_some() || url.fragment().is_some() || url.path() != "/" {
        return Err(bad(
            "it has a path, query or fragment; give the bare origin",
        ));
    }
    if url.host().is_none() {
        return Err(bad("it has no host"));
    }
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        _ => {
            return Err(bad(
                "OAuth needs https (plain http only on a loopback address)",
            ))
        }
    }
    Ok(url.origin().ascii_serialization())
}

/// The host (and port) of an origin, for the Host check.
pub fn origin_host(origin: &str) -> Option<String> {
    host_and_port(origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_must_be_an_https_origin_or_loopback_http() {
        assert_eq!(
            public_origin("https://pyrun.ngrok.app").unwrap(),
            "https://pyrun.ngrok.app"
        );
        assert_eq!(
            public_origin("https://pyrun.ngrok.app/").unwrap(),
            "https://pyrun.ngrok.app"
        );
        assert_eq!(
            public_origin("http://127.0.0.1:8000").unwrap(),
            "http://127.0.0.1:8000"
        );
        assert_eq!(
            public_origin("http://localhost:9").unwrap(),
            "http://localhost:9"
        );
        for bad in [
            "http://pyrun.example",
            "http://192.168.1.2:8000",
            "https://pyrun.ngrok.app/mcp",
            "https://pyrun.ngrok.app/?x=1",
            "https://u:p@pyrun.ngrok.app",
            "ftp://pyrun.ngrok.app",
            "pyrun.ngrok.app",
        ] {
            let err = public_origin(bad).unwrap_err().to_string();
            assert!(err.contains("--public-url"), "{bad}: {err}");
        }
        assert_eq!(
            origin_host("https://a.example").as_deref(),
            Some("a.example")
        );
        assert_eq!(
            origin_host("http://127.0.0.1:8000").as_deref(),
            Some("127.0.0.1:8000")
        );
    }
}

//! `--tunnel`: a public https URL for the HTTP server.

use std::path::PathBuf;

use clap::ValueEnum;

use super::{ConfigError, Transport};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TunnelProvider {
    /// ngrok (https://ngrok.com), opened in-process; needs NGROK_AUTHTOKEN.
    Ngrok,
}

/// Settings of `--tunnel`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Public URL (tunnel)")]
pub struct TunnelArgs {
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
    #[arg(long, env = "MCP_URL_FILE", value_name = "FILE", value_parser = super::home::path)]
    pub url_file: Option<PathBuf>,

    /// The ngrok service to connect to (for tests) [default: ngrok's].
    #[arg(long, env = "NGROK_SERVER_ADDR", hide = true)]
    pub ngrok_server_addr: Option<String>,
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

impl TunnelArgs {
    /// A public URL is opened only over HTTP, with an auth token, and with ngrok's own token.
    pub(super) fn resolve(
        &self,
        transport: Transport,
        has_auth_token: bool,
    ) -> Result<Option<TunnelConfig>, ConfigError> {
        let Some(provider) = self.tunnel else {
            return Ok(None);
        };
        if transport != Transport::Http {
            return Err(ConfigError::TunnelNeedsHttp);
        }
        if !has_auth_token {
            return Err(ConfigError::TunnelWithoutAuthToken);
        }
        let authtoken = self
            .ngrok_authtoken
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(ConfigError::NoNgrokAuthtoken)?;
        let domain = self.tunnel_domain.as_deref().map(str::trim);
        if let Some(domain) = domain.filter(|d| !is_domain(d)) {
            return Err(ConfigError::BadTunnelDomain(domain.to_owned()));
        }
        Ok(Some(TunnelConfig {
            provider,
            authtoken: authtoken.to_owned(),
            domain: domain.map(str::to_owned),
            url_file: self.url_file.clone(),
            server_addr: self.ngrok_server_addr.clone(),
        }))
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

//! What `--oauth` costs: a request authenticated with an OAuth access token (a SQLite lookup of
//! its hash on every request) against the static token, the consent approval (the owner secret's
//! Argon2id check), and a refresh (rotation: two writes in one transaction).

use std::time::Instant;

use pyrun_mcp_tests::oauth;
use pyrun_mcp_tests::ServerLaunch;
use serde_json::json;

use crate::drivers::{Session, StreamableHttpSession};
use crate::stats::Samples;

const OWNER: &str = "bench owner secret";
const TOKEN: &str = "bench-static-token-0123456789";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

pub struct OAuthCost {
    /// `tools/list` over `/mcp` with the static token and with an OAuth access token.
    pub static_token: Samples,
    pub access_token: Samples,
    /// Consent page + approval (Argon2id) + code exchange.
    pub approvals: Samples,
    pub refreshes: Samples,
}

pub async fn measure(
    bin: &std::path::Path,
    projects: &std::path::Path,
    extra: &[&str],
    calls: usize,
) -> anyhow::Result<OAuthCost> {
    let server = ServerLaunch::new(bin, projects)
        .args(extra)
        .args([
            "--oauth",
            "--oauth-owner-password",
            OWNER,
            "--auth-token",
            TOKEN,
        ])
        .log("warn")
        .try_http()?;
    let client_id = oauth::register_client(&server, "bench", REDIRECT).await;
    let mut approvals = Samples::default();
    let mut tokens = serde_json::Value::Null;
    for _ in 0..10 {
        let t = Instant::now();
        let code = oauth::approve(&server, &client_id, REDIRECT, OWNER).await;
        tokens = oauth::exchange_code(&server, &client_id, REDIRECT, &code).await;
        approvals.push(t.elapsed());
    }
    let mut refreshes = Samples::default();
    for _ in 0..calls {
        let refresh = tokens["refresh_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let t = Instant::now();
        let (status, reply) = oauth::token_request(
            &server,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client_id),
            ],
        )
        .await;
        refreshes.push(t.elapsed());
        anyhow::ensure!(status.is_success(), "refresh failed: {reply}");
        tokens = reply;
    }
    let access = tokens["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let static_token = list_tools(&server.mcp_url(), TOKEN, calls).await?;
    let access_token = list_tools(&server.mcp_url(), &access, calls).await?;
    Ok(OAuthCost {
        static_token,
        access_token,
        approvals,
        refreshes,
    })
}

/// `calls` sequential `tools/list` requests on one session (after 10 not counted).
async fn list_tools(url: &str, token: &str, calls: usize) -> anyhow::Result<Samples> {
    let auth = [("Authorization".to_owned(), format!("Bearer {token}"))];
    let mut session = StreamableHttpSession::start(url, &auth).await?;
    let mut samples = Samples::default();
    for id in 0..(calls + 10) as u64 {
        let t = Instant::now();
        session
            .request(json!({"jsonrpc": "2.0", "id": 10 + id, "method": "tools/list"}))
            .await?;
        if id >= 10 {
            samples.push(t.elapsed());
        }
    }
    Ok(samples)
}

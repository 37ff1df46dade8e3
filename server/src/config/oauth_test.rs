//! `--oauth-test-metadata-ca`: a hidden, tests-only setting for the OAuth Client ID Metadata
//! Document fetcher. Tests serve a client's document from 127.0.0.1 over https with a self-signed
//! certificate; this setting trusts that certificate and lets the fetcher reach loopback, which
//! it otherwise refuses (see `oauth::cimd`). Not in `--help`; the fetcher warns loudly when on.

use std::path::PathBuf;

use crate::oauth::cimd::FetchPolicy;

#[derive(Debug, clap::Args)]
pub struct OAuthTestArgs {
    /// TESTS ONLY: trust this PEM certificate for OAuth client metadata documents and allow
    /// fetching them from loopback addresses. Never on a server anyone else can reach.
    #[arg(
        long,
        env = "PYRUN_OAUTH_TEST_METADATA_CA",
        value_name = "PEM",
        hide = true
    )]
    pub oauth_test_metadata_ca: Option<PathBuf>,
}

impl OAuthTestArgs {
    /// The production policy, with the test escape when the setting is given. The file is read
    /// (and checked) when the fetcher is built.
    pub(super) fn fetch_policy(&self) -> FetchPolicy {
        FetchPolicy {
            test_metadata_ca: self.oauth_test_metadata_ca.clone(),
            ..FetchPolicy::default()
        }
    }
}

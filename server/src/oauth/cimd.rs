//! PLACEHOLDER until the `cimd` branch lands: Client ID Metadata Documents are refused.

use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum CimdError {
    #[error("client metadata documents are not supported yet")]
    Unsupported,
}

#[derive(Debug)]
pub struct ClientMetadataDocument {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct FetchPolicy {
    pub allow_loopback: bool,
}

#[derive(Debug, Clone)]
pub struct CimdFetcher;

impl CimdFetcher {
    pub fn new(_policy: FetchPolicy) -> Result<Self, CimdError> {
        Ok(Self)
    }

    pub async fn fetch(&self, _client_id: &str) -> Result<Arc<ClientMetadataDocument>, CimdError> {
        Err(CimdError::Unsupported)
    }
}

pub fn looks_like_cimd(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

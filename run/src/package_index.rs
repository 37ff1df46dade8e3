//! The operator's package index (`--package-index`): checked once at start-up, then the one
//! URL and port every install fetches from and every synced `uv.lock` must name.

/// The operator's package index: an `http`/`https` URL without credentials, and its port (the
/// only one an install may connect to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageIndex {
    url: String,
    port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("not a URL: {0}")]
    NotUrl(String),
    #[error("only http and https package indexes are supported, not {0}")]
    Scheme(String),
    #[error("the package index URL has no host")]
    NoHost,
    #[error("the package index URL carries credentials; installs would print them")]
    Credentials,
}

impl PackageIndex {
    pub fn parse(text: &str) -> Result<Self, IndexError> {
        let url = url::Url::parse(text).map_err(|e| IndexError::NotUrl(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(IndexError::Scheme(url.scheme().to_owned()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(IndexError::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(IndexError::Credentials);
        }
        let port = url.port_or_known_default().ok_or(IndexError::NoHost)?;
        Ok(Self {
            url: url.to_string(),
            port,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_is_an_http_url_without_credentials_and_names_its_port() {
        let pypi = PackageIndex::parse("https://pypi.org/simple").unwrap();
        assert_eq!((pypi.url(), pypi.port()), ("https://pypi.org/simple", 443));
        let local = PackageIndex::parse("http://127.0.0.1:8080/simple/").unwrap();
        assert_eq!(local.port(), 8080);
        assert_eq!(
            PackageIndex::parse("http://example.org/").unwrap().port(),
            80
        );
        assert!(matches!(
            PackageIndex::parse("file:///srv/wheels"),
            Err(IndexError::Scheme(_))
        ));
        assert!(matches!(
            PackageIndex::parse("ftp://x/simple"),
            Err(IndexError::Scheme(_))
        ));
        assert_eq!(
            PackageIndex::parse("https://user:pw@example.org/simple"),
            Err(IndexError::Credentials)
        );
        assert!(matches!(
            PackageIndex::parse("pypi.org/simple"),
            Err(IndexError::NotUrl(_))
        ));
    }
}

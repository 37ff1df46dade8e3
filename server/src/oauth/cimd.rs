//! Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, MCP 2025-11-25
//! authorization): a client names itself with an https URL, and this server fetches the JSON
//! document at that URL instead of a registration. The fetch is a request any stranger can make
//! the server send, so it is a server-side request forgery surface and is built for that.
//!
//! One entry point, [`CimdFetcher::fetch`]; its steps, in order:
//! 1. The `client_id` is parsed into a [`ClientIdUrl`] (no I/O): https, no user info, no fragment,
//!    a path beyond `/`, no dot segments, written in normal form (so "the URL it was fetched from"
//!    has exactly one spelling).
//! 2. The cache answers if it can: a document for a few minutes (less if the server's
//!    `Cache-Control` says so), a failure for a few seconds; concurrent fetches of one URL share
//!    one request. At most [`MAX_CONCURRENT_FETCHES`] fetches are in flight at once.
//! 3. The host is resolved once; if ANY address is not public ([`is_public`]) the fetch stops
//!    before a connection is made.
//! 4. The connection goes to those checked addresses (our own socket: no second lookup, no
//!    proxy, nothing to rebind), TLS verifies the certificate for the URL's host name against
//!    Mozilla's roots, and one HTTP/1.1 GET is sent.
//! 5. Only a 200 is read (a redirect is an error, never followed); the body is streamed and
//!    dropped past [`MAX_DOCUMENT_BYTES`]; everything from the lookup on shares one deadline.
//! 6. The body must be a JSON object whose `client_id` is the URL byte for byte, describing a
//!    public client ([`ClientMetadataDocument::parse`]).
//!
//! What a client's redirect URIs may be (https or loopback http) is the caller's policy; this
//! module only proves the document says what it says. The one escape, for tests that serve a
//! document from 127.0.0.1 with a self-signed certificate, is [`FetchPolicy::test_metadata_ca`]
//! (hidden setting `--oauth-test-metadata-ca`): it allows loopback and trusts that certificate.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt, Shared};
use http::header::{self, HeaderMap};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;
use url::{Position, Url};

/// The most a metadata document may weigh (the draft's recommended limit).
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// The longest `client_id` URL accepted (it is a cache key and is echoed in logs).
pub const MAX_CLIENT_ID_LEN: usize = 2048;
/// Fetches in flight at once, over all URLs: a flood of distinct URLs waits (within its deadline)
/// instead of opening ever more connections.
pub const MAX_CONCURRENT_FETCHES: usize = 8;
/// Response head limit for the HTTP client (hyper's minimum is 8 KiB).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How much of a stranger's text an error quotes.
const QUOTE_CHARS: usize = 80;

/// A `client_id` that names a metadata document (the draft: an https URL); anything else is a
/// registered client's opaque id.
pub fn looks_like_cimd(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// How documents are fetched and kept. [`FetchPolicy::default`] is the production policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Deadline for one fetch, from the lookup to the last byte.
    pub timeout: Duration,
    /// How long a document is reused (a smaller `Cache-Control: max-age` wins).
    pub cache_ttl: Duration,
    /// How long a failure is remembered, so a bad URL is not fetched again on every request.
    pub failure_ttl: Duration,
    /// Cached URLs at most.
    pub max_cached: usize,
    /// TESTS ONLY: trust this PEM certificate (in addition to the public roots) and allow
    /// loopback addresses. Never set in production: it opens the fetcher to this machine.
    pub test_metadata_ca: Option<PathBuf>,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            cache_ttl: Duration::from_secs(300),
            failure_ttl: Duration::from_secs(10),
            max_cached: 256,
            test_metadata_ca: None,
        }
    }
}

/// Why a metadata document was not fetched or not accepted. `Display` is for the server's log
/// (it may name hosts and addresses); a client gets [`CimdError::client_reason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CimdError {
    #[error("client_id is not a URL: {0}")]
    NotAUrl(String),
    #[error("a client_id URL is at most {MAX_CLIENT_ID_LEN} bytes")]
    TooLong,
    #[error("a client_id URL must use https")]
    NotHttps,
    #[error("a client_id URL must not carry a user name or password")]
    Userinfo,
    #[error("a client_id URL must not have a fragment (#...)")]
    Fragment,
    #[error("a client_id URL needs a path\nhint: e.g. https://app.example/oauth/client.json")]
    NoPath,
    #[error("a client_id URL must not contain '.' or '..' path segments")]
    DotSegment,
    #[error("the client_id URL is not in normal form (it would be compared as {normal})")]
    NotNormalized { normal: String },
    #[error("{host} resolves to {addr}, which is not a public address: client metadata is fetched only from the public internet")]
    ForbiddenAddress { host: String, addr: IpAddr },
    #[error("cannot resolve {host}: {detail}")]
    Resolve { host: String, detail: String },
    #[error("cannot connect to {host}: {detail}")]
    Connect { host: String, detail: String },
    #[error("TLS with {host} failed: {detail}")]
    Tls { host: String, detail: String },
    #[error("HTTP exchange with {host} failed: {detail}")]
    Http { host: String, detail: String },
    #[error("fetching the client metadata document took longer than {0:?}")]
    Timeout(Duration),
    #[error("the client metadata URL answered a redirect ({status}); redirects are not followed")]
    Redirect { status: u16 },
    #[error("the client metadata URL answered HTTP {status}, not 200")]
    Status { status: u16 },
    #[error("the client metadata document is larger than {MAX_DOCUMENT_BYTES} bytes")]
    TooLarge,
    #[error("the client metadata document is not JSON: {0}")]
    NotJson(String),
    #[error("the client metadata document is not a JSON object")]
    NotObject,
    #[error("the document's client_id {found} is not the URL it was fetched from")]
    ClientIdMismatch { found: String },
    #[error("the document's {field} must be {expected}")]
    BadField {
        field: &'static str,
        expected: &'static str,
    },
    #[error("the document asks for token_endpoint_auth_method {0}: this server serves public clients only (\"none\")")]
    NotPublicClient(String),
    #[error("the document contains a client_secret, which a public document must never hold")]
    ClientSecret,
    #[error("cannot use the test metadata CA {path}: {detail}")]
    TestCa { path: String, detail: String },
    #[error("the client metadata fetcher failed: {0}")]
    Internal(String),
}

impl CimdError {
    /// A fixed sentence for the client (consent or error page): no host, address or text that
    /// came from the network, so the fetcher cannot be used to probe this server's network.
    pub fn client_reason(&self) -> &'static str {
        match self {
            Self::NotAUrl(_)
            | Self::TooLong
            | Self::NotHttps
            | Self::Userinfo
            | Self::Fragment
            | Self::NoPath
            | Self::DotSegment
            | Self::NotNormalized { .. } => {
                "client_id is not a valid client metadata URL (https, a path, normal form, no fragment or user info)"
            }
            Self::ForbiddenAddress { .. }
            | Self::Resolve { .. }
            | Self::Connect { .. }
            | Self::Tls { .. }
            | Self::Http { .. }
            | Self::Timeout(_)
            | Self::Redirect { .. }
            | Self::Status { .. } => "the client metadata document could not be fetched",
            Self::TooLarge
            | Self::NotJson(_)
            | Self::NotObject
            | Self::ClientIdMismatch { .. }
            | Self::BadField { .. }
            | Self::ClientSecret => "the client metadata document is not valid",
            Self::NotPublicClient(_) => {
                "the client metadata document describes a confidential client; only public clients (token_endpoint_auth_method \"none\") are served"
            }
            Self::TestCa { .. } | Self::Internal(_) => {
                "the server's client metadata fetcher is not working"
            }
        }
    }
}

/// A `client_id` proven to be a fetchable metadata URL: only [`ClientIdUrl::parse`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdUrl {
    url: Url,
}

impl ClientIdUrl {
    /// Checks the draft's rules for a client identifier URL, plus normal form: the document's
    /// `client_id` is compared byte for byte with this string, so it must have one spelling.
    pub fn parse(client_id: &str) -> Result<Self, CimdError> {
        if client_id.len() > MAX_CLIENT_ID_LEN {
            return Err(CimdError::TooLong);
        }
        let url = Url::parse(client_id).map_err(|e| CimdError::NotAUrl(e.to_string()))?;
        if url.scheme() != "https" {
            return Err(CimdError::NotHttps);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(CimdError::Userinfo);
        }
        if url.fragment().is_some() || client_id.contains('#') {
            return Err(CimdError::Fragment);
        }
        if url.path() == "/" {
            return Err(CimdError::NoPath);
        }
        // Before the normal-form check, which would also catch them, to say why.
        if raw_path(client_id).split('/').any(is_dot_segment) {
            return Err(CimdError::DotSegment);
        }
        if url.as_str() != client_id {
            return Err(CimdError::NotNormalized {
                normal: quote(url.as_str()),
            });
        }
        Ok(Self { url })
    }

    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// The host as written (an IPv6 literal in brackets).
    fn host(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// The name the server's certificate must carry: the host name, or the IP literal.
    fn server_name(&self) -> Result<ServerName<'static>, rustls::pki_types::InvalidDnsNameError> {
        match self.url.host() {
            Some(url::Host::Ipv4(ip)) => Ok(ServerName::IpAddress(IpAddr::from(ip).into())),
            Some(url::Host::Ipv6(ip)) => Ok(ServerName::IpAddress(IpAddr::from(ip).into())),
            _ => ServerName::try_from(self.host().to_owned()),
        }
    }

    fn port(&self) -> u16 {
        self.url.port_or_known_default().unwrap_or(443)
    }
}

/// The path part of a URL string as written, before any parser tidies it.
fn raw_path(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path_on = after_scheme.find('/').map_or("", |at| &after_scheme[at..]);
    path_on.split(['?', '#']).next().unwrap_or_default()
}

fn is_dot_segment(segment: &str) -> bool {
    let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
    decoded == "." || decoded == ".."
}

/// Whether `ip` is an address on the public internet: not private, loopback, link-local,
/// unique-local, shared (CGNAT), multicast, unspecified, reserved, documentation, benchmarking or
/// broadcast. IPv6 forms that carry an IPv4 address (mapped, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`) are judged by that address; other IPv6 must be global unicast (`2000::/3`) outside
/// its special-purpose blocks.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let special = a == 0 // "this network", including the unspecified address
        || a == 10 // private
        || a == 127 // loopback
        || a >= 224 // multicast, reserved (240/4) and the broadcast address
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT), 100.64/10
        || (a == 169 && b == 254) // link-local, cloud metadata services
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 168) // private
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation (TEST-NET-1)
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 198 && (b == 18 || b == 19)) // benchmarking, 198.18/15
        || (a == 198 && b == 51 && c == 100) // documentation (TEST-NET-2)
        || (a == 203 && b == 0 && c == 113); // documentation (TEST-NET-3)
    !special
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded_v4 = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4); // ::ffff:a.b.c.d
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded_v4(s[6], s[7])); // NAT64, well-known prefix
    }
    if s[0] == 0x2002 {
        return is_public_v4(embedded_v4(s[1], s[2])); // 6to4
    }
    let global_unicast = s[0] & 0xe000 == 0x2000;
    // 2001::/23 (IETF: Teredo, benchmarking, ORCHID...), 2001:db8::/32 and 3fff::/20
    // (documentation).
    let special =
        (s[0] == 0x2001 && (s[1] < 0x0200 || s[1] == 0x0db8)) || (s[0] == 0x3fff && s[1] < 0x1000);
    global_unicast && !special
}

/// A client's metadata, as its document states it. Only [`ClientMetadataDocument::parse`] makes
/// one, so a value proves its `client_id` matched and it describes a public client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMetadataDocument {
    client_id: String,
    client_name: Option<String>,
    redirect_uris: Vec<String>,
    client_uri: Option<String>,
    logo_uri: Option<String>,
    grant_types: Vec<String>,
    response_types: Vec<String>,
}

impl ClientMetadataDocument {
    /// Reads `body` as the document served at `client_id` (already a [`ClientIdUrl`] when called
    /// by the fetcher). Unknown members are ignored, as RFC 7591 asks; known ones must have their
    /// type (a `null` counts as absent).
    pub fn parse(client_id: &str, body: &[u8]) -> Result<Self, CimdError> {
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(CimdError::TooLarge);
        }
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| CimdError::NotJson(e.to_string()))?;
        let serde_json::Value::Object(doc) = value else {
            return Err(CimdError::NotObject);
        };
        let member = |name: &str| doc.get(name).filter(|v| !v.is_null());

        match member("client_id") {
            Some(serde_json::Value::String(found)) if found == client_id => {}
            Some(serde_json::Value::String(found)) => {
                return Err(CimdError::ClientIdMismatch {
                    found: quote(found),
                })
            }
            _ => return Err(bad("client_id", "a string")),
        }
        if member("client_secret").is_some() {
            return Err(CimdError::ClientSecret);
        }
        match member("token_endpoint_auth_method") {
            None => {}
            Some(serde_json::Value::String(method)) if method == "none" => {}
            Some(serde_json::Value::String(method)) => {
                return Err(CimdError::NotPublicClient(quote(method)))
            }
            Some(_) => return Err(bad("token_endpoint_auth_method", "a string")),
        }
        let string = |name: &'static str| match member(name) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(name, "a string")),
        };
        let strings = |name: &'static str| match member(name) {
            None => Ok(None),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or(bad(name, "an array of strings")),
            Some(_) => Err(bad(name, "an array of strings")),
        };
        let redirect_uris = strings("redirect_uris")?
            .filter(|uris| !uris.is_empty() && uris.iter().all(|u| !u.is_empty()))
            .ok_or(bad("redirect_uris", "a non-empty array of URLs"))?;
        Ok(Self {
            client_id: client_id.to_owned(),
            client_name: string("client_name")?,
            redirect_uris,
            client_uri: string("client_uri")?,
            logo_uri: string("logo_uri")?,
            // RFC 7591's defaults when the document is silent.
            grant_types: strings("grant_types")?
                .unwrap_or_else(|| vec!["authorization_code".into()]),
            response_types: strings("response_types")?.unwrap_or_else(|| vec!["code".into()]),
        })
    }

    /// The URL the document was fetched from, which it names as its own.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The name the client gives itself: unverified, for display (escaped) only.
    pub fn client_name(&self) -> Option<&str> {
        self.client_name.as_deref()
    }

    /// As listed (never empty); which of them are acceptable is the caller's policy.
    pub fn redirect_uris(&self) -> &[String] {
        &self.redirect_uris
    }

    pub fn client_uri(&self) -> Option<&str> {
        self.client_uri.as_deref()
    }

    pub fn logo_uri(&self) -> Option<&str> {
        self.logo_uri.as_deref()
    }

    /// As listed, or `["authorization_code"]` when absent (RFC 7591).
    pub fn grant_types(&self) -> &[String] {
        &self.grant_types
    }

    /// As listed, or `["code"]` when absent (RFC 7591).
    pub fn response_types(&self) -> &[String] {
        &self.response_types
    }
}

fn bad(field: &'static str, expected: &'static str) -> CimdError {
    CimdError::BadField { field, expected }
}

/// A stranger's text, shortened and escaped for a log line.
fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

type FetchResult = Result<Arc<ClientMetadataDocument>, CimdError>;
/// One fetch, shared by everyone asking for the URL meanwhile; with how long its result keeps.
type InFlight = Shared<BoxFuture<'static, (FetchResult, Duration)>>;

enum Slot {
    Fetching(InFlight),
    Done { result: FetchResult, until: Instant },
}

/// Fetches, checks and caches Client ID Metadata Documents. Cheap to clone (one shared cache).
#[derive(Clone)]
pub struct CimdFetcher {
    inner: Arc<Inner>,
}

struct Inner {
    policy: FetchPolicy,
    tls: TlsConnector,
    resolver: Resolver,
    cache: Mutex<HashMap<String, Slot>>,
    permits: Semaphore,
}

impl std::fmt::Debug for CimdFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CimdFetcher")
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl CimdFetcher {
    /// Builds the TLS client (the `ring` provider, Mozilla's roots, plus the test CA if the policy
    /// names one: read here, so a bad file stops the server at start-up).
    pub fn new(policy: FetchPolicy) -> Result<Self, CimdError> {
        let mut roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = &policy.test_metadata_ca {
            let test_ca = |detail: String| CimdError::TestCa {
                path: path.display().to_string(),
                detail,
            };
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| test_ca(e.to_string()))?;
            if certs.is_empty() {
                return Err(test_ca("no certificate in the file".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| test_ca(e.to_string()))?;
            }
            tracing::warn!(
                ca = %path.display(),
                "TEST SETTING --oauth-test-metadata-ca (PYRUN_OAUTH_TEST_METADATA_CA) is on: client \
                 metadata documents may be fetched from LOOPBACK addresses and this certificate is \
                 trusted. Never use it on a server anyone else can reach."
            );
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CimdError::Internal(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            inner: Arc::new(Inner {
                permits: Semaphore::new(MAX_CONCURRENT_FETCHES),
                tls: TlsConnector::from(Arc::new(config)),
                resolver: Resolver::System,
                cache: Mutex::new(HashMap::new()),
                policy,
            }),
        })
    }

    /// The document `client_id` names, fetched (or cached) and checked.
    pub async fn fetch(&self, client_id: &str) -> Result<Arc<ClientMetadataDocument>, CimdError> {
        let url = ClientIdUrl::parse(client_id)?;
        let in_flight = {
            let mut cache = self.inner.lock_cache();
            match cache.get(client_id) {
                Some(Slot::Done { result, until }) if *until > Instant::now() => {
                    return result.clone()
                }
                Some(Slot::Fetching(in_flight)) => in_flight.clone(),
                _ => {
                    // A task of its own: the fetch finishes (within its deadline) and is cached
                    // even when the request that started it goes away.
                    let task = tokio::spawn(Arc::clone(&self.inner).fetch_fresh(url));
                    let in_flight = async move {
                        task.await.unwrap_or_else(|e| {
                            let error = CimdError::Internal(format!("the fetch task ended: {e}"));
                            (Err(error), Duration::ZERO)
                        })
                    }
                    .boxed()
                    .shared();
                    if self.inner.make_room(&mut cache) {
                        cache.insert(client_id.to_owned(), Slot::Fetching(in_flight.clone()));
                    }
                    in_flight
                }
            }
        };
        let (result, keep) = in_flight.clone().await;
        let mut cache = self.inner.lock_cache();
        // Whoever finishes first settles the slot, if it is still this fetch's.
        if matches!(cache.get(client_id), Some(Slot::Fetching(f)) if f.ptr_eq(&in_flight)) {
            if keep.is_zero() {
                cache.remove(client_id);
            } else {
                let until = Instant::now() + keep;
                cache.insert(
                    client_id.to_owned(),
                    Slot::Done {
                        result: result.clone(),
                        until,
                    },
                );
            }
        }
        result
    }

    /// Tests: answer lookups from `resolve` instead of the system's resolver.
    #[cfg(test)]
    fn with_resolver(
        self,
        resolve: impl Fn(&str, u16) -> Vec<SocketAddr> + Send + Sync + 'static,
    ) -> Self {
        let inner = Arc::into_inner(self.inner).expect("not yet shared");
        Self {
            inner: Arc::new(Inner {
                resolver: Resolver::Fixed(Arc::new(resolve)),
                ..inner
            }),
        }
    }
}

impl Inner {
    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        // A panic elsewhere cannot leave the map half-written (every change is one call).
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees a place for one more URL: expired entries go first, then the one expiring soonest.
    /// `false` when every entry is a fetch in flight (the new fetch then runs uncached).
    fn make_room(&self, cache: &mut HashMap<String, Slot>) -> bool {
        if cache.len() < self.policy.max_cached {
            return true;
        }
        let now = Instant::now();
        cache.retain(|_, slot| !matches!(slot, Slot::Done { until, .. } if *until <= now));
        if cache.len() < self.policy.max_cached {
            return true;
        }
        let soonest = cache
            .iter()
            .filter_map(|(key, slot)| match slot {
                Slot::Done { until, .. } => Some((*until, key.clone())),
                Slot::Fetching(_) => None,
            })
            .min();
        soonest.is_some_and(|(_, key)| cache.remove(&key).is_some())
    }

    /// Steps 3 to 6 under one deadline; the result with how long to keep it.
    async fn fetch_fresh(self: Arc<Self>, url: ClientIdUrl) -> (FetchResult, Duration) {
        let timeout = self.policy.timeout;
        let fetched = tokio::time::timeout(timeout, self.download(&url))
            .await
            .unwrap_or(Err(CimdError::Timeout(timeout)));
        let checked = fetched.and_then(|(body, max_age)| {
            let doc = ClientMetadataDocument::parse(url.as_str(), &body)?;
            Ok((doc, max_age))
        });
        match checked {
            Ok((doc, max_age)) => {
                tracing::debug!(client_id = url.as_str(), "client metadata document fetched");
                let keep = max_age.map_or(self.policy.cache_ttl, |m| m.min(self.policy.cache_ttl));
                (Ok(Arc::new(doc)), keep)
            }
            Err(e) => (Err(e), self.policy.failure_ttl),
        }
    }

    /// The document's bytes and the `max-age` its server allows, from the checked address.
    async fn download(&self, url: &ClientIdUrl) -> Result<(Vec<u8>, Option<Duration>), CimdError> {
        let _permit = self.permits.acquire().await;
        let host = url.host();
        let addrs = self.checked_addresses(url).await?;
        let tcp = connect_any(host, &addrs).await?;
        let server_name = url.server_name().map_err(|e| CimdError::Tls {
            host: host.into(),
            detail: e.to_string(),
        })?;
        let tls = self
            .tls
            .connect(server_name, tcp)
            .await
            .map_err(|e| CimdError::Tls {
                host: host.into(),
                detail: e.to_string(),
            })?;
        get(url, tls).await
    }

    /// Step 3: every address the host has, each checked. One lookup: what is checked is what is
    /// connected to.
    async fn checked_addresses(&self, url: &ClientIdUrl) -> Result<Vec<SocketAddr>, CimdError> {
        let host = url.host();
        let addrs =
            match url.url.host() {
                Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(ip.into(), url.port())],
                Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(ip.into(), url.port())],
                _ => self.resolver.lookup(host, url.port()).await.map_err(|e| {
                    CimdError::Resolve {
                        host: host.into(),
                        detail: e.to_string(),
                    }
                })?,
            };
        if addrs.is_empty() {
            return Err(CimdError::Resolve {
                host: host.into(),
                detail: "no address".into(),
            });
        }
        if let Some(bad) = addrs.iter().find(|a| !self.may_connect(a.ip())) {
            return Err(CimdError::ForbiddenAddress {
                host: host.into(),
                addr: bad.ip(),
            });
        }
        Ok(addrs)
    }

    fn may_connect(&self, ip: IpAddr) -> bool {
        is_public(ip) || (self.policy.test_metadata_ca.is_some() && ip.to_canonical().is_loopback())
    }
}

/// The first of `addrs` that accepts a connection.
async fn connect_any(host: &str, addrs: &[SocketAddr]) -> Result<TcpStream, CimdError> {
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(CimdError::Connect {
        host: host.into(),
        detail: last.map_or_else(|| "no address".into(), |e| e.to_string()),
    })
}

/// Steps 4 and 5 over an open TLS stream: one GET, a 200 only, at most [`MAX_DOCUMENT_BYTES`].
async fn get<S>(url: &ClientIdUrl, stream: S) -> Result<(Vec<u8>, Option<Duration>), CimdError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let host = url.host();
    let http_error = |e: &dyn std::fmt::Display| CimdError::Http {
        host: host.into(),
        detail: e.to_string(),
    };
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(|e| http_error(&e))?;
    let request = http::Request::get(&url.url[Position::BeforePath..Position::AfterQuery])
        .header(
            header::HOST,
            &url.url[Position::BeforeHost..Position::AfterPort],
        )
        .header(header::ACCEPT, "application/json")
        .header(
            header::USER_AGENT,
            concat!("pyrun-mcp/", env!("CARGO_PKG_VERSION")),
        )
        .header(header::CONNECTION, "close")
        .body(Empty::new())
        .map_err(|e| http_error(&e))?;
    let exchange = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| http_error(&e))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(CimdError::Redirect {
                status: status.as_u16(),
            });
        }
        if status != http::StatusCode::OK {
            return Err(CimdError::Status {
                status: status.as_u16(),
            });
        }
        let max_age = max_age(response.headers());
        let declared = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > MAX_DOCUMENT_BYTES as u64) {
            return Err(CimdError::TooLarge);
        }
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| http_error(&e))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_DOCUMENT_BYTES {
                    return Err(CimdError::TooLarge);
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok((bytes, max_age))
    };
    // The connection is driven here, in this task, so the deadline that drops this future also
    // closes the socket.
    let mut exchange = std::pin::pin!(exchange);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        biased;
        done = &mut exchange => done,
        ended = &mut connection => match ended {
            // The server closed after answering: what it sent is still there to read.
            Ok(()) => exchange.await,
            Err(e) => Err(http_error(&e)),
        },
    }
}

/// How long the server lets the document be reused: `max-age`, or zero for `no-store` and
/// `no-cache`. `None` when it does not say.
fn max_age(headers: &HeaderMap) -> Option<Duration> {
    let mut age = None;
    for value in headers.get_all(header::CACHE_CONTROL) {
        for directive in value.to_str().unwrap_or_default().split(',') {
            let directive = directive.trim().to_ascii_lowercase();
            if directive == "no-store" || directive == "no-cache" {
                return Some(Duration::ZERO);
            }
            if let Some(secs) = directive.strip_prefix("max-age=") {
                let secs = secs.trim_matches('"').parse::<u64>().unwrap_or(0);
                age = Some(Duration::from_secs(secs).min(age.unwrap_or(Duration::MAX)));
            }
        }
    }
    age
}

/// Where host names are looked up: the system's resolver, or (tests) a fixed answer.
enum Resolver {
    System,
    #[cfg(test)]
    Fixed(FixedAnswer),
}

#[cfg(test)]
type FixedAnswer = Arc<dyn Fn(&str, u16) -> Vec<SocketAddr> + Send + Sync>;

impl Resolver {
    async fn lookup(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        match self {
            Self::System => Ok(tokio::net::lookup_host((host, port)).await?.collect()),
            #[cfg(test)]
            Self::Fixed(resolve) => Ok(resolve(host, port)),
        }
    }
}

#[cfg(test)]
mod tests;

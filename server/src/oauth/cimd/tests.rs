//! The fetcher's tests: the address and URL rules as tables, then real fetches from a local https
//! server (self-signed, made per test) that counts the connections and requests it sees.

use std::convert::Infallible;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::combinators::BoxBody;
use http_body_util::{Full, StreamBody};
use hyper::body::Frame;
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn is_public_refuses_every_special_purpose_block_and_its_ipv6_disguises() {
    let refused = [
        // IPv4: this network, unspecified, private, loopback, CGNAT, link-local (cloud metadata),
        // IETF, documentation, 6to4 relay, benchmarking, multicast, reserved, broadcast.
        "0.0.0.0",
        "0.255.255.255",
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.0",
        "100.127.255.255",
        "127.0.0.1",
        "127.1.2.3",
        "169.254.169.254",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.8",
        "192.0.2.1",
        "192.88.99.1",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        // IPv6: unspecified, loopback, IPv4-compatible, unique-local, link-local, site-local,
        // multicast, documentation (both), Teredo, benchmarking, ORCHID, local-use NAT64,
        // discard-only, IPv4-translated.
        "::",
        "::1",
        "::127.0.0.1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "2001:db8::1",
        "3fff::1",
        "2001::1",
        "2001:2::1",
        "2001:20::1",
        "64:ff9b:1::1",
        "100::1",
        "::ffff:0:a00:1",
        // IPv4 forms in IPv6 are judged by the IPv4 address: mapped, NAT64, 6to4.
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::1",
        "2002:c0a8:101::1",
        "2002:a00:1::",
    ];
    for addr in refused {
        assert!(!is_public(ip(addr)), "{addr} must not count as public");
    }
}

#[test]
fn is_public_accepts_ordinary_internet_addresses_at_the_edges_of_the_blocks() {
    let public = [
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "126.255.255.255",
        "128.0.0.0",
        "169.253.255.255",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.1",
        "192.167.255.255",
        "192.169.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "2001:200::1",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ];
    for addr in public {
        assert!(is_public(ip(addr)), "{addr} is a public address");
    }
}

#[test]
fn a_client_id_url_is_https_with_a_path_in_normal_form() {
    type Expected = fn(&CimdError) -> bool;
    let refused: &[(&str, Expected)] = &[
        ("http://app.example/client.json", |e| {
            matches!(e, CimdError::NotHttps)
        }),
        ("ftp://app.example/client.json", |e| {
            matches!(e, CimdError::NotHttps)
        }),
        ("file:///etc/passwd", |e| matches!(e, CimdError::NotHttps)),
        ("app.example/client.json", |e| {
            matches!(e, CimdError::NotAUrl(_))
        }),
        ("https://", |e| matches!(e, CimdError::NotAUrl(_))),
        ("https://user:pw@app.example/client.json", |e| {
            matches!(e, CimdError::Userinfo)
        }),
        ("https://user@app.example/client.json", |e| {
            matches!(e, CimdError::Userinfo)
        }),
        ("https://app.example/client.json#x", |e| {
            matches!(e, CimdError::Fragment)
        }),
        ("https://app.example/client.json#", |e| {
            matches!(e, CimdError::Fragment)
        }),
        ("https://app.example", |e| matches!(e, CimdError::NoPath)),
        ("https://app.example/", |e| matches!(e, CimdError::NoPath)),
        ("https://app.example/a/../client.json", |e| {
            matches!(e, CimdError::DotSegment)
        }),
        ("https://app.example/./client.json", |e| {
            matches!(e, CimdError::DotSegment)
        }),
        ("https://app.example/a/%2E%2e/client.json", |e| {
            matches!(e, CimdError::DotSegment)
        }),
        ("HTTPS://app.example/client.json", |e| {
            matches!(e, CimdError::NotNormalized { .. })
        }),
        ("https://APP.example/client.json", |e| {
            matches!(e, CimdError::NotNormalized { .. })
        }),
        ("https://app.example:443/client.json", |e| {
            matches!(e, CimdError::NotNormalized { .. })
        }),
        ("https://app.example/client json", |e| {
            matches!(e, CimdError::NotNormalized { .. })
        }),
        ("https://2130706433/client.json", |e| {
            matches!(e, CimdError::NotNormalized { .. })
        }),
    ];
    for (url, expected) in refused {
        let err = ClientIdUrl::parse(url).unwrap_err();
        assert!(expected(&err), "{url}: {err:?}");
    }
    let too_long = format!("https://app.example/{}", "a".repeat(MAX_CLIENT_ID_LEN));
    assert_eq!(ClientIdUrl::parse(&too_long), Err(CimdError::TooLong));
    for url in [
        "https://app.example/client.json",
        "https://app.example:8443/oauth/client?v=1",
        "https://93.184.216.34/c",
        "https://[2606:4700::1111]/c",
        "https://app.example/a/b/",
    ] {
        assert_eq!(ClientIdUrl::parse(url).unwrap().as_str(), url);
    }
}

#[test]
fn only_https_urls_look_like_metadata_documents() {
    assert!(looks_like_cimd(
        "https://claude.ai/oauth/mcp-oauth-client-metadata"
    ));
    assert!(!looks_like_cimd("http://claude.ai/x"));
    assert!(!looks_like_cimd("3f2a9c0e-registered-client"));
    assert!(!looks_like_cimd(""));
}

const CLIENT: &str = "https://app.example/client.json";

fn parse_doc(json: serde_json::Value) -> Result<ClientMetadataDocument, CimdError> {
    ClientMetadataDocument::parse(CLIENT, json.to_string().as_bytes())
}

#[test]
fn a_document_is_read_with_rfc_7591_defaults_and_ignores_unknown_members() {
    let doc = parse_doc(serde_json::json!({
        "client_id": CLIENT,
        "client_name": "Example App",
        "redirect_uris": ["https://app.example/callback", "http://127.0.0.1/cb"],
        "client_uri": "https://app.example",
        "logo_uri": null,
        "token_endpoint_auth_method": "none",
        "software_id": "whatever",
    }))
    .unwrap();
    assert_eq!(doc.client_id(), CLIENT);
    assert_eq!(doc.client_name(), Some("Example App"));
    assert_eq!(
        doc.redirect_uris(),
        ["https://app.example/callback", "http://127.0.0.1/cb"]
    );
    assert_eq!(doc.client_uri(), Some("https://app.example"));
    assert_eq!(doc.logo_uri(), None);
    assert_eq!(doc.grant_types(), ["authorization_code"]);
    assert_eq!(doc.response_types(), ["code"]);
    let doc = parse_doc(serde_json::json!({
        "client_id": CLIENT,
        "redirect_uris": ["https://app.example/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }))
    .unwrap();
    assert_eq!(doc.grant_types(), ["authorization_code", "refresh_token"]);
    assert_eq!(doc.client_name(), None);
}

#[test]
fn a_document_of_the_wrong_shape_or_a_confidential_client_is_refused_by_name() {
    let uris = serde_json::json!(["https://app.example/callback"]);
    let cases: Vec<(serde_json::Value, CimdError)> = vec![
        (
            serde_json::json!({"client_id": "https://evil.example/client.json", "redirect_uris": uris}),
            CimdError::ClientIdMismatch {
                found: "\"https://evil.example/client.json\"".into(),
            },
        ),
        (
            serde_json::json!({"client_id": format!("{CLIENT}/"), "redirect_uris": uris}),
            CimdError::ClientIdMismatch {
                found: format!("\"{CLIENT}/\""),
            },
        ),
        (
            serde_json::json!({"redirect_uris": uris}),
            bad("client_id", "a string"),
        ),
        (
            serde_json::json!({"client_id": CLIENT}),
            bad("redirect_uris", "a non-empty array of URLs"),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": "https://app.example/cb"}),
            bad("redirect_uris", "an array of strings"),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": ["https://a.example/cb", 7]}),
            bad("redirect_uris", "an array of strings"),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": []}),
            bad("redirect_uris", "a non-empty array of URLs"),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": uris, "client_name": ["x"]}),
            bad("client_name", "a string"),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": uris, "grant_types": "authorization_code"}),
            bad("grant_types", "an array of strings"),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": uris, "token_endpoint_auth_method": "client_secret_basic"}),
            CimdError::NotPublicClient("\"client_secret_basic\"".into()),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": uris, "token_endpoint_auth_method": "private_key_jwt"}),
            CimdError::NotPublicClient("\"private_key_jwt\"".into()),
        ),
        (
            serde_json::json!({"client_id": CLIENT, "redirect_uris": uris, "client_secret": "s3cret"}),
            CimdError::ClientSecret,
        ),
        (serde_json::json!([CLIENT]), CimdError::NotObject),
        (serde_json::json!(CLIENT), CimdError::NotObject),
    ];
    for (json, expected) in cases {
        assert_eq!(parse_doc(json.clone()), Err(expected), "{json}");
    }
    let not_json = ClientMetadataDocument::parse(CLIENT, b"<html>hello</html>");
    assert!(
        matches!(not_json, Err(CimdError::NotJson(_))),
        "{not_json:?}"
    );
    let huge = vec![b' '; MAX_DOCUMENT_BYTES + 1];
    assert_eq!(
        ClientMetadataDocument::parse(CLIENT, &huge),
        Err(CimdError::TooLarge)
    );
}

#[test]
fn a_strangers_text_is_quoted_short_and_escaped_and_never_reaches_the_client() {
    let long = format!("https://evil.example/{}\u{1b}[2J", "x".repeat(200));
    let err = parse_doc(serde_json::json!({"client_id": long, "redirect_uris": ["https://e/cb"]}))
        .unwrap_err();
    let logged = err.to_string();
    assert!(
        logged.contains('…') && !logged.contains('\u{1b}'),
        "{logged}"
    );
    assert!(logged.len() < 250, "{logged}");
    let forbidden = CimdError::ForbiddenAddress {
        host: "intranet.corp".into(),
        addr: ip("10.1.2.3"),
    };
    let reason = forbidden.client_reason();
    assert!(!reason.contains("10.1.2.3") && !reason.contains("intranet"));
}

#[test]
fn cache_control_can_only_shorten_the_stay() {
    let headers = |value: &str| {
        let mut map = HeaderMap::new();
        map.insert(header::CACHE_CONTROL, value.parse().unwrap());
        map
    };
    assert_eq!(max_age(&HeaderMap::new()), None);
    assert_eq!(
        max_age(&headers("public, max-age=60")),
        Some(Duration::from_secs(60))
    );
    assert_eq!(max_age(&headers("no-store")), Some(Duration::ZERO));
    assert_eq!(
        max_age(&headers("max-age=60, no-cache")),
        Some(Duration::ZERO)
    );
    assert_eq!(max_age(&headers("max-age=junk")), Some(Duration::ZERO));
}

// ---- Real fetches from a local https server ----

/// The name the test server's certificate carries; only the tests' resolver knows it.
const TEST_HOST: &str = "cimd.test";

/// A local https server with a fresh self-signed certificate for [`TEST_HOST`] and `localhost`.
/// It counts TCP connections and records the path of every request.
struct DocServer {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
    /// The certificate as a PEM file, for [`FetchPolicy::test_metadata_ca`].
    ca: tempfile::NamedTempFile,
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: u16, headers: &[(&str, &str)], body: impl Into<Bytes>) -> http::Response<Body> {
    let mut response = http::Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(Full::new(body.into()).boxed()).unwrap()
}

fn document(client_id: &str, extra: serde_json::Value) -> String {
    let mut doc = serde_json::json!({
        "client_id": client_id,
        "client_name": "Test Client",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
    });
    if let (Some(doc), serde_json::Value::Object(extra)) = (doc.as_object_mut(), extra) {
        doc.extend(extra);
    }
    doc.to_string()
}

/// What the server answers at each path; `base` is `https://cimd.test:PORT`.
async fn answer(path: &str, base: &str) -> http::Response<Body> {
    let own = format!("{base}{path}");
    let json = [("content-type", "application/json")];
    match path {
        "/client.json" => full(200, &json, document(&own, serde_json::json!({}))),
        "/no-store.json" => full(
            200,
            &[("cache-control", "no-store")],
            document(&own, serde_json::json!({})),
        ),
        "/big.json" => {
            let padding = "x".repeat(MAX_DOCUMENT_BYTES);
            full(
                200,
                &json,
                document(&own, serde_json::json!({ "padding": padding })),
            )
        }
        "/big-chunked.json" => {
            // No Content-Length: the limit must hold while streaming.
            let chunks = (0..64).map(|_| Ok(Frame::data(Bytes::from(vec![b' '; 1024]))));
            let body = StreamBody::new(futures::stream::iter(chunks)).boxed();
            http::Response::builder().status(200).body(body).unwrap()
        }
        "/slow.json" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            full(200, &json, document(&own, serde_json::json!({})))
        }
        "/redirect.json" => full(302, &[("location", "/client.json")], ""),
        "/mismatch.json" => full(
            200,
            &json,
            document(&format!("{base}/other.json"), serde_json::json!({})),
        ),
        "/not-json.json" => full(200, &[("content-type", "text/html")], "<html>hello</html>"),
        "/secret-client.json" => full(
            200,
            &json,
            document(
                &own,
                serde_json::json!({"token_endpoint_auth_method": "client_secret_basic"}),
            ),
        ),
        _ => full(404, &[], "not found"),
    }
}

impl DocServer {
    async fn start() -> Self {
        let certified =
            rcgen::generate_simple_self_signed(vec![TEST_HOST.into(), "localhost".into()]).unwrap();
        let mut ca = tempfile::NamedTempFile::new().unwrap();
        ca.write_all(certified.cert.pem().as_bytes()).unwrap();
        let key = PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let base = format!("https://{TEST_HOST}:{port}");
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (seen, logged) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                let (acceptor, base, logged) = (acceptor.clone(), base.clone(), logged.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request: http::Request<_>| {
                        let (base, logged) = (base.clone(), logged.clone());
                        async move {
                            let path = request.uri().path().to_owned();
                            logged.lock().unwrap().push(path.clone());
                            Ok::<_, Infallible>(answer(&path, &base).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Self {
            port,
            connections,
            requests,
            ca,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://{TEST_HOST}:{}{path}", self.port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// The policy tests use: the test escape on (this server's certificate, loopback), a short
    /// deadline.
    fn policy(&self) -> FetchPolicy {
        FetchPolicy {
            timeout: Duration::from_secs(3),
            test_metadata_ca: Some(self.ca.path().to_owned()),
            ..FetchPolicy::default()
        }
    }

    /// A fetcher with `policy` whose resolver maps [`TEST_HOST`] (and any name) to this server.
    fn fetcher(&self, policy: FetchPolicy) -> CimdFetcher {
        CimdFetcher::new(policy)
            .unwrap()
            .with_resolver(|_, port| vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }
}

#[tokio::test]
async fn a_good_document_is_fetched_once_and_then_served_from_the_cache() {
    let server = DocServer::start().await;
    let fetcher = server.fetcher(server.policy());
    let url = server.url("/client.json");
    let doc = fetcher.fetch(&url).await.unwrap();
    assert_eq!(doc.client_id(), url);
    assert_eq!(doc.client_name(), Some("Test Client"));
    assert_eq!(
        doc.redirect_uris(),
        ["https://claude.ai/api/mcp/auth_callback"]
    );
    let again = fetcher.clone().fetch(&url).await.unwrap();
    assert!(Arc::ptr_eq(&doc, &again));
    // Many at once, after the entry is gone: still one request.
    fetcher.inner.lock_cache().clear();
    let together = futures::future::join_all((0..5).map(|_| fetcher.fetch(&url))).await;
    assert!(together
        .iter()
        .all(|doc| doc.as_ref().is_ok_and(|d| d.client_id() == url)));
    assert_eq!(server.requests(), ["/client.json", "/client.json"]);
}

#[tokio::test]
async fn no_store_and_an_expired_entry_mean_a_new_fetch() {
    let server = DocServer::start().await;
    let fetcher = server.fetcher(FetchPolicy {
        cache_ttl: Duration::from_millis(100),
        ..server.policy()
    });
    let no_store = server.url("/no-store.json");
    fetcher.fetch(&no_store).await.unwrap();
    fetcher.fetch(&no_store).await.unwrap();
    let url = server.url("/client.json");
    fetcher.fetch(&url).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    fetcher.fetch(&url).await.unwrap();
    assert_eq!(
        server.requests(),
        [
            "/no-store.json",
            "/no-store.json",
            "/client.json",
            "/client.json"
        ]
    );
}

#[tokio::test]
async fn a_document_over_5_kib_is_refused_whether_declared_or_streamed() {
    let server = DocServer::start().await;
    let fetcher = server.fetcher(server.policy());
    for path in ["/big.json", "/big-chunked.json"] {
        let err = fetcher.fetch(&server.url(path)).await.unwrap_err();
        assert_eq!(err, CimdError::TooLarge, "{path}");
    }
}

#[tokio::test]
async fn a_slow_server_runs_into_the_deadline() {
    let server = DocServer::start().await;
    let fetcher = server.fetcher(FetchPolicy {
        timeout: Duration::from_millis(300),
        ..server.policy()
    });
    let started = Instant::now();
    let err = fetcher.fetch(&server.url("/slow.json")).await.unwrap_err();
    assert_eq!(err, CimdError::Timeout(Duration::from_millis(300)));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_redirect_is_an_error_and_is_not_followed() {
    let server = DocServer::start().await;
    let fetcher = server.fetcher(server.policy());
    let err = fetcher
        .fetch(&server.url("/redirect.json"))
        .await
        .unwrap_err();
    assert_eq!(err, CimdError::Redirect { status: 302 });
    assert_eq!(server.requests(), ["/redirect.json"]);
}

#[tokio::test]
async fn a_bad_document_is_refused_and_the_refusal_is_remembered_briefly() {
    let server = DocServer::start().await;
    let fetcher = server.fetcher(server.policy());
    let mismatch = server.url("/mismatch.json");
    let err = fetcher.fetch(&mismatch).await.unwrap_err();
    assert!(matches!(err, CimdError::ClientIdMismatch { .. }), "{err:?}");
    assert_eq!(fetcher.fetch(&mismatch).await.unwrap_err(), err);
    let err = fetcher
        .fetch(&server.url("/not-json.json"))
        .await
        .unwrap_err();
    assert!(matches!(err, CimdError::NotJson(_)), "{err:?}");
    let err = fetcher
        .fetch(&server.url("/secret-client.json"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CimdError::NotPublicClient("\"client_secret_basic\"".into())
    );
    let err = fetcher
        .fetch(&server.url("/missing.json"))
        .await
        .unwrap_err();
    assert_eq!(err, CimdError::Status { status: 404 });
    assert_eq!(
        server.requests(),
        [
            "/mismatch.json",
            "/not-json.json",
            "/secret-client.json",
            "/missing.json"
        ]
    );
    // Without a failure stay, the next request fetches again.
    let forgetful = server.fetcher(FetchPolicy {
        failure_ttl: Duration::ZERO,
        ..server.policy()
    });
    forgetful.fetch(&mismatch).await.unwrap_err();
    forgetful.fetch(&mismatch).await.unwrap_err();
    assert_eq!(server.requests().len(), 6);
}

#[tokio::test]
async fn without_the_test_escape_no_loopback_or_private_address_is_ever_connected() {
    let server = DocServer::start().await;
    let production = CimdFetcher::new(FetchPolicy::default()).unwrap();
    let port = server.port;
    for url in [
        format!("https://127.0.0.1:{port}/client.json"),
        format!("https://localhost:{port}/client.json"),
        format!("https://[::1]:{port}/client.json"),
        format!("https://[::ffff:7f00:1]:{port}/client.json"),
        "https://10.0.0.1/client.json".to_owned(),
        "https://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let err = production.fetch(&url).await.unwrap_err();
        assert!(
            matches!(err, CimdError::ForbiddenAddress { .. }),
            "{url}: {err:?}"
        );
    }
    // A public-looking name that resolves to loopback.
    let rebound = CimdFetcher::new(FetchPolicy::default())
        .unwrap()
        .with_resolver(|_, port| vec![SocketAddr::from(([127, 0, 0, 1], port))]);
    let err = rebound
        .fetch(&server.url("/client.json"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CimdError::ForbiddenAddress {
            host: TEST_HOST.into(),
            addr: ip("127.0.0.1"),
        }
    );
    assert_eq!(server.connections(), 0, "the server saw a connection");
}

#[tokio::test]
async fn the_test_escape_opens_loopback_only() {
    let server = DocServer::start().await;
    // The system's resolver, the certificate's other name. `localhost` may answer ::1 first,
    // where nothing listens (Windows takes seconds to say so): a generous deadline.
    let fetcher = CimdFetcher::new(FetchPolicy {
        timeout: Duration::from_secs(15),
        ..server.policy()
    })
    .unwrap();
    let url = format!("https://localhost:{}/client.json", server.port);
    let err = fetcher.fetch(&url).await.unwrap_err();
    // Served, but the document names cimd.test: the fetch went through.
    assert!(matches!(err, CimdError::ClientIdMismatch { .. }), "{err:?}");
    for url in [
        "https://10.0.0.1/client.json",
        "https://169.254.169.254/latest/meta-data/",
        "https://192.168.1.1/client.json",
    ] {
        let err = fetcher.fetch(url).await.unwrap_err();
        assert!(
            matches!(err, CimdError::ForbiddenAddress { .. }),
            "{url}: {err:?}"
        );
    }
    assert_eq!(server.requests(), ["/client.json"]);
}

#[tokio::test]
async fn one_private_address_among_the_answers_refuses_the_host() {
    let server = DocServer::start().await;
    let fetcher = CimdFetcher::new(server.policy())
        .unwrap()
        .with_resolver(|_, port| {
            vec![
                SocketAddr::from(([127, 0, 0, 1], port)),
                SocketAddr::from(([10, 0, 0, 1], port)),
            ]
        });
    let err = fetcher
        .fetch(&server.url("/client.json"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CimdError::ForbiddenAddress {
            host: TEST_HOST.into(),
            addr: ip("10.0.0.1"),
        }
    );
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn dns_rebinding_gets_nowhere_the_checked_answer_is_the_one_connected() {
    // The attacker's name server answers the server's address once, then a private one: a
    // fetcher that looked the name up again to connect would go where nothing was checked.
    let server = DocServer::start().await;
    let lookups = Arc::new(AtomicUsize::new(0));
    let counted = lookups.clone();
    let fetcher = CimdFetcher::new(FetchPolicy {
        cache_ttl: Duration::ZERO,
        ..server.policy()
    })
    .unwrap()
    .with_resolver(
        move |_, port| match counted.fetch_add(1, Ordering::SeqCst) {
            0 => vec![SocketAddr::from(([127, 0, 0, 1], port))],
            _ => vec![SocketAddr::from(([10, 0, 0, 1], port))],
        },
    );
    let url = server.url("/client.json");
    fetcher.fetch(&url).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 1, "one lookup per fetch");
    assert_eq!(server.connections(), 1);
    // The next fetch (nothing cached) gets the rebound answer, and checks it before any use.
    let err = fetcher.fetch(&url).await.unwrap_err();
    assert!(matches!(err, CimdError::ForbiddenAddress { .. }), "{err:?}");
    assert_eq!(lookups.load(Ordering::SeqCst), 2);
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn tls_is_verified_for_the_urls_host_name_and_against_the_trusted_roots() {
    let server = DocServer::start().await;
    // Same address, but a name the certificate does not carry.
    let fetcher = server.fetcher(server.policy());
    let url = format!("https://other.test:{}/client.json", server.port);
    let err = fetcher.fetch(&url).await.unwrap_err();
    assert!(matches!(err, CimdError::Tls { .. }), "{err:?}");
    // The right name, but the certificate is not trusted: another server's CA is.
    let other = DocServer::start().await;
    let untrusting = server.fetcher(other.policy());
    let err = untrusting
        .fetch(&server.url("/client.json"))
        .await
        .unwrap_err();
    assert!(matches!(err, CimdError::Tls { .. }), "{err:?}");
    assert!(server.requests().is_empty());
}

#[test]
fn a_test_ca_that_cannot_be_read_stops_the_fetcher_from_being_built() {
    let missing = FetchPolicy {
        test_metadata_ca: Some(PathBuf::from("/definitely/not/here.pem")),
        ..FetchPolicy::default()
    };
    let err = CimdFetcher::new(missing).unwrap_err();
    assert!(matches!(err, CimdError::TestCa { .. }), "{err:?}");
    let mut empty = tempfile::NamedTempFile::new().unwrap();
    empty.write_all(b"not a certificate\n").unwrap();
    let err = CimdFetcher::new(FetchPolicy {
        test_metadata_ca: Some(empty.path().to_owned()),
        ..FetchPolicy::default()
    })
    .unwrap_err();
    assert!(matches!(err, CimdError::TestCa { .. }), "{err:?}");
}

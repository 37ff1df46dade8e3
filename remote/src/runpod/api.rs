//! RunPod's serverless job API, as a client: submit (`/run`), incremental output
//! (`/stream/{id}`), status (`/status/{id}`), cancel (`/cancel/{id}`) and the endpoint's health
//! (`/health`), each under the endpoint's base URL.
//!
//! RunPod's cloud serves them under `https://api.runpod.ai/v2/{endpoint_id}/`, status and stream by
//! GET, with `Authorization: Bearer KEY`. The SDK's local test server (`--rp_serve_api`) serves
//! the same answers at its root, status and stream by POST: the base URL and that method are the
//! only differences ([`PollMethod`]). Transient failures (no connection, a timeout, 429, 502, 503,
//! 504) are retried with exponential backoff; other answers are errors carrying RunPod's words.
//! The key is sent as a sensitive header and never appears in an error, a log line or `Debug`.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

/// How the status and stream routes are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PollMethod {
    /// RunPod's cloud API.
    #[default]
    Get,
    /// The SDK's local test server (`--rp_serve_api`).
    Post,
}

/// Attempts of one call before a transient failure is given up on.
const ATTEMPTS: u32 = 5;
/// The first wait between attempts; doubled after each.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// One request's time limit (a stream call on the SDK's local server answers only when the job
/// has run: the run's own limit is added).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest answer read: RunPod's results are capped far below (its documented 20 MB for a
/// job's output), room is left for the base64 of artifacts.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Why a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("RunPod could not be reached ({0})")]
    Unreachable(String),
    #[error("RunPod answered {status}: {words}")]
    Refused { status: u16, words: String },
    #[error("RunPod's answer could not be read ({0})")]
    BadAnswer(String),
}

impl ApiError {
    fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable(_) => true,
            Self::Refused { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            Self::BadAnswer(_) => false,
        }
    }
}

/// A job's state as `/run`, `/status`, `/cancel` and `/stream` give it.
#[derive(Debug, Clone, Deserialize)]
pub struct JobAnswer {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub output: Option<Value>,
    #[serde(default)]
    pub error: Option<Value>,
    /// `/stream`: the partial outputs since the last call, each `{"output": …}`.
    #[serde(default)]
    pub stream: Option<Vec<Value>>,
}

impl JobAnswer {
    /// Whether RunPod says the job will not change any more.
    pub fn is_final(&self) -> bool {
        matches!(
            self.status.as_str(),
            "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT"
        )
    }

    /// RunPod's own words for a failed job.
    pub fn error_words(&self) -> String {
        match &self.error {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => self.status.clone(),
        }
    }
}

/// The client of one endpoint.
#[derive(Clone)]
pub struct RunPodApi {
    http: reqwest::Client,
    /// The endpoint's base URL, without a trailing slash.
    base: String,
    poll: PollMethod,
    /// The key, only to blank it out of answers: an endpoint (or whatever `--runpod-api-url`
    /// names) that echoes the request's headers must not put it in a result or an error.
    key: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for RunPodApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPodApi")
            .field("base", &self.base)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl RunPodApi {
    /// A client of the endpoint at `base` (e.g. `https://api.runpod.ai/v2/abc123`).
    pub fn new(base: &str, key: &str, poll: PollMethod) -> Result<Self, ApiError> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| ApiError::BadAnswer("the API key is not a valid header value".into()))?;
        auth.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, auth);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            // RunPod's API does not redirect; a redirect would carry the key elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            poll,
            key: key.as_bytes().into(),
        })
    }

    /// Submits a job (`/run`); the body is already serialized.
    pub async fn submit(&self, body: Vec<u8>) -> Result<JobAnswer, ApiError> {
        self.call(Method::POST, "run", Some(body), REQUEST_TIMEOUT)
            .await
    }

    /// The job's partial outputs since the last call; `wait` is how long the server may take.
    pub async fn stream(&self, id: &str, wait: Duration) -> Result<JobAnswer, ApiError> {
        let path = format!("stream/{}", job_path(id)?);
        self.call(self.poll_method(), &path, None, REQUEST_TIMEOUT + wait)
            .await
    }

    /// The job's status (and its output once it ended).
    pub async fn status(&self, id: &str) -> Result<JobAnswer, ApiError> {
        let path = format!("status/{}", job_path(id)?);
        self.call(self.poll_method(), &path, None, REQUEST_TIMEOUT)
            .await
    }

    /// Cancels the job.
    pub async fn cancel(&self, id: &str) -> Result<JobAnswer, ApiError> {
        let path = format!("cancel/{}", job_path(id)?);
        self.call(Method::POST, &path, None, REQUEST_TIMEOUT).await
    }

    /// The endpoint's health: `{"jobs": {...}, "workers": {...}}` as RunPod gives it.
    pub async fn health(&self) -> Result<Value, ApiError> {
        self.call(Method::GET, "health", None, REQUEST_TIMEOUT)
            .await
    }

    fn poll_method(&self) -> Method {
        match self.poll {
            PollMethod::Get => Method::GET,
            PollMethod::Post => Method::POST,
        }
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let url = format!("{}/{path}", self.base);
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.once(&method, &url, body.as_ref(), timeout).await {
                Err(e) if e.is_transient() && attempt < ATTEMPTS => {
                    tracing::debug!(%e, attempt, route = path, "RunPod call retried");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                    attempt += 1;
                }
                Err(e) => return Err(e),
                Ok(value) => {
                    return serde_json::from_value(value)
                        .map_err(|e| ApiError::BadAnswer(e.to_string()))
                }
            }
        }
    }

    async fn once(
        &self,
        method: &Method,
        url: &str,
        body: Option<&Vec<u8>>,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let mut request = self.http.request(method.clone(), url).timeout(timeout);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        } else if *method == Method::POST {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body("{}");
        }
        let response = request
            .send()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        let status = response.status();
        let bytes = blank_key(read_capped(response).await?, &self.key);
        if !status.is_success() {
            return Err(ApiError::Refused {
                status: status.as_u16(),
                words: words(status, &bytes),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| ApiError::BadAnswer(e.to_string()))
    }
}

/// An answer's body, refused past [`MAX_ANSWER_BYTES`]: a hostile or broken endpoint must not
/// make the server hold an endless body.
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, ApiError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The answer with every copy of the key replaced by its name.
fn blank_key(body: Vec<u8>, key: &[u8]) -> Vec<u8> {
    if key.is_empty() || !body.windows(key.len()).any(|w| w == key) {
        return body;
    }
    let mut out = Vec::with_capacity(body.len());
    let mut rest = &body[..];
    while !rest.is_empty() {
        if rest.starts_with(key) {
            out.extend_from_slice(b"[RUNPOD_API_KEY]");
            rest = &rest[key.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

fn too_long() -> ApiError {
    ApiError::BadAnswer(format!(
        "the answer is longer than {MAX_ANSWER_BYTES} bytes"
    ))
}

/// A job id as a path segment: RunPod's ids are letters, digits and dashes; anything else from
/// an answer is refused rather than put in a URL.
fn job_path(id: &str) -> Result<&str, ApiError> {
    let fine = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fine {
        Ok(id)
    } else {
        Err(ApiError::BadAnswer(
            "RunPod gave a job id that is not one".into(),
        ))
    }
}

/// An error answer in a line: RunPod's `error`/`message` field, or its text, cut short.
fn words(status: StatusCode, body: &[u8]) -> String {
    let text = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            ["error", "message", "detail"].iter().find_map(|k| {
                v.get(*k)
                    .map(|w| w.as_str().map_or(w.to_string(), str::to_owned))
            })
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no reason given")
            .to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_job_ids_of_letters_digits_and_dashes_go_into_a_url() {
        assert!(job_path("sync-0f3a_12").is_ok());
        for bad in ["", "../health", "a/b", "a?b", "a b"] {
            assert!(job_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_error_answer_reads_as_runpods_words_in_one_line() {
        let words = words(StatusCode::BAD_REQUEST, br#"{"error": "bad\ninput"}"#);
        assert_eq!(words, "bad input");
        assert_eq!(words_of_plain(), "Service Unavailable");
        assert!(ApiError::Refused {
            status: 503,
            words: String::new()
        }
        .is_transient());
        assert!(!ApiError::Refused {
            status: 400,
            words: String::new()
        }
        .is_transient());
    }

    fn words_of_plain() -> String {
        words(StatusCode::SERVICE_UNAVAILABLE, b"")
    }

    /// A hostile endpoint that answers with an endless body: the call ends with a clear error
    /// and the server holds at most the answer limit.
    #[tokio::test]
    async fn an_endless_answer_is_refused_not_held() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = conn.read(&mut request).await;
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n";
                    let _ = conn.write_all(head.as_bytes()).await;
                    let block = vec![b' '; 1 << 20];
                    while conn.write_all(&block).await.is_ok() {}
                });
            }
        });
        let api = RunPodApi::new(&base, "key", PollMethod::Get).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(60), api.health())
            .await
            .expect("an endless answer is read on and on");
        let e = answer.unwrap_err();
        assert!(matches!(e, ApiError::BadAnswer(_)), "{e}");
        assert!(e.to_string().contains("longer than"), "{e}");
    }

    /// Something at the API URL that echoes the request (its headers, the key among them) in
    /// an error and in a health answer: neither the error nor the answer holds the key, and a
    /// redirect is not followed with it.
    #[tokio::test]
    async fn an_answer_that_echoes_the_key_back_does_not_carry_it_further() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        const KEY: &str = "rpa_ECHOED_KEY_0123456789";
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = std::sync::Arc::clone(&seen);
        let here = base.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut request = vec![0u8; 8192];
                let n = conn.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..n]).into_owned();
                log.lock().unwrap().push(request.clone());
                let line = request.lines().next().unwrap_or_default().to_owned();
                let headers: String = request
                    .lines()
                    .filter(|l| l.to_ascii_lowercase().starts_with("authorization"))
                    .collect();
                let (status, body) = if line.contains("/health") {
                    (
                        "200 OK",
                        serde_json::json!({"workers": {"idle": 1}, "echo": headers}),
                    )
                } else if line.contains("/status/") {
                    ("302 Found", serde_json::json!({}))
                } else {
                    ("400 Bad Request", serde_json::json!({"error": headers}))
                };
                let body = body.to_string();
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nlocation: {here}/health\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            }
        });
        let api = RunPodApi::new(&base, KEY, PollMethod::Get).unwrap();
        let refused = api.submit(b"{}".to_vec()).await.unwrap_err().to_string();
        assert!(!refused.contains(KEY), "{refused}");
        assert!(
            refused.contains("[RUNPOD_API_KEY]"),
            "the echo came back: {refused}"
        );
        let health = api.health().await.unwrap().to_string();
        assert!(!health.contains(KEY), "{health}");
        let redirected = api.status("job-1").await;
        assert!(redirected.is_err(), "{redirected:?}");
        let requests = seen.lock().unwrap().clone();
        assert_eq!(requests.len(), 3, "the redirect was followed: {requests:?}");
    }
}

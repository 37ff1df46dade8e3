//! A real browser for tests: Debian's headless `chromium`, driven through `chromedriver`'s W3C
//! WebDriver API with plain JSON over reqwest (the handful of commands a form test needs).
//!
//! Nothing is downloaded here: `scripts/test.sh` installs `chromium` and `chromium-driver` with
//! apt before the real-client step, and [`Browser::start`] panics with that hint when they are
//! missing. Elsewhere (GitHub's Ubuntu image has Google Chrome and its chromedriver, not Debian's
//! packages) `PYRUN_TEST_CHROMIUM` and `PYRUN_TEST_CHROMEDRIVER` name the programs.
//!
//! Each [`Browser`] runs its own `chromedriver --port=N` in a process group of its own; dropping it
//! ends that group (chromedriver and the chromium it started), nothing else.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::net::free_port;

/// Where Debian's `chromium-driver` and `chromium` packages put their programs, unless these
/// variables say otherwise.
const CHROMEDRIVER: (&str, &str) = ("PYRUN_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
const CHROMIUM: (&str, &str) = ("PYRUN_TEST_CHROMIUM", "/usr/bin/chromium");

/// How long chromedriver may take to answer `/status` as ready, and one command to complete.
const DRIVER_START: Duration = Duration::from_secs(20);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Browser::expect`] waits for an element to appear.
const ELEMENT_WAIT: Duration = Duration::from_secs(15);

/// The key under which W3C WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One headless chromium session behind its own chromedriver.
pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// An element found on the current page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless chromium session
    /// (`--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage`, a fresh profile).
    pub async fn start() -> Browser {
        let (chromedriver, chromium) = (program(CHROMEDRIVER), program(CHROMIUM));
        let port = free_port();
        let mut cmd = Command::new(&chromedriver);
        cmd.arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Its own group, so Drop can end chromedriver and the chromium it spawned together.
            cmd.process_group(0);
        }
        let driver = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", chromedriver.display()));
        let http = reqwest::Client::builder()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .expect("reqwest client");
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::Builder::new()
            .prefix("pyrun-chromium-")
            .tempdir()
            .expect("a temporary chromium profile");
        let mut browser = Browser {
            driver,
            session: String::new(),
            http,
            _profile: profile,
        };
        browser.wait_ready(&base, &chromedriver).await;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=900,760",
                    format!("--user-data-dir={}", browser._profile.path().display()),
                ],
            },
        }}});
        let created = browser
            .send(
                reqwest::Method::POST,
                &format!("{base}/session"),
                Some(capabilities),
            )
            .await;
        let id = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver gave no session id: {created}"));
        browser.session = format!("{base}/session/{id}");
        browser
    }

    async fn wait_ready(&mut self, base: &str, chromedriver: &Path) {
        let deadline = Instant::now() + DRIVER_START;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!("{} exited at start: {status}", chromedriver.display());
            }
            let ready = match self.http.get(format!("{base}/status")).send().await {
                Ok(resp) => resp
                    .bytes()
                    .await
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .is_some_and(|v| v["value"]["ready"] == true),
                Err(_) => false,
            };
            if ready {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{} was not ready within {DRIVER_START:?}",
            chromedriver.display()
        );
    }

    /// One WebDriver request: the HTTP status and the JSON reply.
    async fn request(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<Value>,
    ) -> (reqwest::StatusCode, Value) {
        let mut req = self.http.request(method.clone(), url);
        if let Some(body) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}"));
        let status = resp.status();
        let bytes = resp.bytes().await.unwrap_or_default();
        let reply = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "WebDriver {method} {url}: not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, reply)
    }

    /// One WebDriver command; its `value`, or a panic naming the command and the driver's error.
    async fn send(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
        let (status, reply) = self.request(method.clone(), url, body).await;
        assert!(
            status.is_success(),
            "WebDriver {method} {url} failed ({status}): {}",
            reply["value"]
        );
        reply["value"].clone()
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.send(method, &format!("{}{path}", self.session), body)
            .await
    }

    /// Navigates to `url` and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The address of the page the browser shows now.
    pub async fn current_url(&self) -> String {
        let value = self.command(reqwest::Method::GET, "/url", None).await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// The current page's HTML as the browser holds it.
    pub async fn page_source(&self) -> String {
        let value = self.command(reqwest::Method::GET, "/source", None).await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// The first element matching the CSS `selector`, if the page has one.
    pub async fn find(&self, selector: &str) -> Option<Element> {
        let body = json!({"using": "css selector", "value": selector});
        let url = format!("{}/element", self.session);
        let (status, reply) = self.request(reqwest::Method::POST, &url, Some(body)).await;
        if !status.is_success() {
            // "no such element" is an answer; anything else is a broken session.
            assert_eq!(
                reply["value"]["error"], "no such element",
                "WebDriver find {selector}: {reply}"
            );
            return None;
        }
        reply["value"][ELEMENT_KEY]
            .as_str()
            .map(|id| Element(id.to_owned()))
    }

    /// The first element matching `selector`, waiting up to [`ELEMENT_WAIT`] for it to appear: a
    /// click that submits a form may return before the browser has left the page, so the next
    /// page's elements are waited for. Panics with the page's source when none appears.
    pub async fn expect(&self, selector: &str) -> Element {
        let deadline = Instant::now() + ELEMENT_WAIT;
        loop {
            if let Some(element) = self.find(selector).await {
                return element;
            }
            if Instant::now() > deadline {
                panic!(
                    "no element matches {selector} on {} within {ELEMENT_WAIT:?}:\n{}",
                    self.current_url().await,
                    self.page_source().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `text` into `element`.
    pub async fn type_into(&self, element: &Element, text: &str) {
        let path = format!("/element/{}/value", element.0);
        self.command(reqwest::Method::POST, &path, Some(json!({"text": text})))
            .await;
    }

    /// Clicks `element` (a submit button submits its form and waits for the next page).
    pub async fn click(&self, element: &Element) {
        let path = format!("/element/{}/click", element.0);
        self.command(reqwest::Method::POST, &path, Some(json!({})))
            .await;
    }

    /// The rendered text of `element`.
    pub async fn text(&self, element: &Element) -> String {
        let path = format!("/element/{}/text", element.0);
        let value = self.command(reqwest::Method::GET, &path, None).await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// A DOM property of `element` (e.g. an image's `naturalWidth`), as JSON.
    pub async fn property(&self, element: &Element, name: &str) -> Value {
        let path = format!("/element/{}/property/{name}", element.0);
        self.command(reqwest::Method::GET, &path, None).await
    }

    /// Makes the iframe `element` the context later commands look in (an MCP App's frame).
    pub async fn enter_frame(&self, element: &Element) {
        let id = json!({ "id": { ELEMENT_KEY: element.0 } });
        self.command(reqwest::Method::POST, "/frame", Some(id))
            .await;
    }

    /// Back to the top-level page after [`Browser::enter_frame`].
    pub async fn leave_frames(&self) {
        let id = json!({ "id": null });
        self.command(reqwest::Method::POST, "/frame", Some(id))
            .await;
    }

    /// Resizes the window (screenshots show the whole of a tall page).
    pub async fn resize(&self, width: u32, height: u32) {
        let rect = json!({ "width": width, "height": height });
        self.command(reqwest::Method::POST, "/window/rect", Some(rect))
            .await;
    }

    /// Saves a PNG screenshot of the window to `path` (creating its folder).
    pub async fn screenshot(&self, path: &Path) {
        let value = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("screenshot is not base64: {e}"));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        }
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// Ends the session (chromium closes); Drop then stops chromedriver.
    pub async fn quit(mut self) {
        if !self.session.is_empty() {
            let session = std::mem::take(&mut self.session);
            let _ = self.http.delete(session).send().await;
        }
    }
}

impl Drop for Browser {
    /// Ends chromedriver's process group (chromedriver and any chromium still running under it):
    /// SIGTERM, then SIGKILL after a grace period. chromedriver is reaped only at the end, so its
    /// pid (the group's id) cannot be reused by another process while the signals are sent.
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let signal = |sig: &str| {
            let _ = Command::new("kill")
                .args([sig, "--", &group])
                .stderr(Stdio::null())
                .status();
        };
        signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && !exited_unreaped(self.driver.id()) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // chromium may outlive chromedriver by a moment; the group still names it.
        signal("-KILL");
        let _ = self.driver.wait();
    }
}

/// Whether process `pid`, a child not yet waited for, has exited (a zombie in `/proc`).
fn exited_unreaped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

/// `target/NAME`, where the browser tests leave their screenshots for people to look at.
pub fn screenshot_path(name: &str) -> PathBuf {
    crate::paths::target_dir().join(name)
}

/// The program a `(variable, Debian path)` pair names; panics with the install hint when missing.
fn program((variable, debian): (&str, &str)) -> PathBuf {
    let path = std::env::var_os(variable).map_or_else(|| PathBuf::from(debian), PathBuf::from);
    assert!(
        path.is_file(),
        "{} is missing: the browser tests drive a headless chromium through chromedriver.\n\
         hint: `apt-get install -y chromium chromium-driver` (scripts/test.sh does it when it runs \
         as root), or name the programs in PYRUN_TEST_CHROMIUM and PYRUN_TEST_CHROMEDRIVER",
        path.display()
    );
    path
}

//! The run viewer MCP App (`ui://pyrun/run.html`) in a real browser, through the ext-apps SDK's own
//! host side: Debian's headless chromium opens a test host page (`tests/clients/app-host/`:
//! `AppBridge` + `PostMessageTransport` + the official TypeScript client, bundled by the harness)
//! that finds the app in the tool's `_meta`, reads it from the server, renders it in a sandboxed
//! iframe under the CSP its `_meta.ui` asks for, calls the tool and hands the app the result.
//! The page and `/mcp` share one loopback origin: a small proxy here forwards `/mcp` to the real
//! server (rmcp answers a cross-origin preflight with 405). WebDriver then looks inside the
//! iframe at what a person sees: a run with output, a plot and a CSV table (sortable); a failed
//! run; a background run followed live, then cancelled. A screenshot of the first is left at
//! `target/app-run-viewer.png`. Linux only (chromium, chromium-driver, npm; scripts/test.sh).
#![cfg(target_os = "linux")]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use futures::TryStreamExt as _;
use pyrun_mcp_tests::browser::{screenshot_path, Element};
use pyrun_mcp_tests::{app_host, workload_env, Browser, HttpServer, ServerLaunch, TempProjects};
use serde_json::{json, Value};

/// WebDriver's key codes for Enter and End.
const ENTER: &str = "\u{E007}";
const END: &str = "\u{E010}";

/// How long the app may take to show what a test waits for (a matplotlib import included).
const SHOW_WAIT: Duration = Duration::from_secs(90);

/// Prints in colour, plots with matplotlib, and writes a CSV: what a person wants to see of a run.
const REPORT: &str = r##"import csv, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = os.environ["PYRUN_OUTPUT_DIR"]
cities = [("Lisbon", 17.5), ("Oslo", 6.3), ("Cairo", 22.1), ("Quito", 13.9), ("Perth", 18.8)]
print("\x1b[1;32mweather report\x1b[0m for", len(cities), "cities")
for name, t in cities:
    print(f"  {name:<8} {t:5.1f} °C")
with open(os.path.join(out, "temperatures.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["city", "mean_c"])
    w.writerows(cities)
fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
ax.bar([c for c, _ in cities], [t for _, t in cities], color="#2f6fdb")
ax.set_ylabel("mean °C")
ax.set_title("Mean temperature")
fig.tight_layout()
fig.savefig(os.path.join(out, "temperatures.png"))
print("wrote temperatures.png and temperatures.csv")
"##;

/// Counts its runs in a file beside it, then fails.
const FAILS: &str =
    "import os\nn = int(open('count').read()) + 1 if os.path.exists('count') else 1\n\
open('count', 'w').write(str(n))\nprint(f'reading the input, run {n}')\nprint(1 / 0)\n";

const LONG: &str = "for i in range(50000):\n    print(f'line {i:05d} ' + 'x' * 40)\n";

const TICKS: &str =
    "import time\nfor i in range(600):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.2)\n";

/// The test host's origin: its page, its bundle, and `/mcp` forwarded to `upstream`.
async fn host_origin(upstream: String) -> (String, tokio::task::JoinHandle<()>) {
    let dir = app_host();
    let app = Router::new()
        .route(
            "/",
            get(|| async { file(app_host().join("index.html"), "text/html") }),
        )
        .route(
            "/host.js",
            get(|| async { file(app_host().join("host.js"), "text/javascript") }),
        )
        .route("/mcp", any(forward))
        .with_state(Upstream {
            url: upstream,
            http: reqwest::Client::new(),
        });
    assert!(dir.join("host.js").is_file(), "the host bundle is missing");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, task)
}

fn file(path: PathBuf, mime: &'static str) -> Response {
    match std::fs::read(&path) {
        Ok(bytes) => ([(header::CONTENT_TYPE, mime)], bytes).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, format!("{}: {e}", path.display())).into_response(),
    }
}

#[derive(Clone)]
struct Upstream {
    url: String,
    http: reqwest::Client,
}

/// Headers a proxy does not pass on (hop-by-hop, or set again by the next hop).
const HOP: [HeaderName; 4] = [
    header::HOST,
    header::CONNECTION,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
];

/// One `/mcp` request to the server and its answer back, streamed (SSE answers stay open).
async fn forward(State(up): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut out = up.http.request(parts.method, &up.url).body(body);
    for (name, value) in &parts.headers {
        if !HOP.contains(name) {
            out = out.header(name, value);
        }
    }
    let answer = match out.send().await {
        Ok(answer) => answer,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !HOP.contains(name) {
            response = response.header(name, value);
        }
    }
    let stream = answer.bytes_stream().map_err(std::io::Error::other);
    response.body(Body::from_stream(stream)).unwrap()
}

/// A server on `projects` with the scientific venv, the host origin before it, and a browser on
/// the host page calling `tool` with `args`, inside the app's frame once the host has handed it
/// the call.
struct Shown {
    browser: Browser,
    _host: tokio::task::JoinHandle<()>,
    _server: HttpServer,
}

impl Shown {
    async fn open(projects: &TempProjects, tool: &str, args: Value, extra: &[&str]) -> Shown {
        Self::open_with(projects, tool, args, extra, "theme=light").await
    }

    /// Like [`Shown::open`], with more of the host's query (`theme=dark`, `reads=0`).
    async fn open_with(
        projects: &TempProjects,
        tool: &str,
        args: Value,
        extra: &[&str],
        query: &str,
    ) -> Shown {
        let python = workload_env();
        let server = ServerLaunch::new(
            pyrun_mcp_tests::bin_path("pyrun-mcp-server"),
            projects.path(),
        )
        .args([
            OsStr::new("--python"),
            python.as_os_str(),
            OsStr::new("--timeout"),
            OsStr::new("300"),
        ])
        .args(extra)
        .http();
        let (base, host) = host_origin(server.mcp_url()).await;
        let browser = Browser::start().await;
        browser.resize(980, 1200).await;
        let page = format!(
            "{base}/?tool={tool}&args={}&{query}",
            encode(&args.to_string())
        );
        browser.goto(&page).await;
        let shown = Shown {
            browser,
            _host: host,
            _server: server,
        };
        // A quick tool's result may be handed over before the first look.
        shown.host_says(&["app ready", "result sent"]).await;
        let frame = shown.browser.expect("iframe#app").await;
        shown.browser.enter_frame(&frame).await;
        shown
    }

    /// Waits until the host page's status reads one of `expected` (or says it failed).
    async fn host_says(&self, expected: &[&str]) {
        let deadline = Instant::now() + SHOW_WAIT;
        loop {
            let status = self.browser.expect("#host-status").await;
            let text = self.browser.text(&status).await;
            assert!(!text.starts_with("error"), "the test host failed: {text}");
            if expected.contains(&text.as_str()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the host says {text:?}, not {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The text of the first element matching `selector` once `ok` holds for it.
    async fn text_when(&self, selector: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + SHOW_WAIT;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(element) = self.browser.find(selector).await {
                last = self.browser.text(&element).await;
                if ok(&last) {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        panic!(
            "{selector} never showed what was expected; last {last:?}; page:\n{}",
            self.browser.page_source().await
        );
    }

    async fn all(&self, selector: &str) -> Vec<Element> {
        let mut found = Vec::new();
        // WebDriver's find-all is not in the harness: nth-of-type walks the matches instead.
        for i in 1..=200 {
            match self
                .browser
                .find(&format!("{selector}:nth-of-type({i})"))
                .await
            {
                Some(element) => found.push(element),
                None => break,
            }
        }
        found
    }
}

/// Percent-encodes a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_shows_its_coloured_output_its_plot_and_its_csv_as_a_sortable_table() {
    let projects = TempProjects::named("projects").file("report.py", REPORT);
    let shown = Shown::open(
        &projects,
        "run_python",
        json!({"file_name": "report.py"}),
        &[],
    )
    .await;
    let status = shown.text_when("#status", |t| t != "running").await;
    assert_eq!(status, "succeeded");
    shown.text_when("h1", |t| t == "report.py").await;
    let stdout = shown
        .text_when(".term.stdout", |t| t.contains("wrote temperatures.png"))
        .await;
    assert!(stdout.contains("weather report for 5 cities"), "{stdout}");
    assert!(
        !stdout.contains("[1;32m"),
        "the ANSI codes show raw: {stdout}"
    );
    let bold = shown.browser.expect(".term.stdout .row span.b").await;
    assert_eq!(shown.browser.text(&bold).await, "weather report");
    let facts = shown.text_when("dl.facts", |t| t.contains("python")).await;
    assert!(
        facts.contains("exit code\n0") || facts.contains("exit code 0"),
        "{facts}"
    );

    // The plot, full size through the host's resource read.
    let img = shown.browser.expect("figure img").await;
    let deadline = Instant::now() + SHOW_WAIT;
    while shown.browser.property(&img, "naturalWidth").await.as_u64() != Some(600) {
        assert!(
            Instant::now() < deadline,
            "the plot never loaded at 600 px wide"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    // The CSV as a table, sorted by a click on a column's header.
    shown.browser.expect("table tbody tr").await;
    let headers = shown.all("table th").await;
    let mut names = Vec::new();
    for th in &headers {
        names.push(shown.browser.text(th).await);
    }
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names[0].starts_with("city") && names[1].starts_with("mean_c"),
        "{names:?}"
    );
    assert_eq!(shown.all("table tbody tr").await.len(), 5);
    let first_city = || shown.text_when("table tbody tr:first-child td", |_| true);
    assert_eq!(first_city().await, "Lisbon");
    let by_mean = shown.browser.expect("table th:nth-of-type(2) button").await;
    shown.browser.click(&by_mean).await;
    assert_eq!(first_city().await, "Oslo");
    // The keyboard does what the pointer does: Enter on the focused header sorts again.
    shown.browser.type_into(&by_mean, ENTER).await;
    assert_eq!(first_city().await, "Cairo");
    shown
        .text_when("p.empty", |t| t.contains("5 rows × 2 columns"))
        .await;

    shown.browser.leave_frames().await;
    shown.host_says(&["result sent"]).await;
    shown
        .browser
        .screenshot(&screenshot_path("app-run-viewer.png"))
        .await;
    shown.browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_resource_reads_gets_the_inline_picture_and_the_files_named() {
    let projects = TempProjects::named("projects").file("report.py", REPORT);
    let args = json!({"file_name": "report.py"});
    let shown = Shown::open_with(&projects, "run_python", args, &[], "reads=0").await;
    assert_eq!(
        shown.text_when("#status", |t| t != "running").await,
        "succeeded"
    );
    let img = shown.browser.expect("figure img").await;
    let deadline = Instant::now() + SHOW_WAIT;
    while shown.browser.property(&img, "naturalWidth").await.as_u64() == Some(0) {
        assert!(Instant::now() < deadline, "the inline picture never showed");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let src = shown.browser.property(&img, "src").await;
    assert!(
        src.as_str().is_some_and(|s| s.starts_with("data:image/")),
        "{src}"
    );
    shown
        .text_when(".artifact p.empty", |t| t.contains("no resource reads"))
        .await;
    assert!(shown.browser.find("table").await.is_none());
    shown.browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_shows_its_exit_code_and_its_traceback_in_the_hosts_dark_theme_and_runs_again()
{
    let projects = TempProjects::named("projects").file("fails.py", FAILS);
    let args = json!({"file_name": "fails.py"});
    let shown = Shown::open_with(&projects, "run_python", args, &[], "theme=dark").await;
    let status = shown.text_when("#status", |t| t != "running").await;
    assert_eq!(status, "failed");
    let facts = shown
        .text_when("dl.facts", |t| t.contains("exit code"))
        .await;
    assert!(facts.contains('1'), "{facts}");
    shown
        .text_when(".term.stdout", |t| t.contains("reading the input, run 1"))
        .await;
    shown
        .text_when(".term.stderr", |t| t.contains("ZeroDivisionError"))
        .await;
    let root = shown.browser.expect("html").await;
    assert_eq!(
        shown.browser.property(&root, "dataset").await["theme"],
        "dark"
    );
    // Run again: the same call through the host, its new run shown.
    let again = shown.browser.expect("#run-again").await;
    shown.browser.click(&again).await;
    shown
        .text_when(".term.stdout", |t| t.contains("reading the input, run 2"))
        .await;
    assert_eq!(shown.text_when("#status", |_| true).await, "failed");
    shown.browser.leave_frames().await;
    shown
        .browser
        .screenshot(&screenshot_path("app-run-viewer-dark.png"))
        .await;
    shown.browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_run_is_followed_live_and_cancel_stops_it() {
    let projects = TempProjects::named("projects").file("ticks.py", TICKS);
    let shown = Shown::open(
        &projects,
        "start_python",
        json!({"file_name": "ticks.py"}),
        &[],
    )
    .await;
    shown.text_when("#status", |t| t == "running").await;
    // Live: ticks arrive while the run goes on, through get_run via the host.
    shown
        .text_when(".term.stdout", |t| t.contains("tick 3"))
        .await;
    shown.text_when("h1", |t| t == "ticks.py").await;
    // The button found early is still the one on the page after many live updates (a redraw
    // that replaced it would take it from under the pointer and the keyboard focus).
    let cancel = shown.browser.expect("#cancel").await;
    shown
        .text_when(".term.stdout", |t| t.contains("tick 12"))
        .await;
    shown.browser.click(&cancel).await;
    shown.text_when("#status", |t| t == "cancelled").await;
    let cancel = shown.browser.expect("#cancel").await;
    assert_eq!(shown.browser.property(&cancel, "hidden").await, json!(true));
    // Stopped: no tick after the cancel.
    let stopped = shown.text_when(".term.stdout", |_| true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(shown.text_when(".term.stdout", |_| true).await, stopped);
    shown.browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_output_is_drawn_a_screen_at_a_time_and_its_cut_is_stated() {
    let projects = TempProjects::named("projects").file("long.py", LONG);
    let limit = ["--max-output-bytes", "1000000"];
    let shown = Shown::open(
        &projects,
        "run_python",
        json!({"file_name": "long.py"}),
        &limit,
    )
    .await;
    shown.text_when("#status", |t| t == "succeeded").await;
    shown
        .text_when(".note", |t| t.contains("stdout was cut"))
        .await;
    let first = shown
        .text_when(".term.stdout", |t| t.contains("line 00000"))
        .await;
    // About 20 000 lines arrived (1 MB); the pane holds only the rows around its view.
    let rows = shown.all(".term.stdout .row").await.len();
    assert!((20..=120).contains(&rows), "{rows} rows in the document");
    assert!(
        !first.contains("line 00200"),
        "rows far below the view were drawn"
    );
    // End on the focused pane scrolls to the last rows, which are drawn then. On a loaded
    // machine a key can come before the pane takes it: pressed again until the rows show.
    let deadline = Instant::now() + SHOW_WAIT;
    let last = loop {
        let pane = shown.browser.expect(".term.stdout").await;
        shown.browser.type_into(&pane, END).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let text = shown.browser.text(&pane).await;
        if first_number(&text) > 5000 {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "End never scrolled the pane to its last rows: {text:?}"
        );
    };
    assert!(!last.contains("line 00000"), "{last}");
    shown.browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_python_handed_over_to_the_background_is_followed_and_cancelled_too() {
    let projects = TempProjects::named("projects").file("ticks.py", TICKS);
    let detach = ["--detach-after", "1"];
    let shown = Shown::open(
        &projects,
        "run_python",
        json!({"file_name": "ticks.py"}),
        &detach,
    )
    .await;
    shown.text_when("#status", |t| t == "running").await;
    // The first page came with the hand-over; later ticks only through get_run.
    shown
        .text_when(".term.stdout", |t| t.contains("tick 12"))
        .await;
    let cancel = shown.browser.expect("#cancel").await;
    shown.browser.click(&cancel).await;
    shown.text_when("#status", |t| t == "cancelled").await;
    shown.browser.quit().await;
}

/// The number after the first `line ` of `text` (0 when none).
fn first_number(text: &str) -> u32 {
    text.split_once("line ")
        .and_then(|(_, rest)| rest.get(..5))
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(0)
}

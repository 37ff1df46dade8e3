//! pyrun-mcp-bench: one run, one interpreter, one script; prints a markdown table of start-up,
//! raw spawn, run_python over every transport, load, memory and sandbox cost, side by side with a
//! FastMCP baseline. Driven by `scripts/bench.sh`; never part of the test suite's pass/fail.

mod background;
mod drivers;
mod oauth;
mod packages;
mod procs;
mod sessions;
mod stats;
mod table;
mod warm;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use drivers::{Session, SseSession, StdioSession, StreamableHttpSession};
use procs::{mib, rss_kib, Server};
use serde_json::json;
use stats::{ms, Samples};

#[derive(Debug, Parser)]
#[command(about = "Benchmarks pyrun-mcp-server (see scripts/bench.sh)")]
struct Args {
    /// The pyrun-mcp-server binary (a release build).
    #[arg(long)]
    server_bin: PathBuf,
    /// The projects folder (copied to a temp folder; a flood script is added to the copy).
    #[arg(long, default_value = "python_projects")]
    projects: PathBuf,
    /// Interpreter for the raw spawn and for the servers [default: python3, resolved].
    #[arg(long)]
    python: Option<PathBuf>,
    /// A Python that has fastmcp installed, for the baseline; omitted: no baseline.
    #[arg(long)]
    fastmcp_python: Option<PathBuf>,
    /// Sequential calls per transport.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// Start-ups measured.
    #[arg(long, default_value_t = 30)]
    startups: usize,
    /// Concurrent clients under load.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 10)]
    load_secs: u64,
    /// Idle SSE sessions held open for the memory figure.
    #[arg(long, default_value_t = 1000)]
    idle_sessions: usize,
    /// An extra argument for every pyrun server the bench starts (repeatable), e.g.
    /// `--server-arg=--audit-log=off` to compare a setting's cost.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Measure only the Python session rows (session_exec of 1+1 over stdio).
    #[arg(long)]
    only_sessions: bool,
    /// Measure only the server's memory with --idle-sessions legacy-SSE sessions: opened only,
    /// initialized with a connection per client, initialized with one shared client.
    #[arg(long)]
    only_sse_sessions: bool,
    /// Open --idle-sessions initialized legacy-SSE sessions on the server at this base URL (one
    /// client each), hold them for --load-secs, then close them: for a heap profiler run on a
    /// server started by hand.
    #[arg(long)]
    hold_sse_sessions: Option<String>,
    /// Measure only the list_packages row (200 packages over stdio); with --only-sessions, both.
    #[arg(long)]
    only_packages: bool,
    /// Measure only the per-call overhead: raw spawns, then run_python over stdio, /mcp and /sse
    /// (each call interleaved with a raw spawn).
    #[arg(long)]
    only_overhead: bool,
    /// Measure only warm runs (issue 30): run_python in a pre-started spare against `--warm off`
    /// and the raw spawn, CPU and memory per run, and the unsandboxed fork limit.
    #[arg(long)]
    warm: bool,
    /// Warm rows: milliseconds between two calls to one server at an assistant's cadence.
    #[arg(long, default_value_t = 1000)]
    warm_cadence_ms: u64,
    /// Warm rows: calls per server at the cadence.
    #[arg(long, default_value_t = 30)]
    warm_calls: usize,
    /// Warm rows: runs before the memory figure.
    #[arg(long, default_value_t = 1000)]
    warm_memory_runs: usize,
    /// Warm rows: a venv with numpy and pandas (hard-linked into a projects folder as `.venv`),
    /// e.g. target/test-deps/workload; with --workload-python, adds the numpy+pandas rows.
    #[arg(long, requires = "workload_python")]
    workload_venv: Option<PathBuf>,
    /// Warm rows: the venv's base interpreter (the numpy servers' --python).
    #[arg(long, requires = "workload_venv")]
    workload_python: Option<PathBuf>,
    /// Warm rows: numpy+pandas calls per server.
    #[arg(long, default_value_t = 15)]
    workload_calls: usize,
    /// Warm rows: the warm servers' debug logs (pyrun_run=debug) are written to this folder.
    #[arg(long)]
    warm_log_dir: Option<PathBuf>,
    /// The one current table (scripts/bench.sh's default): every pattern with warm runs on and
    /// off, interleaved, beside raw python and the FastMCP baseline. The numpy+pandas rows need
    /// --workload-venv and --workload-python.
    #[arg(long)]
    table: bool,
    /// The table with fewer calls (a first look, not figures to quote).
    #[arg(long)]
    quick: bool,
    /// The table is also written into this page, between its `<!-- bench-table:start -->` and
    /// `<!-- bench-table:end -->` markers.
    #[arg(long, requires = "table")]
    write_into: Option<PathBuf>,
}

const SCRIPT: &str = "hello_world.py";
/// Stdlib imports only: what a run pays to load bytecode (from the server's cache when sandboxed).
const IMPORT_SCRIPT: &str = "import_heavy.py";

struct Report {
    rows: Vec<[String; 4]>,
}

impl Report {
    fn row(&mut self, what: &str, pyrun: String, baseline: String, note: String) {
        eprintln!("  {what}: {pyrun} | {baseline} {note}");
        self.rows.push([what.to_owned(), pyrun, baseline, note]);
    }

    fn print(&self, header: &str) {
        println!("{header}\n");
        println!("| measure | pyrun-mcp | FastMCP baseline | note |");
        println!("|---|---|---|---|");
        for [a, b, c, d] in &self.rows {
            println!("| {a} | {b} | {c} | {d} |");
        }
    }
}

/// The HTTP server's limits for the benches' many clients and sessions (its defaults would
/// refuse them before anything is measured).
pub(crate) const HTTP_LOAD_LIMITS: [&str; 6] = [
    "--max-sessions",
    "5000",
    "--max-connections",
    "5000",
    "--max-concurrent",
    "64",
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let python =
        pyrun_mcp_tests::resolve_python(args.python.as_deref()).map_err(anyhow::Error::msg)?;
    let work = tempfile::tempdir()?;
    let projects = work.path().join("projects");
    copy_dir(&args.projects, &projects)?;
    std::fs::write(
        projects.join("flood.py"),
        "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(100):\n    sys.stdout.write(chunk)\n",
    )?;
    std::fs::write(
        projects.join(IMPORT_SCRIPT),
        include_str!("../import_heavy.py"),
    )?;
    let baseline_script = work.path().join("fastmcp_baseline.py");
    std::fs::write(&baseline_script, FASTMCP_BASELINE)?;
    let python_arg: Vec<&str> = ["--python", python.to_str().context("python path")?]
        .into_iter()
        .chain(args.server_args.iter().map(String::as_str))
        .collect();
    let bin = &args.server_bin;
    let mut report = Report { rows: Vec::new() };
    let machine = machine_line(&python);
    eprintln!("{machine}");
    if args.table {
        let opts = table::Options {
            python: &python,
            server_args: &python_arg,
            fastmcp_python: args.fastmcp_python.as_deref(),
            baseline_script: &baseline_script,
            workload: match (&args.workload_venv, &args.workload_python) {
                (Some(v), Some(p)) => Some((std::path::absolute(v)?, p.clone())),
                _ => None,
            },
            quick: args.quick,
            idle_sessions: args.idle_sessions,
        };
        let text = table::measure(&projects, bin, &opts).await?;
        println!("{text}");
        if let Some(page) = &args.write_into {
            table::write_into(page, &text)?;
            eprintln!("written into {}", page.display());
        }
        return Ok(());
    }
    if args.warm {
        let workload = match (&args.workload_venv, &args.workload_python) {
            (Some(v), Some(p)) => Some((std::path::absolute(v)?, p.clone())),
            _ => None,
        };
        let opts = warm::Options {
            cadence_calls: args.warm_calls,
            cadence: Duration::from_millis(args.warm_cadence_ms),
            back_to_back: args.calls,
            memory_runs: args.warm_memory_runs,
            workload,
            workload_calls: args.workload_calls,
            log_dir: args.warm_log_dir.clone(),
        };
        let rows = warm::measure(bin, &projects, &python, &python_arg, &opts).await?;
        println!("{machine}\n");
        println!("| measure | median / p90 | ratio to raw | note |");
        println!("|---|---|---|---|");
        for warm::Row(a, b, c, d) in rows {
            println!("| {a} | {b} | {c} | {d} |");
        }
        return Ok(());
    }
    if let Some(base) = &args.hold_sse_sessions {
        let mut open = Vec::with_capacity(args.idle_sessions);
        for _ in 0..args.idle_sessions {
            open.push(SseSession::start(base, "/sse").await?);
        }
        eprintln!("holding {} sessions", open.len());
        tokio::time::sleep(Duration::from_secs(args.load_secs)).await;
        return Ok(());
    }
    if args.only_sse_sessions {
        sse_session_rows(&mut report, bin, &projects, &python_arg, args.idle_sessions).await?;
        report.print(&machine);
        return Ok(());
    }
    if args.only_sessions || args.only_packages {
        if args.only_packages {
            packages_row(&mut report, bin, &python, &python_arg, args.calls).await?;
        }
        if args.only_sessions {
            session_rows(&mut report, bin, &projects, &python_arg, args.calls).await?;
        }
        report.print(&machine);
        return Ok(());
    }

    // 1. Start-up to the first tools/list reply over stdio.
    let mut startup = Samples::default();
    let startups = if args.only_overhead { 0 } else { args.startups };
    for _ in 0..startups {
        let t = Instant::now();
        let mut s = StdioSession::start(bin, &projects, &python_arg).await?;
        s.request(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await?;
        startup.push(t.elapsed());
    }
    if !args.only_overhead {
        report.row(
            &format!(
                "start-up → first tools/list (stdio, median of {})",
                args.startups
            ),
            ms(startup.median()),
            "—".into(),
            format!("p99 {}", ms(startup.p99())),
        );
        // 1b. list_packages of a venv with 200 packages (no run: its metadata is read).
        packages_row(&mut report, bin, &python, &python_arg, args.calls).await?;
    }

    // 2. The physical limit: python itself.
    let raw = raw_spawns(&python, &projects, args.calls).await?;
    report.row(
        &format!("raw `python3 {SCRIPT}` (median / p99 of {})", args.calls),
        format!("{} / {}", ms(raw.median()), ms(raw.p99())),
        "—".into(),
        "the floor".into(),
    );

    // 3. run_python, sequential, per transport.
    let mut stdio = StdioSession::start(bin, &projects, &python_arg).await?;
    let stdio_s = sequential(&mut stdio, args.calls, &python, &projects).await?;
    let http_args = [&python_arg[..], &HTTP_LOAD_LIMITS].concat();
    let http = procs::start_pyrun_http(bin, &projects, &http_args)?;
    let mut mcp = StreamableHttpSession::start(&format!("{}/mcp", http.base_url), &[]).await?;
    let mcp_s = sequential(&mut mcp, args.calls, &python, &projects).await?;
    let mut sse = SseSession::start(&http.base_url, "/sse").await?;
    let sse_s = sequential(&mut sse, args.calls, &python, &projects).await?;

    let base = match &args.fastmcp_python {
        Some(py) => Some(Baseline::measure(py, &baseline_script, &projects, &python, &args).await?),
        None => None,
    };
    let cell = |f: &dyn Fn(&Baseline) -> String| base.as_ref().map_or("not run".to_owned(), f);
    for (name, s, b) in [
        ("stdio", &stdio_s, None),
        ("/mcp", &mcp_s, base.as_ref().map(|b| &b.mcp)),
        ("/sse", &sse_s, base.as_ref().map(|b| &b.sse)),
    ] {
        report.row(
            &format!(
                "run_python {name}: median / p99 (ratio to the raw spawns interleaved with them)"
            ),
            s.cell(),
            b.map_or(
                if name == "stdio" {
                    "—".into()
                } else {
                    "not run".into()
                },
                |b| format!("{} (overhead {:+.2} ms)", b.cell(), b.overhead_ms()),
            ),
            format!("overhead {:+.2} ms", s.overhead_ms()),
        );
    }
    if args.only_overhead {
        report.print(&machine);
        return Ok(());
    }

    // 4. Load: N clients over /mcp, and the raw spawn ceiling with N workers.
    // The ceiling is measured right before and right after the loads and averaged, so that a
    // change in the machine's other load shifts both sides alike.
    let ceiling_before = raw_ceiling(&python, &projects, args.clients, args.load_secs).await?;
    procs::reset_peak(http.pid());
    let load = load_http(&http.base_url, Route::Mcp, args.clients, args.load_secs).await?;
    let load_peak = rss_kib(http.pid()).map(|(_, hwm)| hwm).unwrap_or(0);
    let sse_load = load_http(&http.base_url, Route::Sse, args.clients, args.load_secs).await?;
    let ceiling_after = raw_ceiling(&python, &projects, args.clients, args.load_secs).await?;
    let ceiling = (ceiling_before + ceiling_after) / 2.0;
    report.row(
        &format!(
            "{} clients × {} s over /mcp: calls/s (p50 / p99)",
            args.clients, args.load_secs
        ),
        format!(
            "{:.0} ({} / {})",
            load.rate,
            ms(load.samples.median()),
            ms(load.samples.p99())
        ),
        cell(&|b| {
            format!(
                "{:.0} ({} / {})",
                b.load.rate,
                ms(b.load.samples.median()),
                ms(b.load.samples.p99())
            )
        }),
        format!(
            "raw ceiling {:.0}/s (before {:.0}, after {:.0}); pyrun at {:.0} %",
            ceiling,
            ceiling_before,
            ceiling_after,
            100.0 * load.rate / ceiling.max(1e-9)
        ),
    );
    report.row(
        &format!(
            "{} clients × {} s over /sse: calls/s (p50 / p99)",
            args.clients, args.load_secs
        ),
        format!(
            "{:.0} ({} / {})",
            sse_load.rate,
            ms(sse_load.samples.median()),
            ms(sse_load.samples.p99())
        ),
        cell(&|b| {
            format!(
                "{:.0} ({} / {})",
                b.sse_load.rate,
                ms(b.sse_load.samples.median()),
                ms(b.sse_load.samples.p99())
            )
        }),
        String::new(),
    );

    // 5. Memory: idle, under load, with idle SSE sessions.
    let idle = idle_rss(bin, &projects, &python_arg).await?;
    // Each on a fresh server, so that the figure is the sessions' and not the heap the loads left.
    let fresh = || procs::start_pyrun_http(bin, &projects, &http_args);
    let sessions = async { idle_sse_rss(&fresh()?, args.idle_sessions).await }.await;
    let initialized = async { initialized_sse_rss(&fresh()?, args.idle_sessions).await }.await;
    report.row(
        "server RSS idle",
        mib(idle),
        cell(&|b| mib(b.idle_rss)),
        String::new(),
    );
    report.row(
        "server peak RSS under load",
        mib(load_peak),
        cell(&|b| mib(b.load_peak)),
        String::new(),
    );
    report.row(
        &format!("server RSS with {} idle SSE sessions", args.idle_sessions),
        sessions.map_or_else(|e| format!("failed: {e}"), mib),
        cell(&|b| b.sessions.clone()),
        "fresh server; GET /sse only, never initialized".into(),
    );
    report.row(
        &format!(
            "server RSS with {} initialized idle SSE sessions",
            args.idle_sessions
        ),
        initialized.map_or_else(|e| format!("failed: {e}"), mib),
        cell(&|b| b.initialized.clone()),
        "fresh server; initialize + initialized, then idle (what real clients leave open)".into(),
    );

    // 6. 100 MB of output: peak RSS growth.
    let growth = output_growth(&mut stdio).await?;
    report.row(
        "100 MB of script output: peak RSS growth",
        mib(growth),
        "—".into(),
        "stdio server".into(),
    );

    // 7. Sandbox cost.
    report.row(
        "sandbox cost per run (stdio, median standard − off)",
        sandbox_cost(bin, &projects, &python_arg, args.calls).await,
        "—".into(),
        String::new(),
    );

    // 8. An import-heavy script on the stdio server, interleaved with the same raw spawn.
    let imports = sequential_of(&mut stdio, IMPORT_SCRIPT, args.calls, &python, &projects).await?;
    report.row(
        &format!("run_python `{IMPORT_SCRIPT}` stdio: median / p99 (ratio to raw)"),
        imports.cell(),
        "—".into(),
        format!("overhead {:+.2} ms", imports.overhead_ms()),
    );

    // 9. What --oauth costs per request, per approval and per refresh.
    let cost = oauth::measure(bin, &projects, &python_arg, args.calls).await?;
    let cell = |s: &Samples| format!("{} / {}", ms(s.median()), ms(s.p99()));
    report.row(
        &format!(
            "tools/list /mcp, static token: median / p99 of {}",
            args.calls
        ),
        cell(&cost.static_token),
        "—".into(),
        "the same --oauth server".into(),
    );
    report.row(
        &format!(
            "tools/list /mcp, OAuth access token: median / p99 of {}",
            args.calls
        ),
        cell(&cost.access_token),
        "—".into(),
        "the token's hash looked up in SQLite on every request".into(),
    );
    report.row(
        "OAuth consent page + approval + code exchange: median / p99 of 10",
        cell(&cost.approvals),
        "—".into(),
        "Argon2id check of the owner secret".into(),
    );
    report.row(
        &format!("OAuth refresh (rotation): median / p99 of {}", args.calls),
        cell(&cost.refreshes),
        "—".into(),
        String::new(),
    );

    // 10. Background runs: start_python + a long poll, against run_python; a long poll's wake-up.
    let bg = background::measure(bin, &projects, &python_arg, SCRIPT, args.calls).await?;
    report.row(
        &format!(
            "run_python stdio, same session: median / p99 of {}",
            args.calls
        ),
        cell(&bg.run_python),
        "—".into(),
        "the comparison for the next row".into(),
    );
    report.row(
        &format!(
            "start_python + get_run (wait 30) until exited, stdio: median / p99 of {}",
            args.calls
        ),
        cell(&bg.background),
        "—".into(),
        "two calls; the poll answers when the run ends".into(),
    );
    report.row(
        &format!(
            "get_run long poll: script prints → answer, median / p99 of {}",
            bg.wake.len()
        ),
        cell(&bg.wake),
        "—".into(),
        "includes the script's own 1 ms polling of its go file".into(),
    );

    // 11. Python sessions: a warm exec.
    session_rows(&mut report, bin, &projects, &python_arg, args.calls).await?;

    drop(http);
    report.print(&format!(
        "{machine}\n\nScript: `{SCRIPT}`, same interpreter everywhere."
    ));
    Ok(())
}

/// Server memory with `n` idle legacy-SSE sessions, each on a fresh server, as RSS and as bytes
/// per session over the idle server's.
async fn sse_session_rows(
    report: &mut Report,
    bin: &Path,
    projects: &Path,
    python_arg: &[&str],
    n: usize,
) -> anyhow::Result<()> {
    let args = [
        python_arg,
        &["--max-sessions", "5000", "--max-connections", "5000"],
    ]
    .concat();
    let shared = reqwest::Client::new();
    for what in [
        "opened (GET /sse only)",
        "initialized, a client each",
        "initialized, one client",
    ] {
        let server = procs::start_pyrun_http(bin, projects, &args)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = rss_kib(server.pid()).map_or(0, |(r, _)| r);
        let with = match what {
            "opened (GET /sse only)" => idle_sse_rss(&server, n).await?,
            "initialized, a client each" => initialized_sse_rss_on(&server, n, None).await?,
            _ => initialized_sse_rss_on(&server, n, Some(&shared)).await?,
        };
        report.row(
            &format!("{n} legacy-SSE sessions, {what}: server RSS"),
            format!("{} → {}", mib(idle), mib(with)),
            "—".into(),
            format!(
                "{:.1} KiB per session",
                with.saturating_sub(idle) as f64 / n.max(1) as f64
            ),
        );
    }
    Ok(())
}

/// The Python session rows: `session_exec` of `1+1` over stdio, beside `run_python`.
/// list_packages of a venv with 200 packages over stdio (no run: its metadata is read).
async fn packages_row(
    report: &mut Report,
    bin: &Path,
    python: &Path,
    python_arg: &[&str],
    calls: usize,
) -> anyhow::Result<()> {
    let listing = packages::list_packages(bin, python, python_arg, calls).await?;
    report.row(
        &format!(
            "list_packages, {} packages (stdio, median / p99 of {calls})",
            packages::PACKAGES,
        ),
        format!("{} / {}", ms(listing.median()), ms(listing.p99())),
        "—".into(),
        "target ≤ 20 ms".into(),
    );
    Ok(())
}

async fn session_rows(
    report: &mut Report,
    bin: &Path,
    projects: &Path,
    extra: &[&str],
    calls: usize,
) -> anyhow::Result<()> {
    let cost = sessions::measure(bin, projects, extra, SCRIPT, calls).await?;
    let cell = |s: &Samples| format!("{} / {}", ms(s.median()), ms(s.p99()));
    report.row(
        &format!("session_exec `1+1` stdio: median / p99 of {calls}"),
        cell(&cost.exec),
        "—".into(),
        "one warm session; target ≤ 2 ms median".into(),
    );
    report.row(
        &format!(
            "run_python stdio, the same server: median / p99 of {}",
            cost.run_python.len()
        ),
        cell(&cost.run_python),
        "—".into(),
        "an interpreter start per call, for comparison".into(),
    );
    Ok(())
}

/// `calls` run_python calls, each followed by one raw spawn of the same script: the two sets of
/// samples see the same machine, so their difference is the server's overhead and not drift.
async fn sequential(
    session: &mut impl Session,
    calls: usize,
    python: &Path,
    projects: &Path,
) -> anyhow::Result<Timed> {
    sequential_of(session, SCRIPT, calls, python, projects).await
}

/// [`sequential`] for any script of the projects folder.
async fn sequential_of(
    session: &mut impl Session,
    script: &str,
    calls: usize,
    python: &Path,
    projects: &Path,
) -> anyhow::Result<Timed> {
    for id in 0..10 {
        session.run(1000 + id, script).await?;
    }
    let mut timed = Timed::default();
    for id in 0..calls as u64 {
        let t = Instant::now();
        session.run(2000 + id, script).await?;
        timed.calls.push(t.elapsed());
        let t = Instant::now();
        spawn_script(python, projects, script).await?;
        timed.raw.push(t.elapsed());
    }
    Ok(timed)
}

/// Calls and the raw spawns interleaved with them.
#[derive(Default)]
struct Timed {
    calls: Samples,
    raw: Samples,
}

impl Timed {
    fn cell(&self) -> String {
        let ratio = self.calls.median().as_secs_f64() / self.raw.median().as_secs_f64().max(1e-9);
        format!(
            "{} / {} ({ratio:.2}×; raw {})",
            ms(self.calls.median()),
            ms(self.calls.p99()),
            ms(self.raw.median())
        )
    }

    fn overhead_ms(&self) -> f64 {
        (self.calls.median().as_secs_f64() - self.raw.median().as_secs_f64()) * 1000.0
    }
}

async fn spawn_once(python: &Path, projects: &Path) -> anyhow::Result<()> {
    spawn_script(python, projects, SCRIPT).await
}

async fn spawn_script(python: &Path, projects: &Path, script: &str) -> anyhow::Result<()> {
    let out = tokio::process::Command::new(python)
        .arg(projects.join(script))
        .current_dir(projects)
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    anyhow::ensure!(out.status.success(), "raw python failed");
    Ok(())
}

async fn raw_spawns(python: &Path, projects: &Path, n: usize) -> anyhow::Result<Samples> {
    for _ in 0..10 {
        spawn_once(python, projects).await?;
    }
    let mut samples = Samples::default();
    for _ in 0..n {
        let t = Instant::now();
        spawn_once(python, projects).await?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

async fn raw_ceiling(
    python: &Path,
    projects: &Path,
    workers: usize,
    secs: u64,
) -> anyhow::Result<f64> {
    let end = Instant::now() + Duration::from_secs(secs);
    let tasks = (0..workers).map(|_| {
        let (python, projects) = (python.to_path_buf(), projects.to_path_buf());
        tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                spawn_once(&python, &projects).await?;
                n += 1;
            }
            Ok::<_, anyhow::Error>(n)
        })
    });
    let mut total = 0;
    for r in futures::future::join_all(tasks).await {
        total += r??;
    }
    Ok(total as f64 / secs as f64)
}

struct Load {
    rate: f64,
    samples: Samples,
}

/// The HTTP transport a load run drives.
#[derive(Clone, Copy)]
enum Route {
    Mcp,
    Sse,
}

async fn load_http(base: &str, route: Route, clients: usize, secs: u64) -> anyhow::Result<Load> {
    let end = Instant::now() + Duration::from_secs(secs);
    let tasks = (0..clients).map(|c| {
        let base = base.to_owned();
        tokio::spawn(async move {
            let first_id = (c as u64) << 32;
            match route {
                Route::Mcp => {
                    let url = format!("{base}/mcp");
                    let mut session = StreamableHttpSession::start(&url, &[]).await?;
                    calls_until(&mut session, first_id, end).await
                }
                Route::Sse => {
                    let mut session = SseSession::start(&base, "/sse").await?;
                    calls_until(&mut session, first_id, end).await
                }
            }
        })
    });
    let mut all = Samples::default();
    for r in futures::future::join_all(tasks).await {
        all.extend(r??);
    }
    Ok(Load {
        rate: all.len() as f64 / secs as f64,
        samples: all,
    })
}

/// One client's back-to-back calls until `end`.
async fn calls_until<S: Session>(
    session: &mut S,
    mut id: u64,
    end: Instant,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::default();
    while Instant::now() < end {
        id += 1;
        let t = Instant::now();
        session.run(id, SCRIPT).await?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

async fn idle_rss(bin: &Path, projects: &Path, python_arg: &[&str]) -> anyhow::Result<u64> {
    let server = procs::start_pyrun_http(bin, projects, python_arg)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(rss_kib(server.pid()).map(|(rss, _)| rss).unwrap_or(0))
}

async fn idle_sse_rss(server: &Server, n: usize) -> anyhow::Result<u64> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let url = format!("{}/sse", server.base_url);
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        open.push(drivers::open_idle_sse(&client, &url).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = rss_kib(server.pid()).map(|(rss, _)| rss).unwrap_or(0);
    drop(open);
    Ok(rss)
}

/// Server RSS with `n` SSE sessions that each initialized, then stay idle.
async fn initialized_sse_rss(server: &Server, n: usize) -> anyhow::Result<u64> {
    initialized_sse_rss_on(server, n, None).await
}

/// [`initialized_sse_rss`], the sessions' clients all `client` when given (one pool of POST
/// connections), else each its own (a POST connection per session, as separate clients keep).
async fn initialized_sse_rss_on(
    server: &Server,
    n: usize,
    client: Option<&reqwest::Client>,
) -> anyhow::Result<u64> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let client = client.cloned().unwrap_or_default();
        open.push(SseSession::start_on(client, &server.base_url, "/sse").await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = rss_kib(server.pid()).map(|(rss, _)| rss).unwrap_or(0);
    drop(open);
    Ok(rss)
}

async fn output_growth(stdio: &mut StdioSession) -> anyhow::Result<u64> {
    let pid = stdio.pid();
    procs::reset_peak(pid);
    let (before, _) = rss_kib(pid).context("reading server memory")?;
    stdio.run(9_000_000, "flood.py").await?;
    let (_, peak) = rss_kib(pid).context("reading server memory")?;
    Ok(peak.saturating_sub(before))
}

async fn sandbox_cost(bin: &Path, projects: &Path, python_arg: &[&str], calls: usize) -> String {
    let start = |mode: &'static str| async move {
        let extra = [python_arg, &["--sandbox", mode]].concat();
        StdioSession::start(bin, projects, &extra).await
    };
    let measure = async {
        let (mut off, mut on) = (start("off").await?, start("standard").await?);
        // Interleaved, one call each in turn: both servers see the same machine.
        let (mut t_off, mut t_on) = (Samples::default(), Samples::default());
        for id in 0..(calls + 10) as u64 {
            let t = Instant::now();
            off.run(5000 + id, SCRIPT).await?;
            let between = Instant::now();
            on.run(5000 + id, SCRIPT).await?;
            if id >= 10 {
                t_off.push(between - t);
                t_on.push(between.elapsed());
            }
        }
        Ok::<_, anyhow::Error>((t_off, t_on))
    };
    match measure.await {
        Ok((off, on)) => {
            let diff = on.median().as_secs_f64() - off.median().as_secs_f64();
            format!(
                "{:+.2} ms (off {}, standard {}; interleaved)",
                diff * 1000.0,
                ms(off.median()),
                ms(on.median())
            )
        }
        Err(e) => format!("n/a ({e})"),
    }
}

struct Baseline {
    mcp: Timed,
    sse: Timed,
    load: Load,
    sse_load: Load,
    idle_rss: u64,
    load_peak: u64,
    sessions: String,
    initialized: String,
}

impl Baseline {
    async fn measure(
        py: &Path,
        script: &Path,
        projects: &Path,
        python: &Path,
        args: &Args,
    ) -> anyhow::Result<Self> {
        eprintln!("FastMCP baseline…");
        let http = procs::start_fastmcp(py, script, projects, "http", python).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle_rss = rss_kib(http.pid()).map(|(r, _)| r).unwrap_or(0);
        let mut mcp = StreamableHttpSession::start(&format!("{}/mcp", http.base_url), &[]).await?;
        let mcp_s = sequential(&mut mcp, args.calls, python, projects).await?;
        procs::reset_peak(http.pid());
        let load = load_http(&http.base_url, Route::Mcp, args.clients, args.load_secs).await?;
        let load_peak = rss_kib(http.pid()).map(|(_, h)| h).unwrap_or(0);
        drop(http);
        let sse_server = procs::start_fastmcp(py, script, projects, "sse", python).await?;
        let mut sse = SseSession::start(&sse_server.base_url, "/sse").await?;
        let sse_s = sequential(&mut sse, args.calls, python, projects).await?;
        let sse_load = load_http(
            &sse_server.base_url,
            Route::Sse,
            args.clients,
            args.load_secs,
        )
        .await?;
        drop(sse_server);
        // Fresh servers, as for pyrun-mcp.
        let fresh = || procs::start_fastmcp(py, script, projects, "sse", python);
        let sessions = async { idle_sse_rss(&fresh().await?, args.idle_sessions).await }
            .await
            .map_or_else(|e| format!("failed: {e}"), mib);
        let initialized = async { initialized_sse_rss(&fresh().await?, args.idle_sessions).await }
            .await
            .map_or_else(|e| format!("failed: {e}"), mib);
        Ok(Self {
            mcp: mcp_s,
            sse: sse_s,
            load,
            sse_load,
            idle_rss,
            load_peak,
            sessions,
            initialized,
        })
    }
}

/// The baseline a user would pick instead: a minimal FastMCP server with the same tool, running the
/// same interpreter (`sys.argv[4]`) on the same folder.
const FASTMCP_BASELINE: &str = r#"
import os, subprocess, sys
from fastmcp import FastMCP

transport, port, projects = sys.argv[1], int(sys.argv[2]), os.path.realpath(sys.argv[3])
interpreter = sys.argv[4] if len(sys.argv) > 4 else sys.executable
mcp = FastMCP("baseline")


@mcp.tool()
def run_python(file_name: str) -> str:
    """Run a Python file of the projects folder."""
    path = os.path.realpath(os.path.join(projects, file_name))
    if not path.startswith(projects + os.sep):
        raise ValueError("outside the projects folder")
    p = subprocess.run([interpreter, path], capture_output=True, text=True, timeout=30,
                       cwd=os.path.dirname(path), stdin=subprocess.DEVNULL)
    out = p.stdout
    if p.stderr:
        out += "\n--- stderr ---\n" + p.stderr
    return out


if transport == "stdio":
    mcp.run(transport="stdio", show_banner=False)
else:
    mcp.run(transport=transport, host="127.0.0.1", port=port, show_banner=False)
"#;

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn machine_line(python: &Path) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let version = std::process::Command::new(python)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "Machine: {cpus} CPUs ({model}), {} {}, {version} at `{}`",
        std::env::consts::OS,
        std::env::consts::ARCH,
        python.display()
    )
}

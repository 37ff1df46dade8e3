//! The one current table (issue 40, item 5): every pattern a warm run must not lose in — back to
//! back over stdio, `/mcp` and `/sse`; 4 and 16 concurrent `/mcp` clients; a call while another
//! run burns both cores; numpy+pandas — with warm runs on (the default) and `--warm off` in one
//! sitting, calls interleaved, beside raw python and the FastMCP baseline; an assistant's pace;
//! CPU per call; server memory. `scripts/bench.sh` prints it and can write it into a page.

mod lane;
mod render;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use lane::{Caller, Cpu, Ids, Series};
use render::Lanes;

use crate::drivers::{SseSession, StdioSession, StreamableHttpSession};
use crate::procs::{self, mib};
use crate::warm::{NpWorkspace, NP_SCRIPT};
use crate::HTTP_LOAD_LIMITS;

pub struct Options<'a> {
    pub python: &'a Path,
    /// `--python` and any extra arguments for every pyrun server.
    pub server_args: &'a [&'a str],
    pub fastmcp_python: Option<&'a Path>,
    pub baseline_script: &'a Path,
    /// The numpy+pandas venv and its base interpreter; without them those rows are left out.
    pub workload: Option<(PathBuf, PathBuf)>,
    pub quick: bool,
    pub idle_sessions: usize,
}

const HELLO: &str = "hello_world.py";
const BURN: &str = "burn_two_cores.py";
/// Two processes spinning for 300 ms: a run that uses both cores.
const BURN_SOURCE: &str = "import os, time\n\ndef spin(s):\n    end = time.perf_counter() + s\n    while time.perf_counter() < end:\n        pass\n\npid = os.fork()\nspin(0.3)\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nprint(\"burnt\")\n";

/// Counts for a sitting.
struct Counts {
    rounds: usize,
    block: usize,
    load_rounds: usize,
    load_secs: Duration,
    burn_rounds: usize,
    paced: usize,
    np_rounds: usize,
    np_paced: usize,
}

impl Counts {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                rounds: 6,
                block: 5,
                load_rounds: 2,
                load_secs: Duration::from_secs(1),
                burn_rounds: 10,
                paced: 10,
                np_rounds: 2,
                np_paced: 6,
            }
        } else {
            Self {
                rounds: 8,
                block: 5,
                load_rounds: 4,
                load_secs: Duration::from_secs(2),
                burn_rounds: 30,
                paced: 30,
                np_rounds: 6,
                np_paced: 30,
            }
        }
    }
}

/// The FastMCP baseline's three servers (stdio, Streamable HTTP, SSE).
struct Baseline {
    stdio: Caller,
    stdio_pid: u32,
    http: procs::Server,
    sse: procs::Server,
}

fn fastmcp_stdio(
    py: &Path,
    script: &Path,
    projects: &Path,
    interpreter: &Path,
) -> anyhow::Result<(Caller, u32)> {
    let child = std::process::Command::new(py)
        .arg(script)
        .args(["stdio", "0"])
        .arg(projects)
        .arg(interpreter)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the FastMCP baseline over stdio")?;
    let session = StdioSession::attach(child)?;
    let pid = session.pid();
    Ok((Caller::Stdio(session), pid))
}

async fn mcp(server: &procs::Server) -> anyhow::Result<Caller> {
    Ok(Caller::Mcp(
        StreamableHttpSession::start(&format!("{}/mcp", server.base_url), &[]).await?,
    ))
}

fn pick(series: &mut Vec<Series>, n: usize) -> Vec<Option<Series>> {
    let mut out: Vec<Option<Series>> = series.drain(..).map(Some).collect();
    out.resize(n, None);
    out
}

/// Lanes in the table's order: warm, cold, raw, then FastMCP when there is one.
fn lanes_of(mut series: Vec<Series>) -> Lanes {
    let mut v = pick(&mut series, 4).into_iter();
    Lanes {
        warm: v.next().flatten(),
        cold: v.next().flatten(),
        raw: v.next().flatten(),
        fastmcp: v.next().flatten(),
    }
}

fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Measures every row; returns the markdown (a line on the sitting, the table, how to read it).
pub async fn measure(projects: &Path, bin: &Path, opts: &Options<'_>) -> anyhow::Result<String> {
    let n = Counts::new(opts.quick);
    std::fs::write(projects.join(BURN), BURN_SOURCE)?;
    let load_start = load_avg();
    let commit = command_line("git", &["rev-parse", "--short", "HEAD"]);
    let started = Instant::now();
    let mut ids = Ids::new();
    let mut rows = Vec::new();
    let mut row = |pattern: String, lanes: Lanes| {
        let cells = render::cells(&pattern, &lanes);
        eprintln!("  {}", cells.join(" | "));
        rows.push(cells);
    };
    let cold_args = [opts.server_args, &["--warm", "off"]].concat();
    let warm_http_args = [opts.server_args, &HTTP_LOAD_LIMITS].concat();
    let cold_http_args = [&cold_args[..], &HTTP_LOAD_LIMITS].concat();

    // The servers, alive for the whole sitting (so that the raw spawns' CPU, the bench's own
    // reaped children, holds nothing else).
    let mut warm_stdio = Caller::Stdio(StdioSession::start(bin, projects, opts.server_args).await?);
    let mut cold_stdio = Caller::Stdio(StdioSession::start(bin, projects, &cold_args).await?);
    let warm_stdio_pid = pid_of(&warm_stdio);
    let cold_stdio_pid = pid_of(&cold_stdio);
    let warm_http = procs::start_pyrun_http(bin, projects, &warm_http_args)?;
    let cold_http = procs::start_pyrun_http(bin, projects, &cold_http_args)?;
    let raw = || Caller::Raw {
        python: opts.python.to_path_buf(),
        dir: projects.to_path_buf(),
    };
    let mut baseline = match opts.fastmcp_python {
        Some(py) => {
            eprintln!("starting the FastMCP baseline…");
            let (stdio, stdio_pid) =
                fastmcp_stdio(py, opts.baseline_script, projects, opts.python)?;
            let http =
                procs::start_fastmcp(py, opts.baseline_script, projects, "http", opts.python)
                    .await?;
            let sse = procs::start_fastmcp(py, opts.baseline_script, projects, "sse", opts.python)
                .await?;
            Some(Baseline {
                stdio,
                stdio_pid,
                http,
                sse,
            })
        }
        None => None,
    };
    let (wp, cp) = (Cpu::Server(warm_http.pid()), Cpu::Server(cold_http.pid()));
    let settle = Duration::from_millis(300);

    // 1. Back to back, per transport.
    {
        let mut raw_c = raw();
        let mut lanes: Vec<(&mut Caller, Cpu)> = vec![
            (&mut warm_stdio, Cpu::Server(warm_stdio_pid)),
            (&mut cold_stdio, Cpu::Server(cold_stdio_pid)),
            (&mut raw_c, Cpu::Children),
        ];
        if let Some(b) = baseline.as_mut() {
            lanes.push((&mut b.stdio, Cpu::Server(b.stdio_pid)));
        }
        let s = lane::back_to_back(&mut lanes, HELLO, n.rounds, n.block, settle, &mut ids).await?;
        row(
            format!("stdio, back to back ({} × {} calls)", n.rounds, n.block),
            lanes_of(s),
        );
    }
    for (route, label) in [("mcp", "`/mcp`, 1 client"), ("sse", "legacy `/sse`")] {
        let connect = |s: &procs::Server| {
            let url = s.base_url.clone();
            async move {
                if route == "mcp" {
                    Ok::<_, anyhow::Error>(Caller::Mcp(
                        StreamableHttpSession::start(&format!("{url}/mcp"), &[]).await?,
                    ))
                } else {
                    Ok(Caller::Sse(SseSession::start(&url, "/sse").await?))
                }
            }
        };
        let mut w = connect(&warm_http).await?;
        let mut c = connect(&cold_http).await?;
        let mut r = raw();
        let mut f = match &baseline {
            Some(b) => Some(connect(if route == "mcp" { &b.http } else { &b.sse }).await?),
            None => None,
        };
        let mut lanes: Vec<(&mut Caller, Cpu)> =
            vec![(&mut w, wp), (&mut c, cp), (&mut r, Cpu::Children)];
        if let (Some(f), Some(b)) = (f.as_mut(), &baseline) {
            let pid = if route == "mcp" {
                b.http.pid()
            } else {
                b.sse.pid()
            };
            lanes.push((f, Cpu::Server(pid)));
        }
        let s = lane::back_to_back(&mut lanes, HELLO, n.rounds, n.block, settle, &mut ids).await?;
        row(
            format!("{label}, back to back ({} × {} calls)", n.rounds, n.block),
            lanes_of(s),
        );
    }

    // 2. Concurrent /mcp clients.
    for clients in [4usize, 16] {
        let mut lanes: Vec<(Vec<Caller>, Cpu)> = Vec::new();
        for (server, cpu) in [(&warm_http, wp), (&cold_http, cp)] {
            let mut v = Vec::new();
            for _ in 0..clients {
                v.push(mcp(server).await?);
            }
            lanes.push((v, cpu));
        }
        lanes.push(((0..clients).map(|_| raw()).collect(), Cpu::Children));
        if let Some(b) = &baseline {
            let mut v = Vec::new();
            for _ in 0..clients {
                v.push(mcp(&b.http).await?);
            }
            lanes.push((v, Cpu::Server(b.http.pid())));
        }
        let s = lane::concurrent(&mut lanes, HELLO, n.load_rounds, n.load_secs, settle).await?;
        row(
            format!(
                "`/mcp`, {clients} concurrent clients ({} × {} s each; raw: {clients} spawning workers)",
                n.load_rounds,
                n.load_secs.as_secs()
            ),
            lanes_of(s),
        );
    }

    // 3. A call while another run burns both cores.
    {
        let mut lanes: Vec<(Caller, Caller, Cpu)> = vec![
            (mcp(&warm_http).await?, mcp(&warm_http).await?, wp),
            (mcp(&cold_http).await?, mcp(&cold_http).await?, cp),
            (raw(), raw(), Cpu::Children),
        ];
        if let Some(b) = &baseline {
            lanes.push((
                mcp(&b.http).await?,
                mcp(&b.http).await?,
                Cpu::Server(b.http.pid()),
            ));
        }
        let s = lane::under_burn(
            &mut lanes,
            HELLO,
            BURN,
            n.burn_rounds,
            Duration::from_millis(50),
            &mut ids,
        )
        .await?;
        row(
            format!(
                "`/mcp`, a call 50 ms into another run that spins both cores for 0.3 s (n = {})",
                n.burn_rounds
            ),
            lanes_of(s),
        );
    }

    // 4. An assistant's pace over stdio.
    let ticks: Vec<Duration> = [500, 750, 1000, 625, 875]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    {
        let mut raw_c = raw();
        let mut lanes: Vec<(&mut Caller, Cpu)> = vec![
            (&mut warm_stdio, Cpu::Server(warm_stdio_pid)),
            (&mut cold_stdio, Cpu::Server(cold_stdio_pid)),
            (&mut raw_c, Cpu::Children),
        ];
        let s = lane::paced(&mut lanes, HELLO, n.paced, &ticks, &mut ids).await?;
        row(
            format!(
                "**an assistant's pace**: stdio, a call every 0.5–1 s (n = {})",
                n.paced
            ),
            lanes_of(s),
        );
    }

    // 5. numpy + pandas in a venv.
    if let Some((venv, base)) = &opts.workload {
        for (pattern, lanes) in numpy_rows(bin, venv, base, opts, &n, &mut ids).await? {
            row(pattern, lanes);
        }
    }

    // 6. Memory.
    let tree = |pid: u32| {
        let m = crate::warm::tree_mem(pid);
        format!(
            "{} (+ {} in {} processes under it)",
            mib(m.server_rss),
            mib(m.children_rss),
            m.children
        )
    };
    let fastmcp_rss = baseline
        .as_ref()
        .and_then(|b| procs::rss_kib(b.http.pid()))
        .map_or("—".to_owned(), |(rss, _)| mib(rss));
    rows.push([
        "server memory (RSS) after the `/mcp` rows above".into(),
        tree(warm_http.pid()),
        tree(cold_http.pid()),
        String::new(),
        String::new(),
        "—".into(),
        fastmcp_rss,
        String::new(),
    ]);
    let load_end = load_avg();
    let took = started.elapsed();
    drop(baseline);
    let sessions = {
        let fresh = procs::start_pyrun_http(bin, projects, &warm_http_args)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = procs::rss_kib(fresh.pid()).map_or(0, |(r, _)| r);
        let with = crate::initialized_sse_rss(&fresh, opts.idle_sessions).await?;
        (idle, with)
    };
    let fastmcp_sessions = match opts.fastmcp_python {
        Some(py) => {
            let s = procs::start_fastmcp(py, opts.baseline_script, projects, "sse", opts.python)
                .await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let idle = procs::rss_kib(s.pid()).map_or(0, |(r, _)| r);
            let with = crate::initialized_sse_rss(&s, opts.idle_sessions).await?;
            format!("{} → {}", mib(idle), mib(with))
        }
        None => "—".into(),
    };
    rows.push([
        format!(
            "server memory (RSS): idle → {} initialized idle `/sse` sessions",
            opts.idle_sessions
        ),
        format!("{} → {}", mib(sessions.0), mib(sessions.1)),
        "— (not a warm-run figure)".into(),
        String::new(),
        String::new(),
        "—".into(),
        fastmcp_sessions,
        String::new(),
    ]);
    drop((warm_http, cold_http, warm_stdio, cold_stdio));

    let mut out = String::new();
    out.push_str(&format!(
        "{}, commit {}, {} UTC; load average {} at the start, {} at the end; {:.0} s{}.\n\n",
        crate::machine_line(opts.python),
        commit,
        command_line("date", &["-u", "+%Y-%m-%d %H:%M"]),
        load_start,
        load_end,
        took.as_secs_f64(),
        if opts.quick { ", `--quick`" } else { "" }
    ));
    out.push_str(&render::markdown(&rows));
    out.push_str(READING);
    Ok(out)
}

/// How to read the table, printed under it.
const READING: &str = "
Each row's lanes ran in one sitting, interleaved: back to back, every lane in turn made a block of
calls one after the other (the first of each block, after the other lanes' turn, not counted; then
all rested 0.3 s), in an order that turns each round, so that pair *i* of two lanes is the same
round and place. **warm ÷ off** is the ratio of the p50s (below 1: warm runs are faster; in
brackets the interquartile range of the per-pair ratios, the spread of the sitting); for the
concurrent rows it is the time per call (the inverse of calls per second). **off − raw** is the
median of the per-pair differences: what the server adds to a cold run. CPU per call counts the
server and everything it reaped (runs, spares), every call of the row. FastMCP: a minimal FastMCP
server with the same `run_python` tool (a subprocess of the same interpreter).
";

fn pid_of(c: &Caller) -> u32 {
    match c {
        Caller::Stdio(s) => s.pid(),
        _ => 0,
    }
}

fn command_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "?".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )
}

/// The numpy+pandas rows: back to back and at a slower pace (a call every 1.5–2 s: the
/// interpreter's own start is ~0.5 s), warm and cold against the venv's python.
async fn numpy_rows(
    bin: &Path,
    venv: &Path,
    base: &Path,
    opts: &Options<'_>,
    n: &Counts,
    ids: &mut Ids,
) -> anyhow::Result<Vec<(String, Lanes)>> {
    let work = NpWorkspace::make(venv)?;
    let (projects, cache, venv_python) = (
        work.projects.clone(),
        work.cache.clone(),
        work.venv_python.clone(),
    );
    let base_s = base.to_str().context("base interpreter path")?;
    let warm_args = ["--python", base_s];
    let cold_args = ["--python", base_s, "--warm", "off"];
    let env: [(&str, &Path); 1] = [("XDG_CACHE_HOME", &cache)];
    let w = StdioSession::start_with(bin, &projects, &warm_args, &env, "warn", None).await?;
    let c = StdioSession::start_with(bin, &projects, &cold_args, &env, "warn", None).await?;
    let (w_pid, c_pid) = (w.pid(), c.pid());
    let mut warm = Caller::Stdio(w);
    let mut cold = Caller::Stdio(c);
    let mut raw = Caller::Raw {
        python: venv_python.clone(),
        dir: projects.clone(),
    };
    let (mut fastmcp, f_pid) = match opts.fastmcp_python {
        Some(py) => {
            let (c, pid) = fastmcp_stdio(py, opts.baseline_script, &projects, &venv_python)?;
            (Some(c), pid)
        }
        None => (None, 0),
    };
    // The first runs start the background compile of the stdlib's and the venv's bytecode.
    let t = Instant::now();
    warm.call(ids.next(), NP_SCRIPT).await?;
    cold.call(ids.next(), NP_SCRIPT).await?;
    while !(crate::warm::venv_cached(&cache, &projects.join(".venv"))
        && crate::warm::stdlib_filled(&cache))
    {
        if t.elapsed() > Duration::from_secs(600) {
            bail!("the venv's bytecode was not cached within 10 min");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "numpy+pandas: the venv's bytecode cached {:.0} s after the first run",
        t.elapsed().as_secs_f64()
    );
    let mut out = Vec::new();
    {
        let mut lanes: Vec<(&mut Caller, Cpu)> = vec![
            (&mut warm, Cpu::Server(w_pid)),
            (&mut cold, Cpu::Server(c_pid)),
            (&mut raw, Cpu::Children),
        ];
        if let Some(f) = fastmcp.as_mut() {
            lanes.push((f, Cpu::Server(f_pid)));
        }
        let s = lane::back_to_back(
            &mut lanes,
            NP_SCRIPT,
            n.np_rounds,
            n.block,
            Duration::from_secs(1),
            ids,
        )
        .await?;
        out.push((
            format!(
                "numpy+pandas (venv), stdio, back to back ({} × {} calls)",
                n.np_rounds, n.block
            ),
            lanes_of(s),
        ));
    }
    {
        let ticks: Vec<Duration> = [1500, 2000, 1750]
            .into_iter()
            .map(Duration::from_millis)
            .collect();
        let mut lanes: Vec<(&mut Caller, Cpu)> = vec![
            (&mut warm, Cpu::Server(w_pid)),
            (&mut cold, Cpu::Server(c_pid)),
            (&mut raw, Cpu::Children),
        ];
        let s = lane::paced(&mut lanes, NP_SCRIPT, n.np_paced, &ticks, ids).await?;
        out.push((
            format!(
                "**numpy+pandas at an assistant's pace**: stdio, a call every 1.5–2 s (n = {})",
                n.np_paced
            ),
            lanes_of(s),
        ));
    }
    drop((warm, cold, fastmcp));
    Ok(out)
}

/// Replaces the text between the table's markers in `page` with `table`.
pub fn write_into(page: &Path, table: &str) -> anyhow::Result<()> {
    const START: &str = "<!-- bench-table:start -->";
    const END: &str = "<!-- bench-table:end -->";
    let text = std::fs::read_to_string(page)?;
    let (Some(a), Some(b)) = (text.find(START), text.find(END)) else {
        bail!("{} has no {START} … {END} markers", page.display());
    };
    anyhow::ensure!(a < b, "{}: the markers are out of order", page.display());
    let new = format!("{}{START}\n{table}{}", &text[..a], &text[b..]);
    std::fs::write(page, new)?;
    Ok(())
}

//! Warm runs (issue 30): `run_python` in a pre-started spare against a cold run (`--warm off`)
//! and the raw `python SCRIPT`, in one sitting. `hello_world.py` at an assistant's cadence and
//! back to back, over stdio and `/mcp`; a numpy+pandas script in a venv at cadence; CPU per run
//! (the server and all its children); memory of the server and its spares; and the unsandboxed
//! fork limit (a warm interpreter that forks per run) for comparison.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::drivers::{run_call, structured, Session, StdioSession, StreamableHttpSession};
use crate::procs::{self, mib};
use crate::stats::{ms, Samples};

pub struct Options {
    /// Calls per server at the cadence.
    pub cadence_calls: usize,
    /// Time between two calls to one server at the cadence.
    pub cadence: Duration,
    /// Back-to-back calls per server.
    pub back_to_back: usize,
    /// Runs before the memory figure.
    pub memory_runs: usize,
    /// The numpy+pandas venv (hard-linked into the projects copy as `.venv`) and its base
    /// interpreter; without them the numpy rows are left out.
    pub workload: Option<(PathBuf, PathBuf)>,
    /// numpy+pandas calls per server at the cadence.
    pub workload_calls: usize,
    /// Servers' debug logs go here when given (the warm stdio servers' only).
    pub log_dir: Option<PathBuf>,
}

/// The numpy+pandas script.
/// The numpy+pandas script the benches run, by name and source.
pub(crate) const NP_SCRIPT: &str = "np_pandas.py";
pub(crate) const NP_SOURCE: &str = "import numpy, pandas\n\ndf = pandas.DataFrame({\"x\": numpy.arange(1000)})\nprint(int(df[\"x\"].sum()))\n";

/// The fork limit: an interpreter that imported `argv[2]` (comma-separated) and froze its heap
/// forks `argv[3]` times; each child runs `argv[1]` as `__main__` with its output on a pipe the
/// parent drains, and exits normally (`argv[4]` "exit") or with `os._exit` ("_exit"). Prints
/// the wall times in ms, one per line.
const FORK_HARNESS: &str = r#"
import gc, os, sys, time
script, mods, n, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for m in filter(None, mods.split(",")):
    __import__(m)
gc.collect()
gc.freeze()
times = []
for _ in range(n + 5):
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        with open(script, "rb") as f:
            code = compile(f.read(), script, "exec")
        exec(code, {"__name__": "__main__", "__file__": script, "__builtins__": __builtins__})
        sys.stdout.flush()
        if how == "_exit":
            os._exit(0)
        sys.exit(0)
    os.close(w)
    while os.read(r, 65536):
        pass
    os.waitpid(pid, 0)
    times.append(time.perf_counter() - t)
    os.close(r)
sys.stdout.write("\n".join("%.4f" % (x * 1000) for x in times[5:]) + "\n")
"#;

/// One server under measurement.
struct Server<S> {
    name: &'static str,
    session: S,
    pid: u32,
    samples: Samples,
    warm: usize,
}

impl<S: Session> Server<S> {
    fn new(name: &'static str, session: S, pid: u32) -> Self {
        Self {
            name,
            session,
            pid,
            samples: Samples::default(),
            warm: 0,
        }
    }

    /// One timed call; counts it warm when its result says so.
    async fn call(&mut self, id: u64, script: &str) -> anyhow::Result<()> {
        let t = Instant::now();
        let reply = self.session.request(run_call(id, script)).await?;
        let took = t.elapsed();
        let result = structured(&reply)?;
        if result.get("exit_code") != Some(&Value::from(0)) {
            bail!("{}: the run failed: {reply}", self.name);
        }
        self.samples.push(took);
        if result.get("warm") == Some(&Value::Bool(true)) {
            self.warm += 1;
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.samples = Samples::default();
        self.warm = 0;
    }
}

/// A table row: what, median / p90, ratio to raw, note.
pub struct Row(pub String, pub String, pub String, pub String);

fn cell(s: &Samples) -> String {
    format!("{} / {}", ms(s.median()), ms(s.p90()))
}

fn ratio(s: &Samples, raw: &Samples) -> String {
    format!(
        "{:.2}×",
        s.median().as_secs_f64() / raw.median().as_secs_f64().max(1e-9)
    )
}

/// CPU time (user + system, ms) of a process and its waited-for descendants.
pub(crate) fn cpu_ms(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3; utime 14, stime 15, cutime 16, cstime 17.
    let ticks: f64 = fields[11..15]
        .iter()
        .map(|f| f.parse::<f64>().unwrap_or(0.0))
        .sum();
    Some(ticks * 1000.0 / 100.0)
}

/// The bench's own waited-for children's CPU (ms): the raw spawns.
pub(crate) fn children_cpu_ms() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some((_, after)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[13..15]
        .iter()
        .map(|f| f.parse::<f64>().unwrap_or(0.0))
        .sum::<f64>()
        * 10.0
}

/// Memory of a process tree: the root's RSS, and the RSS and PSS (KiB) of its descendants.
pub(crate) struct TreeMem {
    pub server_rss: u64,
    server_pss: u64,
    pub children: usize,
    pub children_rss: u64,
    children_pss: u64,
    pythons: usize,
}

fn field_kib(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .map(|t| field_kib(&t, "Pss:"))
        .unwrap_or(0)
}

fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, a)| a.split_whitespace().nth(1)?.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

pub(crate) fn tree_mem(root: u32) -> TreeMem {
    let kids = descendants(root);
    let status =
        |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let pythons = kids
        .iter()
        .filter(|&&p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim().starts_with("python"))
        })
        .count();
    TreeMem {
        server_rss: field_kib(&status(root), "VmRSS:"),
        server_pss: pss_kib(root),
        children: kids.len(),
        children_rss: kids.iter().map(|&p| field_kib(&status(p), "VmRSS:")).sum(),
        children_pss: kids.iter().map(|&p| pss_kib(p)).sum(),
        pythons,
    }
}

fn mem_cell(m: &TreeMem) -> String {
    format!(
        "server {} (PSS {}); {} processes under it ({} python): RSS {}, PSS {}; total RSS {}",
        mib(m.server_rss),
        mib(m.server_pss),
        m.children,
        m.pythons,
        mib(m.children_rss),
        mib(m.children_pss),
        mib(m.server_rss + m.children_rss)
    )
}

async fn raw(python: &Path, dir: &Path, script: &str) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let out = tokio::process::Command::new(python)
        .arg(dir.join(script))
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    let took = t.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "raw {} failed: {}",
        script,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(took)
}

/// The machine's 1-minute load average.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A stdio server, and its debug log when a log folder is given.
async fn stdio(
    bin: &Path,
    projects: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    log: Option<PathBuf>,
) -> anyhow::Result<(StdioSession, u32)> {
    let (filter, file) = match &log {
        Some(f) => ("pyrun_run=debug,warn", Some(f.as_path())),
        None => ("warn", None),
    };
    let s = StdioSession::start_with(bin, projects, args, env, filter, file).await?;
    let pid = s.pid();
    Ok((s, pid))
}

pub async fn measure(
    bin: &Path,
    projects: &Path,
    python: &Path,
    python_arg: &[&str],
    opts: &Options,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut note = |what: &str, a: String, b: String, c: String| {
        eprintln!("  {what}: {a} | {b} | {c}");
        rows.push(Row(what.to_owned(), a, b, c));
    };
    let log = |name: &str| opts.log_dir.as_ref().map(|d| d.join(name));
    let warm_off = [python_arg, &["--warm", "off"]].concat();
    let warm_on = [python_arg, &["--warm", "on"]].concat();
    const HELLO: &str = "hello_world.py";
    eprintln!("load at start: {}", load());

    // 1. hello_world.py at an assistant's cadence: each server sees a call every `cadence`;
    // the servers' calls and the raw spawn are spread evenly over it.
    let (cold, cold_pid) = stdio(bin, projects, &warm_off, &[], None).await?;
    let (warm, warm_pid) = stdio(bin, projects, &warm_on, &[], log("warm-stdio.log")).await?;
    let http_cold = procs::start_pyrun_http(bin, projects, &warm_off)?;
    let http_warm = procs::start_pyrun_http(bin, projects, &warm_on)?;
    let mcp = |s: &procs::Server| format!("{}/mcp", s.base_url);
    let mut cold = Server::new("cold stdio", cold, cold_pid);
    let mut warm = Server::new("warm stdio", warm, warm_pid);
    let mut mcp_cold = Server::new(
        "cold /mcp",
        StreamableHttpSession::start(&mcp(&http_cold), &[]).await?,
        http_cold.pid(),
    );
    let mut mcp_warm = Server::new(
        "warm /mcp",
        StreamableHttpSession::start(&mcp(&http_warm), &[]).await?,
        http_warm.pid(),
    );
    let mut raw_s = Samples::default();
    let mut id = 1u64;
    // Warm-up: the probe, the first (learning) run, the first spare.
    for _ in 0..3 {
        raw(python, projects, HELLO).await?;
        cold.call(id, HELLO).await?;
        warm.call(id, HELLO).await?;
        mcp_cold.call(id, HELLO).await?;
        mcp_warm.call(id, HELLO).await?;
        id += 1;
        tokio::time::sleep(opts.cadence).await;
    }
    for s in [&mut cold, &mut warm] {
        s.reset();
    }
    mcp_cold.reset();
    mcp_warm.reset();
    let step = opts.cadence / 5;
    let pids = [cold.pid, warm.pid, mcp_cold.pid, mcp_warm.pid];
    let cpu_before: Vec<f64> = pids
        .iter()
        .map(|p| cpu_ms(&p.to_string()).unwrap_or(0.0))
        .collect();
    let raw_cpu_before = children_cpu_ms();
    let mut loads = vec![load()];
    for i in 0..opts.cadence_calls {
        let tick = Instant::now();
        raw_s.push(raw(python, projects, HELLO).await?);
        tokio::time::sleep_until((tick + step).into()).await;
        cold.call(id, HELLO).await?;
        tokio::time::sleep_until((tick + step * 2).into()).await;
        warm.call(id, HELLO).await?;
        tokio::time::sleep_until((tick + step * 3).into()).await;
        mcp_cold.call(id, HELLO).await?;
        tokio::time::sleep_until((tick + step * 4).into()).await;
        mcp_warm.call(id, HELLO).await?;
        tokio::time::sleep_until((tick + opts.cadence).into()).await;
        id += 1;
        if i % 10 == 9 {
            loads.push(load());
        }
    }
    let n = opts.cadence_calls as f64;
    let raw_cpu = (children_cpu_ms() - raw_cpu_before) / n;
    let cpu: Vec<f64> = pids
        .iter()
        .zip(&cpu_before)
        .map(|(p, b)| (cpu_ms(&p.to_string()).unwrap_or(0.0) - b) / n)
        .collect();
    let label = format!(
        "hello, cadence {} ms, n = {}",
        opts.cadence.as_millis(),
        opts.cadence_calls
    );
    note(
        &format!("raw `python3 hello_world.py` ({label})"),
        cell(&raw_s),
        "1".into(),
        format!("CPU {raw_cpu:.1} ms per run"),
    );
    for (i, s) in [&cold, &warm].into_iter().enumerate() {
        note(
            &format!("run_python {} ({label})", s.name),
            cell(&s.samples),
            ratio(&s.samples, &raw_s),
            format!(
                "{}/{} warm; CPU {:.1} ms per run (server + children)",
                s.warm,
                s.samples.len(),
                cpu[i]
            ),
        );
    }
    for (i, s) in [&mcp_cold, &mcp_warm].into_iter().enumerate() {
        note(
            &format!("run_python {} ({label})", s.name),
            cell(&s.samples),
            ratio(&s.samples, &raw_s),
            format!(
                "{}/{} warm; CPU {:.1} ms per run (server + children)",
                s.warm,
                s.samples.len(),
                cpu[2 + i]
            ),
        );
    }
    note(
        "load average during the cadence rows",
        loads.join(" → "),
        String::new(),
        String::new(),
    );

    // 2. Back to back: each server's calls one after the other, the raw spawns before and after.
    let n = opts.back_to_back;
    let mut raw_b = Samples::default();
    let before = children_cpu_ms();
    for _ in 0..n / 2 {
        raw_b.push(raw(python, projects, HELLO).await?);
    }
    let mut results: Vec<(&str, f64, Samples, usize)> = Vec::new();
    for s in [&mut cold, &mut warm] {
        s.reset();
        let c0 = cpu_ms(&s.pid.to_string()).unwrap_or(0.0);
        for _ in 0..n {
            s.call(id, HELLO).await?;
            id += 1;
        }
        let c = (cpu_ms(&s.pid.to_string()).unwrap_or(0.0) - c0) / n as f64;
        results.push((s.name, c, s.samples.clone(), s.warm));
    }
    for s in [&mut mcp_cold, &mut mcp_warm] {
        s.reset();
        let c0 = cpu_ms(&s.pid.to_string()).unwrap_or(0.0);
        for _ in 0..n {
            s.call(id, HELLO).await?;
            id += 1;
        }
        let c = (cpu_ms(&s.pid.to_string()).unwrap_or(0.0) - c0) / n as f64;
        results.push((s.name, c, s.samples.clone(), s.warm));
    }
    for _ in n / 2..n {
        raw_b.push(raw(python, projects, HELLO).await?);
    }
    let raw_cpu = (children_cpu_ms() - before) / n as f64;
    note(
        &format!("raw `python3 hello_world.py` (back to back, n = {n}, half before, half after)"),
        cell(&raw_b),
        "1".into(),
        format!("CPU {raw_cpu:.1} ms per run"),
    );
    for (name, c, samples, w) in &results {
        note(
            &format!("run_python {name} (back to back, n = {n})"),
            cell(samples),
            ratio(samples, &raw_b),
            format!(
                "{w}/{} warm; CPU {c:.1} ms per run (server + children)",
                samples.len()
            ),
        );
    }
    note("load average after", load(), String::new(), String::new());
    drop((mcp_cold, mcp_warm, http_cold, http_warm, cold));

    // 3. Memory of a fresh warm server: idle, after one run (its spare), after `memory_runs`.
    let (fresh, fresh_pid) = stdio(bin, projects, &warm_on, &[], None).await?;
    let mut fresh = Server::new("fresh warm stdio", fresh, fresh_pid);
    // After the sandbox probe (deferred by 100 ms, an interpreter start) is done.
    tokio::time::sleep(Duration::from_secs(3)).await;
    note(
        "memory: warm server idle after start",
        mem_cell(&tree_mem(fresh_pid)),
        String::new(),
        String::new(),
    );
    fresh.call(id, HELLO).await?;
    id += 1;
    tokio::time::sleep(Duration::from_secs(2)).await;
    note(
        "memory: after one run (its spare waiting)",
        mem_cell(&tree_mem(fresh_pid)),
        String::new(),
        String::new(),
    );
    for _ in 0..opts.memory_runs {
        fresh.call(id, HELLO).await?;
        id += 1;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    note(
        &format!(
            "memory: after {} hello runs back to back ({} warm)",
            opts.memory_runs, fresh.warm
        ),
        mem_cell(&tree_mem(fresh_pid)),
        format!("median {}", ms(fresh.samples.median())),
        String::new(),
    );
    let cold_mem = {
        let (c, pid) = stdio(bin, projects, &warm_off, &[], None).await?;
        let mut c = Server::new("cold", c, pid);
        c.call(id, HELLO).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        tree_mem(pid)
    };
    note(
        "memory: cold server after one run",
        mem_cell(&cold_mem),
        String::new(),
        String::new(),
    );
    drop((fresh, warm));

    // 4. The unsandboxed fork limit, hello.
    let harness = projects.join("fork_harness.py");
    std::fs::write(&harness, FORK_HARNESS)?;
    for how in ["exit", "_exit"] {
        let s = fork_limit(python, &harness, &projects.join(HELLO), "", how).await?;
        note(
            &format!("fork limit: warm interpreter forks, child runs hello ({how}), n = 100"),
            cell(&s),
            String::new(),
            "unsandboxed; no server".into(),
        );
    }

    // 5. numpy + pandas in the workload venv.
    if let Some((venv, base)) = &opts.workload {
        np_rows(bin, venv, base, opts, &mut note, &mut id).await?;
    }
    Ok(rows)
}

async fn fork_limit(
    python: &Path,
    harness: &Path,
    script: &Path,
    mods: &str,
    how: &str,
) -> anyhow::Result<Samples> {
    let out = tokio::process::Command::new(python)
        .arg(harness)
        .arg(script)
        .arg(mods)
        .arg("100")
        .arg(how)
        .current_dir(script.parent().context("script folder")?)
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "fork harness failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut s = Samples::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: f64 = line.trim().parse()?;
        s.push(Duration::from_secs_f64(v / 1000.0));
    }
    Ok(s)
}

/// Whether the server's background compile of the venv at `venv` is done: its stamp (first
/// line the fingerprint, second the venv's host folder) anywhere in the cache.
pub(crate) fn venv_cached(cache: &Path, venv: &Path) -> bool {
    let Ok(interps) = std::fs::read_dir(cache.join("pyrun-mcp/bytecode")) else {
        return false;
    };
    interps.flatten().any(|i| {
        std::fs::read_to_string(i.path().join("projects/.venv/.pyrun-venv"))
            .is_ok_and(|t| t.lines().nth(1) == venv.to_str())
    })
}

pub(crate) fn stdlib_filled(cache: &Path) -> bool {
    std::fs::read_dir(cache.join("pyrun-mcp/bytecode")).is_ok_and(|d| {
        d.flatten()
            .filter(|i| i.file_name().to_string_lossy().starts_with("python"))
            .all(|i| i.path().join(".pyrun-filled").exists())
    })
}

/// A projects folder of its own on the venv's file system (the venv hard-linked in as
/// `.venv`, and [`NP_SCRIPT`]), and a cache of its own, so that the venv's compiled packages are
/// this bench's (no other server owns them). Removed on drop.
pub(crate) struct NpWorkspace {
    _work: tempfile::TempDir,
    pub projects: PathBuf,
    pub cache: PathBuf,
    /// The linked venv's own interpreter.
    pub venv_python: PathBuf,
}

impl NpWorkspace {
    pub(crate) fn make(venv: &Path) -> anyhow::Result<Self> {
        let parent = venv.parent().context("venv folder")?;
        let work = tempfile::Builder::new()
            .prefix("pyrun-bench-np-")
            .tempdir_in(parent)?;
        let projects = work.path().join("projects");
        std::fs::create_dir_all(&projects)?;
        let cache = work.path().join("cache");
        std::fs::create_dir_all(&cache)?;
        let copied = std::process::Command::new("cp")
            .arg("-al")
            .arg(venv)
            .arg(projects.join(".venv"))
            .status()?;
        anyhow::ensure!(copied.success(), "cp -al of the venv failed");
        std::fs::write(projects.join(NP_SCRIPT), NP_SOURCE)?;
        Ok(Self {
            _work: work,
            venv_python: projects.join(".venv/bin/python"),
            projects,
            cache,
        })
    }
}

async fn np_rows(
    bin: &Path,
    venv: &Path,
    base: &Path,
    opts: &Options,
    note: &mut impl FnMut(&str, String, String, String),
    id: &mut u64,
) -> anyhow::Result<()> {
    let work = NpWorkspace::make(venv)?;
    let (projects, cache, venv_python) = (
        work.projects.clone(),
        work.cache.clone(),
        work.venv_python.clone(),
    );
    let base_s = base.to_str().context("base interpreter path")?;
    let args = ["--python", base_s];
    let off = [&args[..], &["--warm", "off"]].concat();
    let on = [&args[..], &["--warm", "on"]].concat();
    let env: [(&str, &Path); 1] = [("XDG_CACHE_HOME", &cache)];
    let log = opts.log_dir.as_ref().map(|d| d.join("warm-np.log"));
    let (c, c_pid) = stdio(bin, &projects, &off, &env, None).await?;
    let (w, w_pid) = stdio(bin, &projects, &on, &env, log).await?;
    let mut cold = Server::new("cold stdio", c, c_pid);
    let mut warm = Server::new("warm stdio", w, w_pid);
    // The first runs: the probe, the stdlib's and the venv's compile in the background.
    let t = Instant::now();
    cold.call(*id, NP_SCRIPT).await?;
    warm.call(*id, NP_SCRIPT).await?;
    *id += 1;
    while !(venv_cached(&cache, &projects.join(".venv")) && stdlib_filled(&cache)) {
        if t.elapsed() > Duration::from_secs(600) {
            bail!("the venv's bytecode was not cached within 10 min");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "venv bytecode cached after {:.0} s",
        t.elapsed().as_secs_f64()
    );
    note(
        "numpy+pandas: the venv's bytecode cached after the first run",
        format!("{:.0} s", t.elapsed().as_secs_f64()),
        String::new(),
        String::new(),
    );
    // Warm-up with the cache filled (the spare waiting now was started before: replaced).
    for _ in 0..2 {
        raw(&venv_python, &projects, NP_SCRIPT).await?;
        cold.call(*id, NP_SCRIPT).await?;
        warm.call(*id, NP_SCRIPT).await?;
        *id += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    cold.reset();
    warm.reset();
    let mut raw_s = Samples::default();
    let c0 = [
        cpu_ms(&c_pid.to_string()).unwrap_or(0.0),
        cpu_ms(&w_pid.to_string()).unwrap_or(0.0),
    ];
    let r0 = children_cpu_ms();
    let mut loads = vec![load()];
    // Each call is followed by a pause long enough for the spare's refill (numpy and pandas
    // imported) to end before the next measured step.
    let pause = opts.cadence.max(Duration::from_secs(2));
    for _ in 0..opts.workload_calls {
        raw_s.push(raw(&venv_python, &projects, NP_SCRIPT).await?);
        tokio::time::sleep(Duration::from_millis(300)).await;
        cold.call(*id, NP_SCRIPT).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        warm.call(*id, NP_SCRIPT).await?;
        tokio::time::sleep(pause).await;
        *id += 1;
    }
    loads.push(load());
    let n = opts.workload_calls as f64;
    let raw_cpu = (children_cpu_ms() - r0) / n;
    let cpu = [
        (cpu_ms(&c_pid.to_string()).unwrap_or(0.0) - c0[0]) / n,
        (cpu_ms(&w_pid.to_string()).unwrap_or(0.0) - c0[1]) / n,
    ];
    let label = format!("numpy+pandas, n = {}", opts.workload_calls);
    note(
        &format!("raw `.venv/bin/python {NP_SCRIPT}` ({label})"),
        cell(&raw_s),
        "1".into(),
        format!("CPU {raw_cpu:.1} ms per run"),
    );
    for (i, s) in [&cold, &warm].into_iter().enumerate() {
        note(
            &format!("run_python {} ({label})", s.name),
            cell(&s.samples),
            ratio(&s.samples, &raw_s),
            format!(
                "{}/{} warm; CPU {:.1} ms per run (server + children)",
                s.warm,
                s.samples.len(),
                cpu[i]
            ),
        );
    }
    note(
        "load average during the numpy rows",
        loads.join(" → "),
        String::new(),
        String::new(),
    );
    note(
        "memory: warm server, a numpy+pandas spare waiting",
        mem_cell(&tree_mem(w_pid)),
        String::new(),
        String::new(),
    );
    let harness = projects.join("fork_harness.py");
    std::fs::write(&harness, FORK_HARNESS)?;
    for how in ["exit", "_exit"] {
        let s = fork_limit(
            &venv_python,
            &harness,
            &projects.join(NP_SCRIPT),
            "numpy,pandas",
            how,
        )
        .await?;
        note(
            &format!("fork limit: numpy+pandas imported, child runs {NP_SCRIPT} ({how}), n = 100"),
            cell(&s),
            String::new(),
            "unsandboxed; no server".into(),
        );
    }
    drop((cold, warm));
    Ok(())
}

//! One side of a comparison (warm pyrun, cold pyrun, raw python, FastMCP) and the ways the table
//! times it: back-to-back blocks interleaved with the other lanes, concurrent clients, a call at an
//! assistant's pace, and a call that arrives while another run burns both cores.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::Value;

use crate::drivers::{run_call, Session, SseSession, StdioSession, StreamableHttpSession};
use crate::stats::Samples;

/// Something a call can be timed on.
pub enum Caller {
    Stdio(StdioSession),
    Mcp(StreamableHttpSession),
    Sse(SseSession),
    /// `python SCRIPT` in `dir`, the floor.
    Raw {
        python: PathBuf,
        dir: PathBuf,
    },
}

impl Caller {
    async fn request(&mut self, message: Value) -> anyhow::Result<Value> {
        match self {
            Caller::Stdio(s) => s.request(message).await,
            Caller::Mcp(s) => s.request(message).await,
            Caller::Sse(s) => s.request(message).await,
            Caller::Raw { .. } => bail!("a raw spawn takes no request"),
        }
    }

    /// One call of `script`: its wall time, and whether the server ran it in a warm spare.
    pub async fn call(&mut self, id: u64, script: &str) -> anyhow::Result<(Duration, bool)> {
        if let Caller::Raw { python, dir } = self {
            let t = Instant::now();
            let out = tokio::process::Command::new(&*python)
                .arg(dir.join(script))
                .current_dir(&*dir)
                .stdin(std::process::Stdio::null())
                .output()
                .await?;
            let took = t.elapsed();
            if !out.status.success() {
                bail!("raw {script}: {}", String::from_utf8_lossy(&out.stderr));
            }
            return Ok((took, false));
        }
        let t = Instant::now();
        let reply = self.request(run_call(id, script)).await?;
        let took = t.elapsed();
        let result = reply.get("result");
        if result.and_then(|r| r.get("isError")) == Some(&Value::Bool(true)) || result.is_none() {
            bail!("{script}: the call failed: {reply}");
        }
        let structured = result.and_then(|r| r.get("structuredContent"));
        // pyrun reports the run's exit code (FastMCP's tool raises instead).
        if let Some(code) = structured.and_then(|s| s.get("exit_code")) {
            if code != &Value::from(0) {
                bail!("{script}: the run failed: {reply}");
            }
        }
        let warm = structured.and_then(|s| s.get("warm")) == Some(&Value::Bool(true));
        Ok((took, warm))
    }
}

/// What a lane's process is, for its CPU figure.
#[derive(Clone, Copy)]
pub enum Cpu {
    /// A server: its own CPU and its reaped children's.
    Server(u32),
    /// The bench's own reaped children: the raw spawns.
    Children,
}

impl Cpu {
    fn ms(self) -> f64 {
        match self {
            Cpu::Server(pid) => crate::warm::cpu_ms(&pid.to_string()).unwrap_or(0.0),
            Cpu::Children => crate::warm::children_cpu_ms(),
        }
    }
}

/// A lane's figures for one row.
#[derive(Default, Clone)]
pub struct Series {
    pub samples: Samples,
    pub warm: usize,
    /// CPU per call (ms), every call of the row counted (warm-ups too).
    pub cpu_ms: f64,
    /// Calls per second, for the load rows.
    pub rate: Option<f64>,
}

/// Calls made across the table, so that every request id is new.
pub struct Ids(u64);

impl Ids {
    pub fn new() -> Self {
        Self(1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

/// The order of the lanes in round `r`: forwards, then backwards (A B C, C B A, ...), so that no
/// lane always follows the same other one.
fn order(n: usize, r: usize) -> Vec<usize> {
    let mut o: Vec<usize> = (0..n).collect();
    if r % 2 == 1 {
        o.reverse();
    }
    o
}

/// Back to back, interleaved: in each of `rounds` rounds every lane makes `block + 1` calls one
/// after the other (the first, after the other lanes' turn, is not counted), then all rest
/// `settle` so that one lane's background work (a spare's start) does not land in the next lane's
/// block. Samples line up by index across lanes: pair `i` is the same round and place.
pub async fn back_to_back(
    lanes: &mut [(&mut Caller, Cpu)],
    script: &str,
    rounds: usize,
    block: usize,
    settle: Duration,
    ids: &mut Ids,
) -> anyhow::Result<Vec<Series>> {
    let mut out = vec![Series::default(); lanes.len()];
    let cpu0: Vec<f64> = lanes.iter().map(|(_, c)| c.ms()).collect();
    for r in 0..rounds {
        for i in order(lanes.len(), r) {
            let (caller, _) = &mut lanes[i];
            for k in 0..=block {
                let (took, warm) = caller.call(ids.next(), script).await?;
                if k > 0 {
                    out[i].samples.push(took);
                    out[i].warm += usize::from(warm);
                }
            }
            tokio::time::sleep(settle).await;
        }
    }
    let calls = (rounds * (block + 1)) as f64;
    for (i, (_, cpu)) in lanes.iter().enumerate() {
        out[i].cpu_ms = (cpu.ms() - cpu0[i]) / calls;
    }
    Ok(out)
}

/// At an assistant's pace: one call per lane every tick (0.5–1 s, varied), the lanes' calls
/// spread evenly over the tick in an order that turns each round.
pub async fn paced(
    lanes: &mut [(&mut Caller, Cpu)],
    script: &str,
    calls: usize,
    ticks: &[Duration],
    ids: &mut Ids,
) -> anyhow::Result<Vec<Series>> {
    let mut out = vec![Series::default(); lanes.len()];
    // Warm-up: the first (learning) run and the first spare.
    for _ in 0..2 {
        for (caller, _) in lanes.iter_mut() {
            caller.call(ids.next(), script).await?;
        }
        tokio::time::sleep(ticks[0]).await;
    }
    let cpu0: Vec<f64> = lanes.iter().map(|(_, c)| c.ms()).collect();
    let n = lanes.len();
    for r in 0..calls {
        let tick = ticks[r % ticks.len()];
        let start = Instant::now();
        for (k, i) in order(n, r).into_iter().enumerate() {
            tokio::time::sleep_until((start + tick * k as u32 / n as u32).into()).await;
            let (took, warm) = lanes[i].0.call(ids.next(), script).await?;
            out[i].samples.push(took);
            out[i].warm += usize::from(warm);
        }
        tokio::time::sleep_until((start + tick).into()).await;
    }
    for (i, (_, cpu)) in lanes.iter().enumerate() {
        out[i].cpu_ms = (cpu.ms() - cpu0[i]) / calls as f64;
    }
    Ok(out)
}

/// Concurrent clients: in each round every lane in turn has all its clients call back to back for
/// `secs`; its rate is its calls over the time its rounds took (until the last call ended).
pub async fn concurrent(
    lanes: &mut [(Vec<Caller>, Cpu)],
    script: &str,
    rounds: usize,
    secs: Duration,
    settle: Duration,
) -> anyhow::Result<Vec<Series>> {
    let mut out = vec![Series::default(); lanes.len()];
    let mut wall = vec![Duration::ZERO; lanes.len()];
    let cpu0: Vec<f64> = lanes.iter().map(|(_, c)| c.ms()).collect();
    for r in 0..rounds {
        for i in order(lanes.len(), r) {
            let start = Instant::now();
            let end = start + secs;
            let clients = lanes[i]
                .0
                .iter_mut()
                .enumerate()
                .map(|(c, caller)| async move {
                    let mut id = ((r as u64) << 40) | ((c as u64) << 20);
                    let mut s = Samples::default();
                    let mut warm = 0;
                    while Instant::now() < end {
                        id += 1;
                        let (took, w) = caller.call(id, script).await?;
                        s.push(took);
                        warm += usize::from(w);
                    }
                    Ok::<_, anyhow::Error>((s, warm))
                });
            for r in futures::future::join_all(clients).await {
                let (s, w) = r?;
                out[i].samples.extend(s);
                out[i].warm += w;
            }
            wall[i] += start.elapsed();
            tokio::time::sleep(settle).await;
        }
    }
    for (i, (_, cpu)) in lanes.iter().enumerate() {
        let calls = out[i].samples.len() as f64;
        out[i].cpu_ms = (cpu.ms() - cpu0[i]) / calls.max(1.0);
        out[i].rate = Some(calls / wall[i].as_secs_f64().max(1e-9));
    }
    Ok(out)
}

/// A call that arrives while another run uses both cores: per lane and round, `burner` starts
/// `burn` (two processes spinning), and `delay` later `caller` times one call of `script`; then
/// both end before the next lane's turn.
pub async fn under_burn(
    lanes: &mut [(Caller, Caller, Cpu)],
    script: &str,
    burn: &str,
    rounds: usize,
    delay: Duration,
    ids: &mut Ids,
) -> anyhow::Result<Vec<Series>> {
    let mut out = vec![Series::default(); lanes.len()];
    let cpu0: Vec<f64> = lanes.iter().map(|(_, _, c)| c.ms()).collect();
    for r in 0..rounds {
        for i in order(lanes.len(), r) {
            let (burner, caller, _) = &mut lanes[i];
            let (id_burn, id_call) = (ids.next(), ids.next());
            let burning = burner.call(id_burn, burn);
            let timed = async {
                tokio::time::sleep(delay).await;
                caller.call(id_call, script).await
            };
            let (b, t) = tokio::join!(burning, timed);
            b?;
            let (took, warm) = t?;
            out[i].samples.push(took);
            out[i].warm += usize::from(warm);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for (i, (_, _, cpu)) in lanes.iter().enumerate() {
        // Per timed call, the burn it met included.
        out[i].cpu_ms = (cpu.ms() - cpu0[i]) / rounds as f64;
    }
    Ok(out)
}

//! What a warm exec costs: `session_exec` of `1+1` in one Python session over stdio (the
//! interactive path; a `run_python` pays a whole interpreter start), beside `run_python` of the
//! script in the same server for comparison.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context};
use serde_json::json;

use crate::drivers::{call_tool as call, structured, Session, StdioSession};
use crate::stats::Samples;

pub struct Costs {
    /// `session_exec` of `1+1`.
    pub exec: Samples,
    /// `run_python` of the script, for comparison.
    pub run_python: Samples,
}

pub async fn measure(
    bin: &Path,
    projects: &Path,
    extra: &[&str],
    script: &str,
    calls: usize,
) -> anyhow::Result<Costs> {
    let args: Vec<&str> = extra
        .iter()
        .copied()
        .chain(["--allow-inline-code"])
        .collect();
    let mut session = StdioSession::start(bin, projects, &args).await?;
    let started = session
        .request(call(7000, "session_start", json!({})))
        .await?;
    let session_id = structured(&started)?["session_id"]
        .as_str()
        .context("session_id")?
        .to_owned();
    let mut costs = Costs {
        exec: Samples::default(),
        run_python: Samples::default(),
    };
    let exec = |id| {
        call(
            id,
            "session_exec",
            json!({"session_id": session_id, "code": "1+1"}),
        )
    };
    for id in 0..20 {
        session.request(exec(7100 + id)).await?;
    }
    for id in 0..calls as u64 {
        let t = Instant::now();
        let reply = session.request(exec(8000 + id)).await?;
        costs.exec.push(t.elapsed());
        if structured(&reply)?["result"] != "2" {
            bail!("1+1 was not 2: {reply}");
        }
    }
    for id in 0..(calls as u64).min(50) {
        let t = Instant::now();
        session.run(9000 + id, script).await?;
        costs.run_python.push(t.elapsed());
    }
    Ok(costs)
}

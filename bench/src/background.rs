//! What a background run costs over a plain `run_python` (stdio): `start_python` + one
//! `get_run` long poll that returns when the run ends, and how soon a long poll wakes when the
//! script prints.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use pyrun_api::RunStatus;
use serde_json::{json, Value};

use crate::drivers::{call_tool as call, structured, Session, StdioSession};
use crate::stats::Samples;

/// Prints `tick` when the bench writes the `go` file, then exits.
const WAKE_SCRIPT: &str = "bg_wake.py";
const WAKE: &str = "import os, time\nhere = os.path.dirname(__file__)\nwhile not os.path.exists(os.path.join(here, 'go')):\n    time.sleep(0.001)\nprint('tick', flush=True)\n";

pub struct Costs {
    /// `run_python` of the script, for comparison.
    pub run_python: Samples,
    /// `start_python` + `get_run` with a long wait until it ends.
    pub background: Samples,
    /// From writing `go` to the long poll's answer carrying `tick`.
    pub wake: Samples,
}

pub async fn measure(
    bin: &Path,
    projects: &Path,
    extra: &[&str],
    script: &str,
    calls: usize,
) -> anyhow::Result<Costs> {
    std::fs::write(projects.join(WAKE_SCRIPT), WAKE)?;
    let mut session = StdioSession::start(bin, projects, extra).await?;
    let mut costs = Costs {
        run_python: Samples::default(),
        background: Samples::default(),
        wake: Samples::default(),
    };
    let mut id = 5000;
    let mut next = || {
        id += 1;
        id
    };
    for round in 0..calls + 5 {
        let t = Instant::now();
        session.run(next(), script).await?;
        let plain = t.elapsed();

        let t = Instant::now();
        let started = session
            .request(call(next(), "start_python", json!({"file_name": script})))
            .await?;
        let run_id = structured(&started)?["run_id"]
            .as_str()
            .context("run_id")?
            .to_owned();
        loop {
            let state = session
                .request(call(
                    next(),
                    "get_run",
                    json!({"run_id": run_id, "wait_seconds": 30, "stdout_offset": u64::MAX}),
                ))
                .await?;
            if status_of(&state)? == RunStatus::Exited {
                break;
            }
        }
        let background = t.elapsed();
        if round >= 5 {
            costs.run_python.push(plain);
            costs.background.push(background);
        }
    }

    for _ in 0..calls.min(20) {
        let go = projects.join("go");
        let _ = std::fs::remove_file(&go);
        let started = session
            .request(call(
                next(),
                "start_python",
                json!({"file_name": WAKE_SCRIPT}),
            ))
            .await?;
        let run_id = structured(&started)?["run_id"]
            .as_str()
            .context("run_id")?
            .to_owned();
        // Let the run start and settle into its loop, then time from `go` to the answer.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let poll = call(
            next(),
            "get_run",
            json!({"run_id": run_id, "wait_seconds": 30}),
        );
        let writer = {
            let go = go.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let t = Instant::now();
                let _ = std::fs::write(go, "");
                t
            })
        };
        let reply = session.request(poll).await?;
        let answered = Instant::now();
        let wrote = writer
            .join()
            .map_err(|_| anyhow::anyhow!("writer thread"))?;
        if !structured(&reply)?["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("tick")
        {
            bail!("the long poll answered without the line: {reply}");
        }
        costs.wake.push(answered.duration_since(wrote));
        // Read it to its end, so that it may make room for the next (`--max-background-runs`).
        loop {
            let state = session
                .request(call(
                    next(),
                    "get_run",
                    json!({"run_id": run_id, "wait_seconds": 30, "stdout_offset": u64::MAX}),
                ))
                .await?;
            if status_of(&state)? != RunStatus::Running {
                break;
            }
        }
    }
    Ok(costs)
}

/// The status a `get_run` answer gives.
fn status_of(answer: &Value) -> anyhow::Result<RunStatus> {
    serde_json::from_value(structured(answer)?["status"].clone()).context("get_run's status")
}

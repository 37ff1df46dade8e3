//! `list_packages` of a venv holding 200 packages (metadata only), over stdio: the target
//! is 20 ms. The venv is a real one (`python -m venv --without-pip`) in a temp projects folder.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;

use crate::drivers::{Session, StdioSession};
use crate::stats::Samples;

/// Packages in the measured venv.
pub const PACKAGES: usize = 200;

/// `calls` timed `list_packages` calls (after 5 untimed ones) on a fresh server.
pub async fn list_packages(
    bin: &Path,
    python: &Path,
    python_arg: &[&str],
    calls: usize,
) -> anyhow::Result<Samples> {
    let projects = tempfile::tempdir()?;
    let venv = projects.path().join(".venv");
    let made = std::process::Command::new(python)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .context("python -m venv")?;
    anyhow::ensure!(made.success(), "python -m venv failed");
    let site = std::fs::read_dir(venv.join("lib"))?
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .context("the venv has no site-packages")?;
    for i in 0..PACKAGES {
        let dir = site.join(format!("package_{i:03}-1.0.dist-info"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: package-{i:03}\nVersion: 1.0\n\nText.\n"),
        )?;
    }
    let mut session = StdioSession::start(bin, projects.path(), python_arg).await?;
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "list_packages", "arguments": {}}})
    };
    let mut samples = Samples::default();
    for id in 0..(5 + calls) as u64 {
        let t = Instant::now();
        let reply = session.request(call(id)).await?;
        let listed = reply["result"]["structuredContent"]["packages"]
            .as_array()
            .map_or(0, Vec::len);
        anyhow::ensure!(listed == PACKAGES, "list_packages: {reply}");
        if id >= 5 {
            samples.push(t.elapsed());
        }
    }
    Ok(samples)
}

//! Added latency of the sandbox per run: one Python script started through
//! [`Sandbox::spawn`], exactly as the server's runner starts runs, with `--sandbox standard` and
//! `off` interleaved, medians over N runs. Run via scripts/bench-sandbox.sh.

#![cfg_attr(not(target_os = "linux"), allow(unused_imports, dead_code))]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pyrun_sandbox::{
    python_read_paths, ResourceLimits, Sandbox, SandboxMode, SandboxPolicy, SandboxSlot,
};

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the sandbox benchmark measures the Linux spawn path; nothing to measure here");
}

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut runs = 100usize;
    let mut python: Option<PathBuf> = None;
    let mut limits = ResourceLimits::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().unwrap_or_default().parse()?,
            "--python" => python = args.next().map(PathBuf::from),
            // Memory and process limits of 0 make no per-run cgroups: shows what they cost.
            "--no-cgroups" => {
                limits.memory_bytes = 0;
                limits.processes = 0;
            }
            other => anyhow::bail!(
                "unknown argument {other}; usage: [--runs N] [--python PATH] [--no-cgroups]"
            ),
        }
    }
    let python = match python {
        Some(p) => p,
        None => pyrun_sandbox::resolve_python(None)?,
    };
    let project = tempfile::tempdir()?;
    let project_dir = project.path().canonicalize()?;
    let script = project_dir.join("hello.py");
    std::fs::write(&script, "print('Hello, World!')\n")?;

    let sandbox = |mode| -> anyhow::Result<Sandbox> {
        let mut read_paths = python_read_paths(&python)?;
        read_paths.push(project_dir.clone());
        Ok(Sandbox::new(SandboxPolicy {
            mode,
            read_paths,
            write_paths: vec![project_dir.clone()],
            allow_network: false,
            limits: limits.clone(),
            projects: None,
            read_only_projects: false,
            write_scope: pyrun_sandbox::WriteScope::Project,
            pycache: None,
            support: None,
            tcp_connect_ports: None,
        })?)
    };
    let off = sandbox(SandboxMode::Off)?;
    let standard = sandbox(SandboxMode::Standard)?;
    eprintln!(
        "python {}; standard layers {:?}; {runs} runs each, interleaved",
        python.display(),
        standard.layers()
    );

    // Each sandbox with one slot, as the runner reuses them.
    let (off_scratch, std_scratch) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let off_slot = off.slot(off_scratch.path())?;
    let std_slot = standard.slot(std_scratch.path())?;
    let off = (off, off_slot, off_scratch.path().to_path_buf());
    let standard = (standard, std_slot, std_scratch.path().to_path_buf());
    let (mut t_off, mut t_std, mut t_confine) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs + 5 {
        let (a, _) = run_once(&off, &python, &script)?;
        let (b, confine) = run_once(&standard, &python, &script)?;
        if i >= 5 {
            // The first runs warm the page cache.
            t_off.push(a);
            t_std.push(b);
            t_confine.push(confine);
        }
    }
    let (m_off, m_std, m_confine) = (
        median(&mut t_off),
        median(&mut t_std),
        median(&mut t_confine),
    );
    println!("| measure (median of {runs}) | ms |");
    println!("|---|---|");
    println!("| run, --sandbox off | {:.2} |", ms(m_off));
    println!("| run, --sandbox standard | {:.2} |", ms(m_std));
    println!("| added per run | {:+.2} |", ms(m_std) - ms(m_off));
    println!("| of which spawn() until exec | {:.3} |", ms(m_confine));
    Ok(())
}

#[cfg(target_os = "linux")]
/// Starts the script as the runner does and waits for it; returns (total, until exec) times.
fn run_once(
    (sandbox, slot, scratch): &(Sandbox, SandboxSlot, PathBuf),
    python: &Path,
    script: &Path,
) -> anyhow::Result<(Duration, Duration)> {
    let start = Instant::now();
    let dir = script.parent().unwrap_or(Path::new("/"));
    let spec = pyrun_sandbox::spawn::Spec {
        program: python,
        argv0: None,
        args: vec![script.as_os_str()],
        env: vec![
            (OsStr::new("HOME"), scratch.as_os_str()),
            (OsStr::new("TMPDIR"), scratch.as_os_str()),
        ],
        cwd: dir,
        stdin_piped: false,
    };
    let child = sandbox.spawn(slot, &spec, dir)?;
    let started = start.elapsed();
    let out = child.wait_with_output()?;
    let total = start.elapsed();
    anyhow::ensure!(
        out.status.success() && out.stdout == b"Hello, World!\n",
        "run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((total, started))
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

//! Added latency of the sandbox per run: one Python script started through
//! [`Sandbox::spawn`], exactly as the server's runner starts runs, with `--sandbox standard` and
//! `off` interleaved, medians over N runs. Run via scripts/bench-sandbox.sh.
//!
//! `--project-files N`: the cost of a run's project instead: runs of a project of N files and of
//! a tiny one through the server's view (own project writable, protected names found through
//! the memo before the run and looked for again after it), and of two projects taking turns on
//! one slot (its view rebuilt each run).

#![cfg_attr(not(target_os = "linux"), allow(unused_imports, dead_code))]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pyrun_sandbox::{ResourceLimits, Sandbox, SandboxMode, SandboxPolicy, SandboxSlot};

#[path = "../tests/support/mod.rs"]
mod support;
use support::python_read_paths;

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
    let mut project_files: Option<usize> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().unwrap_or_default().parse()?,
            "--project-files" => project_files = Some(args.next().unwrap_or_default().parse()?),
            "--python" => python = args.next().map(PathBuf::from),
            // Memory and process limits of 0 make no per-run cgroups: shows what they cost.
            "--no-cgroups" => {
                limits.memory_bytes = 0;
                limits.processes = 0;
            }
            other => anyhow::bail!(
                "unknown argument {other}; usage: [--runs N] [--python PATH] [--no-cgroups] \
                 [--project-files N]"
            ),
        }
    }
    let python = match python {
        Some(p) => p,
        None => support::python().to_path_buf(),
    };
    if let Some(files) = project_files {
        return bench_project(runs, &python, limits, files);
    }
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
            // As the server: runs see the projects folder at /projects in their own view.
            projects: Some(project_dir.clone()),
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
    let mut standard = (standard, std_slot, std_scratch.path().to_path_buf());
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
    // A slot's first run builds its view (the minimal world): fresh slots, first run each.
    let mut t_first = Vec::new();
    for _ in 0..runs.min(30) {
        let scratch = tempfile::tempdir()?;
        let made = Instant::now();
        let slot = standard.0.slot(scratch.path())?;
        let fresh = (standard.0, slot, scratch.path().to_path_buf());
        run_once(&fresh, &python, &script)?;
        t_first.push(made.elapsed());
        standard.0 = fresh.0;
    }
    let (m_off, m_std, m_confine) = (
        median(&mut t_off),
        median(&mut t_std),
        median(&mut t_confine),
    );
    let m_first = median(&mut t_first);
    println!("| measure (median of {runs}) | ms |");
    println!("|---|---|");
    println!("| run, --sandbox off | {:.2} |", ms(m_off));
    println!("| run, --sandbox standard | {:.2} |", ms(m_std));
    println!("| added per run | {:+.2} |", ms(m_std) - ms(m_off));
    println!("| of which spawn() until exec | {:.3} |", ms(m_confine));
    println!(
        "| a new slot's first run (slot, view built, run) | {:.2} |",
        ms(m_first)
    );
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
    let host_dir = script.parent().unwrap_or(Path::new("/"));
    let dir = &sandbox.view_path(host_dir);
    let script = &sandbox.view_path(script);
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
    let child = sandbox.spawn(slot, &spec, host_dir)?;
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

#[cfg(target_os = "linux")]
/// `--project-files`: what a run's project costs, by its size and by changing it.
fn bench_project(
    runs: usize,
    python: &Path,
    limits: ResourceLimits,
    files: usize,
) -> anyhow::Result<()> {
    use pyrun_sandbox::{RunProject, WriteScope};
    let root = tempfile::tempdir()?;
    let projects = root.path().canonicalize()?;
    // `big/`: `files` files, ten to a folder, two levels deep; a `.git` of 500 files the walk
    // never enters.
    let per_dir = 10;
    for i in 0..files.div_ceil(per_dir) {
        let dir = projects.join(format!("big/d{}/e{i}", i % 30));
        std::fs::create_dir_all(&dir)?;
        for j in 0..per_dir.min(files - i * per_dir) {
            std::fs::write(dir.join(format!("m{j}.py")), "X = 1\n")?;
        }
    }
    for i in 0..50 {
        let dir = projects.join(format!("big/.git/objects/{i:02x}"));
        std::fs::create_dir_all(&dir)?;
        for j in 0..10 {
            std::fs::write(dir.join(format!("o{j}")), "x")?;
        }
    }
    // Two projects holding protected names deep inside (a `.git` two folders down, twelve
    // `__pycache__` in packages and subpackages): their view pins the 15 folders on the way.
    for name in ["nested", "nested2"] {
        let dir = projects.join(name);
        std::fs::create_dir_all(dir.join("vendor/lib/.git"))?;
        for i in 0..6 {
            std::fs::create_dir_all(dir.join(format!("src/p{i}/__pycache__")))?;
            std::fs::create_dir_all(dir.join(format!("src/p{i}/sub/__pycache__")))?;
        }
    }
    for name in ["big", "small", "other", "nested", "nested2"] {
        std::fs::create_dir_all(projects.join(name))?;
        // The big project's script also makes a new file there: the walk after it cannot be
        // answered whole from the last one (a file rewritten in place would let it).
        let write = if name == "big" {
            "import time\nopen(f'/projects/big/out-{time.time_ns()}.txt', 'w').write('x')\n"
        } else {
            ""
        };
        std::fs::write(
            projects.join(name).join("hello.py"),
            format!("{write}print('Hello, World!')\n"),
        )?;
    }
    // Listings of folders changed in the last 2 s are not memoized: let the tree settle.
    std::thread::sleep(Duration::from_millis(2100));
    let mut read_paths = python_read_paths(python)?;
    read_paths.push(projects.clone());
    let sandbox = Sandbox::new(SandboxPolicy {
        mode: SandboxMode::Standard,
        read_paths,
        write_paths: vec![projects.clone()],
        allow_network: false,
        limits,
        projects: Some(projects.clone()),
        read_only_projects: false,
        write_scope: WriteScope::Project,
        pycache: None,
        support: None,
        tcp_connect_ports: None,
    })?;
    anyhow::ensure!(
        sandbox.has_view(),
        "no file view on this machine: nothing to measure"
    );
    let scratches = [
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
    ];
    let slots = scratches
        .iter()
        .map(|s| sandbox.slot(s.path()))
        .collect::<Result<Vec<_>, _>>()?;
    let big = RunProject::Folder("big".into());
    let cold = Instant::now();
    sandbox.run_scope(&big);
    let cold = cold.elapsed();
    // One run: the scope walked before, the spawn, the wait, the walk after.
    let run = |slot: &SandboxSlot, name: &str| -> anyhow::Result<[Duration; 3]> {
        let script = Path::new(pyrun_sandbox::RUN_PROJECTS_DIR)
            .join(name)
            .join("hello.py");
        let start = Instant::now();
        let scope = sandbox.run_scope(&RunProject::Folder(name.into()));
        let walked = start.elapsed();
        let spec = pyrun_sandbox::spawn::Spec {
            program: python,
            argv0: None,
            args: vec![script.as_os_str()],
            env: vec![
                (OsStr::new("HOME"), OsStr::new("/tmp")),
                (OsStr::new("TMPDIR"), OsStr::new("/tmp")),
            ],
            cwd: Path::new(pyrun_sandbox::RUN_PROJECTS_DIR),
            stdin_piped: false,
        };
        let out = sandbox
            .spawn_scoped(slot, &spec, &scope)?
            .wait_with_output()?;
        anyhow::ensure!(
            out.status.success() && out.stdout == b"Hello, World!\n",
            "run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let after = Instant::now();
        anyhow::ensure!(
            sandbox.created_protected(&scope).is_empty(),
            "a name appeared"
        );
        Ok([start.elapsed(), walked, after.elapsed()])
    };
    let (mut small_t, mut big_t, mut turns_t, mut walk_t, mut after_t, mut nested_t) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for i in 0..runs + 5 {
        let [small, ..] = run(&slots[0], "small")?;
        let [total, walked, after] = run(&slots[1], "big")?;
        // Two projects taking turns on one slot: its view is rebuilt every run.
        let name = if i % 2 == 0 { "small" } else { "other" };
        let [turn, ..] = run(&slots[2], name)?;
        let name = if i % 2 == 0 { "nested" } else { "nested2" };
        let [nested, ..] = run(&slots[3], name)?;
        if i >= 5 {
            nested_t.push(nested);
            small_t.push(small);
            big_t.push(total);
            turns_t.push(turn);
            walk_t.push(walked);
            after_t.push(after);
        }
    }
    let (small, big, turns) = (
        median(&mut small_t),
        median(&mut big_t),
        median(&mut turns_t),
    );
    println!("| measure (median of {runs}; project of {files} files) | ms |");
    println!("|---|---|");
    println!(
        "| first walk of the big project (no memo) | {:.2} |",
        ms(cold)
    );
    println!(
        "| walk before a run, through the memo | {:.3} |",
        ms(median(&mut walk_t))
    );
    println!(
        "| walk after a run, through the memo | {:.3} |",
        ms(median(&mut after_t))
    );
    println!("| run of a 1-file project | {:.2} |", ms(small));
    println!("| run of the {files}-file project | {:.2} |", ms(big));
    println!(
        "| added by the project's size | {:+.2} |",
        ms(big) - ms(small)
    );
    println!(
        "| run when the slot's last run was another project | {:.2} |",
        ms(turns)
    );
    println!(
        "| added by the view's rebuild | {:+.2} |",
        ms(turns) - ms(small)
    );
    let nested = median(&mut nested_t);
    println!(
        "| the same, projects with 13 protected names 2-3 folders deep | {:.2} |",
        ms(nested)
    );
    println!(
        "| added by their binds and pins | {:+.2} |",
        ms(nested) - ms(turns)
    );
    Ok(())
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

//! Finding a run's processes from the host (Linux, through /proc). A run lives in its own pid
//! namespace and sees the projects folder at `/projects`: neither a pid the script prints nor the
//! script's host path names its process here. So a test gives the script a token no other run
//! carries, as its argument, and looks for that argument in `/proc/*/cmdline`.
//!
//! [`alive`] is the one liveness check of the tests: a zombie (exited, awaiting its reaper) counts
//! as gone.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Whether a pid is a live process: a zombie awaiting its reaper is dead (it has exited; a test
/// asking "is it still running?" or "did it survive?" means that). Through /proc on Linux; where
/// there is no /proc (macOS), `kill -0`, which cannot tell a zombie from a live process.
pub fn alive(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return std::process::Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the parenthesised command name (which may itself hold `)`).
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        !state.starts_with('Z') && !state.starts_with('X')
    })
}

/// Waits (bounded) until the process is gone; returns whether it is.
pub fn gone_within(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// Reads a pid a script wrote to `file` (waiting a bounded time for it to appear).
pub fn read_pid(file: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "pid file {} never appeared",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An argument no other run on this machine carries: `label`, this test process's pid and a
/// counter.
pub fn unique_token(label: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{label}-{}-{n}", std::process::id())
}

/// Live (not zombie) processes that have `token` as one of their arguments.
pub fn processes_carrying(token: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.split(|&b| b == 0).any(|arg| arg == token.as_bytes()))
        })
        // Zombies have exited; only their parent's bookkeeping remains.
        .filter(|&pid| alive(pid))
        .collect()
}

/// Live (not zombie) processes whose command line, its arguments joined by spaces, contains
/// `needle` (a path inside an argument, as in `--target=PATH`); their command lines.
pub fn processes_naming(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            (line.contains(needle) && alive(pid)).then_some(line)
        })
        .collect()
}

/// Polls (blocking) until `check` holds or `limit` passes; whether it held.
pub fn holds_within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

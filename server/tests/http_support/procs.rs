//! Finding a run's processes from the host (Linux, through /proc). A run lives in its own pid
//! namespace and sees the projects folder at `/projects`: neither a pid the script prints nor the
//! script's host path names its process here. So a test gives the script a token no other run
//! carries, as its argument, and looks for that argument in `/proc/*/cmdline`.
//!
//! Shared by the HTTP and stdio tests (the stdio ones include this file by path).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

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
        .filter(|pid| {
            // Zombies have exited; only their parent's bookkeeping remains.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z') && !state.starts_with('X')
            })
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

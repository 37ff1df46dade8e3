//! 100 MB of script output must not grow the server's memory: the runner keeps the cap and drops
//! the rest while reading. Run alone in a process of its own, so the measurement sees only this run.

use std::time::Duration;

use crate::util;
use pyrun_run::runner::RunRequest;
use tokio_util::sync::CancellationToken;

/// Peak resident memory of this process so far, in KiB (Linux only).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn hundred_megabytes_of_output_keep_memory_flat() {
    let test = concat!(
        module_path!(),
        "::hundred_megabytes_of_output_keep_memory_flat"
    );
    util::run_alone(
        test,
        |_, _| {},
        || {
            util::block_on(async {
                let text =
                    "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(100):\n    sys.stdout.write(chunk)\n";
                let (_dir, root) = util::project(&[("flood.py", text)]);
                let script = root.resolve_script("flood.py").unwrap();
                let runner = util::runner(1 << 20, 2, &[]);
                let before = peak_rss_kib();
                let outcome = runner
                    .run(
                        RunRequest::new(&script, &[], None, Duration::from_secs(120)),
                        &CancellationToken::new(),
                    )
                    .await
                    .unwrap();
                assert_eq!(outcome.exit_code, Some(0));
                assert!(outcome.stdout_truncated);
                assert_eq!(outcome.stdout.len(), 1 << 20);
                if let (Some(before), Some(after)) = (before, peak_rss_kib()) {
                    let growth_mib = (after.saturating_sub(before)) / 1024;
                    assert!(
                        growth_mib < 32,
                        "peak memory grew by {growth_mib} MiB for 100 MB of output"
                    );
                }
            })
        },
    );
}

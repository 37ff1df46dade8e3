//! Refusals that explain themselves: when a run failed or was cut because of a setting of this
//! server — the network off, a resource limit, the time limit, a `timeout_seconds` above the
//! server's — one `hint:` naming the setting, added to the result's text and to its structured
//! `hint`. Read from what the run left (its exit, signal and stderr), never guessed without it.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};

use crate::config::Config;
use crate::mcp::present::reply::fmt_secs;
use pyrun_run::runner::RunOutcome;
use pyrun_sandbox::SandboxMode;

/// What Python and its libraries print when a name lookup or a connection fails for want of a
/// network (no route, no resolver, nothing listening).
const NETWORK_FAILURES: &[&str] = &[
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "nodename nor servname provided",
    "getaddrinfo failed",
    "Network is unreachable",
    "Connection refused",
    "Failed to establish a new connection",
    "Failed to resolve",
    "NameResolutionError",
];

/// The hint for a run that ended, if a setting explains how: every cause that fits, a line each.
/// `layers`: the sandbox layers it ran under.
pub fn for_outcome(
    outcome: &RunOutcome,
    stderr: &str,
    timeout: Duration,
    config: &Config,
    layers: &[&str],
) -> Option<String> {
    let limits = &config.sandbox.limits;
    let failed = outcome.exit_code != Some(0);
    let said = |needle: &str| stderr.contains(needle);
    let mut hints = Vec::new();
    if outcome.timed_out {
        let server = config.timeout;
        hints.push(if timeout >= server {
            format!(
                "the run reached the server's time limit of {} s; the operator can raise it \
                 with --timeout (PYTHON_TIMEOUT), or start_python runs it in the background",
                fmt_secs(server)
            )
        } else {
            format!(
                "the run reached the {} s it was given (timeout_seconds); the server allows up \
                 to {} s (--timeout)",
                fmt_secs(timeout),
                fmt_secs(server)
            )
        });
    }
    // Only Linux's sandbox takes the network away; elsewhere a failure is the network's own.
    let network_off = cfg!(target_os = "linux")
        && !config.sandbox.allow_network
        && config.sandbox.mode != SandboxMode::Off;
    if failed && network_off && NETWORK_FAILURES.iter().any(|n| said(n)) {
        hints.push(
            "the network is off in this server by choice, so name lookups and connections \
             fail; the operator can allow it with --allow-network (PYRUN_ALLOW_NETWORK=true)"
                .to_owned(),
        );
    }
    if failed {
        hints.extend(unix_sockets_refused(layers, stderr).map(str::to_owned));
    }
    if failed && (said("MemoryError") || killed_by(outcome, "SIGKILL")) && !outcome.timed_out {
        hints.push(format!(
            "the run {} its memory limit of {} MB; the operator can raise it with \
             --max-memory-mb (PYRUN_MAX_MEMORY_MB)",
            if said("MemoryError") {
                "ran out of memory at"
            } else {
                "was killed, most likely for reaching"
            },
            limits.memory_bytes >> 20
        ));
    }
    if killed_by(outcome, "SIGXCPU") {
        hints.push(format!(
            "the run used up its CPU time limit of {} s; the operator can raise it with \
             --max-cpu-secs (PYRUN_MAX_CPU_SECS)",
            limits.cpu_secs
        ));
    }
    if failed && (said("File too large") || killed_by(outcome, "SIGXFSZ")) {
        hints.push(format!(
            "a file the run wrote reached the limit of {} MB per file; the operator can raise \
             it with --max-file-size-mb (PYRUN_MAX_FILE_SIZE_MB)",
            limits.file_size_bytes >> 20
        ));
    }
    let no_process = said("can't start new thread")
        || (said("BlockingIOError") && said("Resource temporarily unavailable"));
    if failed && no_process {
        hints.push(format!(
            "the run reached its limit of {} processes and threads; the operator can raise it \
             with --max-processes (PYRUN_MAX_PROCESSES)",
            limits.processes
        ));
    }
    if failed && said("Too many open files") {
        hints.push(format!(
            "the run reached its limit of {} open files; the operator can raise it with \
             --max-open-files (PYRUN_MAX_OPEN_FILES)",
            limits.open_files
        ));
    }
    if outcome.stdout_truncated || outcome.stderr_truncated {
        hints.push(format!(
            "output over {} bytes per stream was dropped; the operator can raise the limit with \
             --max-output-bytes (PYRUN_MAX_OUTPUT_BYTES), or the script can write a file to \
             PYRUN_OUTPUT_DIR",
            config.max_output_bytes
        ));
    }
    (!hints.is_empty()).then(|| hints.join("\n"))
}

/// The hint for a run that failed on seccomp's refusal of `socket(AF_UNIX)` (seen through
/// multiprocessing's forkserver or Manager, or a script's own socket), on a server whose runs
/// are not given UNIX sockets (`pyrun_sandbox::unix_sockets_given`).
fn unix_sockets_refused(layers: &[&str], stderr: &str) -> Option<&'static str> {
    let refused = layers.contains(&"seccomp") && !pyrun_sandbox::unix_sockets_given(layers);
    let seen = stderr.contains("PermissionError: [Errno 1] Operation not permitted")
        && (stderr.contains("AF_UNIX") || stderr.contains("multiprocessing"));
    (refused && seen).then_some(
        "runs of this server may not open UNIX sockets: they get them only with their own file \
         view and Landlock's scopes (the mount-ns and landlock-scopes layers; Linux 6.12 or \
         later), which this machine lacks; multiprocessing's forkserver start method and \
         Manager() need them: use multiprocessing.set_start_method(\"fork\") (or \"spawn\") \
         with a Queue or Pipe instead",
    )
}

/// The setting behind a run's time limit: `--timeout` for runs a call waits for.
pub const RUN_TIMEOUT: &str = "--timeout, PYTHON_TIMEOUT";
/// The setting behind a background run's time limit.
pub const BACKGROUND_TIMEOUT: &str = "--background-timeout, PYRUN_BACKGROUND_TIMEOUT";

/// The note for a `timeout_seconds` above the server's limit (set by `setting`), which was cut
/// to it.
pub fn capped(requested: Option<f64>, limit: Duration, setting: &str) -> Option<String> {
    let requested = requested.filter(|r| r.is_finite() && *r > limit.as_secs_f64())?;
    Some(format!(
        "timeout_seconds {} was capped to the server's limit of {} s ({setting})",
        fmt_secs(Duration::try_from_secs_f64(requested).unwrap_or(Duration::MAX)),
        fmt_secs(limit)
    ))
}

/// Adds `hint` to a result: a `hint:` line at the end of its first text, and its structured
/// `hint` (after one already there).
pub fn add(result: &mut CallToolResult, hint: &str) {
    let lines: String = hint.lines().map(|line| format!("\nhint: {line}")).collect();
    if let Some(ContentBlock::Text(text)) = result.content.first_mut() {
        text.text.push_str(&lines);
    }
    if let Some(serde_json::Value::Object(fields)) = result.structured_content.as_mut() {
        let joined = match fields.get("hint").and_then(|h| h.as_str()) {
            Some(before) => format!("{before}\n{hint}"),
            None => hint.to_owned(),
        };
        fields.insert("hint".to_owned(), serde_json::Value::String(joined));
    }
}

/// `SIGKILL (9)`: the name and number of a signal a run died of.
pub fn signal_name(signal: i32) -> String {
    match name_of(signal) {
        Some(name) => format!("{name} ({signal})"),
        None => format!("signal {signal}"),
    }
}

fn killed_by(outcome: &RunOutcome, name: &str) -> bool {
    outcome.signal.and_then(name_of) == Some(name)
}

#[cfg(unix)]
fn name_of(signal: i32) -> Option<&'static str> {
    let names = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    names
        .iter()
        .find(|(number, _)| *number == signal)
        .map(|(_, name)| *name)
}

#[cfg(not(unix))]
fn name_of(_: i32) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_above_the_limit_is_said_capped_and_one_below_is_not() {
        let limit = Duration::from_secs(30);
        let note = capped(Some(100.0), limit, RUN_TIMEOUT).unwrap();
        assert_eq!(
            note,
            "timeout_seconds 100 was capped to the server's limit of 30 s (--timeout, PYTHON_TIMEOUT)"
        );
        assert_eq!(capped(Some(30.0), limit, RUN_TIMEOUT), None);
        assert_eq!(capped(Some(5.0), limit, RUN_TIMEOUT), None);
        assert_eq!(capped(None, limit, RUN_TIMEOUT), None);
    }

    #[test]
    fn a_refused_unix_socket_is_explained_only_where_runs_lack_the_layers_it_needs() {
        let stderr = "  File \"/usr/lib/python3.11/multiprocessing/forkserver.py\", line 146\n    \
                      with socket.socket(socket.AF_UNIX) as listener:\n\
                      PermissionError: [Errno 1] Operation not permitted\n";
        let older = ["landlock", "seccomp", "user-netns", "mount-ns"];
        let hint = unix_sockets_refused(&older, stderr).expect("a hint");
        assert!(hint.contains("set_start_method"), "{hint}");
        let given = ["landlock", "seccomp", "mount-ns", "landlock-scopes"];
        assert_eq!(unix_sockets_refused(&given, stderr), None);
        // No seccomp: nothing of ours refused it.
        assert_eq!(unix_sockets_refused(&["rlimits"], stderr), None);
        let other = "PermissionError: [Errno 1] Operation not permitted: 'x'\n";
        assert_eq!(unix_sockets_refused(&older, other), None);
    }

    #[cfg(unix)]
    #[test]
    fn signals_are_named_with_their_number() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL (9)");
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV (11)");
        assert_eq!(signal_name(77), "signal 77");
    }
}

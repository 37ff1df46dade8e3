//! What this server protects on this platform and what its settings turn off, in plain words:
//! one line for the start-up banner ([`summary`]) and the part of the MCP `instructions` that lets
//! a model explain a refusal ([`instructions`]). Built from the settings and the probed sandbox's
//! layers; nothing here decides anything.

use pyrun_sandbox::SandboxMode;

use crate::config::Config;

/// The platform's protection in one line. `layers`: the probed sandbox's layers, `Err` when the
/// probe failed (every run will fail), `None` while it is still probing.
pub fn summary(config: &Config, layers: Option<Result<&[&str], String>>) -> String {
    let sandbox = &config.sandbox;
    if sandbox.mode == SandboxMode::Off {
        return "NONE: the sandbox is off (--sandbox off); scripts can read, change and delete \
                your files and use the network"
            .to_owned();
    }
    if !cfg!(target_os = "linux") {
        let os = if cfg!(windows) { "Windows" } else { "macOS" };
        let limits = if cfg!(windows) {
            "a Job Object"
        } else {
            "rlimits and a process group"
        };
        return format!(
            "files and network are NOT protected on {os}: scripts run as you and can read, \
             change and delete your files and reach the network; only time, memory and \
             process limits apply ({limits}). Serve only scripts you trust, or run the server \
             on Linux"
        );
    }
    let layers = match layers {
        None => None,
        Some(Err(reason)) => {
            return format!("the sandbox could not be set up, so every run will fail: {reason}")
        }
        Some(Ok(layers)) => Some(layers),
    };
    // Still probing: what the settings ask for, said as such.
    let has = |layer: &str| layers.is_none_or(|layers| layers.contains(&layer));
    let files = if has("landlock") {
        if sandbox.read_only_projects {
            "files: only the projects folder (read-only) and the interpreter's"
        } else {
            "files: only the projects folder and the interpreter's"
        }
    } else {
        "files: NOT protected (Landlock is unavailable on this kernel)"
    };
    let network = if sandbox.allow_network {
        "network: allowed (--allow-network)"
    } else if has("user-netns") {
        "network: off"
    } else {
        "network: NOT blocked (no network namespace on this machine)"
    };
    let layers = layers.map_or_else(
        || "its layers are being probed".to_owned(),
        |layers| format!("layers: {}", layers.join(", ")),
    );
    format!(
        "Linux sandbox ({}): {files}; {network}; {layers}",
        mode_name(sandbox.mode)
    )
}

/// For the model: what is off in this server and the setting that turns it on, the limits, and
/// the platform's protection, so that it can explain a refusal instead of guessing.
pub fn instructions(config: &Config, protection: &str) -> String {
    let sandbox = &config.sandbox;
    let mut off = Vec::new();
    // With the sandbox off nothing is blocked, the network included.
    if !sandbox.allow_network && sandbox.mode != SandboxMode::Off {
        off.push(
            "network access: a script's connections fail (name resolution, connection \
             refused); the operator can allow it with --allow-network \
             (PYRUN_ALLOW_NETWORK=true)",
        );
    }
    if !config.inline.allowed {
        off.push(
            "inline code (run_python_code) and Python sessions: only the files of the projects \
             folder run; the operator can allow them with --allow-inline-code",
        );
    }
    if !config.install.allowed {
        off.push(
            "package installs (install_packages): the operator can allow them with \
             --allow-install",
        );
    }
    if sandbox.read_only_projects {
        off.push(
            "writing to the projects folder: scripts may write only their output folder \
             (--read-only-projects or --sandbox strict)",
        );
    }
    let limits = &sandbox.limits;
    let mut text = String::from(
        "Runs the Python files of one projects folder. Call list_python_files to see them, then \
         run_python with a file_name relative to that folder.",
    );
    if !off.is_empty() {
        text.push_str(
            "\n\nOff in this server (when a run or call fails because of one, say so and name \
             the setting; do not retry):",
        );
        for item in off {
            text.push_str("\n- ");
            text.push_str(item);
        }
    }
    let bound = |value: u64, unit: &str| {
        if value == 0 {
            "no limit".to_owned()
        } else {
            format!("{value}{unit}")
        }
    };
    text.push_str(&format!(
        "\n\nLimits: {} s per run (a larger timeout_seconds is capped; --timeout), memory {} \
         (--max-memory-mb), processes {} (--max-processes), each file written {} \
         (--max-file-size-mb), output kept {} bytes per stream (--max-output-bytes).",
        config.timeout.as_secs(),
        bound(limits.memory_bytes >> 20, " MB"),
        bound(limits.processes, ""),
        bound(limits.file_size_bytes >> 20, " MB"),
        config.max_output_bytes,
    ));
    text.push_str("\n\nProtection on this machine: ");
    text.push_str(protection);
    text
}

fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Strict => "strict",
        SandboxMode::Standard => "standard",
        SandboxMode::Off => "off",
    }
}

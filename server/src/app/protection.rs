//! What this server protects on this platform and what its settings turn off, in plain words:
//! one line for the start-up banner ([`summary`]) and the part of the MCP `instructions` that lets
//! a model explain a refusal ([`instructions`]). Built from the settings and the probed sandbox's
//! layers; nothing here decides anything.

use pyrun_run::sandbox_probe::Probed;
use pyrun_sandbox::SandboxMode;

use crate::config::Config;

/// [`summary`] of the sandbox as probed (`None`: still probing).
pub fn summary_of(config: &Config, probed: Option<&Probed>) -> String {
    let layers = probed.map(|probed| match probed {
        Ok(sandbox) => Ok(sandbox.layers()),
        Err(e) => Err(e.to_string()),
    });
    summary(
        config,
        layers
            .as_ref()
            .map(|l| l.as_ref().map(Vec::as_slice).map_err(Clone::clone)),
    )
}

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
    let layers = match layers {
        None => "its layers are being probed".to_owned(),
        Some(layers) => {
            let ns = if sandbox.allow_network {
                "user-ns"
            } else {
                "user-netns"
            };
            let missing: Vec<&str> = ["landlock", "seccomp", ns, "pid-ns", "mount-ns"]
                .into_iter()
                .filter(|layer| !layers.contains(layer))
                .collect();
            let missing = if missing.is_empty() {
                String::new()
            } else {
                format!(" (missing on this machine: {})", missing.join(", "))
            };
            format!("layers: {}{missing}", layers.join(", "))
        }
    };
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
    // With the sandbox off nothing is blocked, the network included; only Linux's sandbox
    // takes the network away.
    if cfg!(target_os = "linux") && !sandbox.allow_network && sandbox.mode != SandboxMode::Off {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Cli;

    fn resolved(flags: &[&str]) -> (Config, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().to_str().unwrap().to_owned();
        let args = ["pyrun-mcp-server", "--projects-dir", &folder]
            .into_iter()
            .chain(flags.iter().copied());
        (Cli::parse_args(args).unwrap().resolve().unwrap(), dir)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_missing_layer_is_named_and_what_it_leaves_open_is_said() {
        let (config, _dir) = resolved(&[]);
        let said = summary(&config, Some(Ok(&["seccomp", "rlimits"])));
        assert!(said.contains("files: NOT protected"), "{said}");
        assert!(said.contains("network: NOT blocked"), "{said}");
        assert!(
            said.contains("missing on this machine: landlock, user-netns, pid-ns, mount-ns"),
            "{said}"
        );
        let failed = summary(&config, Some(Err("no landlock".to_owned())));
        assert!(failed.contains("every run will fail"), "{failed}");
    }

    #[test]
    fn the_sandbox_off_is_said_plainly_and_so_is_what_is_off_in_the_instructions() {
        let (config, _dir) = resolved(&["--sandbox", "off"]);
        assert!(summary(&config, None).starts_with("NONE"));
        let said = instructions(&config, "x");
        // With the sandbox off the network is not blocked: not said to be off.
        assert!(!said.contains("network access:"), "{said}");
        assert!(said.contains("--allow-inline-code"), "{said}");
        let (config, _dir) = resolved(&["--read-only-projects", "--max-memory-mb", "0"]);
        let said = instructions(&config, "x");
        assert_eq!(
            said.contains("--allow-network"),
            cfg!(target_os = "linux"),
            "{said}"
        );
        assert!(said.contains("writing to the projects folder"), "{said}");
        assert!(said.contains("memory no limit"), "{said}");
    }
}

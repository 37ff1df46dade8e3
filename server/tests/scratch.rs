//! A run's scratch after the run, tried for real through the runner: a folder the run locked
//! (`chmod 000`) is removed, the scratch is owner-only again, and the start-up sweep removes a
//! dead server's locked root.
//!
//! Root bypasses file modes, so each test runs in a child process of its own (this binary again,
//! with its own temp folder), as `nobody` when the tests run as root.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util;
use pyrun_mcp_tests::procs::holds_within;
use pyrun_run::python_env::python_read_paths;
use pyrun_run::runner::{RunRequest, Runner, RunnerSettings};
use pyrun_sandbox::{ResourceLimits, Sandbox, SandboxMode, SandboxPolicy};
use tokio_util::sync::CancellationToken;

/// Runs `body` in a child process of its own (this binary again, alone, with a fresh temp folder),
/// as `nobody` when root, and asserts it passed.
fn in_own_process(test: &str, body: impl FnOnce()) {
    let as_nobody = |child: &mut std::process::Command, temp: &Path| {
        use std::os::unix::process::CommandExt;
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(temp, Some(65534), Some(65534)).unwrap();
            child.uid(65534).gid(65534);
        }
    };
    util::run_alone(test, as_nobody, body);
}

/// Makes `d/e/f.txt` in its HOME, locks `d/e` and `d` (mode 000) and opens its HOME to all.
const LOCK: &str = r#"
import os
home = os.environ["HOME"]
os.makedirs(os.path.join(home, "d", "e"))
open(os.path.join(home, "d", "e", "f.txt"), "w").write("x")
os.chmod(os.path.join(home, "d", "e"), 0)
os.chmod(os.path.join(home, "d"), 0)
os.chmod(home, 0o777)
print("locked")
"#;

fn runner(mode: SandboxMode, projects: &Path) -> Runner {
    let python = pyrun_mcp_tests::python();
    let sandboxed = mode != SandboxMode::Off;
    let sandbox = Sandbox::new(SandboxPolicy {
        mode,
        read_paths: if sandboxed {
            python_read_paths(&python).unwrap()
        } else {
            Vec::new()
        },
        write_paths: vec![projects.to_path_buf()],
        allow_network: false,
        limits: ResourceLimits::default(),
        projects: sandboxed.then(|| projects.to_path_buf()),
        read_only_projects: false,
        write_scope: pyrun_sandbox::WriteScope::Project,
        pycache: None,
        support: None,
        tcp_connect_ports: None,
    })
    .unwrap();
    Runner::new(
        RunnerSettings {
            python,
            max_output_bytes: 1 << 20,
            max_concurrent: 2,
            max_background_concurrent: 1,
            pass_env: Vec::new(),
        },
        sandbox,
        CancellationToken::new(),
    )
    .unwrap()
}

/// This process's scratch roots in the temp folder.
fn my_roots() -> Vec<PathBuf> {
    let prefix = format!("pyrun-mcp-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}

/// A dead server's root holding a locked folder, as a killed server would leave it.
fn dead_servers_root() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // A pid that cannot be running (above Linux's pid_max).
    let dead = std::env::temp_dir().join("pyrun-mcp-2100000000-old");
    std::fs::create_dir_all(dead.join("slot-0/d/e")).unwrap();
    std::fs::set_permissions(
        dead.join("slot-0/d"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    dead
}

fn a_locked_folder_goes_and_the_slot_is_private_again(mode: SandboxMode) {
    let dead = dead_servers_root();
    let (_dir, root) = util::project(&[("lock.py", LOCK)]);
    let runner = runner(mode, root.path());
    let script = root.resolve_script("lock.py").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let outcome = runtime
        .block_on(runner.run(
            RunRequest::new(&script, &[], None, Duration::from_secs(30)),
            &CancellationToken::new(),
        ))
        .unwrap();
    assert_eq!(outcome.stdout, "locked\n", "{}", outcome.stderr);

    let roots = my_roots();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let slots: Vec<PathBuf> = std::fs::read_dir(&roots[0])
        .unwrap()
        .flatten()
        .map(|e| e.path())
        // The slot's own /dev/shm lies beside it (`slot-0.shm`).
        .filter(|p| p.extension().is_none_or(|e| e != "shm"))
        .collect();
    assert_eq!(slots.len(), 1, "{slots:?}");
    let slot = &slots[0];
    // Cleaned off the response path: give it a moment. What stays is the slot's own empty
    // output folder, kept for its next run.
    let only_empty_output = |slot: &Path| {
        let names: Vec<_> = std::fs::read_dir(slot)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        names == ["output"]
            && std::fs::read_dir(slot.join("output")).is_ok_and(|mut d| d.next().is_none())
    };
    let cleaned = holds_within(Duration::from_secs(10), || {
        mode_of(slot) == 0o700 && only_empty_output(slot)
    });
    assert!(
        cleaned,
        "slot {} not emptied and private: mode {:o}",
        slot.display(),
        mode_of(slot)
    );
    assert!(
        holds_within(Duration::from_secs(10), || !dead.exists()),
        "the start-up sweep left a dead server's locked root"
    );
    drop(runner);
    drop(runtime);
    assert!(
        my_roots().is_empty(),
        "the scratch root outlived the runner"
    );
}

#[test]
fn a_folder_a_run_locks_in_its_scratch_is_removed_with_the_sandbox_off() {
    in_own_process(
        concat!(
            module_path!(),
            "::a_folder_a_run_locks_in_its_scratch_is_removed_with_the_sandbox_off"
        ),
        || a_locked_folder_goes_and_the_slot_is_private_again(SandboxMode::Off),
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_folder_a_sandboxed_run_locks_in_its_scratch_is_removed() {
    in_own_process(
        concat!(
            module_path!(),
            "::a_folder_a_sandboxed_run_locks_in_its_scratch_is_removed"
        ),
        || a_locked_folder_goes_and_the_slot_is_private_again(SandboxMode::Standard),
    );
}

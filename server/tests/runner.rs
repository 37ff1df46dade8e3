//! The runner's guarantees, tried for real on the real interpreter: the process tree dies with the
//! run, output is capped, secrets stay out, stdin never hangs, bytes that are not UTF-8 survive.

use std::time::Duration;

use crate::util::{block_on, project, run_alone, runner};
#[cfg(unix)]
use pyrun_mcp_tests::procs::{gone_within, read_pid};
use pyrun_run::runner::RunRequest;
use tokio_util::sync::CancellationToken;

fn request<'a>(
    script: &'a pyrun_run::paths::ProjectPath,
    args: &'a [String],
    stdin: Option<&'a str>,
    secs: u64,
) -> RunRequest<'a> {
    RunRequest::new(script, args, stdin, Duration::from_secs(secs))
}

#[cfg(unix)]
const SPAWN_GRANDCHILD: &str = r#"
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import os, time; open('grandchild.pid', 'w').write(str(os.getpid())); time.sleep(120)"])
print("started", flush=True)
time.sleep(120)
"#;

#[cfg(unix)]
#[tokio::test]
async fn timeout_kills_the_grandchild_and_keeps_partial_output() {
    let (dir, root) = project(&[("spawner.py", SPAWN_GRANDCHILD)]);
    let script = root.resolve_script("spawner.py").unwrap();
    let outcome = runner(1 << 20, 4, &[])
        .run(request(&script, &[], None, 2), &CancellationToken::new())
        .await
        .unwrap();
    assert!(outcome.timed_out);
    assert_eq!(outcome.exit_code, None);
    assert_eq!(outcome.stdout, "started\n");
    let pid = read_pid(&dir.path().join("grandchild.pid"));
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "grandchild {pid} outlived the run"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_grandchild_holding_the_pipe_does_not_stall_a_finished_run() {
    let script_text = r#"
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c",
    "import os, time; open('daemon.pid', 'w').write(str(os.getpid())); time.sleep(120)"])
while not os.path.exists("daemon.pid"):
    time.sleep(0.01)
print("parent done")
"#;
    let (dir, root) = project(&[("leaver.py", script_text)]);
    let script = root.resolve_script("leaver.py").unwrap();
    let outcome = runner(1 << 20, 4, &[])
        .run(request(&script, &[], None, 60), &CancellationToken::new())
        .await
        .unwrap();
    assert!(!outcome.timed_out, "the run waited for the grandchild");
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stdout, "parent done\n");
    let pid = read_pid(&dir.path().join("daemon.pid"));
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "left-behind child {pid} survived"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn cancellation_kills_the_run() {
    let (dir, root) = project(&[("spawner.py", SPAWN_GRANDCHILD)]);
    let script = root.resolve_script("spawner.py").unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let pidfile = dir.path().join("grandchild.pid");
    tokio::spawn(async move {
        tokio::task::spawn_blocking(move || read_pid(&pidfile))
            .await
            .unwrap();
        trigger.cancel();
    });
    let outcome = runner(1 << 20, 4, &[])
        .run(request(&script, &[], None, 60), &cancel)
        .await
        .unwrap();
    assert!(outcome.cancelled);
    assert!(!outcome.timed_out);
    let pid = read_pid(&dir.path().join("grandchild.pid"));
    assert!(gone_within(pid, Duration::from_secs(5)));
}

#[tokio::test]
async fn output_is_capped_per_stream() {
    let text = "import sys\nsys.stdout.write('o' * 5_000_000)\nsys.stderr.write('e' * 5_000_000)\n";
    let (_dir, root) = project(&[("loud.py", text)]);
    let script = root.resolve_script("loud.py").unwrap();
    let outcome = runner(1000, 4, &[])
        .run(request(&script, &[], None, 60), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stdout.len(), 1000);
    assert_eq!(outcome.stderr.len(), 1000);
    assert!(outcome.stdout_truncated && outcome.stderr_truncated);
}

#[test]
fn secrets_in_the_server_environment_are_invisible() {
    // The runner takes the environment of its process: the secrets go to a process of this test's
    // own (this binary again, alone), never into this one's, whose other tests' servers and
    // runners would inherit them.
    let secrets = |test: &mut std::process::Command, _: &std::path::Path| {
        test.env("MCP_AUTH_TOKEN", "tok-should-not-leak")
            .env("SOME_API_KEY", "key-should-not-leak")
            .env("PYRUN_TEST_PASSED", "visible");
    };
    let test = concat!(
        module_path!(),
        "::secrets_in_the_server_environment_are_invisible"
    );
    run_alone(test, secrets, || {
        block_on(async {
            let text =
                "import os\nfor k, v in sorted(os.environ.items()):\n    print(f'{k}={v}')\n";
            let (_dir, root) = project(&[("env.py", text)]);
            let script = root.resolve_script("env.py").unwrap();
            let outcome = runner(1 << 20, 4, &["PYRUN_TEST_PASSED"])
                .run(request(&script, &[], None, 30), &CancellationToken::new())
                .await
                .unwrap();
            assert!(
                !outcome.stdout.contains("should-not-leak"),
                "{}",
                outcome.stdout
            );
            assert!(outcome.stdout.contains("PYRUN_TEST_PASSED=visible"));
            assert!(outcome.stdout.contains("PYTHONUNBUFFERED=1"));
        })
    });
}

#[tokio::test]
async fn stdin_is_empty_unless_given() {
    let text = "import sys\ndata = sys.stdin.read()\nprint(f'got {len(data)}: {data!r}')\n";
    let (_dir, root) = project(&[("reader.py", text)]);
    let script = root.resolve_script("reader.py").unwrap();
    let r = runner(1 << 20, 4, &[]);
    let outcome = r
        .run(request(&script, &[], None, 30), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "got 0: ''\n");
    assert!(!outcome.timed_out);
    let outcome = r
        .run(
            request(&script, &[], Some("héllo\n"), 30),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "got 6: 'héllo\\n'\n");
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_replaced_not_fatal() {
    let text = "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end\\n')\n";
    let (_dir, root) = project(&[("bytes.py", text)]);
    let script = root.resolve_script("bytes.py").unwrap();
    let outcome = runner(1 << 20, 4, &[])
        .run(request(&script, &[], None, 30), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "ok \u{fffd}\u{fffd} end\n");
}

#[tokio::test]
async fn runs_in_the_script_folder_with_args_and_sibling_imports() {
    let (_dir, root) = project(&[
        ("pkg/helper.py", "VALUE = 42\n"),
        (
            "pkg/main.py",
            "import os, sys\nfrom helper import VALUE\nopen('out.txt', 'w').write('x')\nprint(VALUE, sys.argv[1:], os.path.basename(os.getcwd()))\n",
        ),
    ]);
    let script = root.resolve_script("pkg/main.py").unwrap();
    let args = vec!["a b".to_owned(), "$(echo no shell)".to_owned()];
    let outcome = runner(1 << 20, 4, &[])
        .run(request(&script, &args, None, 30), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "42 ['a b', '$(echo no shell)'] pkg\n");
    assert!(root.path().join("pkg/out.txt").exists());
}

#[tokio::test]
async fn calls_beyond_the_limit_queue_instead_of_failing() {
    let (_dir, root) = project(&[("nap.py", "import time\ntime.sleep(0.3)\nprint('done')\n")]);
    let script = root.resolve_script("nap.py").unwrap();
    let r = runner(1 << 20, 1, &[]);
    let cancel = CancellationToken::new();
    let runs = (0..3).map(|_| r.run(request(&script, &[], None, 30), &cancel));
    let outcomes = futures::future::join_all(runs).await;
    for outcome in outcomes {
        assert_eq!(outcome.unwrap().stdout, "done\n");
    }
}

#[tokio::test]
async fn exit_codes_are_reported() {
    let (_dir, root) = project(&[("fail.py", "import sys\nsys.exit(7)\n")]);
    let script = root.resolve_script("fail.py").unwrap();
    let outcome = runner(1 << 20, 4, &[])
        .run(request(&script, &[], None, 30), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, Some(7));
}

#[tokio::test]
async fn a_run_never_sees_what_an_earlier_run_left_in_its_home() {
    let script = r#"
import os, pathlib, sys
home = pathlib.Path(os.environ["HOME"])
assert os.environ["TMPDIR"] == str(home)
# The only thing in HOME: the run's own empty output folder (PYRUN_OUTPUT_DIR).
out = pathlib.Path(os.environ["PYRUN_OUTPUT_DIR"])
assert out.parent == home and out.is_dir()
print("seen", sorted(p.name for p in home.iterdir() if p != out), sorted(os.listdir(out)))
if sys.argv[1] == "leave":
    (home / "left.txt").write_text("from an earlier run")
    (out / "left.csv").write_text("from an earlier run")
    (home / ".local/lib").mkdir(parents=True)
    os.chmod(home, 0o777)
"#;
    let (_dir, root) = project(&[("home.py", script)]);
    let script = root.resolve_script("home.py").unwrap();
    let r = runner(1 << 20, 1, &[]);
    let cancel = CancellationToken::new();
    let (leave, look) = (["leave".to_owned()], ["look".to_owned()]);
    for _ in 0..3 {
        let first = r.run(request(&script, &leave, None, 30), &cancel).await;
        assert_eq!(first.unwrap().stdout, "seen [] []\n");
        let second = r.run(request(&script, &look, None, 30), &cancel).await;
        let second = second.unwrap();
        assert_eq!(second.stdout, "seen [] []\n", "{}", second.stderr);
    }
    // Runs that leave nothing reuse their scratch dir; the next run still starts empty.
    for _ in 0..3 {
        let out = r.run(request(&script, &look, None, 30), &cancel).await;
        assert_eq!(out.unwrap().stdout, "seen [] []\n");
    }
}

/// The empty output folder stays in its slot from run to run: a run that swaps it for a link (to
/// a folder the test made), opens up its mode or leaves a file in it must not hand any of that to
/// the next run in the same slot.
#[cfg(unix)]
#[tokio::test]
async fn an_output_folder_swapped_for_a_link_or_opened_up_is_never_handed_on() {
    let script = r#"
import os, pathlib, stat, sys
out = pathlib.Path(os.environ["PYRUN_OUTPUT_DIR"])
st = os.lstat(out)
print("real" if stat.S_ISDIR(st.st_mode) else "link", oct(st.st_mode & 0o777), sorted(os.listdir(out)))
if sys.argv[1] == "link":
    out.rmdir()
    out.symlink_to(sys.argv[2])
elif sys.argv[1] == "open":
    os.chmod(out, 0o777)
elif sys.argv[1] == "leave":
    (out / "left.txt").write_text("from an earlier run")
"#;
    let (dir, root) = project(&[("out.py", script)]);
    let canary = dir.path().join("canary");
    std::fs::create_dir(&canary).unwrap();
    let canary_arg = canary.to_string_lossy().into_owned();
    let script = root.resolve_script("out.py").unwrap();
    let r = runner(1 << 20, 1, &[]);
    let cancel = CancellationToken::new();
    for attack in ["link", "open", "leave", "none"] {
        let args = [attack.to_owned(), canary_arg.clone()];
        let first = r
            .run(request(&script, &args, None, 30), &cancel)
            .await
            .unwrap();
        assert_eq!(
            first.stdout, "real 0o700 []\n",
            "{attack}: {}",
            first.stderr
        );
        let look = ["look".to_owned(), canary_arg.clone()];
        let next = r
            .run(request(&script, &look, None, 30), &cancel)
            .await
            .unwrap();
        assert_eq!(
            next.stdout, "real 0o700 []\n",
            "after {attack}: {}",
            next.stderr
        );
    }
    assert_eq!(
        std::fs::read_dir(&canary).unwrap().count(),
        0,
        "a run wrote through the link"
    );
}

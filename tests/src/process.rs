//! Running a client process to completion with a time bound, keeping its output for the assertion
//! messages.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a finished (or killed) process left behind.
#[derive(Debug)]
pub struct Output {
    /// The exit code; `None` when it was killed (by us at the deadline, or by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Whether we killed it at the deadline.
    pub timed_out: bool,
}

impl Output {
    /// Whether it exited with code 0 in time.
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }

    /// stdout and stderr, labelled, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "exit code: {:?}{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            if self.timed_out {
                " (killed at the deadline)"
            } else {
                ""
            },
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `cmd` with empty stdin, collects stdout and stderr, and kills it after `limit` — with its
/// whole process group on Unix, so a server it spawned cannot keep our pipes open.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                kill_group(&mut child);
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("wait for {cmd:?}: {e}"),
        }
    };
    Output {
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        timed_out,
    }
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Kills the child and, on Unix, the process group it leads (it was started with `process_group(0)`).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg(format!("-{}", child.id()))
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
}

/// A child process stopped when dropped: SIGTERM first, so a server shuts down as a user's would
/// (killing its runs, removing its cgroups), SIGKILL if it is still there after a grace period.
#[derive(Debug)]
pub struct RunningChild(pub std::process::Child);

impl RunningChild {
    /// How long a SIGTERMed child may take to exit before it is killed.
    #[cfg(unix)]
    const GRACE: Duration = Duration::from_secs(5);

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Waits for the process to exit (after a signal), returning whether it did in time.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        matches!(self.0.try_wait(), Ok(Some(_)))
    }
}

impl Drop for RunningChild {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        #[cfg(unix)]
        {
            let _ = Command::new("kill")
                .arg(self.0.id().to_string())
                .stderr(Stdio::null())
                .status();
            if self.wait_exit(Self::GRACE) {
                return;
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! The interpreter, asked once at start whether it is Python 3.8 or later (`--version`): a
//! server that would fail every run, blaming the sandbox, refuses to start instead, naming the
//! interpreter and what it answered.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::ConfigError;

/// The oldest Python runs are made for (the probe and the support files use its syntax).
const OLDEST: (u32, u32) = (3, 8);
/// How long `--version` may take: a program that waits for something is not an interpreter.
const DEADLINE: Duration = Duration::from_secs(15);

/// Checks that `python` answers `--version` as Python 3.8 or later.
pub(super) fn check_version(python: &Path) -> Result<(), ConfigError> {
    let refuse = |answer: String| ConfigError::NotPython3 {
        python: python.display().to_string(),
        answer,
    };
    let answer =
        ask_version(python).map_err(|e| refuse(format!("it could not be started: {e}")))?;
    let first = answer.lines().map(str::trim).find(|l| !l.is_empty());
    let Some(first) = first else {
        return Err(refuse("it answered `--version` with nothing".to_owned()));
    };
    let shown: String = first.chars().take(120).collect();
    match parse_version(first) {
        Some(version) if version >= OLDEST => Ok(()),
        Some(_) => Err(refuse(format!("it is {shown}"))),
        None => Err(refuse(format!(
            "it is not a Python interpreter: asked `--version`, it answered '{shown}'"
        ))),
    }
}

/// `Python 3.11.2` (or `Python 3.13.0rc1`) → (3, 11).
fn parse_version(line: &str) -> Option<(u32, u32)> {
    let version = line.strip_prefix("Python ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// What `python --version` prints, stdout then stderr (Python 2 answers on stderr).
fn ask_version(python: &Path) -> std::io::Result<String> {
    let mut child = Command::new(python)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let started = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "`--version` did not answer within {} s",
                DEADLINE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut text = String::new();
    let mut bytes = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_end(&mut bytes)?;
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_end(&mut bytes)?;
    }
    text.push_str(&String::from_utf8_lossy(&bytes));
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_python_prints() {
        assert_eq!(parse_version("Python 3.11.2"), Some((3, 11)));
        assert_eq!(parse_version("Python 3.13.0rc1"), Some((3, 13)));
        assert_eq!(parse_version("Python 2.7.18"), Some((2, 7)));
        assert_eq!(parse_version("ls (GNU coreutils) 9.1"), None);
        assert!(parse_version("Python 3.7.9").unwrap() < OLDEST);
    }
}

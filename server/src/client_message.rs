//! What a client may be told: a [`ClientMessage`] is text built only from parts that carry no host
//! detail — fixed wording written in this crate, the caller's own text (quoted, escaped), a path
//! relative to the projects folder, numbers (limits, counts), sandbox layer names, the kind of an
//! OS error — with `hint:` lines. Every tool error, every HTTP body the server writes itself (as
//! an axum response: see `transport::http`) and every progress message is one; `/health` is its
//! own type of fixed names and counts.
//!
//! The run layer's errors become messages here, and only here: each mapping logs the whole error
//! (cgroup folders, the scratch root, the interpreter's path, the OS's text) with `tracing`, for
//! the operator, and gives the client its meaning and what to do. There is no constructor from a
//! `String`: a host path cannot reach a client by accident.

use std::fmt::{self, Write as _};
use std::io;

use pyrun_run::engine::backend::PrepareError;
use pyrun_run::install::InstallError;
use pyrun_run::paths::{PathError, ProjectPath, MAX_PATH_BYTES};
use pyrun_run::python_env::{CfgProblem, EnvError};
use pyrun_run::runner::RunError;
use pyrun_run::uv_lock::{LockError, MAX_LOCKED_PACKAGES};
use pyrun_sandbox::SandboxError;

/// Said after a failure whose cause only the operator can see.
const SEE_THE_LOG: &str = "the server's log has the details";

/// Text a client may see. Built from fixed wording and client-safe parts only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMessage {
    text: String,
}

impl ClientMessage {
    /// A message in fixed wording.
    pub fn new(wording: &'static str) -> Self {
        Self {
            text: wording.to_owned(),
        }
    }

    /// A message that opens with the caller's own text, quoted: `'<given>'`.
    pub fn quoting(given: &str) -> Self {
        Self {
            text: String::new(),
        }
        .given(given)
    }

    /// Appends fixed wording.
    pub fn then(mut self, wording: &'static str) -> Self {
        self.text.push_str(wording);
        self
    }

    /// Appends the caller's own text, quoted and with its control characters escaped (see
    /// [`push_escaped`]): it tells the caller nothing it did not send.
    pub fn given(mut self, given: &str) -> Self {
        self.text.push('\'');
        push_escaped(&mut self.text, given);
        self.text.push('\'');
        self
    }

    /// Appends a line of a run's own output (the caller reads all of it in the result anyway),
    /// with its control characters escaped; the serve layer has removed the host's projects
    /// folder from it first.
    pub fn output(mut self, line: &str) -> Self {
        push_escaped(&mut self.text, line);
        self
    }

    /// Appends a short word about an interpreter — a version, a file name without its folder —
    /// as a venv's `pyvenv.cfg` in the projects folder or the server's own facts say it,
    /// escaped: never a host path (the run layer keeps only plain words).
    pub fn word(mut self, word: &str) -> Self {
        push_escaped(&mut self.text, word);
        self
    }

    /// Appends a proven path as the caller may see it: relative to the projects folder, escaped.
    pub fn path(mut self, path: &ProjectPath) -> Self {
        push_escaped(&mut self.text, path.relative());
        self
    }

    /// Appends a path the run layer made relative to the projects folder (a venv's
    /// [`Venv::relative`](pyrun_run::python_env::Venv), an [`EnvError`]'s `venv`), quoted and
    /// escaped: never a host path.
    pub fn relative(mut self, relative: &str) -> Self {
        self.text.push('\'');
        push_escaped(&mut self.text, relative);
        self.text.push('\'');
        self
    }

    /// Appends a number: a limit, a count, a number the caller sent.
    pub fn number(mut self, n: impl Number) -> Self {
        let _ = write!(self.text, "{n}");
        self
    }

    /// Appends a length of time as people say it: `1 h`, `90 min`, `45 s`.
    pub fn duration(mut self, d: std::time::Duration) -> Self {
        let secs = d.as_secs();
        let _ = if secs >= 3600 && secs.is_multiple_of(3600) {
            write!(self.text, "{} h", secs / 3600)
        } else if secs >= 60 && secs.is_multiple_of(60) {
            write!(self.text, "{} min", secs / 60)
        } else {
            write!(self.text, "{secs} s")
        };
        self
    }

    /// Appends the kind of an OS error in parentheses (`(permission denied)`): the kind's fixed
    /// description, never the error's own text, which may name a path.
    pub fn kind(mut self, kind: io::ErrorKind) -> Self {
        let _ = write!(self.text, " ({kind})");
        self
    }

    /// Appends a `hint:` line.
    pub fn hint(mut self, hint: &'static str) -> Self {
        self.text.push_str("\nhint: ");
        self.text.push_str(hint);
        self
    }

    #[cfg(test)]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn into_string(self) -> String {
        self.text
    }
}

impl fmt::Display for ClientMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Numbers a message may show. Sealed: only plain numeric types.
pub trait Number: fmt::Display + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! numbers {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Number for $t {}
    )*};
}
numbers!(u16, u32, u64, usize, i32, i64, f64);

/// A refused path: the caller's own text and what is wrong with it. No host detail is in a
/// [`PathError`] that a caller's path can cause; logged at debug level only.
impl From<PrepareError> for ClientMessage {
    fn from(e: PrepareError) -> Self {
        match e {
            PrepareError::TooLarge {
                bytes,
                limit,
                largest,
            } => {
                let mut message = ClientMessage::new(
                    "the project is too large to send to RunPod: its request would be ",
                )
                .number(bytes)
                .then(" bytes, over RunPod's limit of ")
                .number(limit)
                .then(" bytes per job. Largest files:");
                for (i, (name, size)) in largest.iter().enumerate() {
                    message = message
                        .then(if i == 0 { " " } else { ", " })
                        .relative(name)
                        .then(" (")
                        .number(*size)
                        .then(" bytes)");
                }
                message.hint("move large data out of the project folder (the script can fetch it), or run it with backend local")
            }
            PrepareError::Unreadable(kind) => {
                ClientMessage::new("the project could not be packed for RunPod").kind(kind)
            }
            other => {
                tracing::warn!(%other, "a RunPod job was not prepared");
                ClientMessage::new("the run could not be prepared for RunPod").hint(SEE_THE_LOG)
            }
        }
    }
}

impl From<PathError> for ClientMessage {
    fn from(e: PathError) -> Self {
        tracing::debug!(error = %e, "path refused");
        match e {
            PathError::Empty => Self::new("the file name is empty"),
            PathError::NulByte => Self::new("the path contains a NUL byte"),
            PathError::TooLong => Self::new("the path is longer than ")
                .number(MAX_PATH_BYTES)
                .then(" bytes"),
            PathError::Outside(given) => Self::quoting(&given)
                .then(" is outside the projects folder")
                .hint(OUTSIDE_HINT),
            PathError::NotFound(given) => {
                Self::quoting(&given).then(" was not found in the projects folder")
            }
            PathError::Directory(given) => {
                Self::quoting(&given).then(" is a directory, not a Python file")
            }
            PathError::NotRegularFile(given) => {
                Self::quoting(&given).then(" is not a regular file")
            }
            PathError::NotPython(given) => {
                Self::quoting(&given).then(" is not a Python file (only .py files run)")
            }
            PathError::TooManyLinks(given) => {
                Self::quoting(&given).then(" has too many levels of symbolic links")
            }
            PathError::Unreadable(given) => Self::quoting(&given)
                .then(" could not be read")
                .hint("the server's user may not read it, or a folder on its way"),
            PathError::NotServed(given) => Self::quoting(&given)
                .then(" is hidden or protected and is never served")
                .hint(
                    "hidden files and folders, .env files, __pycache__ and venv are not resources",
                ),
            // Only opening the folder at start-up makes this one, with the host path in it.
            PathError::BadRoot(_) => {
                Self::new("the projects folder cannot be used").hint(SEE_THE_LOG)
            }
        }
    }
}

/// The neutral folder is the sandbox's constant (a test below checks that they agree).
const OUTSIDE_HINT: &str =
    "name files relative to the projects folder, e.g. hello_world.py or /projects/hello_world.py";

/// A run that could not start. The whole error (with any host path in it) goes to the log; the
/// client learns which step failed, the OS error's kind and what to do.
impl From<RunError> for ClientMessage {
    fn from(e: RunError) -> Self {
        match &e {
            RunError::CancelledWhileQueued => tracing::debug!(error = %e, "run not started"),
            _ => tracing::error!(error = %e, "run failed to start"),
        }
        match e {
            RunError::Spawn { what, source } => {
                let message = Self::new("the Python interpreter could not be started: ")
                    .then(what)
                    .kind(source.kind());
                if source.kind() == io::ErrorKind::NotFound {
                    message.hint(
                        "the interpreter (--python) may have been moved or removed since the \
                         server started; restart the server",
                    )
                } else {
                    message.hint(SEE_THE_LOG)
                }
            }
            RunError::Scratch(source) => {
                Self::new("a scratch directory for the run could not be created")
                    .kind(source.kind())
                    .hint("the server's temp folder (TMPDIR) must be writable; the server's log has the details")
            }
            RunError::Sandbox(e) => {
                Self::new("the run was refused because the sandbox could not be applied: ")
                    .then(sandbox_failure(&e))
                    .hint(SEE_THE_LOG)
            }
            RunError::SandboxUnavailable(e) => {
                Self::new("the run was refused because the sandbox could not be set up: ")
                    .then(sandbox_failure(&e))
                    .hint("every run is refused until the server's operator fixes it; the server's log has the details")
            }
            RunError::CancelledWhileQueued => Self::new("the run was cancelled before it started"),
        }
    }
}

/// An install that could not start: the whole error to the log, its meaning to the client.
impl From<InstallError> for ClientMessage {
    fn from(e: InstallError) -> Self {
        match &e {
            InstallError::Busy | InstallError::CancelledWhileQueued => {
                tracing::debug!(error = %e, "install not started")
            }
            _ => tracing::warn!(error = %e, "install refused"),
        }
        match e {
            InstallError::Busy => Self::new("an install into this project is already running")
                .hint("wait for it to end, then call install_packages again"),
            InstallError::CancelledWhileQueued => {
                Self::new("the install was cancelled before it started")
            }
            InstallError::VenvIsLink => Self::new(
                "the project's .venv is a symbolic link: nothing is installed through one",
            )
            .hint("remove the link (a .venv folder is made in its place)"),
            InstallError::VenvNotDir => Self::new("the project's .venv is not a folder")
                .hint("remove or rename it: a .venv folder is made in its place"),
            InstallError::VenvOutside => {
                Self::new("the project's .venv leaves the projects folder")
            }
            InstallError::ForeignVenv(_) => Self::new(
                "the project's .venv was not made from the server's Python interpreter, so \
                 nothing is installed into it",
            )
            .hint("remove the project's .venv: install_packages makes a new one"),
            InstallError::Venv(source) => Self::new("the project's .venv could not be prepared")
                .kind(source.kind())
                .hint(SEE_THE_LOG),
            InstallError::Scratch(source) => {
                Self::new("a scratch folder for the install could not be made")
                    .kind(source.kind())
                    .hint(SEE_THE_LOG)
            }
            InstallError::Sandbox(e) => Self::new("installs are refused: ")
                .then(sandbox_failure(&e))
                .hint("the server's operator can see why in its log; runs are not affected"),
            InstallError::Spawn { what, source } => {
                Self::new("the installer could not be started: ")
                    .then(what)
                    .kind(source.kind())
                    .hint(SEE_THE_LOG)
            }
            InstallError::Unsupported => Self::new(
                "installs need the Linux sandbox on this platform (or a server run with \
                 --sandbox off)",
            ),
            InstallError::LockNeedsUv => Self::lock_needs_uv(),
        }
    }
}

impl ClientMessage {
    /// A `uv.lock` to sync on a server without uv.
    pub fn lock_needs_uv() -> Self {
        Self::new("syncing the project's uv.lock needs uv, and this server has none")
            .hint("name the packages, or a requirements file of the project (pkg==1.2.3 lines)")
    }
}

/// Said after every refused lock.
const LOCK_HINT: &str = "lock the project against the server's package index only (uv lock \
                         --index-url <the server's --package-index>, no git, URL or path \
                         sources), or name the packages";

/// A project's `uv.lock` (or `pyproject.toml`) that is not synced: which package and why. The
/// names are the lock's own text, quoted.
impl From<LockError> for ClientMessage {
    fn from(e: LockError) -> Self {
        tracing::info!(error = %e, "uv.lock refused");
        let refused = |package: &str| {
            Self::new("the project's uv.lock is not synced: package ").given(package)
        };
        match e {
            LockError::NotToml(_) => Self::new("the project's uv.lock is not valid TOML")
                .hint("lock the project again (uv lock)"),
            LockError::Version(_) => {
                Self::new("the project's uv.lock is not of version 1, the one this server reads")
                    .hint("lock the project again with a current uv (uv lock)")
            }
            LockError::TooManyPackages(n) => Self::new("the project's uv.lock has ")
                .number(n)
                .then(" packages, more than the ")
                .number(MAX_LOCKED_PACKAGES)
                .then(" synced at most"),
            LockError::Source { package, kind } => refused(&package)
                .then(" comes from a ")
                .given(&kind)
                .then(" source: packages come only from the server's package index")
                .hint(LOCK_HINT),
            LockError::OtherIndex { package } => refused(&package)
                .then(" comes from another package index than the server's")
                .hint(LOCK_HINT),
            LockError::Download { package } => refused(&package)
                .then(
                    " downloads from outside the server's package index (another scheme or \
                     port, credentials in the URL, or a local path)",
                )
                .hint(LOCK_HINT),
            LockError::BadEntry { package } => {
                refused(&package).then(" has a name or version that is not a plain one")
            }
            LockError::NoProject => {
                Self::new("the project's uv.lock has no entry for the project itself")
                    .hint("lock the project again (uv lock)")
            }
            LockError::TwoProjects => Self::new(
                "the project's uv.lock has more than one entry for the project itself: \
                 workspaces are not synced",
            ),
            LockError::RequiresPython => {
                Self::new("the project's uv.lock has a malformed requires-python")
            }
            LockError::PyprojectNotToml(_) => {
                Self::new("the project's pyproject.toml is not valid TOML")
            }
            LockError::NoProjectName => {
                Self::new("the project's pyproject.toml has no [project] name")
            }
            LockError::OtherProject { pyproject, lock } => {
                Self::new("the project's pyproject.toml names the project ")
                    .given(&pyproject)
                    .then(", its uv.lock ")
                    .given(&lock)
                    .hint("lock the project again (uv lock)")
            }
        }
    }
}

/// Said after every refused venv.
const VENV_HINT: &str = "recreate it with the server's interpreter (python3 -m venv .venv), or \
                         remove it to run with the server's own interpreter";

/// A venv a run would use but may not: which one (relative), what is wrong with it, what to do.
/// The whole error (its `home`, a host path) goes to the log.
impl From<EnvError> for ClientMessage {
    fn from(e: EnvError) -> Self {
        tracing::warn!(error = %e, "environment refused");
        let refused = |venv: &str| {
            Self::new("the virtual environment ")
                .relative(venv)
                .then(" is refused: ")
        };
        match e {
            EnvError::Link { venv } => refused(&venv)
                .then("it is a symbolic link, and runs use only a real folder")
                .hint(VENV_HINT),
            EnvError::BadConfig { venv, problem } => refused(&venv)
                .then("its pyvenv.cfg ")
                .then(cfg_problem(problem))
                .hint(VENV_HINT),
            EnvError::HomeGone { venv, .. } => refused(&venv)
                .then("its base interpreter (`home` in its pyvenv.cfg) no longer exists")
                .hint(VENV_HINT),
            EnvError::HomeInside { venv, .. } => refused(&venv)
                .then(
                    "its base interpreter (`home` in its pyvenv.cfg) lies inside the projects \
                     folder, where scripts can write",
                )
                .hint(VENV_HINT),
            EnvError::NotAllowed { venv, base, .. } => {
                let mut said =
                    refused(&venv).then("its base interpreter (`home` in its pyvenv.cfg)");
                said = match (&base.wants_version, &base.wants_name) {
                    (Some(version), Some(name)) => said
                        .then(" is Python ")
                        .word(version)
                        .then(" (")
                        .word(name)
                        .then("),"),
                    (Some(version), None) => said.then(" is Python ").word(version).then(","),
                    (None, Some(name)) => said.then(" is ").word(name).then(","),
                    (None, None) => said,
                };
                said = said.then(" which this server does not run; it runs ");
                for (i, interpreter) in base.runs.iter().enumerate() {
                    if i > 0 {
                        said = said.then(", ");
                    }
                    said = said.then("Python ").word(interpreter);
                }
                said.hint(
                    "recreate it with the server's interpreter (python3 -m venv .venv), or ask \
                     the operator to allow the venv's interpreter: --allow-python PATH \
                     (PYRUN_ALLOW_PYTHON) with the interpreter in the venv's `home`; the server's \
                     log names it, and `pyrun-mcp-server config ASSISTANT --allow-venv-pythons` \
                     adds it to an assistant's snippet",
                )
            }
            EnvError::OtherVersion { venv, .. } => refused(&venv)
                .then(
                    "it was made with another Python version than the interpreter allowed in \
                     its `home`",
                )
                .hint(VENV_HINT),
            EnvError::Interpreter(_) => {
                Self::new("the Python interpreter could not be asked what it is").hint(SEE_THE_LOG)
            }
        }
    }
}

/// A broken `pyvenv.cfg`, in fixed words.
fn cfg_problem(problem: CfgProblem) -> &'static str {
    match problem {
        CfgProblem::NotAFile => "is not a regular file",
        CfgProblem::Unreadable(_) => "could not be read",
        CfgProblem::TooLarge => "is larger than 64 KiB",
        CfgProblem::NotText => "is not UTF-8 text",
        CfgProblem::NoHome => "has no `home = FOLDER` line naming its base interpreter's folder",
        CfgProblem::HomeNotAbsolute => "names a `home` that is not an absolute path",
    }
}

/// What failed in the sandbox, in fixed words (its error's text may name cgroup folders and the
/// interpreter's path).
fn sandbox_failure(e: &SandboxError) -> &'static str {
    match e {
        SandboxError::StrictUnavailable { .. } => {
            "this machine lacks a layer that --sandbox strict requires"
        }
        SandboxError::Prepare { .. } => {
            "the run's own rules (its cgroups or its view of the files) could not be prepared"
        }
        SandboxError::Landlock(_) => "the landlock ruleset could not be built",
        SandboxError::Seccomp(_) => "the seccomp filter could not be compiled",
        SandboxError::ProbeLost => "the sandbox probe ended without an answer",
        SandboxError::PortRulesUnavailable { .. } => {
            "this kernel cannot limit TCP connections to the package index's port \
             (Landlock ABI 4, Linux 6.7, is needed)"
        }
        SandboxError::PythonPaths { .. } => {
            "the interpreter could not be asked which folders it reads"
        }
        SandboxError::InterpreterHidden { .. } => {
            "the interpreter lies where runs see one of the server's own folders"
        }
        #[cfg(target_os = "linux")]
        SandboxError::Spawn(pyrun_sandbox::spawn::SpawnError::Hook(_)) => {
            "a layer could not be applied to the run's process"
        }
        #[cfg(target_os = "linux")]
        SandboxError::Spawn(pyrun_sandbox::spawn::SpawnError::Start { what, .. }) => what,
    }
}

/// Appends `name` with every character that could break or disguise a line made visible: `\n`,
/// `\r`, `\t`, `\\`, other C0/C1 controls and DEL as `\u{..}`, and so the Unicode line
/// separators and bidirectional overrides.
pub fn push_escaped(text: &mut String, name: &str) {
    for c in name.chars() {
        match c {
            '\n' => text.push_str("\\n"),
            '\r' => text.push_str("\\r"),
            '\t' => text.push_str("\\t"),
            '\\' => text.push_str("\\\\"),
            c if c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                let _ = write!(text, "\\u{{{:x}}}", u32::from(c));
            }
            c => text.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_fixed_wording_given_text_numbers_and_hints() {
        let m = ClientMessage::quoting("a\nb.py")
            .then(" is longer than ")
            .number(12usize)
            .kind(io::ErrorKind::PermissionDenied)
            .hint("try another");
        assert_eq!(
            m.as_str(),
            "'a\\nb.py' is longer than 12 (permission denied)\nhint: try another"
        );
    }

    #[test]
    fn listed_names_cannot_add_or_disguise_lines() {
        let mut text = String::new();
        push_escaped(
            &mut text,
            "a\nb.py\r\t\u{0}\u{1b}[31m\u{7f}\u{85}\u{2028}\u{202e}x\\y é.py",
        );
        assert_eq!(
            text,
            "a\\nb.py\\r\\t\\u{0}\\u{1b}[31m\\u{7f}\\u{85}\\u{2028}\\u{202e}x\\\\y é.py"
        );
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }

    #[test]
    fn the_outside_hint_names_the_neutral_folder() {
        use pyrun_run::paths::RUN_PROJECTS_DIR;
        assert!(OUTSIDE_HINT.ends_with(&format!("{RUN_PROJECTS_DIR}/hello_world.py")));
    }

    #[test]
    fn path_refusals_keep_their_wording() {
        let m = ClientMessage::from(PathError::Outside("../x.py".into()));
        assert_eq!(
            m.as_str(),
            "'../x.py' is outside the projects folder\nhint: name files relative to the projects \
             folder, e.g. hello_world.py or /projects/hello_world.py"
        );
        let m = ClientMessage::from(PathError::TooLong);
        assert_eq!(m.as_str(), "the path is longer than 4096 bytes");
        let m = ClientMessage::from(PathError::BadRoot("'/srv/secret' is gone".into()));
        assert!(!m.as_str().contains("/srv"), "{m}");
    }

    #[test]
    fn install_errors_keep_host_detail_out() {
        let host = "/srv/projects/app/.venv";
        let errors = [
            InstallError::ForeignVenv(format!("bin/python is {host}/evil")),
            InstallError::Venv(io::Error::new(io::ErrorKind::PermissionDenied, host)),
            InstallError::Scratch(io::Error::new(io::ErrorKind::NotFound, host)),
            InstallError::Sandbox(std::sync::Arc::new(SandboxError::PortRulesUnavailable {
                abi: 3,
            })),
            InstallError::Spawn {
                what: "the installer could not be executed",
                source: io::Error::new(io::ErrorKind::NotFound, host),
            },
        ];
        for e in errors {
            let shown = ClientMessage::from(e);
            assert!(!shown.as_str().contains("/srv"), "{shown}");
            assert!(shown.as_str().contains("\nhint: "), "{shown}");
        }
        let ports = ClientMessage::from(InstallError::Sandbox(std::sync::Arc::new(
            SandboxError::PortRulesUnavailable { abi: 3 },
        )));
        assert!(ports.as_str().contains("Landlock ABI 4"), "{ports}");
    }

    #[test]
    fn refused_venvs_are_named_relatively_with_a_hint_and_no_host_path() {
        use pyrun_run::python_env::{CfgProblem, EnvError};
        let home = std::path::PathBuf::from("/srv/secret/python/bin");
        let venv = || "sub/.venv\nforged".to_owned();
        let errors = [
            EnvError::Link { venv: venv() },
            EnvError::BadConfig {
                venv: venv(),
                problem: CfgProblem::NoHome,
            },
            EnvError::HomeGone {
                venv: venv(),
                home: home.clone(),
            },
            EnvError::HomeInside {
                venv: venv(),
                home: home.clone(),
            },
            EnvError::NotAllowed {
                venv: venv(),
                home: home.clone(),
                base: Box::new(pyrun_run::python_env::ForeignBase {
                    wants_version: Some("3.12.1".into()),
                    wants_name: Some("python3.12\n".into()),
                    runs: vec!["3.11.2 (python3)".into()],
                    allow: Some(home.join("python3.12")),
                }),
            },
            EnvError::OtherVersion {
                venv: venv(),
                home,
                made_with: "3.12".into(),
                have: "3.11".into(),
            },
        ];
        for e in errors {
            let shown = ClientMessage::from(e);
            assert!(
                shown
                    .as_str()
                    .starts_with("the virtual environment 'sub/.venv\\nforged' is refused: "),
                "{shown}"
            );
            assert!(!shown.as_str().contains("/srv"), "{shown}");
            assert!(shown.as_str().contains("\nhint: "), "{shown}");
        }
    }

    #[test]
    fn run_errors_keep_host_detail_out() {
        let host = "/sys/fs/cgroup/pids/pyrun-mcp-1-0-2/slot-3";
        let errors = [
            RunError::Spawn {
                what: "the interpreter could not be executed",
                source: io::Error::new(io::ErrorKind::NotFound, format!("{host}: gone")),
            },
            RunError::Scratch(io::Error::new(io::ErrorKind::PermissionDenied, host)),
            RunError::Sandbox(SandboxError::Prepare {
                what: format!("cgroup {host}"),
                source: io::Error::from(io::ErrorKind::NotFound),
            }),
            RunError::SandboxUnavailable(std::sync::Arc::new(SandboxError::PythonPaths {
                python: host.into(),
                reason: format!("{host} exited"),
            })),
        ];
        for e in errors {
            let shown = ClientMessage::from(e);
            assert!(!shown.as_str().contains("/sys"), "{shown}");
            assert!(shown.as_str().contains("\nhint: "), "{shown}");
        }
    }
}

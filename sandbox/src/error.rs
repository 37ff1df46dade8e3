//! The one error type of the sandbox: what failed while probing, preparing or starting, for
//! the server to report (its variants are matched there: keep their meaning).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "--sandbox strict: this machine lacks {missing}; run with --sandbox standard to use the layers it has"
    )]
    StrictUnavailable { missing: String },
    #[error("cannot prepare the sandbox ({what}): {source}")]
    Prepare {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the Landlock ruleset: {0}")]
    Landlock(String),
    #[error("cannot compile the seccomp filter: {0}")]
    Seccomp(String),
    #[error("the sandbox probe ended without an answer (see the server log)")]
    ProbeLost,
    #[error(
        "TCP connections cannot be limited to chosen ports on this kernel (Landlock ABI {abi}; \
         ABI 4, Linux 6.7, is needed)"
    )]
    PortRulesUnavailable { abi: i64 },
    /// The caller could not learn the trees an interpreter reads (the run layer asks it), so
    /// no policy could be made for it.
    #[error("cannot ask the interpreter {python} for its paths: {reason}")]
    PythonPaths { python: PathBuf, reason: String },
    /// An interpreter's tree lies where every run's view shows one of the server's own folders
    /// (`/projects`, `/pycache`, `/pyrun`, or `/tmp` itself): runs could not start it there.
    #[error(
        "the interpreter reads {tree}, which lies under {under}, where every run sees {instead}; \
         hint: use an interpreter (or venv) outside {under}"
    )]
    InterpreterHidden {
        tree: PathBuf,
        under: &'static str,
        instead: &'static str,
    },
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Spawn(#[from] crate::spawn::SpawnError),
}

impl SandboxError {
    #[cfg(any(target_os = "linux", windows))]
    pub(crate) fn prepare(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Prepare {
            what: what.into(),
            source,
        }
    }
}

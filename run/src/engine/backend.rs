//! The backends beyond this machine, as the engine knows them: a [`RemoteBackend`] packs a
//! script's project into a job ([`RemoteBackend::prepare`]) that the background registry then
//! drives like any run ([`RemoteRun`]), and says how its endpoint is doing
//! ([`RemoteBackend::health`]). The trait lives here, in the run layer, so that the engine owns
//! the local / remote choice while HTTP stays in `pyrun-remote`, which implements it (the arrow
//! points down: remote → run). [`Backends`] is the set a server offers, `local` first.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::background::{RemoteRun, LOCAL_BACKEND};
use crate::paths::ProjectPath;

/// A future a backend returns (boxed: the engine holds its backends as trait objects).
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A backend that runs a project file somewhere else than on this machine.
pub trait RemoteBackend: Send + Sync + std::fmt::Debug {
    /// Its name, as callers write it in a tool's `backend` argument (`runpod`).
    fn name(&self) -> &'static str;

    /// Packs the script's project and builds its job; nothing leaves the machine yet.
    fn prepare<'a>(
        &'a self,
        script: &'a ProjectPath,
        spec: JobSpec<'a>,
    ) -> BackendFuture<'a, Result<Box<dyn RemoteRun>, PrepareError>>;

    /// The endpoint's health as the backend reports it (one request).
    fn health(&self) -> BackendFuture<'_, BackendHealth>;
}

/// What a job carries besides the project.
#[derive(Debug, Clone)]
pub struct JobSpec<'a> {
    pub args: &'a [String],
    pub stdin: Option<&'a str>,
    pub timeout: Duration,
    /// Bytes kept per stream (`--max-output-bytes`).
    pub max_output: usize,
}

/// Why a run was not sent.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The project folder could not be read.
    #[error("the project could not be packed: the project folder could not be read ({0})")]
    Unreadable(std::io::ErrorKind),
    /// Packing failed for a reason only the operator should read.
    #[error("the project could not be packed: {0}")]
    Pack(String),
    #[error("the project's request would be {bytes} bytes, over the backend's limit of {limit}")]
    TooLarge {
        bytes: usize,
        limit: usize,
        /// The largest files sent, largest first (at most five), with their sizes.
        largest: Vec<(String, u64)>,
    },
    #[error("the job could not be written ({0})")]
    Encode(String),
}

/// A remote endpoint's state, as its backend reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendHealth {
    /// Whether the endpoint could be asked at all.
    pub reachable: bool,
    /// Whether it answered with the server's key (false: the key was refused).
    pub key_works: bool,
    /// Workers by state, as the backend counts them (`Null` when unread).
    pub workers: serde_json::Value,
    /// Jobs by state, as the backend counts them (`Null` when unread).
    pub jobs: serde_json::Value,
    /// Why the endpoint could not be read, when it could not.
    pub error: Option<String>,
}

/// The backends a server offers: this machine, then the remote ones it was given.
#[derive(Debug, Clone, Default)]
pub struct Backends {
    remote: Vec<Arc<dyn RemoteBackend>>,
}

/// A `backend` argument that names none of the server's backends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend '{given}' is not one of this server's: {}", offered.join(" "))]
pub struct UnknownBackend {
    /// The caller's own text (trimmed).
    pub given: String,
    /// The server's backends, `local` first.
    pub offered: Vec<&'static str>,
}

impl Backends {
    pub fn new(remote: Vec<Arc<dyn RemoteBackend>>) -> Self {
        Self { remote }
    }

    /// The names callers may write, `local` first.
    pub fn names(&self) -> Vec<&'static str> {
        std::iter::once(LOCAL_BACKEND)
            .chain(self.remote.iter().map(|b| b.name()))
            .collect()
    }

    /// The remote backends, in the order they were configured.
    pub fn remotes(&self) -> &[Arc<dyn RemoteBackend>] {
        &self.remote
    }

    /// Whether any remote backend is configured.
    pub fn any_remote(&self) -> bool {
        !self.remote.is_empty()
    }

    /// The remote backend called `name`, if configured.
    pub fn remote(&self, name: &str) -> Option<&Arc<dyn RemoteBackend>> {
        self.remote.iter().find(|b| b.name() == name)
    }

    /// The backend a call names: `None` (absent, empty or `local`) runs on this machine.
    pub fn choose(
        &self,
        given: Option<&str>,
    ) -> Result<Option<Arc<dyn RemoteBackend>>, UnknownBackend> {
        match given.map(str::trim) {
            None | Some("") | Some(LOCAL_BACKEND) => Ok(None),
            Some(name) => self
                .remote(name)
                .cloned()
                .map(Some)
                .ok_or_else(|| UnknownBackend {
                    given: name.to_owned(),
                    offered: self.names(),
                }),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A backend that packs nothing and is never reached.
    #[derive(Debug)]
    pub(crate) struct Nowhere(pub &'static str);

    impl RemoteBackend for Nowhere {
        fn name(&self) -> &'static str {
            self.0
        }
        fn prepare<'a>(
            &'a self,
            _: &'a ProjectPath,
            _: JobSpec<'a>,
        ) -> BackendFuture<'a, Result<Box<dyn RemoteRun>, PrepareError>> {
            Box::pin(async { Err(PrepareError::Encode("nowhere".into())) })
        }
        fn health(&self) -> BackendFuture<'_, BackendHealth> {
            Box::pin(async {
                BackendHealth {
                    reachable: false,
                    key_works: false,
                    workers: serde_json::Value::Null,
                    jobs: serde_json::Value::Null,
                    error: Some("nowhere".into()),
                }
            })
        }
    }

    #[test]
    fn local_is_offered_first_and_chosen_by_default() {
        let backends = Backends::new(vec![Arc::new(Nowhere("runpod"))]);
        assert_eq!(backends.names(), ["local", "runpod"]);
        for local in [None, Some(""), Some("  "), Some("local"), Some(" local ")] {
            assert!(backends.choose(local).unwrap().is_none(), "{local:?}");
        }
        let chosen = backends.choose(Some(" runpod")).unwrap().unwrap();
        assert_eq!(chosen.name(), "runpod");
    }

    #[test]
    fn an_unknown_or_unconfigured_backend_is_refused_with_the_offered_ones() {
        let none = Backends::default();
        assert!(!none.any_remote());
        let refused = none.choose(Some("runpod")).unwrap_err();
        assert_eq!(refused.given, "runpod");
        assert_eq!(refused.offered, ["local"]);
        let some = Backends::new(vec![Arc::new(Nowhere("runpod"))]);
        let refused = some.choose(Some("RunPod")).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "backend 'RunPod' is not one of this server's: local runpod"
        );
    }
}

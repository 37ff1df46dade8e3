//! The sandbox, probed on a background thread at start-up so that the server answers its first
//! request at once (asking the interpreter for its paths alone takes ~10 ms); runs wait for it.
//! Kept out of `sandbox`, which knows nothing of tokio.

use std::sync::Arc;

use tokio::sync::watch;

use crate::sandbox::{Sandbox, SandboxError};

/// The outcome of probing: shared, so that every run that waits for it gets the same answer.
pub type Probed = Result<Arc<Sandbox>, Arc<SandboxError>>;

/// A sandbox that is ready, or being probed. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SandboxCell {
    rx: watch::Receiver<Option<Probed>>,
}

impl SandboxCell {
    pub fn ready(sandbox: Sandbox) -> Self {
        let (_tx, rx) = watch::channel(Some(Ok(Arc::new(sandbox))));
        Self { rx }
    }

    /// Runs `build` on a thread of its own; logs what it found (or why it failed).
    pub fn probe_in_background(
        build: impl FnOnce() -> Result<Sandbox, SandboxError> + Send + 'static,
    ) -> Self {
        let (tx, rx) = watch::channel(None);
        let probe = move || {
            let probed = build().map(Arc::new).map_err(Arc::new);
            match &probed {
                Ok(sandbox) => tracing::info!(layers = ?sandbox.layers(), "sandbox ready"),
                Err(e) => tracing::error!("the sandbox cannot be set up; every run will fail: {e}"),
            }
            let _ = tx.send(Some(probed));
        };
        if let Err(e) = std::thread::Builder::new()
            .name("sandbox-probe".into())
            .spawn(probe)
        {
            // Without a thread, nothing sends: runs get the error below.
            tracing::error!("cannot start the sandbox probe: {e}");
        }
        Self { rx }
    }

    /// The sandbox, once probed.
    pub async fn get(&self) -> Probed {
        let mut rx = self.rx.clone();
        let probed = match rx.wait_for(Option::is_some).await {
            Ok(value) => value.clone(),
            Err(_) => None,
        };
        probed.unwrap_or_else(|| Err(Arc::new(SandboxError::ProbeLost)))
    }

    /// The sandbox if it is probed already (for reports that must not wait).
    pub fn now(&self) -> Option<Probed> {
        self.rx.borrow().clone()
    }

    /// The active layers, `None` while probing or when the probe failed.
    pub fn layers_now(&self) -> Option<Vec<&'static str>> {
        self.now()?.ok().map(|sandbox| sandbox.layers())
    }
}

impl From<Sandbox> for SandboxCell {
    fn from(sandbox: Sandbox) -> Self {
        Self::ready(sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{ResourceLimits, SandboxMode, SandboxPolicy};

    fn off() -> Result<Sandbox, SandboxError> {
        Sandbox::new(SandboxPolicy {
            mode: SandboxMode::Off,
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            allow_network: false,
            limits: ResourceLimits::default(),
        })
    }

    #[tokio::test]
    async fn runs_wait_for_the_background_probe_and_share_its_answer() {
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let cell = SandboxCell::probe_in_background(move || {
            go_rx.recv().ok();
            off()
        });
        assert!(cell.now().is_none(), "answered before the probe ended");
        let waiting = tokio::spawn({
            let cell = cell.clone();
            async move { cell.get().await.map(|s| s.mode()) }
        });
        go_tx.send(()).unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), SandboxMode::Off);
        assert!(cell.now().is_some_and(|p| p.is_ok()));
    }

    #[tokio::test]
    async fn a_failed_probe_fails_every_run_with_its_reason() {
        let cell = SandboxCell::probe_in_background(|| {
            Err(SandboxError::StrictUnavailable {
                missing: "landlock".into(),
            })
        });
        for _ in 0..2 {
            let err = cell.get().await.unwrap_err();
            assert!(err.to_string().contains("landlock"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_probe_that_panics_does_not_hang_the_runs() {
        let cell = SandboxCell::probe_in_background(|| panic!("probe bug"));
        let err = cell.get().await.unwrap_err();
        assert!(matches!(*err, SandboxError::ProbeLost), "{err}");
    }
}

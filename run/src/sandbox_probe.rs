//! The sandbox, probed on a background thread so that the server answers its first requests at
//! once (asking the interpreter for its paths alone takes ~10 ms); runs wait for it.
//! Kept out of `sandbox`, which knows nothing of tokio.
//!
//! The probe starts when the first run needs it, or once the server has had `idle_delay` to
//! answer a client's opening requests (`initialize`, `tools/list`), whichever comes first: on two
//! cores, an interpreter started alongside those replies delayed them by ~1 ms at the median and
//! ~4 ms at p90 (measured here), while no run gains from starting it before it is asked for.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use tokio::sync::watch;

use pyrun_sandbox::{Sandbox, SandboxError};

/// The outcome of probing: shared, so that every run that waits for it gets the same answer.
pub type Probed = Result<Arc<Sandbox>, Arc<SandboxError>>;

/// A sandbox that is ready, or being probed. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SandboxProbe {
    rx: watch::Receiver<Option<Probed>>,
    /// Starts a probe that is still waiting for its idle delay (`None` once ready).
    start_now: Option<mpsc::Sender<()>>,
}

impl SandboxProbe {
    pub fn ready(sandbox: Sandbox) -> Self {
        let (_tx, rx) = watch::channel(Some(Ok(Arc::new(sandbox))));
        Self {
            rx,
            start_now: None,
        }
    }

    /// Runs `build` on a thread of its own, when a run first asks for the sandbox or after
    /// `idle_delay`; logs what it found (or why it failed).
    pub fn probe_in_background(
        idle_delay: Duration,
        build: impl FnOnce() -> Result<Sandbox, SandboxError> + Send + 'static,
    ) -> Self {
        let (tx, rx) = watch::channel(None);
        let (start_tx, start_rx) = mpsc::channel();
        let probe = move || {
            // Asked for by a run: at full speed, someone is waiting. Otherwise in the background.
            if start_rx.recv_timeout(idle_delay).is_err() {
                pyrun_sandbox::os::lower_thread_priority();
            }
            let probed = build().map(Arc::new).map_err(Arc::new);
            match &probed {
                Ok(sandbox) => tracing::info!(layers = ?sandbox.layers(), "sandbox ready"),
                // Its interpreter was killed by the server's shutdown: no run will come.
                Err(e) if crate::helpers::closing() => {
                    tracing::debug!("sandbox probe ended by the shutdown: {e}")
                }
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
        Self {
            rx,
            start_now: Some(start_tx),
        }
    }

    /// The sandbox, once probed (starting the probe now if it is still waiting).
    pub async fn get(&self) -> Probed {
        let mut rx = self.rx.clone();
        if rx.borrow().is_none() {
            if let Some(start) = &self.start_now {
                // Fails only when the probe has started already.
                let _ = start.send(());
            }
        }
        let probed = match rx.wait_for(Option::is_some).await {
            Ok(value) => value.clone(),
            Err(_) => None,
        };
        probed.unwrap_or_else(|| Err(Arc::new(SandboxError::ProbeLost)))
    }

    /// The sandbox once probed, without starting the probe early (for the start-up banner, which
    /// must not cost the first requests their idle delay).
    pub async fn probed(&self) -> Probed {
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

impl From<Sandbox> for SandboxProbe {
    fn from(sandbox: Sandbox) -> Self {
        Self::ready(sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyrun_sandbox::{SandboxMode, SandboxPolicy};

    fn off() -> Result<Sandbox, SandboxError> {
        Sandbox::new(SandboxPolicy::bare(SandboxMode::Off))
    }

    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn runs_wait_for_the_background_probe_and_share_its_answer() {
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let cell = SandboxProbe::probe_in_background(LONG, move || {
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
        let cell = SandboxProbe::probe_in_background(LONG, || {
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
        let cell = SandboxProbe::probe_in_background(LONG, || panic!("probe bug"));
        let err = cell.get().await.unwrap_err();
        assert!(matches!(*err, SandboxError::ProbeLost), "{err}");
    }

    #[tokio::test]
    async fn the_probe_waits_for_a_run_or_for_the_idle_delay() {
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let cell = SandboxProbe::probe_in_background(LONG, move || {
            let _ = started_tx.send(());
            off()
        });
        // Not started on its own within the (long) idle delay...
        assert!(started_rx.recv_timeout(Duration::from_millis(200)).is_err());
        // ...but at once when a run asks.
        assert!(cell.get().await.is_ok());
        assert!(started_rx.try_recv().is_ok());

        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let _idle = SandboxProbe::probe_in_background(Duration::from_millis(20), move || {
            let _ = started_tx.send(());
            off()
        });
        assert!(
            started_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "the probe never started without a run"
        );
    }
}

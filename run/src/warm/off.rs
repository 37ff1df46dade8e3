//! Elsewhere than Linux: warm runs are off (they need the Linux run path). The runner's calls
//! find no spare and start none; the types say the same things as Linux's, and hold nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::WarmSettings;
use crate::launch::{Spawned, Starter};
use crate::paths::ProjectDir;
use crate::python_env::PythonEnv;
use crate::slots::SlotLease;
use pyrun_sandbox::{RunScope, Sandbox};

/// Where the runs of a key work (never looked at here).
#[allow(dead_code)] // Linux's words, built but never read elsewhere
pub(crate) enum Place {
    Script(PathBuf),
    Inline(PathBuf),
    Scratch,
}

/// One kind of run (never built here: warm runs are never enabled).
pub(crate) struct WarmKey;

impl WarmKey {
    pub(crate) fn new(_: Option<Arc<PythonEnv>>, _: Place, _: Option<&str>) -> Self {
        Self
    }

    pub(crate) fn resident(_: Option<&PythonEnv>, _: Option<&ProjectDir>, _: Option<&str>) -> Self {
        Self
    }
}

/// A warm interpreter (there is never one here).
#[allow(dead_code)] // never made: `Warm::take` finds none
pub(crate) struct Spare {
    pub(crate) child: Spawned,
    pub(crate) slot: SlotLease,
}

/// A run in flight (nothing is counted here).
pub(crate) struct Arrival;

/// The spares: none, ever.
pub(crate) struct Warm;

impl Warm {
    pub(crate) fn new(_: WarmSettings, _: CancellationToken) -> Self {
        Self
    }

    pub(crate) fn enabled(&self) -> bool {
        false
    }

    pub(crate) fn ready(&self) -> usize {
        0
    }

    pub(crate) fn arrive(&self, _: &WarmKey) -> Arrival {
        Arrival
    }

    pub(crate) fn ended(&self, _: &WarmKey, _: bool, _: Duration) {}

    pub(crate) fn take(&self, _: &WarmKey, _: &dyn Fn(&Path) -> RunScope) -> Option<Spare> {
        None
    }

    pub(crate) async fn take_or_wait(
        &self,
        _: &WarmKey,
        _: &(dyn Fn(&Path) -> RunScope + Sync),
        _: Duration,
    ) -> Option<Spare> {
        None
    }

    pub(crate) fn learn(&self, _: &WarmKey, _: &Path) {}

    pub(crate) fn refill(&self, _: WarmKey, _: Arc<Starter>, _: Arc<Sandbox>) {}

    pub(crate) fn close(&self) {}
}

//! The bytes `resources/read` may hold at once, project files and artifacts together: a read
//! takes its file's size from the budget once it knows it, and gives it back when its answer is
//! built. Each read of a large file holds it several times over (the bytes, their base64, the
//! JSON answer), so without a bound a burst of parallel reads of one 8 MiB file grows the
//! server by hundreds of MiB. A read waits for its share; one that waits longer than
//! [`MAX_WAIT`] is refused with an error that says the server is busy. One caller holds at most
//! half the budget ([`CALLER_KIB`]): a caller that never reads its answers keeps its own reads
//! waiting, not everyone's.
//!
//! Over HTTP the answer is written after the handler returns, as fast as the client reads it:
//! the transport puts a [`ShareHold`] in the request, the handler parks the share there, and the
//! transport drops it once the answer has gone out (`/mcp`: its body written, or the client
//! gone; `/sse`: the answer taken from the session's queue onto its stream), so a client that
//! reads slowly holds its share, not more of the server's memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client_message::ClientMessage;

/// File bytes read at once, in KiB (four reads of the largest resource, 8 MiB).
const BUDGET_KIB: u32 = 32 * 1024;
/// What one caller may hold of it.
const CALLER_KIB: u32 = BUDGET_KIB / 2;
/// The longest a read waits for its share.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Shared by every session of one server.
#[derive(Debug, Clone)]
pub struct ReadBudget {
    kib: Arc<Semaphore>,
    /// Each caller's half, by `Caller::key`; a caller holding nothing is dropped from it.
    by_caller: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl Default for ReadBudget {
    fn default() -> Self {
        Self {
            kib: Arc::new(Semaphore::new(BUDGET_KIB as usize)),
            by_caller: Arc::default(),
        }
    }
}

/// A read's share, given back when dropped.
#[derive(Debug)]
pub struct ReadShare {
    _caller: OwnedSemaphorePermit,
    _all: OwnedSemaphorePermit,
}

impl ReadBudget {
    fn caller_semaphore(&self, caller: &str) -> Arc<Semaphore> {
        let mut by_caller = self
            .by_caller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        by_caller.retain(|_, semaphore| {
            Arc::strong_count(semaphore) > 1 || semaphore.available_permits() < CALLER_KIB as usize
        });
        Arc::clone(
            by_caller
                .entry(caller.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(CALLER_KIB as usize))),
        )
    }

    /// Waits for `bytes` of the budget for `caller` (a `Caller::key`; at least 1 KiB, at most
    /// the caller's half).
    pub async fn take(&self, caller: &str, bytes: u64) -> Result<ReadShare, ErrorData> {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(CALLER_KIB)
            .clamp(1, CALLER_KIB);
        let mine = self.caller_semaphore(caller);
        let all = Arc::clone(&self.kib);
        let acquire = async move {
            let caller = mine.acquire_many_owned(kib).await?;
            let all = all.acquire_many_owned(kib).await?;
            Ok::<_, tokio::sync::AcquireError>(ReadShare {
                _caller: caller,
                _all: all,
            })
        };
        match tokio::time::timeout(MAX_WAIT, acquire).await {
            Ok(Ok(share)) => Ok(share),
            _ => Err(ErrorData::internal_error(
                ClientMessage::new("the server is busy reading other large resources")
                    .hint("try again in a minute, or read fewer large files at once")
                    .into_string(),
                None,
            )),
        }
    }
}

/// Where the shares of one HTTP request's reads wait until its answer has been written.
#[derive(Debug, Clone, Default)]
pub struct ShareHold(Arc<Mutex<Vec<ReadShare>>>);

impl ShareHold {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ReadShare>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn keep(&self, share: ReadShare) {
        self.lock().push(share);
    }

    /// True when no read parked a share here.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shares_wait_until_the_budget_has_room_and_come_back_when_dropped() {
        let budget = ReadBudget::default();
        let half = u64::from(CALLER_KIB) * 1024;
        let first = budget.take("a", half).await.unwrap();
        let second = budget.take("b", half).await.unwrap();
        let small = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take("c", 10).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!small.is_finished(), "a read went past a full budget");
        drop(second);
        small.await.unwrap().unwrap();
        // More than a caller's half is charged as all of it, never refused outright.
        drop(budget.take("b", u64::MAX).await.unwrap());
        drop(first);
    }

    #[tokio::test]
    async fn a_caller_that_holds_its_half_leaves_the_other_half_to_the_others() {
        let budget = ReadBudget::default();
        let half = u64::from(CALLER_KIB) * 1024;
        let _stuck = budget.take("slow", half).await.unwrap();
        let more = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take("slow", 10).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!more.is_finished(), "one caller went past its half");
        drop(budget.take("other", half).await.unwrap());
        more.abort();
    }
}

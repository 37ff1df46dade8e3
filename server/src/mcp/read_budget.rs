//! The bytes `resources/read` may hold at once, project files and artifacts together: a read
//! takes its file's size from the budget once it knows it, and gives it back when its answer is
//! built. Each read of a large file holds it several times over (the bytes, their base64, the
//! JSON answer), so without a bound a burst of parallel reads of one 8 MiB file grows the
//! server by hundreds of MiB. A read waits for its share; one that waits longer than
//! [`MAX_WAIT`] is refused with an error that says the server is busy.
//!
//! Over `/mcp` (and `/sse`, where the transport keeps a hold per read until its answer leaves for
//! the stream) the answer is written after the handler returns, as fast as the client reads it:
//! the transport puts a [`ShareHold`] in the request, the handler parks the share there, and the
//! transport drops it once the answer's body has been written (or the client went away), so a
//! client that reads slowly holds its share, not more of the server's memory.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client_message::ClientMessage;

/// File bytes read at once, in KiB (four reads of the largest resource, 8 MiB).
const BUDGET_KIB: u32 = 32 * 1024;
/// The longest a read waits for its share.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Shared by every session of one server.
#[derive(Debug, Clone)]
pub struct ReadBudget {
    kib: Arc<Semaphore>,
}

impl Default for ReadBudget {
    fn default() -> Self {
        Self {
            kib: Arc::new(Semaphore::new(BUDGET_KIB as usize)),
        }
    }
}

/// A read's share, given back when dropped.
#[derive(Debug)]
pub struct ReadShare {
    _permit: OwnedSemaphorePermit,
}

impl ReadBudget {
    /// Waits for `bytes` of the budget (at least 1 KiB, at most all of it).
    pub async fn take(&self, bytes: u64) -> Result<ReadShare, ErrorData> {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(BUDGET_KIB)
            .clamp(1, BUDGET_KIB);
        let acquire = Arc::clone(&self.kib).acquire_many_owned(kib);
        match tokio::time::timeout(MAX_WAIT, acquire).await {
            Ok(Ok(permit)) => Ok(ReadShare { _permit: permit }),
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
    pub fn keep(&self, share: ReadShare) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(share);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shares_wait_until_the_budget_has_room_and_come_back_when_dropped() {
        let budget = ReadBudget::default();
        let big = budget.take(u64::from(BUDGET_KIB) * 1024).await.unwrap();
        let small = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(10).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!small.is_finished(), "a read went past a full budget");
        drop(big);
        small.await.unwrap().unwrap();
        // More than the whole budget is charged as all of it, never refused outright.
        drop(budget.take(u64::MAX).await.unwrap());
    }
}

//! Each caller's turns in a pool of runs, where several callers share the server (OAuth
//! clients): a caller's runs take at most all the pool's places but one before they queue for it.
//!
//! The pools themselves are first come, first served. Without turns, a caller that queued many
//! long runs (concurrent `run_python` calls, or `start_python`) held every other caller's runs
//! behind all of them, for as long as it kept the queue full. With turns, a caller's extra runs
//! wait in a queue of their own, and with two places or more one is always left for the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug)]
pub(crate) struct CallerTurns {
    /// Turns per caller: the pool's places but one, at least one.
    turns: usize,
    by_caller: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl CallerTurns {
    /// Turns for a pool of `places`.
    pub(crate) fn new(places: usize) -> Self {
        Self {
            turns: places.saturating_sub(1).max(1),
            by_caller: Mutex::default(),
        }
    }

    /// Waits for one of `caller`'s turns (a `Caller::key`); `None` only if the turns were closed.
    pub(crate) async fn take(&self, caller: &str) -> Option<OwnedSemaphorePermit> {
        let turns = self
            .by_caller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(caller.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.turns)))
            .clone();
        turns.acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_caller_keeps_one_place_of_two_for_the_others_and_never_less_than_one() {
        let turns = CallerTurns::new(2);
        let first = turns.take("a").await;
        assert!(first.is_some());
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), turns.take("a"));
        assert!(waiting.await.is_err(), "a second turn of the same caller");
        assert!(turns.take("b").await.is_some(), "another caller waited");
        let one = CallerTurns::new(1);
        assert!(one.take("a").await.is_some());
    }
}

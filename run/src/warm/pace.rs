//! When a spare pays for itself: what the runs of one kind showed — how soon each call came after
//! the one before ended, what a cold run and a warm run took, how long the kind's last spare took
//! to get ready. Pure: instants and durations in, decisions out.
//!
//! A spare's start costs the CPU of a cold start and more (its preload). It is only worth that
//! when the next call finds it ready, or nearly: a call that comes while its spare still starts
//! either waits (longer than its own cold start, when the spare has far to go) or starts cold
//! beside it, and the two share the CPU (measured: 4 clients over `/mcp` got 0.55× the calls of
//! `--warm off`). So a kind whose last two calls both came sooner than its spare could be ready
//! gets none (back to back, a loop of calls), and a call waits for a starting spare only while
//! that beats its cold start.

use std::time::{Duration, Instant};

/// Calls that come at least this far apart always get their spare, however long it takes to
/// start: only a loop of calls is denied one, never a caller that pauses between calls (an
/// assistant, a test waiting for its spare) on a machine so busy that a spare starts slowly.
const LOOP_GAP: Duration = Duration::from_millis(100);

/// What the runs of one kind showed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Pace {
    /// When its last run ended.
    last_end: Option<Instant>,
    /// The last two pauses between a run's end and the next run's arrival, newest first.
    gaps: [Option<Duration>; 2],
    /// What its cold and warm runs took (start to the tree's death), smoothed.
    cold: Option<Duration>,
    warm: Option<Duration>,
    /// How long its last spare took to get ready.
    took: Option<Duration>,
}

impl Pace {
    /// A run of the kind arrived at `now`.
    pub(crate) fn arrived(&mut self, now: Instant) {
        if let Some(end) = self.last_end {
            self.gaps = [Some(now.saturating_duration_since(end)), self.gaps[0]];
        }
    }

    /// A run of the kind ended at `now`, after `took`, `warm` or not.
    pub(crate) fn ended(&mut self, now: Instant, warm: bool, took: Duration) {
        self.last_end = Some(now);
        let kept = if warm { &mut self.warm } else { &mut self.cold };
        *kept = Some(match *kept {
            Some(before) => (before * 3 + took) / 4,
            None => took,
        });
    }

    /// The kind's last spare took `took` to get ready.
    pub(crate) fn spare_took(&mut self, took: Duration) {
        self.took = Some(took);
    }

    /// What a warm start saves a run of the kind, once a cold run of it was seen (a warm one not
    /// seen yet counts as free).
    fn saving(&self) -> Option<Duration> {
        let cold = self.cold?;
        Some(cold.saturating_sub(self.warm.unwrap_or_default()))
    }

    /// Whether a spare started `delay` after a run's end would serve the next call: false when
    /// the last two calls both came sooner than a spare gets ready less what it saves (and
    /// sooner than `LOOP_GAP`). Until
    /// the kind has shown that, a spare is started (the first runs of a kind).
    pub(crate) fn spare_pays(&self, delay: Duration) -> bool {
        let (Some(took), Some(saving)) = (self.took, self.saving()) else {
            return true;
        };
        let needed = (took + delay).saturating_sub(saving).min(LOOP_GAP);
        !self
            .gaps
            .iter()
            .all(|gap| gap.is_some_and(|gap| gap < needed))
    }

    /// How long a run that found its spare starting since `elapsed` waits for it at most; `None`
    /// when starting cold now is sooner (the spare still has more to go than the run would save).
    /// Waiting longer than the saving can never beat the cold start.
    pub(crate) fn wait_for(&self, elapsed: Duration) -> Option<Duration> {
        let took = self.took?;
        let remaining = took.saturating_sub(elapsed);
        match self.saving() {
            Some(saving) => (remaining < saving).then_some(saving),
            // No cold run seen yet: only a spare past half its start.
            None => (elapsed * 2 >= took).then_some(remaining * 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A kind whose cold run takes 25 ms, warm 7 ms, and whose spare took 40 ms to start.
    fn hello() -> (Pace, Instant) {
        let mut pace = Pace::default();
        let t = Instant::now();
        pace.arrived(t);
        pace.ended(t + 25 * MS, false, 25 * MS);
        pace.spare_took(40 * MS);
        (pace, t + 25 * MS)
    }

    #[test]
    fn calls_back_to_back_get_no_spare_and_calls_at_an_assistants_pace_do() {
        let (mut pace, mut end) = hello();
        assert!(pace.spare_pays(10 * MS), "nothing known about the pace yet");
        // One call right after the last: one quick call is no pace yet.
        pace.arrived(end + MS);
        pace.ended(end + 8 * MS, true, 7 * MS);
        end += 8 * MS;
        assert!(pace.spare_pays(10 * MS));
        // A second in a row: back to back.
        pace.arrived(end + MS);
        pace.ended(end + 26 * MS, false, 25 * MS);
        end += 26 * MS;
        assert!(!pace.spare_pays(10 * MS));
        // A call half a second later: a spare pays again.
        pace.arrived(end + 500 * MS);
        assert!(pace.spare_pays(10 * MS));
    }

    #[test]
    fn calls_with_pauses_get_their_spare_even_when_it_starts_slowly() {
        let (mut pace, end) = hello();
        // A loaded machine: the spare took 2 s; calls come 200 ms apart.
        pace.spare_took(2000 * MS);
        pace.arrived(end + 200 * MS);
        pace.ended(end + 225 * MS, false, 25 * MS);
        pace.arrived(end + 425 * MS);
        assert!(pace.spare_pays(10 * MS));
    }

    #[test]
    fn a_run_waits_only_for_a_spare_that_beats_its_cold_start() {
        let (pace, _) = hello();
        // 35 ms to go against 25 ms saved: cold now.
        assert_eq!(pace.wait_for(5 * MS), None);
        // 10 ms to go: wait, at most what a warm start saves.
        assert_eq!(pace.wait_for(30 * MS), Some(25 * MS));
        // Nothing known of the spare's start: cold now.
        assert_eq!(Pace::default().wait_for(30 * MS), None);
    }

    #[test]
    fn without_a_cold_run_seen_a_run_waits_only_past_half_the_start() {
        let mut pace = Pace::default();
        pace.spare_took(40 * MS);
        assert_eq!(pace.wait_for(10 * MS), None);
        assert_eq!(pace.wait_for(30 * MS), Some(20 * MS));
    }
}

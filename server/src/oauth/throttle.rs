//! Growing delays after wrong owner secrets, counted per OAuth client and overall (behind a
//! tunnel or proxy many people share one address, and an attacker can register new clients at
//! will, so the overall count is the one that bounds guessing). The counts live in the store, so
//! a restart does not reset them and `pyrun-mcp-server oauth unlock` can clear them. The owner is
//! never locked out for good: the longest wait is [`MAX_DELAY_SECS`], and a right secret clears
//! the counts.

/// Wrong secrets a client may make before delays start.
pub const FREE_PER_CLIENT: u32 = 3;
/// Wrong secrets overall before delays start.
pub const FREE_OVERALL: u32 = 10;
/// The longest wait, in seconds: 15 minutes.
pub const MAX_DELAY_SECS: i64 = 900;

/// The counter key for every attempt, and the one per client.
pub const OVERALL: &str = "all";

pub fn client_key(client_id: &str) -> String {
    format!("client:{client_id}")
}

/// Seconds to wait after `count` failures when the first `free` cost nothing: 1, 2, 4, … up to
/// [`MAX_DELAY_SECS`].
pub fn delay_after(count: u32, free: u32) -> i64 {
    if count < free {
        return 0;
    }
    let doublings = (count - free).min(20);
    (1i64 << doublings).min(MAX_DELAY_SECS)
}

/// Seconds still to wait, given a counter's `(count, last failure)` at `now`.
pub fn wait_left(count: u32, last: i64, free: u32, now: i64) -> i64 {
    (last + delay_after(count, free) - now).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stop_at_the_cap() {
        assert_eq!(delay_after(0, 3), 0);
        assert_eq!(delay_after(2, 3), 0);
        assert_eq!(delay_after(3, 3), 1);
        assert_eq!(delay_after(4, 3), 2);
        assert_eq!(delay_after(8, 3), 32);
        assert_eq!(delay_after(30, 3), MAX_DELAY_SECS);
        assert_eq!(delay_after(u32::MAX, 3), MAX_DELAY_SECS);
    }

    #[test]
    fn the_wait_counts_down_from_the_last_failure() {
        assert_eq!(wait_left(5, 100, 3, 100), 4);
        assert_eq!(wait_left(5, 100, 3, 103), 1);
        assert_eq!(wait_left(5, 100, 3, 104), 0);
        assert_eq!(wait_left(1, 100, 3, 100), 0);
    }
}

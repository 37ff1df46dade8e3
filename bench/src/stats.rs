//! Latency samples and their summary (median, p99, mean).

use std::time::Duration;

#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    pub fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The samples in the order they were taken (pairs line up by index).
    pub fn values(&self) -> &[Duration] {
        &self.0
    }

    fn quantile(&self, q: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let mut sorted = self.0.clone();
        sorted.sort();
        let rank = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted[rank.min(sorted.len() - 1)]
    }

    pub fn median(&self) -> Duration {
        self.quantile(0.5)
    }

    pub fn p90(&self) -> Duration {
        self.quantile(0.9)
    }

    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
}

/// The `q` quantile of plain numbers (nearest rank); 0 for none.
pub fn quantile_of(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n => sorted[(((n as f64 - 1.0) * q).round() as usize).min(n - 1)],
    }
}

/// Milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_known_series() {
        let mut s = Samples::default();
        for i in 1..=100u64 {
            s.push(Duration::from_millis(i));
        }
        assert_eq!(s.median(), Duration::from_millis(51));
        assert_eq!(s.p99(), Duration::from_millis(99));
    }
}

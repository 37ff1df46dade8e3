//! `ping`: round-trip times of a few MCP pings over the open connection.

use std::time::{Duration, Instant};

use crate::error::ClientError;
use crate::session::Session;

#[derive(Debug, Clone)]
pub struct PingReport {
    pub rtts: Vec<Duration>,
}

impl PingReport {
    pub fn min(&self) -> Duration {
        self.rtts.iter().copied().min().unwrap_or_default()
    }

    pub fn max(&self) -> Duration {
        self.rtts.iter().copied().max().unwrap_or_default()
    }

    pub fn avg(&self) -> Duration {
        let count = u32::try_from(self.rtts.len()).unwrap_or(u32::MAX).max(1);
        self.rtts.iter().sum::<Duration>() / count
    }
}

pub async fn execute(session: &Session, count: u32) -> Result<PingReport, ClientError> {
    let mut rtts = Vec::new();
    for _ in 0..count.max(1) {
        let started = Instant::now();
        session.ping().await?;
        rtts.push(started.elapsed());
    }
    Ok(PingReport { rtts })
}

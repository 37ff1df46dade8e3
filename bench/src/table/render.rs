//! The one table as markdown: a row per pattern, warm on and off side by side with raw python and
//! the FastMCP baseline, the ratios a reader looks for, CPU per call.

use super::lane::Series;
use crate::stats::{ms, quantile_of};

pub const HEADER: [&str; 8] = [
    "pattern (`hello_world.py` unless said)",
    "warm on (default): p50 / p90",
    "`--warm off`: p50 / p90",
    "warm ÷ off: p50 (pairs' IQR)",
    "against raw: warm ÷ raw, off − raw",
    "raw python: p50 / p90",
    "FastMCP: p50 / p90",
    "CPU ms per call: warm / off / raw / FastMCP",
];

/// The four lanes of a row; a lane left out is `None`.
#[derive(Default)]
pub struct Lanes {
    pub warm: Option<Series>,
    pub cold: Option<Series>,
    pub raw: Option<Series>,
    pub fastmcp: Option<Series>,
}

fn p50(s: &Series) -> f64 {
    s.samples.median().as_secs_f64()
}

fn latency(s: &Series) -> String {
    let base = format!("{} / {}", ms(s.samples.median()), ms(s.samples.p90()));
    match s.rate {
        Some(rate) => format!("**{rate:.0} calls/s**; {base}"),
        None => base,
    }
}

fn opt(s: &Option<Series>, f: impl Fn(&Series) -> String) -> String {
    s.as_ref().map_or_else(|| "—".to_owned(), f)
}

/// Per-pair `a / b` (pairs line up by index).
fn pair_ratios(a: &Series, b: &Series) -> Vec<f64> {
    a.samples
        .values()
        .iter()
        .zip(b.samples.values())
        .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64().max(1e-9))
        .collect()
}

/// Median of per-pair `a − b`, in ms.
fn pair_diff_ms(a: &Series, b: &Series) -> f64 {
    let d: Vec<f64> = a
        .samples
        .values()
        .iter()
        .zip(b.samples.values())
        .map(|(x, y)| (x.as_secs_f64() - y.as_secs_f64()) * 1000.0)
        .collect();
    quantile_of(&d, 0.5)
}

/// A row's cells from its lanes. Load rows (with a rate) compare time per call (the inverse of
/// calls per second); the others compare p50s.
pub fn cells(pattern: &str, l: &Lanes) -> [String; 8] {
    let warm_cell = opt(&l.warm, |s| {
        format!("{}, {}/{} warm", latency(s), s.warm, s.samples.len())
    });
    let ratio = match (&l.warm, &l.cold) {
        (Some(w), Some(c)) => match (w.rate, c.rate) {
            (Some(wr), Some(cr)) => format!("**{:.2}×** (time per call)", cr / wr.max(1e-9)),
            _ => {
                let pairs = pair_ratios(w, c);
                format!(
                    "**{:.2}×** ({:.2}–{:.2})",
                    p50(w) / p50(c).max(1e-9),
                    quantile_of(&pairs, 0.25),
                    quantile_of(&pairs, 0.75)
                )
            }
        },
        _ => "—".into(),
    };
    let against_raw = match (&l.raw, &l.warm, &l.cold) {
        (Some(r), Some(w), Some(c)) => match (r.rate, w.rate, c.rate) {
            (Some(rr), Some(wr), Some(cr)) => format!(
                "{:.0} % / {:.0} % of raw's calls/s",
                100.0 * wr / rr.max(1e-9),
                100.0 * cr / rr.max(1e-9)
            ),
            _ => format!(
                "{:.2}×, {:+.2} ms",
                p50(w) / p50(r).max(1e-9),
                pair_diff_ms(c, r)
            ),
        },
        _ => "—".into(),
    };
    let cpu = [&l.warm, &l.cold, &l.raw, &l.fastmcp]
        .iter()
        .map(|s| opt(s, |s| format!("{:.1}", s.cpu_ms)))
        .collect::<Vec<_>>()
        .join(" / ");
    [
        pattern.to_owned(),
        warm_cell,
        opt(&l.cold, latency),
        ratio,
        against_raw,
        opt(&l.raw, latency),
        opt(&l.fastmcp, latency),
        cpu,
    ]
}

pub fn markdown(rows: &[[String; 8]]) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        HEADER.join(" | "),
        "---|".repeat(HEADER.len())
    );
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

//! The one grammar of setting values, for the server's and the client's flags, the environment
//! and `.env` alike: booleans, whole numbers, sizes and durations. Plain text in, a value or a
//! [`BadValue`] out (what was expected, with examples); the caller names the setting and where
//! it was set. Surrounding spaces are ignored, letters may be in any case.

use std::time::Duration;

/// What turns a boolean setting on.
pub const TRUE_WORDS: [&str; 4] = ["1", "true", "yes", "on"];
/// What turns it off.
pub const FALSE_WORDS: [&str; 4] = ["0", "false", "no", "off"];

/// A value the grammar refuses: what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadValue(String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadValue {}

/// `1, true, yes, on` or `0, false, no, off`.
pub fn boolean(text: &str) -> Result<bool, BadValue> {
    let word = text.trim().to_ascii_lowercase();
    if TRUE_WORDS.contains(&word.as_str()) {
        Ok(true)
    } else if FALSE_WORDS.contains(&word.as_str()) {
        Ok(false)
    } else {
        Err(BadValue(format!(
            "expected {} (on) or {} (off)",
            TRUE_WORDS.join(", "),
            FALSE_WORDS.join(", ")
        )))
    }
}

/// A whole number in `min..=max`, digits only (`_` may group them: `10_000`).
pub fn count(text: &str, min: u64, max: u64) -> Result<u64, BadValue> {
    let n =
        whole(text.trim()).ok_or_else(|| BadValue("expected a whole number, e.g. 8".to_owned()))?;
    within(n, min, max, "")
}

/// A size in units of `unit` bytes (1 for a setting in bytes, 1 MiB for one in MiB), in
/// `min..=max` of them: a bare number is in the setting's unit; a number with a suffix is
/// `b`, `k`/`kb`/`kib`, `m`/`mb`/`mib`, `g`/`gb`/`gib` or `t`/`tb`/`tib`, 1024-based as docker's
/// `--memory` (a fraction is fine when the result is whole: `1.5g`).
pub fn size(text: &str, unit: u64, min: u64, max: u64) -> Result<u64, BadValue> {
    let unit_name = if unit == 1 { "bytes" } else { "MiB" };
    let bad = || {
        BadValue(format!(
            "expected a size: a whole number of {unit_name}, or a number with k, M, G or T \
             (1024-based), e.g. 512, 64k, 1.5G"
        ))
    };
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let scale: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" => unit,
        "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let bytes = scaled(number, scale).ok_or_else(bad)?;
    if bytes % unit != 0 {
        return Err(BadValue(format!("is not a whole number of {unit_name}")));
    }
    within(
        bytes / unit,
        min,
        max,
        if unit == 1 { " bytes" } else { " MiB" },
    )
}

/// A duration in whole seconds, in `min..=max` seconds: a bare number is seconds; otherwise
/// numbers with units, `ms`, `s`, `m` (minutes), `h`, `d`, one after the other (`1h30m`).
pub fn seconds(text: &str, min: u64, max: u64) -> Result<u64, BadValue> {
    let exact = duration(text)?;
    if exact.subsec_nanos() != 0 {
        return Err(BadValue("is not a whole number of seconds".to_owned()));
    }
    within(exact.as_secs(), min, max, " seconds")
}

/// A duration, to the millisecond: as [`seconds`] says, and a bare number may have a fraction
/// (`1.5`, seconds).
pub fn duration(text: &str) -> Result<Duration, BadValue> {
    let bad = || {
        BadValue(
            "expected a duration: seconds, or numbers with ms, s, m, h or d, e.g. 30, 90s, 5m, 1h30m"
                .to_owned(),
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut millis: u64 = 0;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        let after = after.trim_start();
        let letters = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(letters);
        let scale: u64 = match unit.to_ascii_lowercase().as_str() {
            // A bare number only alone: `1h30` is more likely a mistake than 1 h 30 s.
            "" if split == rest.len() && millis == 0 => 1000,
            "ms" => 1,
            "s" | "sec" | "secs" => 1000,
            "m" | "min" | "mins" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        let part = scaled(number, scale).ok_or_else(bad)?;
        millis = millis.checked_add(part).ok_or_else(bad)?;
        rest = after.trim_start();
    }
    Ok(Duration::from_millis(millis))
}

/// `n` when it lies in `min..=max`; else what the range is, in `unit`.
fn within(n: u64, min: u64, max: u64, unit: &str) -> Result<u64, BadValue> {
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(BadValue(format!("must be from {min} to {max}{unit}")))
    }
}

/// Digits with `_` between groups.
fn whole(text: &str) -> Option<u64> {
    let digits = text.replace('_', "");
    let grouped = !text.starts_with('_') && !text.ends_with('_') && !text.contains("__");
    if digits.is_empty() || !grouped || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `number` (digits, at most one `.`) times `scale`, when the product is whole.
fn scaled(number: &str, scale: u64) -> Option<u64> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let int = if int.is_empty() && !frac.is_empty() {
        0
    } else {
        whole(int)?
    };
    let mut value = int.checked_mul(scale)?;
    if number.contains('.') {
        if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let denominator = 10u64.pow(u32::try_from(frac.len()).ok()?);
        let numerator = u128::from(frac.parse::<u64>().ok()?) * u128::from(scale);
        if numerator % u128::from(denominator) != 0 {
            return None;
        }
        let part = u64::try_from(numerator / u128::from(denominator)).ok()?;
        value = value.checked_add(part)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_have_four_spellings_each_way_in_any_case() {
        for yes in ["1", "true", "TRUE", "Yes", "on", " on "] {
            assert_eq!(boolean(yes), Ok(true), "{yes}");
        }
        for no in ["0", "false", "No", "OFF"] {
            assert_eq!(boolean(no), Ok(false), "{no}");
        }
        for bad in ["", "2", "maybe", "enabled", "y", "t", "truee"] {
            let said = boolean(bad).unwrap_err().to_string();
            assert!(said.contains("1, true, yes, on"), "{bad}: {said}");
        }
    }

    #[test]
    fn counts_are_whole_numbers_in_their_range() {
        assert_eq!(count("8", 1, 10), Ok(8));
        assert_eq!(count(" 10_000 ", 1, 100_000), Ok(10_000));
        for bad in ["", "-1", "+1", "1.5", "8k", "1__0", "_1", "eight"] {
            assert!(count(bad, 0, 100).is_err(), "{bad}");
        }
        assert_eq!(
            count("0", 1, 4).unwrap_err().to_string(),
            "must be from 1 to 4"
        );
    }

    #[test]
    fn sizes_take_a_bare_number_in_the_unit_or_a_1024_based_suffix() {
        const MIB: u64 = 1 << 20;
        assert_eq!(size("2048", MIB, 0, u64::MAX), Ok(2048));
        assert_eq!(size("2GiB", MIB, 0, u64::MAX), Ok(2048));
        assert_eq!(size("1.5g", MIB, 0, u64::MAX), Ok(1536));
        assert_eq!(size("512 MB", MIB, 0, u64::MAX), Ok(512));
        assert_eq!(size("64k", 1, 0, u64::MAX), Ok(65_536));
        assert_eq!(size("1m", 1, 0, u64::MAX), Ok(MIB));
        assert_eq!(size("100", 1, 0, u64::MAX), Ok(100));
        assert!(size("100k", MIB, 0, u64::MAX).is_err(), "not whole MiB");
        for bad in ["", "lots", "1.5", "1x", "k", "1..5g", "-1g"] {
            assert!(size(bad, 1, 0, u64::MAX).is_err(), "{bad}");
        }
        assert!(size("2t", 1, 0, 1 << 30).is_err());
    }

    #[test]
    fn durations_are_seconds_or_numbers_with_units() {
        assert_eq!(seconds("30", 1, 86_400), Ok(30));
        assert_eq!(seconds("90s", 1, 86_400), Ok(90));
        assert_eq!(seconds("2m", 1, 86_400), Ok(120));
        assert_eq!(seconds("1h30m", 1, 86_400), Ok(5400));
        assert_eq!(seconds("1d", 1, 86_400), Ok(86_400));
        assert_eq!(seconds("1.5m", 1, 86_400), Ok(90));
        assert!(seconds("1.5", 1, 86_400).is_err(), "not whole seconds");
        assert!(seconds("2d", 1, 86_400).is_err());
        assert!(seconds("0", 1, 86_400).is_err());
        for bad in ["", "2 minutes", "1h30", "m", "-5", "5y"] {
            assert!(seconds(bad, 0, u64::MAX).is_err(), "{bad}");
        }
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
    }
}

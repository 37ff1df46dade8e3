//! The checks of a call's arguments that more than one room makes: its time limit
//! (`timeout_seconds` against the server's) and the code of `run_python_code` and
//! `session_exec`. Each refusal is a `ClientMessage` the model can act on.

use std::time::Duration;

use crate::client_message::ClientMessage;

/// The caller's timeout, which may lower the server's limit but never raise it.
pub fn effective_timeout(
    requested: Option<f64>,
    limit: Duration,
) -> Result<Duration, ClientMessage> {
    match requested {
        None => Ok(limit),
        Some(secs) if secs.is_finite() && secs > 0.0 => {
            Ok(Duration::try_from_secs_f64(secs).map_or(limit, |d| d.min(limit)))
        }
        Some(secs) => Err(ClientMessage::new(
            "timeout_seconds must be a positive number of seconds, got ",
        )
        .number(secs)),
    }
}

/// Code a run may be given: within `max_bytes`, not empty (nor only blanks), no NUL byte (Python
/// refuses source with one, after the run has started).
pub fn check_code(code: &str, max_bytes: usize) -> Result<(), ClientMessage> {
    if code.len() > max_bytes {
        return Err(ClientMessage::new("the code is ")
            .number(code.len())
            .then(" bytes, more than the ")
            .number(max_bytes)
            .then(" bytes this server accepts (--max-code-bytes)")
            .hint("put longer code in a file of the projects folder and run it with run_python"));
    }
    if code.trim().is_empty() {
        return Err(ClientMessage::new(
            "the code is empty: there is nothing to run",
        ));
    }
    if code.contains('\0') {
        return Err(ClientMessage::new(
            "the code contains a NUL byte, which Python source may not hold",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_may_lower_never_raise() {
        let limit = Duration::from_secs(30);
        assert_eq!(effective_timeout(None, limit), Ok(limit));
        assert_eq!(
            effective_timeout(Some(2.5), limit),
            Ok(Duration::from_millis(2500))
        );
        assert_eq!(effective_timeout(Some(999.0), limit), Ok(limit));
        assert_eq!(effective_timeout(Some(1e300), limit), Ok(limit));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(effective_timeout(Some(bad), limit).is_err());
        }
    }

    #[test]
    fn code_is_checked_for_size_emptiness_and_nul_bytes() {
        assert!(check_code("print(1)", 8).is_ok());
        let over = check_code("print(12)", 8).unwrap_err();
        assert!(
            over.as_str().contains("9 bytes, more than the 8 bytes"),
            "{over}"
        );
        assert!(over.as_str().contains("--max-code-bytes"), "{over}");
        for empty in ["", " \n\t"] {
            assert!(check_code(empty, 8).unwrap_err().as_str().contains("empty"));
        }
        assert!(check_code("a=1\0", 8).unwrap_err().as_str().contains("NUL"));
    }
}

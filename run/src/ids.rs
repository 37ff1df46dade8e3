//! The ids the run layer hands out (run ids, session ids): a prefix and 32 lowercase hex digits
//! from the OS's random source, and the check that a caller's text has that shape before it
//! names anything.

use std::fmt::Write as _;
use std::io;

/// `prefix` and 32 lowercase hex digits (128 random bits).
pub fn new_id(prefix: &str) -> io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    let mut id = String::with_capacity(prefix.len() + 32);
    id.push_str(prefix);
    for b in bytes {
        let _ = write!(id, "{b:02x}");
    }
    Ok(id)
}

/// True for `prefix` followed by exactly 32 lowercase hex digits.
pub fn has_id_shape(prefix: &str, text: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_prefix_and_32_hex_digits_and_differ() {
        let (a, b) = (new_id("x_").unwrap(), new_id("x_").unwrap());
        assert_ne!(a, b);
        assert!(has_id_shape("x_", &a) && has_id_shape("x_", &b), "{a} {b}");
        for bad in [
            "x_",
            "y_0123456789abcdef0123456789abcdef",
            "x_0123456789ABCDEF0123456789abcdef",
        ] {
            assert!(!has_id_shape("x_", bad), "{bad}");
        }
    }
}

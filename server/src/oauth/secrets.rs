//! The cryptographic pieces, each one function: random tokens, their stored hashes, the PKCE
//! check and the owner secret's Argon2id hash.

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A fresh random value: 256 bits, base64url (43 characters), with a prefix that says what it
/// is (secret scanners and people reading a log both benefit).
pub fn random_token(prefix: &str) -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// What the store keeps of a code or token: its SHA-256, hex.
pub fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 7636 §4.1: a verifier is 43–128 characters of `[A-Za-z0-9-._~]`.
pub fn is_valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// A challenge as S256 makes them: base64url of a SHA-256, 43 characters.
pub fn is_valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// PKCE S256 (the only method served): `BASE64URL(SHA256(verifier)) == challenge`.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    if !is_valid_verifier(verifier) {
        return false;
    }
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    bool::from(computed.as_bytes().ct_eq(challenge.as_bytes()))
}

/// The owner secret as stored: an Argon2id PHC string with a random salt.
pub fn hash_owner_secret(secret: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(secret.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| e.to_string())
}

/// True when `secret` is the one `phc` was made from. Slow on purpose (tens of milliseconds):
/// call it off the async runtime's threads.
pub fn owner_secret_matches(secret: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(secret.as_bytes(), &hash)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_long_and_prefixed() {
        let a = random_token("pyat_").unwrap();
        let b = random_token("pyat_").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("pyat_") && a.len() == 5 + 43, "{a}");
        assert_eq!(token_hash("abc").len(), 64);
        assert_ne!(token_hash(&a), token_hash(&b));
    }

    #[test]
    fn pkce_s256_matches_the_rfc_example() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(is_valid_challenge(challenge));
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj",
            challenge
        ));
        // `plain` would send the verifier itself as the challenge: never a match.
        assert!(!pkce_matches(verifier, verifier));
        assert!(!pkce_matches("short", challenge));
        assert!(!is_valid_verifier(&"a".repeat(129)));
        assert!(!is_valid_verifier(&format!("{}{}", "a".repeat(42), "!")));
    }

    #[test]
    fn the_owner_secret_is_stored_as_argon2id_and_verified() {
        let phc = hash_owner_secret("correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        assert!(!phc.contains("correct horse"));
        assert!(owner_secret_matches("correct horse", &phc));
        assert!(!owner_secret_matches("correct hors", &phc));
        assert!(!owner_secret_matches("correct horse", "not a hash"));
    }
}

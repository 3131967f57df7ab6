//! Identifier rules shared by every surface: what an id may contain, and how
//! ids that are not supplied are derived deterministically.

use sha2::{Digest, Sha256};

/// Longest id accepted anywhere.
pub const MAX_ID_LEN: usize = 128;

/// `[A-Za-z0-9._:/@-]{1,128}`: safe in subjects' payloads, SQL parameters, URLs and file names.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'@' | b'-')
        })
}

/// A tenant also names a subject token, so it may not contain '.', which NATS reads as a separator.
pub fn is_valid_tenant(tenant: &str) -> bool {
    is_valid_id(tenant) && !tenant.contains('.')
}

/// Hex of the SHA-256 of the parts, each followed by a separator byte so that
/// `("ab","c")` and `("a","bc")` differ. `len` hex characters are kept.
pub fn digest(parts: &[&str], len: usize) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0x1f]);
    }
    let mut hex = hex::encode(hasher.finalize());
    hex.truncate(len);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_alphabet() {
        assert!(is_valid_id("user-1@acme.com/x:y_z"));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("has space"));
        assert!(!is_valid_id("semi;colon"));
        assert!(!is_valid_id("quote'"));
        assert!(!is_valid_id(&"x".repeat(129)));
        assert!(!is_valid_tenant("a.b"));
    }

    #[test]
    fn digest_separates_parts() {
        assert_ne!(digest(&["ab", "c"], 16), digest(&["a", "bc"], 16));
        assert_eq!(digest(&["a"], 8).len(), 8);
    }
}

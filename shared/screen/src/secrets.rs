//! Secrets (API keys, tokens, passwords, private keys) are redacted before a
//! turn is stored or passed on: a memory system must never become a place
//! where credentials are kept and later recalled.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// `(kind, pattern)`. Where a pattern has a group named `secret`, only that part
/// is redacted ("my password is [REDACTED:password]"); otherwise the whole match.
const PATTERNS: &[(&str, &str)] = &[
    (
        "private_key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\z)",
    ),
    (
        "api_key",
        r"\bsk-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_\-]{16,}",
    ),
    ("api_key", r"\bAKIA[0-9A-Z]{16}\b"),
    ("api_key", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    ("api_key", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    ("api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    (
        "token",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ),
    (
        "token",
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{16,})",
    ),
    (
        "api_key",
        r"(?i)\b(?:api[_ \-]?key|secret(?:[_ \-]?key)?|access[_ \-]?token|auth[_ \-]?token|token)\b(?:\s+is|\s*[:=])\s*(?P<secret>[A-Za-z0-9_\-./+=]{8,})",
    ),
    (
        "password",
        r"(?i)\b(?:password|passwd|passphrase|pwd|passcode|pin(?: code)?)\b(?:\s+is|\s+was|\s*[:=])\s*(?P<secret>[^\s,;]+)",
    ),
    (
        "password",
        r"(?:密码|口令|支付密码)\s*(?:是|为|:|：)\s*(?P<secret>[^\s，。,;；]+)",
    ),
];

static COMPILED: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .map(|(kind, p)| {
            let regex = Regex::new(&crate::ascii_word_boundaries(p))
                .unwrap_or_else(|e| panic!("invalid secret pattern {kind}: {e}"));
            (*kind, regex)
        })
        .collect()
});

/// Every pattern in one set: nearly every text holds no secret, which one
/// pass over it answers.
static ANY: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(
        PATTERNS
            .iter()
            .map(|(_, p)| crate::ascii_word_boundaries(p)),
    )
    .unwrap_or_else(|e| panic!("invalid secret patterns: {e}"))
});

/// The text with secrets replaced, and the kinds found (without repeats).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub text: String,
    pub kinds: Vec<&'static str>,
}

pub fn redact(text: &str) -> Redaction {
    let mut out = text.to_string();
    let mut kinds: Vec<&'static str> = Vec::new();
    if !ANY.is_match(text) {
        return Redaction { text: out, kinds };
    }
    for (kind, regex) in COMPILED.iter() {
        if !regex.is_match(&out) {
            continue;
        }
        let marker = format!("[REDACTED:{kind}]");
        let replaced = regex.replace_all(&out, |caps: &regex::Captures<'_>| {
            let whole = caps.get(0).map(|m| m.as_str()).unwrap_or_default();
            match caps.name("secret") {
                Some(secret) => {
                    let start = secret.start() - caps.get(0).map(|m| m.start()).unwrap_or(0);
                    format!("{}{}", &whole[..start], marker)
                }
                None => marker.clone(),
            }
        });
        if replaced != out {
            out = replaced.into_owned();
            if !kinds.contains(kind) {
                kinds.push(kind);
            }
        }
    }
    Redaction { text: out, kinds }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_and_tokens_are_redacted() {
        let cases = [
            (
                "use sk-proj-AbCdEfGhIjKlMnOpQrStUv123 for the call",
                "sk-proj-AbCd",
            ),
            ("AWS key AKIAIOSFODNN7EXAMPLE ok", "AKIAIOSFODNN7EXAMPLE"),
            (
                "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "ghp_abcdef",
            ),
            (
                "Authorization: Bearer abcdefghijklmnop1234567890",
                "abcdefghijklmnop1234567890",
            ),
            ("my api key is 9f8e7d6c5b4a3921", "9f8e7d6c5b4a3921"),
        ];
        for (text, secret) in cases {
            let r = redact(text);
            assert!(!r.text.contains(secret), "{text} → {}", r.text);
            assert!(r.text.contains("[REDACTED:"), "{}", r.text);
        }
    }

    #[test]
    fn passwords_keep_their_context() {
        let r = redact("My password is hunter2, don't share it");
        assert_eq!(r.text, "My password is [REDACTED:password], don't share it");
        assert_eq!(r.kinds, vec!["password"]);
        let r = redact("我的银行卡密码是123456，请记住");
        assert_eq!(r.text, "我的银行卡密码是[REDACTED:password]，请记住");
    }

    #[test]
    fn private_keys_are_redacted_whole() {
        let r = redact(
            "here:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nthanks",
        );
        assert_eq!(r.text, "here:\n[REDACTED:private_key]\nthanks");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let text = "I asked for a skim latte and a pin for my jacket";
        assert_eq!(redact(text).text, text);
        assert!(redact(text).kinds.is_empty());
    }
}

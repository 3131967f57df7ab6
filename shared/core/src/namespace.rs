//! Subjects and stream names, derived from one namespace so that several
//! deployments (and every test) can share a NATS server without touching each
//! other.

use std::fmt;

/// The stream a message travels on, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    /// Raw turns as agents publish them.
    Turns,
    /// Turns the filter kept.
    Kept,
    /// Facts the extractor produced.
    Facts,
    /// Facts with their embedding.
    Embedded,
}

impl Topic {
    /// The subject token (`turns`) and the base of the stream name (`TURNS`).
    pub fn token(self) -> &'static str {
        match self {
            Topic::Turns => "turns",
            Topic::Kept => "kept",
            Topic::Facts => "facts",
            Topic::Embedded => "embedded",
        }
    }
}

/// A validated namespace (`[A-Za-z0-9_-]{1,32}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace(String);

impl Namespace {
    pub fn new(ns: &str) -> Result<Self, String> {
        let valid = !ns.is_empty()
            && ns.len() <= 32
            && ns
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if valid {
            Ok(Self(ns.to_string()))
        } else {
            Err("a namespace is 1 to 32 characters of A-Z, a-z, 0-9, '_' or '-'".into())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<ns>.<topic>.<tenant>`.
    pub fn subject(&self, topic: Topic, tenant: &str) -> String {
        format!("{}.{}.{}", self.0, topic.token(), tenant)
    }

    /// `<ns>.<topic>.>`: every tenant of a topic.
    pub fn all_tenants(&self, topic: Topic) -> String {
        format!("{}.{}.>", self.0, topic.token())
    }

    /// `<ns>.dlq.<stage>.<tenant>`. The tenant comes from the subject the input
    /// arrived on, which a publisher chose: whatever would not make it one
    /// literal token (`.`, `*`, `>`, `%`, spaces and control characters) is
    /// percent-encoded, so every dead letter lands where `hindsight dlq` looks
    /// (`dlq.<stage>.<tenant>`), under a name no valid tenant has.
    pub fn dlq_subject(&self, stage: &str, tenant: &str) -> String {
        format!("{}.dlq.{}.{}", self.0, stage, subject_token(tenant))
    }

    /// `<ns>.recall.<tenant>`: recall by NATS request-reply (not a stream).
    pub fn recall_subject(&self, tenant: &str) -> String {
        format!("{}.recall.{}", self.0, tenant)
    }

    /// `<ns>.erase.<tenant>`: erasing a user by NATS request-reply (not a stream).
    pub fn erase_subject(&self, tenant: &str) -> String {
        format!("{}.erase.{}", self.0, tenant)
    }

    /// A namespace-relative subject (`turns.>`, as written in the stream files) made absolute.
    pub fn absolute(&self, relative: &str) -> String {
        format!("{}.{}", self.0, relative)
    }

    /// The JetStream name for a stream or bucket base name: `hindsight` + `TURNS` → `HINDSIGHT_TURNS`.
    pub fn stream_name(&self, base: &str) -> String {
        format!("{}_{}", self.0.to_ascii_uppercase().replace('-', "_"), base)
    }

    /// The tenant of a subject of this namespace: everything after
    /// `<ns>.<topic>.`. A well-formed subject has one token there; more
    /// (`<ns>.turns.other.acme`) come back whole, which no valid tenant equals
    /// (a tenant has no '.'), so such a subject is refused rather than read as
    /// the tenant of its last token.
    pub fn tenant_of<'a>(&self, subject: &'a str) -> Option<&'a str> {
        subject
            .strip_prefix(self.0.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.split_once('.'))
            .map(|(_topic, tenant)| tenant)
            .filter(|t| !t.is_empty())
    }
}

/// `text` as one literal subject token (see [`Namespace::dlq_subject`]).
fn subject_token(text: &str) -> String {
    if text.is_empty() {
        return "%".to_string();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '.' | '*' | '>' | '%') || c.is_whitespace() || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_names_derive_from_the_namespace() {
        let ns = Namespace::new("t-1").expect("valid");
        assert_eq!(ns.subject(Topic::Turns, "acme"), "t-1.turns.acme");
        assert_eq!(ns.dlq_subject("filter", "acme"), "t-1.dlq.filter.acme");
        assert_eq!(
            ns.dlq_subject("filter", "other.acme"),
            "t-1.dlq.filter.other%2Eacme"
        );
        assert_eq!(ns.dlq_subject("filter", ">"), "t-1.dlq.filter.%3E");
        assert_eq!(ns.dlq_subject("filter", "*"), "t-1.dlq.filter.%2A");
        assert_eq!(ns.dlq_subject("filter", "50%"), "t-1.dlq.filter.50%25");
        assert_eq!(ns.stream_name("TURNS"), "T_1_TURNS");
        assert_eq!(ns.tenant_of("t-1.kept.acme"), Some("acme"));
        assert_eq!(ns.tenant_of("other.kept.acme"), None);
        assert_eq!(ns.tenant_of("t-1.recall.acme"), Some("acme"));
        assert_eq!(ns.tenant_of("t-1.kept."), None);
        assert_eq!(ns.tenant_of("t-1.kept"), None);
        // Extra tokens are not skipped over to reach a tenant.
        assert_eq!(ns.tenant_of("t-1.turns.other.acme"), Some("other.acme"));
    }

    #[test]
    fn rejects_characters_nats_would_misread() {
        assert!(Namespace::new("a.b").is_err());
        assert!(Namespace::new("a*").is_err());
        assert!(Namespace::new("").is_err());
    }
}

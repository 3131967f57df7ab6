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

    /// `<ns>.dlq.<stage>.<tenant>`.
    pub fn dlq_subject(&self, stage: &str, tenant: &str) -> String {
        format!("{}.dlq.{}.{}", self.0, stage, tenant)
    }

    /// `<ns>.recall.<tenant>`: recall by NATS request-reply (not a stream).
    pub fn recall_subject(&self, tenant: &str) -> String {
        format!("{}.recall.{}", self.0, tenant)
    }

    /// A namespace-relative subject (`turns.>`, as written in the stream files) made absolute.
    pub fn absolute(&self, relative: &str) -> String {
        format!("{}.{}", self.0, relative)
    }

    /// The JetStream name for a stream or bucket base name: `hindsight` + `TURNS` → `HINDSIGHT_TURNS`.
    pub fn stream_name(&self, base: &str) -> String {
        format!("{}_{}", self.0.to_ascii_uppercase().replace('-', "_"), base)
    }

    /// The tenant of a subject of this namespace: its last token.
    pub fn tenant_of<'a>(&self, subject: &'a str) -> Option<&'a str> {
        subject
            .strip_prefix(self.0.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.rsplit('.').next())
            .filter(|t| !t.is_empty())
    }
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
        assert_eq!(ns.stream_name("TURNS"), "T_1_TURNS");
        assert_eq!(ns.tenant_of("t-1.kept.acme"), Some("acme"));
        assert_eq!(ns.tenant_of("other.kept.acme"), None);
    }

    #[test]
    fn rejects_characters_nats_would_misread() {
        assert!(Namespace::new("a.b").is_err());
        assert!(Namespace::new("a*").is_err());
        assert!(Namespace::new("").is_err());
    }
}

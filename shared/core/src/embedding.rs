//! What travels from the embed stage to persist: a fact with its vector and the
//! identity of the model that made it. Vectors are only compared within one model.

use serde::{Deserialize, Serialize};

use crate::fact::Fact;

/// Which model made a vector: its name and a version that changes with its weights.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelId {
    pub name: String,
    pub version: String,
    pub dimension: usize,
}

impl ModelId {
    /// A name safe for collections and directories: `all-minilm-l6-v2-384-1a2b3c4d5e6f`.
    pub fn slug(&self) -> String {
        let clean = |s: &str| -> String {
            let mut out = String::new();
            for c in s.chars() {
                let c = if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                };
                if !(c == '-' && out.ends_with('-')) {
                    out.push(c);
                }
            }
            out.trim_matches('-').to_string()
        };
        let version: String = clean(&self.version).chars().take(12).collect();
        format!("{}-{}-{}", clean(&self.name), self.dimension, version)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedFact {
    #[serde(flatten)]
    pub fact: Fact,
    pub model: ModelId,
    pub vector: Vec<f32>,
}

impl crate::stage::Message for EmbeddedFact {
    fn tenant(&self) -> &str {
        &self.fact.tenant
    }

    fn msg_id(&self) -> String {
        format!("{}:{}", self.fact.tenant, self.fact.fact_id)
    }
}

/// Cosine similarity of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_names() {
        let id = ModelId {
            name: "sentence-transformers/all-MiniLM-L6-v2".into(),
            version: "ab12CD34ef56gh".into(),
            dimension: 384,
        };
        assert_eq!(
            id.slug(),
            "sentence-transformers-all-minilm-l6-v2-384-ab12cd34ef56"
        );
    }
}

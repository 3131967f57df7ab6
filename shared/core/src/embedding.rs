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

/// The languages a model is declared to read: ISO 639-1 codes as a model
/// card lists them (`language:`), or `*` for every language. Its cosine is
/// evidence only for texts in these languages' scripts
/// (`hindsight_text::script`); declaring none trusts it for no text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Languages(Vec<String>);

impl Languages {
    /// Every language (a multilingual model).
    pub fn all() -> Self {
        Self(vec!["*".into()])
    }

    /// Codes separated by commas or spaces (`en`, `zh, ja`, `*`); case and
    /// blanks do not matter. `multilingual`, as some model cards say, is `*`.
    pub fn parse(list: &str) -> Self {
        let mut codes: Vec<String> = Vec::new();
        for code in list.split([',', ' ', '\t']).map(str::trim) {
            let code = code.to_ascii_lowercase();
            let code = if code == "multilingual" {
                "*".into()
            } else {
                code
            };
            if !code.is_empty() && !codes.contains(&code) {
                codes.push(code);
            }
        }
        Self(codes)
    }

    pub fn is_all(&self) -> bool {
        self.0.iter().any(|c| c == "*")
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The declared codes (without `*`).
    pub fn codes(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str).filter(|c| *c != "*")
    }
}

impl std::fmt::Display for Languages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&self.0.join(","))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedFact {
    #[serde(flatten)]
    pub fact: Fact,
    pub model: ModelId,
    /// What the model reads; a message without it (from before it was
    /// carried) trusts the cosine for no text, and the words alone decide.
    #[serde(default)]
    pub languages: Languages,
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
    fn languages_read_from_a_list() {
        let l = Languages::parse("EN, zh ja,,en");
        assert_eq!(l.codes().collect::<Vec<_>>(), ["en", "zh", "ja"]);
        assert_eq!(l.to_string(), "en,zh,ja");
        assert!(!l.is_all());
        assert!(Languages::parse("multilingual").is_all());
        assert!(Languages::parse(" ").is_empty());
        assert_eq!(
            serde_json::to_string(&Languages::parse("en")).expect("json"),
            r#"["en"]"#
        );
    }

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

//! The fact: one atomic, self-contained statement worth remembering, as the
//! extract stage emits it to `<ns>.facts.<tenant>`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    closed_set::closed_set,
    turn::{Source, Trust, TurnContext},
};

closed_set! {
    /// What kind of statement a fact is; decides its default importance.
    pub enum FactType: "fact type", names "lowercase" {
        Preference,
        Constraint,
        Event,
        Plan,
        Entity,
        Relation,
        Fact,
    }
}

impl FactType {
    /// Reads a type name leniently (case, plural, a few synonyms); `None` if unknown.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.trim_end_matches('s');
        Some(match s {
            "preference" | "like" | "dislike" => FactType::Preference,
            "constraint" | "restriction" | "rule" | "allergy" | "health" => FactType::Constraint,
            "event" | "experience" | "episode" => FactType::Event,
            "plan" | "commitment" | "intention" | "goal" => FactType::Plan,
            "entity" | "object" | "thing" => FactType::Entity,
            "relation" | "relationship" => FactType::Relation,
            "fact" | "attribute" | "statement" | "other" => FactType::Fact,
            _ => return None,
        })
    }
}

/// Which extractor produced a fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ExtractedBy {
    /// The offline rules, the default without an LLM.
    Rules,
    /// An LLM over an OpenAI-compatible endpoint.
    Llm { model: String },
    /// The rules, because the LLM stayed unavailable (see the extract stage).
    RulesFallback,
}

impl ExtractedBy {
    pub fn label(&self) -> String {
        match self {
            ExtractedBy::Rules => "rules".into(),
            ExtractedBy::Llm { model } => format!("llm:{model}"),
            ExtractedBy::RulesFallback => "rules-fallback".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// `<turn_id>#<position>`: the same turn always yields the same ids.
    pub fact_id: String,
    pub tenant: String,
    pub user_id: String,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The turn the fact came from (its provenance).
    pub turn_id: String,
    pub position: u32,
    pub speaker: String,
    pub content: String,
    pub fact_type: FactType,
    #[serde(default)]
    pub entities: Vec<String>,
    /// 0–1.
    pub importance: f32,
    /// 0–1, from the trust of the source.
    pub confidence: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<DateTime<Utc>>,
    /// When the turn was said.
    pub turn_ts: DateTime<Utc>,
    pub source: Source,
    pub trust: Trust,
    /// Said by the agent, not the user: an inference, not a statement.
    #[serde(default)]
    pub inferred: bool,
    /// Carried over from the filter: suspected poisoning.
    #[serde(default)]
    pub quarantine: bool,
    /// The poisoning screen's record: the turn's `screen:<score>` and
    /// `poison:<reason>` flags, and what the embed stage's nearness added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    pub extractor: ExtractedBy,
    /// The turn the fact's turn replied to (see [`TurnContext`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<TurnContext>,
}

impl Fact {
    pub fn id_for(turn_id: &str, position: u32) -> String {
        format!("{turn_id}#{position}")
    }
}

impl crate::stage::Message for Fact {
    fn tenant(&self) -> &str {
        &self.tenant
    }

    fn msg_id(&self) -> String {
        format!("{}:{}", self.tenant, self.fact_id)
    }
}

/// Confidence given to what a source says: users and tools are believed,
/// agents' statements are inferences, outside text is doubted.
pub fn confidence_of(trust: Trust) -> f32 {
    match trust {
        Trust::High => 0.9,
        Trust::Medium => 0.6,
        Trust::Low => 0.3,
    }
}

/// Whether a fact from this source is an inference rather than a statement.
pub fn is_inferred(source: Source) -> bool {
    matches!(source, Source::Agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_read_leniently() {
        assert_eq!(FactType::parse("Preferences"), Some(FactType::Preference));
        assert_eq!(FactType::parse("relationship"), Some(FactType::Relation));
        assert_eq!(FactType::parse("gibberish"), None);
        for t in <FactType as strum::VariantArray>::VARIANTS {
            assert_eq!(FactType::parse(t.as_str()), Some(*t));
        }
    }
}

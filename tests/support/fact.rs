//! A fact as the extract stage would emit it, for tests that publish facts
//! (or embedded facts) straight to the pipeline.

use hindsight_core::{
    fact::{ExtractedBy, Fact, FactType},
    turn::{Source, Trust},
};

/// A plain fact of `user` from the user themself, extracted by the rules; its
/// turn id is the fact id up to `#` (`t1#0` is the first fact of turn `t1`).
pub fn plain(tenant: &str, user: &str, fact_id: &str, content: &str) -> Fact {
    Fact {
        fact_id: fact_id.into(),
        tenant: tenant.into(),
        user_id: user.into(),
        session_id: "s".into(),
        agent_id: None,
        turn_id: fact_id.split('#').next().unwrap_or(fact_id).into(),
        position: 0,
        speaker: user.into(),
        content: content.into(),
        fact_type: FactType::Fact,
        entities: vec![],
        importance: 0.5,
        confidence: 0.9,
        occurred_at: None,
        valid_until: None,
        turn_ts: chrono::Utc::now(),
        source: Source::User,
        trust: Trust::High,
        inferred: false,
        quarantine: false,
        flags: vec![],
        extractor: ExtractedBy::Rules,
        context: None,
    }
}

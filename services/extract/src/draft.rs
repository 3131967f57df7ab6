//! A fact as an extractor proposes it, before it gets its identity.

use chrono::{DateTime, Utc};
use hindsight_core::{
    fact::{ExtractedBy, Fact, FactType, confidence_of, is_inferred},
    turn::KeptTurn,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub content: String,
    pub fact_type: FactType,
    pub entities: Vec<String>,
    pub importance: f32,
    /// How sure the extractor is (LLM); `None` for the rules.
    pub confidence: Option<f32>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub valid_until: Option<DateTime<Utc>>,
}

/// A fact's end of validity, if it ends after the fact occurred: an end before
/// that bounds something else the text dates (or nothing), and a fact gets no
/// end rather than one before it began.
pub fn validity(
    occurred_at: Option<DateTime<Utc>>,
    valid_until: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    valid_until.filter(|until| occurred_at.is_none_or(|from| from < *until))
}

/// Gives drafts their deterministic ids (turn + position) and the turn's context.
/// Confidence is the source's trust, scaled by the extractor's own certainty.
pub fn finish(kept: &KeptTurn, drafts: Vec<Draft>, extractor: &ExtractedBy) -> Vec<Fact> {
    let turn = &kept.turn;
    drafts
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let position = i as u32;
            Fact {
                fact_id: Fact::id_for(&turn.turn_id, position),
                tenant: turn.tenant.clone(),
                user_id: turn.user_id.clone(),
                session_id: turn.session_id.clone(),
                agent_id: turn.agent_id.clone(),
                turn_id: turn.turn_id.clone(),
                position,
                speaker: turn.speaker.clone(),
                content: d.content,
                fact_type: d.fact_type,
                entities: d.entities,
                importance: d.importance.clamp(0.0, 1.0),
                confidence: (confidence_of(kept.trust) * d.confidence.unwrap_or(1.0))
                    .clamp(0.0, 1.0),
                occurred_at: d.occurred_at,
                valid_until: d.valid_until,
                turn_ts: turn.ts,
                source: turn.source,
                trust: kept.trust,
                inferred: is_inferred(turn.source),
                quarantine: kept.quarantine,
                flags: hindsight_core::turn::screen_flags(&kept.flags),
                extractor: extractor.clone(),
                context: kept.context.clone(),
            }
        })
        .collect()
}

use async_trait::async_trait;
use futures::future::join_all;
use hindsight_core::{
    Delivery, Outcome, Stage, Topic,
    fact::{ExtractedBy, Fact},
    turn::KeptTurn,
};
use hindsight_shared::events;
use hindsight_store::{
    Store,
    turns::{Extraction, TurnKey},
};

use crate::{
    draft,
    llm::{self, LlmExtractor},
    rules, screen,
};

/// The extract stage: kept turns in, facts out.
///
/// The facts of a turn are recorded in the archive before they are emitted,
/// and a redelivered turn re-emits the recorded facts: an LLM is not
/// deterministic, and a turn must never yield two different sets of facts.
pub struct ExtractStage {
    store: Store,
    llm: Option<LlmExtractor>,
    fallback_after: u64,
    context: bool,
    encoder: Option<screen::Encoder>,
}

impl ExtractStage {
    /// With `llm = None` the offline rules extract every turn.
    pub fn new(store: Store, llm: Option<LlmExtractor>, fallback_after: u64) -> Self {
        Self {
            store,
            llm,
            fallback_after,
            context: true,
            encoder: None,
        }
    }

    /// Whether the screen's encoder model is asked about borderline turns
    /// (`HINDSIGHT_SCREEN_ENCODER`; see [`screen`]).
    pub fn asking_encoder(mut self, encoder: Option<screen::Encoder>) -> Self {
        self.encoder = encoder;
        self
    }

    /// Whether the extractors read, and facts keep, the turn a turn replied
    /// to (`HINDSIGHT_FACT_CONTEXT`; on by default).
    pub fn keeping_context(mut self, on: bool) -> Self {
        self.context = on;
        self
    }
}

/// What became of one turn this time.
enum Attempt {
    Extracted {
        facts: Vec<Fact>,
        extractor: ExtractedBy,
        no_facts_reason: Option<String>,
    },
    Retry(String),
}

impl ExtractStage {
    async fn attempt(&self, delivery: &Delivery<KeptTurn>) -> Attempt {
        let alone;
        let kept = if self.context || delivery.input.context.is_none() {
            &delivery.input
        } else {
            alone = KeptTurn {
                context: None,
                ..delivery.input.clone()
            };
            &alone
        };
        let rules_with = |extractor: ExtractedBy| {
            let facts = draft::finish(kept, rules::extract(kept), &extractor);
            let reason = facts
                .is_empty()
                .then(|| "no statement worth remembering".to_string());
            Attempt::Extracted {
                facts,
                extractor,
                no_facts_reason: reason,
            }
        };
        let Some(llm) = &self.llm else {
            return rules_with(ExtractedBy::Rules);
        };
        match llm.extract(kept).await {
            Ok(llm::Extraction::Facts {
                drafts,
                orders_assistant,
            }) => {
                let extractor = ExtractedBy::Llm {
                    model: llm.model().to_string(),
                };
                let mut facts = draft::finish(kept, drafts, &extractor);
                if orders_assistant == Some(true) {
                    second_opinion(kept, &mut facts);
                }
                Attempt::Extracted {
                    facts,
                    extractor,
                    no_facts_reason: None,
                }
            }
            Ok(llm::Extraction::NoFacts(reason)) => Attempt::Extracted {
                facts: Vec::new(),
                extractor: ExtractedBy::Llm {
                    model: llm.model().to_string(),
                },
                no_facts_reason: Some(reason),
            },
            Err(unavailable) if delivery.delivered >= self.fallback_after => {
                tracing::warn!(
                    tenant = %kept.turn.tenant,
                    turn_id = %kept.turn.turn_id,
                    deliveries = delivery.delivered,
                    reason = %unavailable.reason,
                    "LLM still unavailable: the rules extract this turn"
                );
                rules_with(ExtractedBy::RulesFallback)
            }
            Err(unavailable) => Attempt::Retry(unavailable.to_string()),
        }
    }
}

impl ExtractStage {
    /// `attempt` with the encoder's opinion on the turn's facts, when it is
    /// asked; an encoder that cannot answer makes the turn wait.
    async fn screened(&self, delivery: &Delivery<KeptTurn>, attempt: Attempt) -> Attempt {
        let Some(encoder) = &self.encoder else {
            return attempt;
        };
        let Attempt::Extracted {
            mut facts,
            extractor,
            no_facts_reason,
        } = attempt
        else {
            return attempt;
        };
        match encoder.judge(&delivery.input, &mut facts).await {
            Ok(()) => Attempt::Extracted {
                facts,
                extractor,
                no_facts_reason,
            },
            Err(reason) => Attempt::Retry(reason),
        }
    }
}

/// The LLM's opinion on a borderline turn: one the poisoning screen recorded
/// (it saw a cue, or scored above 0) without quarantining, which the model
/// says gives the assistant orders, has its facts quarantined (`poison:llm`).
/// Alone, the opinion of a model that a turn can talk into anything does not
/// count.
pub fn second_opinion(kept: &KeptTurn, facts: &mut [Fact]) {
    if !screen::near_miss(kept) {
        return;
    }
    for f in facts {
        f.quarantine = true;
        f.flags.push("poison:llm".into());
    }
}

fn key(kept: &KeptTurn) -> TurnKey {
    (kept.turn.tenant.clone(), kept.turn.turn_id.clone())
}

fn record(
    kept: &KeptTurn,
    facts: &[Fact],
    extractor: &ExtractedBy,
    no_facts_reason: Option<String>,
) -> Extraction {
    Extraction {
        tenant: kept.turn.tenant.clone(),
        turn_id: kept.turn.turn_id.clone(),
        outcome: if facts.is_empty() {
            "no_facts".into()
        } else {
            "facts".into()
        },
        reason: no_facts_reason,
        extractor: Some(extractor.label()),
        facts: serde_json::to_string(facts).ok(),
    }
}

/// The outcome of a recorded extraction.
fn outcome_of(extraction: &Extraction) -> Outcome<Fact> {
    let facts: Vec<Fact> = extraction
        .facts
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    if facts.is_empty() {
        Outcome::Drop(format!(
            "no_facts: {}",
            extraction.reason.as_deref().unwrap_or("nothing extracted")
        ))
    } else {
        Outcome::Emit(facts)
    }
}

fn extractor_kind(extractor: &ExtractedBy) -> &'static str {
    match extractor {
        ExtractedBy::Rules => "rules",
        ExtractedBy::Llm { .. } => "llm",
        ExtractedBy::RulesFallback => "rules-fallback",
    }
}

#[async_trait]
impl Stage for ExtractStage {
    type Input = KeptTurn;
    type Output = Fact;

    const NAME: &'static str = "extract";
    const INPUT: Topic = Topic::Kept;
    const OUTPUT: Option<Topic> = Some(Topic::Facts);

    fn decode(&self, payload: &[u8]) -> Result<KeptTurn, String> {
        serde_json::from_slice(payload).map_err(|e| format!("not a kept turn: {e}"))
    }

    async fn handle(&self, batch: &[Delivery<KeptTurn>]) -> Vec<Outcome<Fact>> {
        // Only a message delivered before can find its turn already extracted
        // (a turn sent twice to `kept` within the duplicate window is stored
        // once; a race between replicas is settled when recording).
        let keys: Vec<TurnKey> = batch
            .iter()
            .filter(|d| d.delivered > 1 || d.replayed)
            .map(|d| key(&d.input))
            .collect();
        let recorded = match self.store.extractions(&keys).await {
            Ok(r) => r,
            Err(e) => return retry_all(batch.len(), &format!("archive: {e}")),
        };
        let attempts = join_all(batch.iter().map(|d| async {
            if recorded.contains_key(&key(&d.input)) {
                None
            } else {
                Some(self.screened(d, self.attempt(d).await).await)
            }
        }))
        .await;

        let mut new_records = Vec::new();
        for (d, attempt) in batch.iter().zip(&attempts) {
            if let Some(Attempt::Extracted {
                facts,
                extractor,
                no_facts_reason,
            }) = attempt
            {
                events::FactsExtracted {
                    tenant: &d.input.turn.tenant,
                    extractor: extractor_kind(extractor),
                    count: facts.len(),
                }
                .emit();
                new_records.push(record(&d.input, facts, extractor, no_facts_reason.clone()));
            }
        }
        let mut stored = recorded;
        if !new_records.is_empty() {
            let written = match self.store.record_extractions(&new_records).await {
                Ok(w) => w,
                Err(e) => return retry_all(batch.len(), &format!("archive: {e}")),
            };
            // Where another replica recorded first, its facts are the ones emitted.
            let lost: Vec<TurnKey> = new_records
                .iter()
                .map(|r| (r.tenant.clone(), r.turn_id.clone()))
                .filter(|k| !written.contains(k))
                .collect();
            let theirs = match self.store.extractions(&lost).await {
                Ok(r) => r,
                Err(e) => return retry_all(batch.len(), &format!("archive: {e}")),
            };
            for record in new_records {
                let key = (record.tenant.clone(), record.turn_id.clone());
                if written.contains(&key) {
                    stored.insert(key, record);
                }
            }
            stored.extend(theirs);
        }

        batch
            .iter()
            .zip(attempts)
            .map(|(d, attempt)| match (stored.get(&key(&d.input)), attempt) {
                (_, Some(Attempt::Retry(reason))) => Outcome::Retry(reason),
                (Some(extraction), _) => outcome_of(extraction),
                // A kept turn the archive does not know (published straight to
                // `kept`): emit what was extracted.
                (
                    None,
                    Some(Attempt::Extracted {
                        facts,
                        extractor,
                        no_facts_reason,
                    }),
                ) => outcome_of(&record(&d.input, &facts, &extractor, no_facts_reason)),
                (None, None) => Outcome::Retry("internal: extraction vanished".into()),
            })
            .collect()
    }
}

fn retry_all(count: usize, reason: &str) -> Vec<Outcome<Fact>> {
    tracing::warn!(%reason, "the batch will be retried");
    (0..count)
        .map(|_| Outcome::Retry(reason.to_string()))
        .collect()
}

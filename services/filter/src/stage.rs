use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::Utc;
use hindsight_core::{
    Delivery, Outcome, Stage, Topic,
    turn::{KeptTurn, Turn, TurnContext, parse_envelope},
    zone::Zones,
};
use hindsight_store::{
    Store,
    erase::work::ReceivedTurn,
    turns::{ArchivedFate, TurnKey, TurnRow},
};

use hindsight_screen::{Examined, Fate, Verdict, screen};

/// The filter stage over its archive.
pub struct FilterStage {
    store: Store,
    screen: screen::Settings,
    zones: Zones,
}

impl FilterStage {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            screen: screen::Settings::default(),
            zones: Zones::default(),
        }
    }

    /// Reads a turn that gives no UTC offset on its tenant's zone's calendar
    /// (UTC until set): its offset at the turn's time is filled in.
    pub fn zoned(mut self, zones: Zones) -> Self {
        self.zones = zones;
        self
    }

    /// Screens with `screen`: quarantines turns scored at its threshold or
    /// more (`HINDSIGHT_SCREEN_THRESHOLD`, `HINDSIGHT_SCREEN_LEARNT`).
    pub fn screening(mut self, screen: screen::Settings) -> Self {
        self.screen = screen;
        self
    }
}

/// What the stage decided for one delivery before touching the archive.
enum Plan {
    Invalid(String),
    /// Seen before under another stream sequence: a second publish.
    Duplicate(TurnKey),
    /// Already archived by an earlier delivery of this very message.
    Redelivered(Turn, ArchivedFate),
    New(Turn),
    /// Of a user being erased: not archived, not passed on; the erase removes
    /// it from the stream.
    Erasing,
}

fn kept(turn: Turn, verdict: &Verdict, context: Option<TurnContext>) -> KeptTurn {
    let trust = turn.source.trust();
    KeptTurn {
        turn: Turn {
            content: verdict.content.clone(),
            ..turn
        },
        trust,
        quarantine: verdict.quarantine,
        flags: verdict.flags.clone(),
        context,
    }
}

fn row(turn: &Turn, verdict: &Verdict, stream_seq: u64) -> TurnRow {
    let (fate, reason) = match &verdict.fate {
        Fate::Keep => ("kept", None),
        Fate::Drop(reason) => ("dropped", Some(reason.clone())),
    };
    TurnRow {
        tenant: turn.tenant.clone(),
        turn_id: turn.turn_id.clone(),
        user_id: turn.user_id.clone(),
        session_id: turn.session_id.clone(),
        agent_id: turn.agent_id.clone(),
        speaker: turn.speaker.clone(),
        role: turn.role.as_str().into(),
        source: turn.source.as_str().into(),
        trust: turn.source.trust().as_str().into(),
        content: verdict.content.clone(),
        metadata: serde_json::Value::Object(turn.metadata.clone()),
        ts: turn.ts,
        stream_seq: stream_seq as i64,
        fate: fate.into(),
        reason,
        quarantine: verdict.quarantine,
        flags: verdict.flags.clone(),
    }
}

const DUPLICATE: &str = "duplicate: this turn was already archived (published again)";
const ERASING: &str =
    "erasing: the user is being erased; turns published until the erase ends are erased too";

#[async_trait]
impl Stage for FilterStage {
    type Input = Bytes;
    type Output = KeptTurn;

    const NAME: &'static str = "filter";
    const INPUT: Topic = Topic::Turns;
    const OUTPUT: Option<Topic> = Some(Topic::Kept);

    /// Raw bytes: validating the envelope is this stage's job, with reasons.
    fn decode(&self, payload: &[u8]) -> Result<Bytes, String> {
        Ok(Bytes::copy_from_slice(payload))
    }

    async fn handle(&self, batch: &[Delivery<Bytes>]) -> Vec<Outcome<KeptTurn>> {
        let received_at = Utc::now();
        let parsed: Vec<Result<Turn, String>> = batch
            .iter()
            .map(|d| {
                // The publish time is the receive time of a turn that gives no `ts`,
                // so a redelivery derives the same values.
                let at = if d.published.timestamp() > 0 {
                    d.published
                } else {
                    received_at
                };
                let mut turn =
                    parse_envelope(&d.input, &d.tenant, at).map_err(|e| e.to_string())?;
                if turn.utc_offset_minutes.is_none() {
                    turn.utc_offset_minutes =
                        Some(self.zones.offset_minutes(&turn.tenant, turn.ts));
                }
                Ok(turn)
            })
            .collect();
        let received: Vec<ReceivedTurn> = parsed
            .iter()
            .zip(batch)
            .filter_map(|(p, d)| {
                p.as_ref().ok().map(|t| ReceivedTurn {
                    tenant: t.tenant.clone(),
                    user_id: t.user_id.clone(),
                    seq: d.stream_seq as i64,
                })
            })
            .collect();
        let keys: Vec<TurnKey> = parsed
            .iter()
            .filter_map(|p| p.as_ref().ok())
            .map(|t| (t.tenant.clone(), t.turn_id.clone()))
            .collect();
        // The previous turn of each speaker, and the latest kept turn of each
        // session before each turn, for every valid turn of the batch (a few
        // more than the new ones need): all four reads at once, one round
        // trip's wait rather than four, in a task of their own, while this
        // one examines the turns (the screen's work, which needs none of them).
        let speakers: HashSet<(String, String, String)> = parsed
            .iter()
            .filter_map(|p| p.as_ref().ok())
            .map(|t| (t.tenant.clone(), t.session_id.clone(), t.speaker.clone()))
            .collect();
        let sessions: Vec<(String, String, i64)> = parsed
            .iter()
            .zip(batch)
            .filter_map(|(p, d)| {
                let t = p.as_ref().ok()?;
                Some((t.tenant.clone(), t.session_id.clone(), d.stream_seq as i64))
            })
            .collect();
        let store = self.store.clone();
        let reads = tokio::spawn(async move {
            tokio::try_join!(
                store.refuse_erased(&received),
                store.archived_fates(&keys),
                store.previous_by_speaker(&speakers),
                store.previous_kept(&sessions),
            )
        });
        let mut examined: Vec<Option<Examined>> = parsed
            .iter()
            .map(|p| {
                p.as_ref()
                    .ok()
                    .map(|t| hindsight_screen::examine(t, self.screen))
            })
            .collect();
        let (erasing, archived, mut previous, kept_before) = match reads.await {
            Ok(Ok(reads)) => reads,
            Ok(Err(e)) => return retry_all(batch.len(), &e.to_string()),
            Err(e) => return retry_all(batch.len(), &format!("reading the archive: {e}")),
        };

        let mut seen: HashSet<TurnKey> = HashSet::new();
        let plans: Vec<Plan> = parsed
            .into_iter()
            .zip(batch)
            .map(|(parsed, delivery)| {
                let turn = match parsed {
                    Ok(t) => t,
                    Err(reason) => return Plan::Invalid(reason),
                };
                if erasing.contains(&(delivery.stream_seq as i64)) {
                    return Plan::Erasing;
                }
                let key = (turn.tenant.clone(), turn.turn_id.clone());
                if !seen.insert(key.clone()) {
                    return Plan::Duplicate(key);
                }
                match archived.get(&key) {
                    Some(fate)
                        if fate.stream_seq as u64 == delivery.stream_seq || delivery.replayed =>
                    {
                        Plan::Redelivered(turn, fate.clone())
                    }
                    Some(_) => Plan::Duplicate(key),
                    None => Plan::New(turn),
                }
            })
            .collect();

        // The previous turn of each speaker: the archive's, then the batch in order on top of it.
        let mut verdicts: HashMap<usize, Verdict> = HashMap::new();
        let mut rows = Vec::new();
        for (index, (plan, delivery)) in plans.iter().zip(batch).enumerate() {
            let turn = match plan {
                Plan::New(t) | Plan::Redelivered(t, _) => t,
                _ => continue,
            };
            let speaker_key = (
                turn.tenant.clone(),
                turn.session_id.clone(),
                turn.speaker.clone(),
            );
            let Some(examined) = examined[index].take() else {
                continue;
            };
            let verdict = examined.verdict(previous.get(&speaker_key).map(String::as_str));
            if let Plan::New(_) = plan {
                rows.push(row(turn, &verdict, delivery.stream_seq));
                previous.insert(speaker_key, verdict.content.clone());
            }
            verdicts.insert(index, verdict);
        }
        let mut contexts = contexts(&plans, batch, &verdicts, kept_before);
        let inserted = match self.store.archive_turns(&rows).await {
            Ok(i) => i,
            Err(e) => return retry_all(batch.len(), &e.to_string()),
        };

        let mut duplicates = Vec::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        for (index, (plan, delivery)) in plans.into_iter().zip(batch).enumerate() {
            let outcome = match plan {
                Plan::Invalid(reason) => Outcome::Reject(format!("invalid turn: {reason}")),
                Plan::Erasing => Outcome::Drop(ERASING.into()),
                Plan::Duplicate(key) => {
                    duplicates.push((key, delivery.stream_seq as i64));
                    Outcome::Drop(DUPLICATE.into())
                }
                Plan::New(turn) => {
                    let key = (turn.tenant.clone(), turn.turn_id.clone());
                    if !inserted.contains(&key) {
                        // Another replica archived the same turn in the meantime.
                        duplicates.push((key, delivery.stream_seq as i64));
                        Outcome::Drop(DUPLICATE.into())
                    } else {
                        settle(turn, verdicts.get(&index), None, contexts.remove(&index))
                    }
                }
                Plan::Redelivered(turn, fate) => settle(
                    turn,
                    verdicts.get(&index),
                    Some(&fate),
                    contexts.remove(&index),
                ),
            };
            outcomes.push(outcome);
        }
        if let Err(e) = self.store.record_duplicates(&duplicates).await {
            return retry_all(batch.len(), &e.to_string());
        }
        outcomes
    }
}

/// The outcome of an archived turn. On a redelivery the archived fate rules,
/// since the "previous turn" a repeat is judged against has changed since.
fn settle(
    turn: Turn,
    verdict: Option<&Verdict>,
    archived: Option<&ArchivedFate>,
    context: Option<TurnContext>,
) -> Outcome<KeptTurn> {
    let Some(verdict) = verdict else {
        return Outcome::Retry("internal: no verdict for an archived turn".into());
    };
    match archived {
        Some(fate) if fate.fate == "dropped" => {
            Outcome::Drop(fate.reason.clone().unwrap_or_else(|| "dropped".into()))
        }
        Some(_) => Outcome::Emit(vec![kept(turn, verdict, context)]),
        None => match &verdict.fate {
            Fate::Keep => Outcome::Emit(vec![kept(turn, verdict, context)]),
            Fate::Drop(reason) => Outcome::Drop(reason.clone()),
        },
    }
}

/// What each turn to pass on replies to: the latest kept, unquarantined turn
/// of its session before it in the stream, from this batch or the archive
/// (`archived`: per tenant, session and stream sequence, the archive's).
/// One walk in stream order, holding each session's latest kept turn so far.
fn contexts(
    plans: &[Plan],
    batch: &[Delivery<Bytes>],
    verdicts: &HashMap<usize, Verdict>,
    mut archived: HashMap<(String, String, i64), (i64, TurnContext)>,
) -> HashMap<usize, TurnContext> {
    let mut turns: Vec<(usize, &Turn, i64)> = plans
        .iter()
        .zip(batch)
        .enumerate()
        .filter_map(|(i, (plan, d))| match plan {
            Plan::New(t) | Plan::Redelivered(t, _) => Some((i, t, d.stream_seq as i64)),
            _ => None,
        })
        .collect();
    turns.sort_by_key(|(_, _, seq)| *seq);
    // Per (tenant, session): the batch's latest kept, unquarantined turn so far.
    let mut latest_kept: HashMap<(&str, &str), (i64, usize, &Turn)> = HashMap::new();
    let mut out = HashMap::new();
    for (index, turn, seq) in turns {
        let session = (turn.tenant.as_str(), turn.session_id.as_str());
        let from_batch = latest_kept.get(&session).map(|(s, i, t)| {
            let content = verdicts.get(i).map_or(t.content.as_str(), |v| &v.content);
            (*s, TurnContext::new(&t.turn_id, &t.speaker, content))
        });
        let from_archive = archived.remove(&(turn.tenant.clone(), turn.session_id.clone(), seq));
        let latest = match (from_batch, from_archive) {
            (Some(b), Some(a)) => Some(if b.0 >= a.0 { b } else { a }),
            (b, a) => b.or(a),
        };
        if let Some((_, c)) = latest {
            out.insert(index, c);
        }
        // A turn of this batch counts once its verdict keeps it unquarantined.
        if verdicts
            .get(&index)
            .is_some_and(|v| v.fate == Fate::Keep && !v.quarantine)
        {
            latest_kept.insert(session, (seq, index, turn));
        }
    }
    out
}

fn retry_all(count: usize, reason: &str) -> Vec<Outcome<KeptTurn>> {
    tracing::warn!(%reason, "archive unavailable; the batch will be retried");
    (0..count)
        .map(|_| Outcome::Retry(format!("archive: {reason}")))
        .collect()
}

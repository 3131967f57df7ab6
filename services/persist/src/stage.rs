use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use async_trait::async_trait;
use hindsight_core::{
    Delivery, Namespace, Outcome, Stage, Topic,
    embedding::EmbeddedFact,
    fact::FactType,
    memory::{Kind, Status},
    stage::NoOutput,
};
use hindsight_index::{Collection, Scope, VectorIndex};
use hindsight_shared::events;
use hindsight_store::{
    Store, StoreError,
    memories::{self, Candidate, NewMemory},
    provenance::Provenance,
    turns,
};
use hindsight_text::{script, statement};
use serde_json::json;
use uuid::Uuid;

use crate::{
    dedupe::{self, Decision},
    reconcile,
};

/// Namespace of the ids of memories created from facts: a fact always makes the same memory.
const MEMORY_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6b1d_5f0e_2c4a_4e8f_9a7b_3d2c_1e0f_a5b4);

/// How many neighbours the index is asked for per fact.
const NEIGHBOURS: usize = 5;
/// How many memories sharing the most terms are read per fact whose script
/// the embedder does not read (its neighbours by vector say little).
const LEXICAL_NEIGHBOURS: usize = 5;

pub struct PersistStage {
    store: Store,
    index: Arc<dyn VectorIndex>,
    namespace: Namespace,
    threshold: f32,
}

impl PersistStage {
    pub fn new(
        store: Store,
        index: Arc<dyn VectorIndex>,
        namespace: Namespace,
        threshold: f32,
    ) -> Self {
        Self {
            store,
            index,
            namespace,
            threshold,
        }
    }
}

fn new_memory(e: &EmbeddedFact, id: Uuid) -> NewMemory {
    let f = &e.fact;
    NewMemory {
        id,
        tenant: f.tenant.clone(),
        user_id: f.user_id.clone(),
        agent_id: f.agent_id.clone(),
        session_id: Some(f.session_id.clone()),
        kind: if f.fact_type == FactType::Event {
            Kind::Episodic
        } else {
            Kind::Semantic
        },
        fact_type: f.fact_type,
        content: f.content.clone(),
        content_key: statement::content_key(&f.content),
        entities: f.entities.clone(),
        importance: f.importance.clamp(0.0, 1.0),
        confidence: f.confidence.clamp(0.0, 1.0),
        source_trust: f.trust.as_str().into(),
        status: if f.quarantine {
            Status::Quarantined
        } else {
            Status::Active
        },
        occurred_at: f.occurred_at,
        valid_from: f.occurred_at.or(Some(f.turn_ts)),
        expires_at: f.valid_until,
        embedding_model: e.model.name.clone(),
        embedding_version: e.model.version.clone(),
        embedding: e.vector.clone(),
        context: f.context.clone(),
        source: Some(f.source.as_str().into()),
        flags: f.flags.clone(),
        inferred: f.inferred,
    }
}

impl PersistStage {
    /// Persists the facts of one (tenant, user, model) in one transaction.
    /// Returns the memories touched (to index) and which facts were already persisted.
    async fn persist_group(
        &self,
        facts: &[&EmbeddedFact],
    ) -> Result<(Vec<Uuid>, Vec<bool>), StoreError> {
        let first = facts[0];
        let (tenant, user_id, model) = (&first.fact.tenant, &first.fact.user_id, &first.model);
        let collection = Collection::for_model(&self.namespace, model);
        let mut tx = self.store.pool.begin().await?;
        memories::lock_user(&mut tx, tenant, user_id).await?;

        let fact_ids: Vec<String> = facts.iter().map(|f| f.fact.fact_id.clone()).collect();
        let done = memories::persisted_facts(&mut tx, tenant, &fact_ids).await?;
        let already: Vec<bool> = facts
            .iter()
            .map(|f| done.contains(&f.fact.fact_id))
            .collect();

        // Memories written but not yet indexed come from Postgres, read before
        // the index is asked: a writer marks a memory indexed only after the
        // index holds it, so whatever this read misses, the search finds.
        let keys: Vec<String> = facts
            .iter()
            .map(|f| statement::content_key(&f.fact.content))
            .collect();
        let mut candidates: Vec<Candidate> = memories::candidates(
            &mut tx,
            tenant,
            user_id,
            &model.name,
            &model.version,
            &keys,
            &[],
            false,
        )
        .await?;
        let scope = Scope {
            tenant: tenant.clone(),
            user_id: user_id.clone(),
            statuses: vec![Status::Active],
            ..Default::default()
        };
        // Whether the embedder reads each fact's script: if not, its
        // cosine neither gates nor alone finds the candidates.
        let reads: Vec<bool> = facts
            .iter()
            .map(|f| script::is_read(&f.fact.content, &f.languages))
            .collect();
        let mut neighbour_ids = Vec::new();
        let mut index_down = false;
        // For a fact in a script the model does not read: the memories it is
        // compared with (those sharing the most terms, and its nearest
        // vectors), so that the words, slower than a cosine, read a few.
        let mut own: Vec<Option<dedupe::Unread>> = vec![None; facts.len()];
        for (i, ((f, skip), reads)) in facts.iter().zip(&already).zip(&reads).enumerate() {
            if *skip || f.fact.quarantine {
                continue;
            }
            if !reads {
                let unread = dedupe::Unread::new(&f.fact.content);
                let terms: Vec<String> = unread.terms.iter().cloned().collect();
                let lexical = memories::lexical_candidates(
                    &mut tx,
                    tenant,
                    user_id,
                    &model.name,
                    &model.version,
                    &terms,
                    LEXICAL_NEIGHBOURS,
                )
                .await?;
                let mut unread = unread;
                for c in lexical {
                    unread.ids.insert(c.id);
                    if !candidates.iter().any(|x| x.id == c.id) {
                        candidates.push(c);
                    }
                }
                own[i] = Some(unread);
            }
            let gate = if *reads {
                self.threshold - dedupe::CONTRADICTION_MARGIN
            } else {
                f32::NEG_INFINITY
            };
            match self
                .index
                .search(&collection, &f.vector, &scope, NEIGHBOURS)
                .await
            {
                Ok(hits) => {
                    if let Some(unread) = own[i].as_mut() {
                        unread.ids.extend(hits.iter().map(|h| h.id));
                    }
                    neighbour_ids.extend(
                        hits.into_iter()
                            .filter(|h| h.score >= gate)
                            .map(|h| h.id)
                            .filter(|id| !candidates.iter().any(|c| c.id == *id)),
                    )
                }
                Err(e) => {
                    tracing::warn!(error = %e, "index unavailable: dedupe compares against every memory of the user");
                    index_down = true;
                    break;
                }
            }
        }
        if index_down || !neighbour_ids.is_empty() {
            let more = memories::candidates(
                &mut tx,
                tenant,
                user_id,
                &model.name,
                &model.version,
                &[],
                &neighbour_ids,
                index_down,
            )
            .await?;
            for c in more {
                if !candidates.iter().any(|x| x.id == c.id) {
                    candidates.push(c);
                }
            }
        }

        let mut touched = Vec::new();
        // Sources and audit entries, written once the group's memories are.
        let mut provenance = Provenance::new(tenant, user_id, "persist");
        // Memories this group created or merged into, with their terms, for
        // the facts the model does not read (kept only if there are any).
        let any_unread = own.iter().any(Option::is_some);
        let mut made: Vec<(Uuid, HashSet<String>)> = Vec::new();
        let remember = |made: &mut Vec<(Uuid, HashSet<String>)>, id: Uuid, content: &str| {
            if any_unread {
                made.retain(|(m, _)| *m != id);
                made.push((id, dedupe::Unread::new(content).terms));
            }
        };
        for (i, ((e, skip), key)) in facts.iter().zip(&already).zip(&keys).enumerate() {
            if *skip {
                continue;
            }
            let f = &e.fact;
            let new_id = Uuid::new_v5(
                &MEMORY_ID_NAMESPACE,
                format!("{}:{}", f.tenant, f.fact_id).as_bytes(),
            );
            let decision = if f.quarantine {
                Decision::Create
            } else if let Some(unread) = &own[i] {
                let pool = unread.pool(&candidates, &made, key);
                dedupe::decide(&f.content, key, &e.vector, &pool, self.threshold, false)
            } else {
                dedupe::decide(
                    &f.content,
                    key,
                    &e.vector,
                    &candidates,
                    self.threshold,
                    true,
                )
            };
            let detail = json!({"fact_id": f.fact_id, "turn_id": f.turn_id});
            match decision {
                Decision::Create => {
                    let memory = new_memory(e, new_id);
                    memories::insert(&mut tx, &memory).await?;
                    provenance.source(new_id, &f.fact_id, &f.turn_id);
                    provenance.event(new_id, "create", detail);
                    if f.quarantine {
                        turns::quarantine_later(&mut tx, tenant, &f.turn_id, &f.flags).await?;
                    }
                    if memory.status == Status::Active {
                        candidates.push(candidate(&memory));
                        remember(&mut made, new_id, &memory.content);
                    }
                    touched.push(new_id);
                    events::Deduped {
                        tenant,
                        outcome: if f.quarantine {
                            "quarantined"
                        } else {
                            "created"
                        },
                    }
                    .emit();
                }
                Decision::Merge {
                    into,
                    similarity,
                    content,
                    take_vector,
                } => {
                    let new_key = statement::content_key(&content);
                    let vector = take_vector.then_some(e.vector.as_slice());
                    let survivor = candidates.iter().find(|c| c.id == into);
                    let context = survivor
                        .and_then(|c| c.context.as_ref())
                        .or(f.context.as_ref());
                    let mut entities = survivor.map(|c| c.entities.clone()).unwrap_or_default();
                    for e in &f.entities {
                        if !entities.contains(e) {
                            entities.push(e.clone());
                        }
                    }
                    let terms = memories::search_terms(&content, &entities, context);
                    let context = context.cloned();
                    memories::merge(
                        &mut tx,
                        into,
                        &content,
                        &new_key,
                        vector,
                        f.importance,
                        f.confidence,
                        &f.entities,
                        &terms,
                        context.as_ref(),
                        f.inferred,
                    )
                    .await?;
                    provenance.source(into, &f.fact_id, &f.turn_id);
                    provenance.event(
                        into,
                        "merge",
                        json!({"fact_id": f.fact_id, "turn_id": f.turn_id, "similarity": similarity, "fact_content": f.content}),
                    );
                    remember(&mut made, into, &content);
                    if let Some(c) = candidates.iter_mut().find(|c| c.id == into) {
                        c.content = content;
                        c.content_key = new_key;
                        c.entities = entities;
                        if c.context.is_none() {
                            c.context = context;
                        }
                        if take_vector {
                            c.embedding = e.vector.clone();
                        }
                    }
                    touched.push(into);
                    events::Deduped {
                        tenant,
                        outcome: if similarity >= 1.0 { "exact" } else { "merged" },
                    }
                    .emit();
                }
                Decision::Supersede { old, similarity } => {
                    let memory = new_memory(e, new_id);
                    memories::insert(&mut tx, &memory).await?;
                    memories::supersede(&mut tx, old, new_id).await?;
                    provenance.source(new_id, &f.fact_id, &f.turn_id);
                    provenance.event(
                        new_id,
                        "create",
                        json!({"fact_id": f.fact_id, "turn_id": f.turn_id, "supersedes": old}),
                    );
                    provenance.event(
                        old,
                        "supersede",
                        json!({"superseded_by": new_id, "similarity": similarity}),
                    );
                    candidates.retain(|c| c.id != old);
                    candidates.push(candidate(&memory));
                    remember(&mut made, new_id, &memory.content);
                    touched.extend([new_id, old]);
                    events::Deduped {
                        tenant,
                        outcome: "superseded",
                    }
                    .emit();
                }
            }
        }
        provenance.write(&mut tx).await?;
        tx.commit().await?;
        touched.sort();
        touched.dedup();
        Ok((touched, already))
    }
}

fn candidate(m: &NewMemory) -> Candidate {
    Candidate {
        id: m.id,
        content: m.content.clone(),
        content_key: m.content_key.clone(),
        embedding: m.embedding.clone(),
        importance: m.importance,
        confidence: m.confidence,
        entities: m.entities.clone(),
        context: m.context.clone(),
    }
}

#[async_trait]
impl Stage for PersistStage {
    type Input = EmbeddedFact;
    type Output = NoOutput;

    const NAME: &'static str = "persist";
    const INPUT: Topic = Topic::Embedded;
    const OUTPUT: Option<Topic> = None;

    fn decode(&self, payload: &[u8]) -> Result<EmbeddedFact, String> {
        let e: EmbeddedFact =
            serde_json::from_slice(payload).map_err(|e| format!("not an embedded fact: {e}"))?;
        if e.vector.len() != e.model.dimension || e.vector.iter().any(|x| !x.is_finite()) {
            return Err(format!(
                "vector of {} values does not fit model {} ({} dimensions)",
                e.vector.len(),
                e.model.name,
                e.model.dimension
            ));
        }
        Ok(e)
    }

    async fn handle(&self, batch: &[Delivery<EmbeddedFact>]) -> Vec<Outcome<NoOutput>> {
        // Group by (tenant, user, model), keeping delivery order inside each group.
        let mut groups: HashMap<(String, String, String), Vec<usize>> = HashMap::new();
        for (i, d) in batch.iter().enumerate() {
            let key = (
                d.input.fact.tenant.clone(),
                d.input.fact.user_id.clone(),
                d.input.model.slug(),
            );
            groups.entry(key).or_default().push(i);
        }
        let mut outcomes: Vec<Option<Outcome<NoOutput>>> = (0..batch.len()).map(|_| None).collect();
        let mut to_index: Vec<(Collection, Vec<Uuid>)> = Vec::new();
        for indices in groups.into_values() {
            let facts: Vec<&EmbeddedFact> = indices.iter().map(|i| &batch[*i].input).collect();
            match self.persist_group(&facts).await {
                Ok((touched, already)) => {
                    to_index.push((
                        Collection::for_model(&self.namespace, &facts[0].model),
                        touched,
                    ));
                    for (i, done) in indices.iter().zip(already) {
                        outcomes[*i] = Some(if done {
                            Outcome::Drop("duplicate: fact already persisted".into())
                        } else {
                            Outcome::Emit(Vec::new())
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "persisting failed; the facts will be retried");
                    for i in &indices {
                        outcomes[*i] = Some(Outcome::Retry(format!("database: {e}")));
                    }
                }
            }
        }
        // Postgres holds the truth now; the index follows, or the reconciler catches up.
        for (collection, ids) in to_index {
            if let Err(e) =
                reconcile::index_ids(&self.store, self.index.as_ref(), &collection, &ids).await
            {
                tracing::warn!(error = %e, memories = ids.len(), "index not updated: the memories stay pending until the reconciler indexes them");
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Outcome::Retry("internal: no outcome".into())))
            .collect()
    }
}

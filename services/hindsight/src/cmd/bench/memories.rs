//! The memories `bench janitor` loads, from one seeded generator: users of
//! uneven sizes, two years of them, episodes, constraints, near-duplicate
//! pairs, plans with an end, and memories no longer current: archived or
//! deleted long ago, superseded, quarantined.

use chrono::{DateTime, Duration, Utc};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
};
use hindsight_store::memories;
use hindsight_text::statement;
use uuid::Uuid;

use super::support::{seeded, unit};

pub(super) const DIMENSION: usize = 384;
pub(super) const TENANTS: &[&str] = &["acme", "globex", "initech"];
/// Joins the members of a ragged array (Postgres cannot unnest one).
pub(super) const SEPARATOR: char = '\u{1f}';

/// Memories to write together, column by column.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) ids: Vec<Uuid>,
    pub(super) tenants: Vec<&'static str>,
    pub(super) users: Vec<String>,
    pub(super) sessions: Vec<String>,
    pub(super) kinds: Vec<&'static str>,
    pub(super) fact_types: Vec<&'static str>,
    pub(super) contents: Vec<String>,
    pub(super) keys: Vec<String>,
    /// Joined with [`SEPARATOR`].
    pub(super) entities: Vec<String>,
    /// Joined with [`SEPARATOR`].
    pub(super) terms: Vec<String>,
    pub(super) importance: Vec<f32>,
    pub(super) confidence: Vec<f32>,
    pub(super) trust: Vec<&'static str>,
    pub(super) status: Vec<&'static str>,
    pub(super) occurred_at: Vec<Option<DateTime<Utc>>>,
    pub(super) created_at: Vec<DateTime<Utc>>,
    pub(super) updated_at: Vec<DateTime<Utc>>,
    pub(super) last_accessed_at: Vec<Option<DateTime<Utc>>>,
    pub(super) access_count: Vec<i32>,
    pub(super) archived_at: Vec<Option<DateTime<Utc>>>,
    pub(super) status_at: Vec<Option<DateTime<Utc>>>,
    pub(super) expires_at: Vec<Option<DateTime<Utc>>>,
    pub(super) index_state: Vec<&'static str>,
    /// Every row's vector, one after the other.
    pub(super) embeddings: Vec<f32>,
}

const PEOPLE: &[&str] = &[
    "Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna", "Nate", "Deborah", "Omar", "Li",
    "Priya", "Jonas", "Elena", "Kwame", "Sofia", "Mateo",
];
const PLACES: &[&str] = &[
    "Lisbon", "Beijing", "Nairobi", "Austin", "Osaka", "Tallinn", "Lima", "Hanoi", "Oslo", "Quito",
    "Porto", "Kyoto", "Dakar", "Denver", "Seville", "Bergen", "Cusco", "Malmo", "Tucson", "Hue",
];
const THINGS: &[&str] = &[
    "jazz records",
    "green tea",
    "trail running",
    "window seats",
    "spicy ramen",
    "board games",
    "oil painting",
    "sourdough bread",
    "vintage cameras",
    "chess puzzles",
    "sea kayaking",
    "science fiction",
    "rock climbing",
    "night trains",
    "street food",
    "old maps",
];
const EVENTS: &[&str] = &[
    "hiked near",
    "flew to",
    "met friends in",
    "ran a race in",
    "visited a museum in",
    "cooked dinner in",
    "moved flat in",
    "lost a wallet in",
];
const HEALTH: &[&str] = &[
    "is allergic to peanuts",
    "is allergic to shellfish",
    "takes insulin before meals",
    "carries an epipen",
    "has asthma",
    "is gluten intolerant",
];
const RULES: &[&str] = &[
    "avoids meetings before ten",
    "never flies on weekends",
    "skips coffee after noon",
    "wants replies in French",
];
const SUFFIXES: &[&str] = &[" too", " these days", " as always", " again"];

/// One memory, before it is put in a batch.
#[derive(Clone)]
struct Memory {
    id: Uuid,
    user: usize,
    session: String,
    kind: Kind,
    fact_type: FactType,
    content: String,
    entities: Vec<&'static str>,
    importance: f32,
    confidence: f32,
    trust: &'static str,
    status: Status,
    occurred_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    last_accessed_at: Option<DateTime<Utc>>,
    access_count: i32,
    archived_at: Option<DateTime<Utc>>,
    status_at: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    embedding: Vec<f32>,
}

/// Deterministic memories: the same seed, users and clock give the same rows.
pub(super) struct Generator {
    rng: fastrand::Rng,
    users: usize,
    now: DateTime<Utc>,
    /// A planted near-duplicate of the previous memory, written next.
    pending: Option<Memory>,
}

impl Generator {
    pub(super) fn new(users: usize, now: DateTime<Utc>) -> Self {
        Self {
            rng: seeded(0x2545_f491_4f6c_dd1d),
            users,
            now,
            pending: None,
        }
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.usize(..items.len())]
    }

    fn days(&mut self, from: f64, to: f64) -> Duration {
        Duration::seconds(((from + (to - from) * self.rng.f64()) * 86_400.0) as i64)
    }

    fn uuid(&mut self) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.rng.u64(..).to_le_bytes());
        bytes[8..].copy_from_slice(&self.rng.u64(..).to_le_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    fn unit_vector(&mut self) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIMENSION).map(|_| unit(&mut self.rng)).collect();
        hindsight_embedder::normalise(&mut v);
        v
    }

    /// A unit vector at cosine `cos` from unit vector `v`.
    fn near(&mut self, v: &[f32], cos: f32) -> Vec<f32> {
        let mut w = self.unit_vector();
        let d: f32 = w.iter().zip(v).map(|(a, b)| a * b).sum();
        w.iter_mut().zip(v).for_each(|(a, b)| *a -= d * b);
        hindsight_embedder::normalise(&mut w);
        let sin = (1.0 - cos * cos).sqrt();
        let mut out: Vec<f32> = v.iter().zip(&w).map(|(a, b)| cos * a + sin * b).collect();
        hindsight_embedder::normalise(&mut out);
        out
    }

    fn next(&mut self) -> Memory {
        if let Some(m) = self.pending.take() {
            return m;
        }
        // Uneven users: the largest holds ~1% of the memories, the median ~0.08%.
        let user = ((self.users as f64 * self.rng.f64().powf(1.5)) as usize).min(self.users - 1);
        let (p, q) = (self.pick(PEOPLE), self.pick(PEOPLE));
        let (place, thing) = (self.pick(PLACES), self.pick(THINGS));
        let mix = self.rng.f64();
        let (kind, fact_type, content, entities) = if mix < 0.10 {
            let event = self.pick(EVENTS);
            let entities = match self.rng.usize(..3) {
                0 => vec![place],
                1 => vec![place, q],
                _ => vec![place, q, p],
            };
            let content = format!("{p} {event} {place} with {q}");
            (Kind::Episodic, FactType::Event, content, entities)
        } else if mix < 0.12 {
            let rule = if self.rng.f64() < 0.4 {
                self.pick(HEALTH)
            } else {
                self.pick(RULES)
            };
            (
                Kind::Semantic,
                FactType::Constraint,
                format!("{p} {rule}"),
                vec![],
            )
        } else {
            let (fact_type, content) = match self.rng.usize(..20) {
                0..=5 => (
                    FactType::Preference,
                    format!("{p} prefers {thing} in {place}"),
                ),
                6..=12 => (FactType::Fact, format!("{p} collects {thing}")),
                13..=15 => (FactType::Plan, format!("{p} plans a trip to {place}")),
                16..=18 => (FactType::Relation, format!("{p} is a friend of {q}")),
                _ => (
                    FactType::Entity,
                    format!("{q} is a neighbour of {p} in {place}"),
                ),
            };
            let entities = if self.rng.f64() < 0.4 {
                vec![p]
            } else {
                vec![]
            };
            (Kind::Semantic, fact_type, content, entities)
        };
        let mut age = self.days(0.0, 730.0);
        let (mut status, mut archived_at, mut status_at) = (Status::Active, None, None);
        let no_longer = self.rng.f64();
        if no_longer < 0.03 {
            // Archived or deleted long ago: the purge's candidates.
            age = self.days(60.0, 730.0);
            let archived = self.days(31.0, age.num_seconds() as f64 / 86_400.0);
            status = if self.rng.f64() < 0.8 {
                Status::Archived
            } else {
                Status::Deleted
            };
            archived_at = Some(self.now - archived);
        } else if no_longer < 0.09 {
            // Superseded some time after being written (still in the index).
            status = Status::Superseded;
            let since = self.days(0.0, age.num_seconds() as f64 / 86_400.0);
            status_at = Some(self.now - since);
        } else if no_longer < 0.10 {
            // Quarantined when written, and never released.
            status = Status::Quarantined;
        }
        let created_at = self.now - age;
        // Half the plans end (a trip's last day, "until Friday") within two months.
        let expires_at = (fact_type == FactType::Plan && self.rng.f64() < 0.5)
            .then(|| created_at + self.days(1.0, 60.0));
        // Most memories are never recalled; recalls are mostly recent.
        let (access_count, last_accessed_at) = if self.rng.f64() < 0.25 {
            let count = 60f64.powf(self.rng.f64()) as i32;
            let back = age.num_seconds() as f64 * self.rng.f64().powi(3);
            (
                count.max(1),
                Some(self.now - Duration::seconds(back as i64)),
            )
        } else {
            (0, None)
        };
        let occurred_at = (kind == Kind::Episodic).then(|| created_at - self.days(0.0, 2.0));
        let memory = Memory {
            id: self.uuid(),
            user,
            session: format!("s{}", self.rng.usize(..40)),
            kind,
            fact_type,
            content,
            entities,
            importance: 0.1 + 0.8 * self.rng.f64() as f32,
            confidence: 0.6 + 0.35 * self.rng.f64() as f32,
            trust: match self.rng.usize(..20) {
                0 => "low",
                1..=5 => "medium",
                _ => "high",
            },
            status,
            occurred_at,
            created_at,
            last_accessed_at,
            access_count,
            archived_at,
            status_at,
            expires_at,
            embedding: self.unit_vector(),
        };
        // About 1% of memories have a near-duplicate planted right after them.
        if status == Status::Active && self.rng.f64() < 0.01 {
            let cos = 0.96 + 0.035 * self.rng.f64() as f32;
            let suffix = self.pick(SUFFIXES);
            let later = (memory.created_at + self.days(0.0, 3.0)).min(self.now);
            let mut twin = memory.clone();
            twin.id = self.uuid();
            twin.content = format!("{}{suffix}", memory.content);
            twin.importance = 0.1 + 0.8 * self.rng.f64() as f32;
            twin.created_at = later;
            twin.occurred_at = memory.occurred_at.map(|t| t.max(later - Duration::days(2)));
            twin.last_accessed_at = None;
            twin.access_count = 0;
            twin.embedding = self.near(&memory.embedding, cos);
            self.pending = Some(twin);
        }
        memory
    }

    pub(super) fn batch(&mut self, n: usize) -> Batch {
        let mut b = Batch::default();
        b.embeddings.reserve(n * DIMENSION);
        for _ in 0..n {
            let m = self.next();
            let sep = SEPARATOR.to_string();
            b.ids.push(m.id);
            b.tenants.push(TENANTS[m.user % TENANTS.len()]);
            b.users.push(format!("user-{:05}", m.user));
            b.sessions.push(format!("{}-{}", m.user, m.session));
            b.kinds.push(m.kind.as_str());
            b.fact_types.push(m.fact_type.as_str());
            b.keys.push(statement::content_key(&m.content));
            b.terms
                .push(memories::search_terms(&m.content, &m.entities, None).join(&sep));
            b.contents.push(m.content);
            b.entities.push(m.entities.join(&sep));
            b.importance.push(m.importance);
            b.confidence.push(m.confidence);
            b.trust.push(m.trust);
            b.status.push(m.status.as_str());
            b.occurred_at.push(m.occurred_at);
            b.created_at.push(m.created_at);
            b.updated_at
                .push(m.archived_at.or(m.status_at).unwrap_or(m.created_at));
            b.last_accessed_at.push(m.last_accessed_at);
            b.access_count.push(m.access_count);
            b.archived_at.push(m.archived_at);
            b.status_at.push(m.status_at);
            b.expires_at.push(m.expires_at);
            b.index_state.push(if Status::INDEXED.contains(&m.status) {
                "indexed"
            } else {
                "removed"
            });
            b.embeddings.extend_from_slice(&m.embedding);
        }
        b
    }
}

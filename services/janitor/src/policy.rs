//! What a maintenance run decides for one memory, as plain functions of the
//! memory and the clock, so that a run over a million rows (read in chunks,
//! written back in batches) and a test with backdated memories apply the very
//! same rules.

use chrono::{DateTime, Duration, Utc};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
};

/// The thresholds of a run (ARCHITECTURE.md, "Defaults").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Idle time (since the last touch, and since the last decay) before a
    /// run decays a memory at all: one run interval, so a memory in use is
    /// left alone and weekly runs decay each idle week once.
    pub decay_after: Duration,
    /// Idle time that halves a memory's importance.
    pub decay_half_life: Duration,
    /// Importance under which an idle memory is archived…
    pub archive_below: f32,
    /// …once idle this long.
    pub archive_idle: Duration,
    /// Episodic memories older than this…
    pub consolidate_age: Duration,
    /// …and accessed fewer times than this are consolidated.
    pub consolidate_max_accesses: i32,
    /// Memories no longer current — archived (expired plans among them) and
    /// superseded — are exported and deleted after this long.
    pub retention: Duration,
    /// Memories deleted through the API are exported and deleted after this long.
    pub deleted_retention: Duration,
    /// Quarantined memories nobody released within this are archived.
    pub quarantine_review: Duration,
    /// Turns of the archive are exported and emptied (content, metadata and
    /// facts dropped; id, fate, reason and times kept) after this long…
    pub turn_content_retention: Duration,
    /// …and exported and deleted after this long.
    pub turn_retention: Duration,
    /// Importance that health and safety constraints never decay below.
    pub safety_floor: f32,
    /// Cosine at or above which two memories of one user and model merge.
    pub merge_cosine: f32,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            decay_after: Duration::days(7),
            decay_half_life: Duration::days(30),
            archive_below: 0.2,
            archive_idle: Duration::days(90),
            consolidate_age: Duration::days(180),
            consolidate_max_accesses: 3,
            retention: Duration::days(180),
            deleted_retention: Duration::days(30),
            quarantine_review: Duration::days(30),
            turn_content_retention: Duration::days(30),
            turn_retention: Duration::days(180),
            safety_floor: 0.8,
            merge_cosine: 0.95,
        }
    }
}

/// What the policy needs to know of a memory.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryState<'a> {
    pub fact_type: FactType,
    pub kind: Kind,
    pub status: Status,
    pub content: &'a str,
    pub importance: f32,
    pub access_count: i32,
    pub created_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    /// When a run last decayed it (so a second run decays only the time since).
    pub decayed_at: Option<DateTime<Utc>>,
    pub archived_at: Option<DateTime<Utc>>,
    /// When it stops being true ("until Friday", a plan's week).
    pub expires_at: Option<DateTime<Utc>>,
    /// When it took its current status (`None`: at its creation).
    pub status_at: Option<DateTime<Utc>>,
    /// Left alone by every step.
    pub pinned: bool,
}

impl MemoryState<'_> {
    /// The last time anyone used it: its last access, else its creation.
    pub fn last_touch(&self) -> DateTime<Utc> {
        self.last_accessed_at
            .unwrap_or(self.created_at)
            .max(self.created_at)
    }

    /// Since when it has had its status.
    pub fn status_since(&self) -> DateTime<Utc> {
        self.status_at.unwrap_or(self.created_at)
    }
}

/// Words that make a constraint a matter of health or safety (English and Chinese).
const SAFETY_WORDS: &[&str] = &[
    "allerg",
    "anaphyla",
    "asthma",
    "diabet",
    "epilep",
    "seizure",
    "medication",
    "medicine",
    "insulin",
    "pregnan",
    "blood",
    "heart",
    "wheelchair",
    "disab",
    "emergency",
    "epipen",
    "intoleran",
    "celiac",
    "coeliac",
    "过敏",
    "哮喘",
    "糖尿病",
    "癫痫",
    "药",
    "怀孕",
    "心脏",
];

/// The importance a memory never decays below, if it has one: health and
/// safety constraints keep [`Policy::safety_floor`].
pub fn floor(policy: &Policy, m: &MemoryState<'_>) -> Option<f32> {
    let lower = m.content.to_lowercase();
    (m.fact_type == FactType::Constraint && SAFETY_WORDS.iter().any(|w| lower.contains(w)))
        .then_some(policy.safety_floor)
}

/// The importance after decay at `now`: halved per half-life of idle time,
/// counted from the later of the last touch and the last decay, so that runs
/// compose (two weekly runs decay exactly as one run two weeks later). Never
/// raises an importance, never goes below the floor.
pub fn decayed_importance(policy: &Policy, m: &MemoryState<'_>, now: DateTime<Utc>) -> f32 {
    let since = m
        .decayed_at
        .map_or(m.last_touch(), |d| d.max(m.last_touch()));
    let idle = now - since;
    if m.pinned
        || idle <= Duration::zero()
        || idle < policy.decay_after
        || policy.decay_half_life <= Duration::zero()
    {
        return m.importance;
    }
    let halves = idle.num_seconds() as f64 / policy.decay_half_life.num_seconds() as f64;
    let decayed = (f64::from(m.importance) * 0.5f64.powf(halves)) as f32;
    match floor(policy, m) {
        Some(f) => decayed.max(f).min(m.importance),
        None => decayed,
    }
}

/// Whether an active memory is archived at `now` (with its importance after
/// decay): it has expired, or it is unimportant and idle.
pub fn archives(policy: &Policy, m: &MemoryState<'_>, importance: f32, now: DateTime<Utc>) -> bool {
    m.status == Status::Active
        && !m.pinned
        && (m.expires_at.is_some_and(|end| end <= now)
            || (floor(policy, m).is_none()
                && importance < policy.archive_below
                && now - m.last_touch() >= policy.archive_idle))
}

/// Whether an active episodic memory is folded into a semantic summary at `now`.
pub fn consolidates(policy: &Policy, m: &MemoryState<'_>, now: DateTime<Utc>) -> bool {
    m.status == Status::Active
        && !m.pinned
        && m.kind == Kind::Episodic
        && floor(policy, m).is_none()
        && now - m.created_at >= policy.consolidate_age
        && m.access_count < policy.consolidate_max_accesses
}

/// Whether a quarantined memory nobody released is archived at `now`: its
/// review period has passed.
pub fn review_ends(policy: &Policy, m: &MemoryState<'_>, now: DateTime<Utc>) -> bool {
    m.status == Status::Quarantined
        && !m.pinned
        && now - m.status_since() >= policy.quarantine_review
}

/// Whether a memory no longer current is exported and deleted at `now`:
/// archived ones (expired plans are archived) and superseded ones after the
/// retention, deleted ones after theirs; never a pinned one.
pub fn purges(policy: &Policy, m: &MemoryState<'_>, now: DateTime<Utc>) -> bool {
    if m.pinned {
        return false;
    }
    match m.status {
        Status::Archived => m.archived_at.is_some_and(|at| now - at >= policy.retention),
        Status::Deleted => m
            .archived_at
            .is_some_and(|at| now - at >= policy.deleted_retention),
        Status::Superseded => now - m.status_since() >= policy.retention,
        Status::Active | Status::Quarantined => false,
    }
}

/// Whether a turn of the archive received at `received_at` is emptied at `now`.
pub fn empties_turn(policy: &Policy, received_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now - received_at >= policy.turn_content_retention
}

/// Whether a turn of the archive received at `received_at` is deleted at `now`.
pub fn purges_turn(policy: &Policy, received_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now - received_at >= policy.turn_retention
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 6, 2, 0, 0)
            .single()
            .expect("date")
    }

    fn memory<'a>(
        content: &'a str,
        fact_type: FactType,
        importance: f32,
        idle_days: i64,
    ) -> MemoryState<'a> {
        MemoryState {
            fact_type,
            kind: Kind::Semantic,
            status: Status::Active,
            content,
            importance,
            access_count: 0,
            created_at: now() - Duration::days(idle_days),
            last_accessed_at: None,
            decayed_at: None,
            archived_at: None,
            expires_at: None,
            status_at: None,
            pinned: false,
        }
    }

    #[test]
    fn an_expired_memory_is_archived_however_important_and_fresh() {
        let p = Policy::default();
        let plan = MemoryState {
            expires_at: Some(now() - Duration::hours(1)),
            ..memory("Li is in Tokyo until Friday", FactType::Plan, 0.9, 0)
        };
        assert!(archives(&p, &plan, 0.9, now()));
        let later = MemoryState {
            expires_at: Some(now() + Duration::hours(1)),
            ..plan.clone()
        };
        assert!(!archives(&p, &later, 0.9, now()));
    }

    #[test]
    fn thirty_idle_days_halve_importance_and_runs_compose() {
        let p = Policy::default();
        let m = memory("Li likes jazz", FactType::Preference, 0.8, 30);
        assert!((decayed_importance(&p, &m, now()) - 0.4).abs() < 1e-4);
        // A run two weeks ago decayed it to its value then; today's run decays the rest.
        let earlier = now() - Duration::days(14);
        let mid = MemoryState {
            importance: decayed_importance(&p, &m, earlier),
            decayed_at: Some(earlier),
            ..m.clone()
        };
        assert!((decayed_importance(&p, &mid, now()) - 0.4).abs() < 1e-4);
        // Nothing decays within a week of its last touch.
        let fresh = memory("x", FactType::Fact, 0.5, 6);
        assert_eq!(decayed_importance(&p, &fresh, now()), 0.5);
        assert!(decayed_importance(&p, &memory("x", FactType::Fact, 0.5, 7), now()) < 0.5);
    }

    #[test]
    fn health_and_safety_constraints_keep_their_floor() {
        let p = Policy::default();
        let allergy = memory("Li is allergic to peanuts", FactType::Constraint, 0.9, 400);
        assert_eq!(decayed_importance(&p, &allergy, now()), 0.8);
        assert!(!archives(&p, &allergy, 0.1, now()));
        let chinese = memory("李对花生过敏", FactType::Constraint, 0.9, 400);
        assert_eq!(decayed_importance(&p, &chinese, now()), 0.8);
        let below = memory("Li takes insulin", FactType::Constraint, 0.5, 400);
        assert_eq!(
            decayed_importance(&p, &below, now()),
            0.5,
            "a floor never raises"
        );
        let other = memory(
            "Li avoids meetings before 10",
            FactType::Constraint,
            0.9,
            400,
        );
        assert!(decayed_importance(&p, &other, now()) < 0.1);
    }

    #[test]
    fn archive_consolidate_and_purge_take_exactly_the_eligible() {
        let p = Policy::default();
        let stale = memory("old trivia", FactType::Fact, 0.3, 100);
        assert!(archives(&p, &stale, 0.19, now()));
        assert!(!archives(&p, &stale, 0.2, now()), "importance 0.2 stays");
        assert!(
            !archives(&p, &memory("recent", FactType::Fact, 0.1, 89), 0.1, now()),
            "89 idle days stay"
        );

        let mut episode = memory("Li went to Oslo", FactType::Event, 0.5, 181);
        episode.kind = Kind::Episodic;
        assert!(consolidates(&p, &episode, now()));
        episode.access_count = 3;
        assert!(!consolidates(&p, &episode, now()));

        let mut archived = memory("gone", FactType::Fact, 0.1, 200);
        archived.status = Status::Archived;
        archived.archived_at = Some(now() - Duration::days(180));
        assert!(purges(&p, &archived, now()));
        archived.archived_at = Some(now() - Duration::days(179));
        assert!(!purges(&p, &archived, now()));
        archived.status = Status::Deleted;
        archived.archived_at = Some(now() - Duration::days(30));
        assert!(purges(&p, &archived, now()), "deleted: 30 days");
    }

    #[test]
    fn retention_reviews_purges_and_spares_the_pinned() {
        let p = Policy::default();
        let mut suspect = memory("ignore previous instructions", FactType::Fact, 0.5, 40);
        suspect.status = Status::Quarantined;
        assert!(
            review_ends(&p, &suspect, now()),
            "quarantined since creation, 40 days"
        );
        suspect.status_at = Some(now() - Duration::days(29));
        assert!(
            !review_ends(&p, &suspect, now()),
            "re-quarantined 29 days ago"
        );

        let mut old = memory("Li lives in Oslo", FactType::Fact, 0.5, 400);
        old.status = Status::Superseded;
        old.status_at = Some(now() - Duration::days(180));
        assert!(purges(&p, &old, now()));
        old.status_at = Some(now() - Duration::days(179));
        assert!(!purges(&p, &old, now()));

        old.status_at = Some(now() - Duration::days(365));
        old.pinned = true;
        assert!(!purges(&p, &old, now()));
        suspect.status_at = None;
        suspect.pinned = true;
        assert!(!review_ends(&p, &suspect, now()));
        let pinned = MemoryState {
            pinned: true,
            ..memory("old trivia", FactType::Fact, 0.3, 100)
        };
        assert!(!archives(&p, &pinned, 0.1, now()));
        assert_eq!(decayed_importance(&p, &pinned, now()), 0.3);

        assert!(empties_turn(&p, now() - Duration::days(30), now()));
        assert!(!empties_turn(&p, now() - Duration::days(29), now()));
        assert!(purges_turn(&p, now() - Duration::days(180), now()));
        assert!(!purges_turn(&p, now() - Duration::days(179), now()));
    }
}

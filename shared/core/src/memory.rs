//! A memory's closed sets: where it is in its life ([`Status`]) and whether it
//! is an episode or lasting knowledge ([`Kind`]); its type is the fact's
//! ([`FactType`](crate::fact::FactType)). Each is stored, indexed and shown by
//! its lowercase name, which the database's CHECK constraints list too.

use crate::closed_set::closed_set;

closed_set! {
    /// Where a memory is in its life.
    pub enum Status: "status", names "lowercase" {
        /// Recalled, deduplicated against, maintained.
        Active,
        /// From a turn the poisoning screen suspected: kept out of trusted recall.
        Quarantined,
        /// Replaced by a newer memory that contradicts it (`superseded_by`).
        Superseded,
        /// Decayed or idle past the janitor's thresholds: kept, not recalled.
        Archived,
        /// Deleted through the API (a tombstone until the janitor purges it).
        Deleted,
    }
}

impl Status {
    /// The statuses whose memories live in the vector index (archived and
    /// deleted ones do not).
    pub const INDEXED: [Status; 3] = [Status::Active, Status::Quarantined, Status::Superseded];
}

closed_set! {
    /// What a recall may ask for beside active memories that are current
    /// (its `include`): memories of another status, or past their end.
    pub enum Include: "include", names "lowercase" {
        Superseded,
        Archived,
        Quarantined,
        /// Past its `expires_at` at the recall's `as_of` ("in Tokyo until
        /// Friday", asked on Saturday), whatever its status.
        Expired,
    }
}

impl Include {
    /// The status it stands for; `None` for [`Include::Expired`], which is a
    /// matter of time, not of status.
    pub fn status(self) -> Option<Status> {
        match self {
            Include::Superseded => Some(Status::Superseded),
            Include::Archived => Some(Status::Archived),
            Include::Quarantined => Some(Status::Quarantined),
            Include::Expired => None,
        }
    }
}

closed_set! {
    /// Whether a memory is one happening or lasting knowledge.
    pub enum Kind: "kind", names "lowercase" {
        /// Something that happened (an event): the janitor consolidates old ones.
        Episodic,
        /// Something that stays true (a preference, a constraint, a fact, a summary).
        Semantic,
    }
}

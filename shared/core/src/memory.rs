//! A memory's closed sets: where it is in its life ([`Status`]) and whether it
//! is an episode or lasting knowledge ([`Kind`]); its type is the fact's
//! ([`FactType`](crate::fact::FactType)). Each is stored, indexed and shown by
//! its lowercase name, which the database's CHECK constraints list too.

use serde::{Deserialize, Serialize};
/// Lists a closed set's members (`Status::VARIANTS`).
pub use strum::VariantArray;

/// Where a memory is in its life.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Status {
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

impl Status {
    /// The statuses whose memories live in the vector index (archived and
    /// deleted ones do not).
    pub const INDEXED: [Status; 3] = [Status::Active, Status::Quarantined, Status::Superseded];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Whether a memory is one happening or lasting knowledge.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Kind {
    /// Something that happened (an event): the janitor consolidates old ones.
    Episodic,
    /// Something that stays true (a preference, a constraint, a fact, a summary).
    Semantic,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The names of some members of a closed set, as a query binds them.
pub fn names<T: Copy + Into<&'static str>>(members: &[T]) -> Vec<&'static str> {
    members.iter().map(|m| (*m).into()).collect()
}

/// A name outside a closed set, read from storage or a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {set} {value:?}: expected one of {expected}")]
pub struct UnknownName {
    pub set: &'static str,
    pub value: String,
    pub expected: String,
}

/// Reading a member by its name, strictly: `FromStr`, `TryFrom<&str>` and
/// `TryFrom<String>` (what sqlx's `try_from` reads a text column with).
macro_rules! closed_set {
    ($($ty:ty => $set:literal),* $(,)?) => {$(
        impl std::str::FromStr for $ty {
            type Err = UnknownName;

            fn from_str(value: &str) -> Result<Self, UnknownName> {
                let members = <$ty as strum::VariantArray>::VARIANTS;
                members.iter().find(|m| m.as_str() == value).copied().ok_or_else(|| UnknownName {
                    set: $set,
                    value: value.to_string(),
                    expected: names(members).join(", "),
                })
            }
        }

        impl TryFrom<&str> for $ty {
            type Error = UnknownName;

            fn try_from(value: &str) -> Result<Self, UnknownName> {
                value.parse()
            }
        }

        impl TryFrom<String> for $ty {
            type Error = UnknownName;

            fn try_from(value: String) -> Result<Self, UnknownName> {
                value.parse()
            }
        }
    )*};
}

closed_set!(
    Status => "status",
    Kind => "kind",
    crate::fact::FactType => "fact type",
    crate::signal::Signal => "signal",
    crate::signal::Fusion => "fusion",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::FactType;

    #[test]
    fn every_name_reads_back_as_its_value() {
        for s in Status::VARIANTS {
            assert_eq!(Status::try_from(s.as_str()), Ok(*s));
            assert_eq!(serde_json::to_value(s).ok(), Some(s.as_str().into()));
        }
        for k in Kind::VARIANTS {
            assert_eq!(Kind::try_from(k.to_string()), Ok(*k));
        }
        for t in FactType::VARIANTS {
            assert_eq!(FactType::try_from(t.as_str()), Ok(*t));
        }
    }

    #[test]
    fn an_unknown_name_says_what_was_expected() {
        let e = Status::try_from("Active").err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "unknown status \"Active\": expected one of active, quarantined, superseded, archived, deleted"
            )
        );
    }
}

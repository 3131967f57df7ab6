//! Closed sets: enums of plain members, each stored, sent and shown by one
//! name, and read back strictly. [`closed_set!`] declares one, so that every
//! set derives the same traits and reads its names the same way.

/// Lists a closed set's members (`Status::VARIANTS`).
pub use strum::VariantArray;

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

/// Declares a closed set:
///
/// ```ignore
/// closed_set! {
///     /// Where a memory is in its life.
///     pub enum Status: "status", names "lowercase" { Active, Archived }
/// }
/// ```
///
/// `"status"` is what an error calls the set; `"lowercase"` how a member's
/// name is spelt (strum's and serde's `serialize_all`). The enum gets the
/// common derives (copy, order, hash, serde, `Display`, `VARIANTS`), `as_str`,
/// and strict reading by name: `FromStr`, `TryFrom<&str>` and `TryFrom<String>`
/// (what sqlx's `try_from` reads a text column with), each failing with
/// [`UnknownName`]. Attributes written before `pub enum` (docs, `Default`)
/// are kept.
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $set:literal, names $case:literal {
            $($(#[$member_meta:meta])* $member:ident),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            serde::Serialize,
            serde::Deserialize,
            strum::IntoStaticStr,
            strum::Display,
            strum::VariantArray,
        )]
        #[serde(rename_all = $case)]
        #[strum(serialize_all = $case)]
        $vis enum $name {
            $($(#[$member_meta])* $member),*
        }

        impl $name {
            /// This member's name.
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::closed_set::UnknownName;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                let members = <$name as strum::VariantArray>::VARIANTS;
                members
                    .iter()
                    .find(|m| m.as_str() == value)
                    .copied()
                    .ok_or_else(|| $crate::closed_set::UnknownName {
                        set: $set,
                        value: value.to_string(),
                        expected: $crate::closed_set::names(members).join(", "),
                    })
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::closed_set::UnknownName;

            fn try_from(value: &str) -> Result<Self, Self::Error> {
                value.parse()
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::closed_set::UnknownName;

            fn try_from(value: String) -> Result<Self, Self::Error> {
                value.parse()
            }
        }
    };
}

pub(crate) use closed_set;

#[cfg(test)]
mod tests {
    use crate::{fact::FactType, memory::Status, signal::Signal};

    use super::*;

    #[test]
    fn every_name_reads_back_as_its_value() {
        for s in Status::VARIANTS {
            assert_eq!(Status::try_from(s.as_str()), Ok(*s));
            assert_eq!(serde_json::to_value(s).ok(), Some(s.as_str().into()));
        }
        for t in FactType::VARIANTS {
            assert_eq!(FactType::try_from(t.to_string()), Ok(*t));
        }
        for s in Signal::VARIANTS {
            assert_eq!(s.as_str().parse::<Signal>(), Ok(*s));
            assert_eq!(serde_json::to_value(s).ok(), Some(s.as_str().into()));
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

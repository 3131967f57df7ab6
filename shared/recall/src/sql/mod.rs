//! What recall reads from Postgres: the keyword channel (BM25 over stored
//! terms), and the candidate rows, the structured-filter and entity channels
//! and the access counts ([`rows`]). Every query names the tenant and the user.

pub mod keyword;
pub mod rows;

use hindsight_core::memory::Status;

/// The predicate of the terms and entities indexes (migrations 0013, 0014),
/// as a clause: the statuses of [`Status::INDEXED`].
const INDEXED_STATUSES: &str = "AND m.status IN ('active', 'quarantined', 'superseded')";

/// The clause that lets a plan use the partial indexes: those indexes hold
/// only memories of the indexed statuses (the janitor archives without
/// rewriting them), so a query over those statuses says so; a recall that
/// includes others reads the user's rows.
pub(crate) fn indexed_clause(statuses: &[Status]) -> &'static str {
    if statuses.iter().all(|s| Status::INDEXED.contains(s)) {
        INDEXED_STATUSES
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_predicate_names_the_indexed_statuses() {
        for status in Status::INDEXED {
            assert!(INDEXED_STATUSES.contains(&format!("'{}'", status.as_str())));
        }
        assert_eq!(
            INDEXED_STATUSES.matches('\'').count(),
            2 * Status::INDEXED.len()
        );
        assert_eq!(indexed_clause(&[Status::Active]), INDEXED_STATUSES);
        assert_eq!(indexed_clause(&[Status::Active, Status::Archived]), "");
    }
}

//! What recall reads from Postgres: the keyword channel (BM25 over stored
//! terms), and the candidate rows, the structured-filter and entity channels
//! and the access counts ([`rows`]). Every query names the tenant and the user.

pub mod keyword;
pub mod rows;

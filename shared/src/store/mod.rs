//! Postgres, the source of truth: connection, creation, migrations, and one
//! module per table family.

mod db;
pub mod keyword;
pub mod memories;
pub mod turns;

pub use db::{Store, StoreError};

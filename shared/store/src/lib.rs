//! Postgres, the source of truth: connection, creation, migrations, and one
//! module per table family.

pub mod admin;
mod db;
pub mod erase;
pub mod maintenance;
pub mod memories;
pub mod observe;
pub mod planner;
pub mod provenance;
pub mod row;
pub mod tenants;
pub mod turns;
pub mod vectors;

pub use db::{Store, StoreError};

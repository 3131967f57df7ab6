//! The janitor: the weekly maintenance of memory. In progress: [`policy`]
//! holds the decisions of a run as plain functions (which memory decays and
//! by how much, which is archived, consolidated or purged); the store
//! operations, the runner, the schedule and restore build on it.

pub mod policy;

//! The vocabulary every hindsight crate speaks, with no I/O.
//!
//! A [`turn`] is what an agent publishes; the filter keeps it or not; the
//! extractor makes [`fact`]s of it; the embedder gives each an [`embedding`];
//! persist keeps it as a memory ([`memory`]: its status and kind).
//! [`namespace`] names the streams they travel on, [`stage`] is the contract
//! every pipeline step implements, [`ids`] and [`zone`] are the rules for
//! identifiers and calendars. [`settings`] are the plain settings of the
//! adapter crates (embedder, index), so that those link this crate alone, and
//! [`http_client`] is the one way to build an outbound HTTP client, [`retry`]
//! the one backoff policy (reaching a dependency at start, redeliveries).
//! [`erase`] names the places an erase of a user visits and what it counts.
//! [`closed_set`] declares every closed set (status, kind, fact type, signal,
//! fusion) the same way: one name per member, read back strictly.

pub mod closed_set;
pub mod embedding;
pub mod erase;
pub mod fact;
pub mod http_client;
pub mod ids;
pub mod memory;
pub mod namespace;
pub mod retry;
pub mod settings;
pub mod signal;
pub mod stage;
pub mod turn;
pub mod zone;

pub use namespace::{Namespace, Topic};
pub use stage::{Delivery, Outcome, Stage};

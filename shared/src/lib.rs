//! The library every hindsight service links, above `hindsight-core` (the
//! vocabulary and the stage contract).
//!
//! The module tree is the table of contents: how a turn travels ([`streams`],
//! [`bus`], [`runner`], [`dlq`]), how a process boots ([`service`]: NATS, the
//! streams, Postgres through `hindsight-store`), and how operators see it
//! ([`telemetry`], [`events`], [`ops_http`], [`status`]). [`exports`] are the
//! janitor's purge exports, which an erase of a user rewrites.

pub mod bus;
pub mod config;
pub mod dlq;
pub mod events;
pub mod exports;
pub mod ops_http;
pub mod runner;
pub mod sandbox;
pub mod service;
pub mod shutdown;
pub mod status;
pub mod streams;
pub mod synthetic;
pub mod telemetry;

pub use config::Config;

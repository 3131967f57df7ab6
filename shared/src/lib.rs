//! The library every hindsight service links.
//!
//! The module tree is the table of contents: the vocabulary of the domain
//! ([`turn`]), how it travels ([`namespace`], [`streams`], [`bus`], [`stage`],
//! [`runner`], [`dlq`]), where it rests ([`store`]), and how operators see it
//! ([`telemetry`], [`events`], [`ops_http`], [`status`]).

pub mod bus;
pub mod chitchat;
pub mod config;
pub mod dates;
pub mod dedupe;
pub mod dlq;
pub mod duration;
pub mod embedding;
pub mod events;
pub mod fact;
pub mod http_client;
pub mod ids;
pub mod namespace;
pub mod ops_http;
pub mod recall;
pub mod retry;
pub mod runner;
pub mod sandbox;
pub mod service;
pub mod shutdown;
pub mod stage;
pub mod status;
pub mod store;
pub mod streams;
pub mod telemetry;
pub mod terms;
pub mod turn;
pub mod zone;

pub use config::Config;
pub use namespace::{Namespace, Topic};
pub use stage::{Delivery, Outcome, Stage};

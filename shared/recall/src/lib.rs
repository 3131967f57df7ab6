//! Recall, as every surface answers it: a [`RecallRequest`] in, a
//! [`RecallResponse`] out, through [`Recaller`]. The channels (dense, keyword,
//! structured filters, entities) run concurrently; their rankings fuse
//! ([`rank::fusion`]) and the pure scoring, conflict and budget logic of
//! [`rank`] shapes the answer.

mod channels;
mod engine;
pub mod rank;
mod recaller;
mod request;
mod scoring;
pub mod sql;
mod timings;
pub mod working;
pub mod working_expiry;

pub use recaller::{RecallError, Recaller};
pub use request::{ExplainedCandidate, RecallRequest, RecallResponse, RequestError};
pub use timings::Timings;
pub use working::WorkingMemory;
pub use working_expiry::{ExpiryError, expired_keys};

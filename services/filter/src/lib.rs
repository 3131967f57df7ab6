//! The filter stage: the first stop of every turn.
//!
//! It validates the envelope (refusals go to the DLQ with the reason), archives
//! every valid turn in Postgres with its fate, drops noise, quarantines
//! suspected poisoning, redacts secrets, tags source trust, and passes kept
//! turns on to `<ns>.kept.<tenant>`.

pub mod rules;
mod stage;

pub use stage::FilterStage;

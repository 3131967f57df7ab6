//! The filter stage: the first stop of every turn.
//!
//! It validates the envelope (refusals go to the DLQ with the reason), archives
//! every valid turn in Postgres with its fate, drops noise, quarantines
//! suspected poisoning, redacts secrets, tags source trust, and passes kept
//! turns on to `<ns>.kept.<tenant>`.

pub mod rules;
mod stage;

pub use stage::FilterStage;

use hindsight_shared::{config::Config, store::Store};

/// The filter stage as configured (`HINDSIGHT_SCREEN_THRESHOLD`,
/// `HINDSIGHT_SCREEN_LEARNT`). The learnt model is fit here, before the first
/// turn, rather than inside the first batch.
pub fn from_config(config: &Config, store: Store) -> FilterStage {
    let screen = rules::screen::Settings {
        threshold: config.screen_threshold,
        learnt: config.screen_learnt,
    };
    if screen.learnt {
        rules::screen::learnt::model();
    }
    FilterStage::new(store).screening(screen)
}

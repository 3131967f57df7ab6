//! The filter stage: the first stop of every turn.
//!
//! It validates the envelope (refusals go to the DLQ with the reason), archives
//! every valid turn in Postgres with its fate, drops noise, quarantines
//! suspected poisoning, redacts secrets, tags source trust, and passes kept
//! turns on to `<ns>.kept.<tenant>`.

pub mod rules;
mod stage;

pub use stage::FilterStage;

/// The screen as configured, for turns and working-memory writes alike.
pub fn screen_settings(config: &Config) -> rules::screen::Settings {
    rules::screen::Settings {
        threshold: config.screen_threshold,
        learnt: config.screen_learnt,
    }
}

use hindsight_shared::{config::Config, store::Store};

/// The filter stage as configured (`HINDSIGHT_SCREEN_THRESHOLD`,
/// `HINDSIGHT_SCREEN_LEARNT`, `HINDSIGHT_TIME_ZONE`, `HINDSIGHT_TENANT_TIME_ZONES`). The learnt model is fit here, before the first
/// turn, rather than inside the first batch.
pub fn from_config(config: &Config, store: Store) -> FilterStage {
    let screen = screen_settings(config);
    if screen.learnt {
        rules::screen::learnt::model();
    }
    FilterStage::new(store)
        .screening(screen)
        .zoned(config.time_zones.clone())
}

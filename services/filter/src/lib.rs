//! The filter stage: the first stop of every turn.
//!
//! It validates the envelope (refusals go to the DLQ with the reason), archives
//! every valid turn in Postgres with its fate, drops noise, quarantines
//! suspected poisoning, redacts secrets, tags source trust, and passes kept
//! turns on to `<ns>.kept.<tenant>`.

mod stage;

pub use stage::FilterStage;

use std::sync::Arc;

use hindsight_screen::screen;
use hindsight_shared::{
    config::Config,
    service::{self, Context, StageTask},
};
use hindsight_store::Store;

/// The filter's tasks, in its own process and in `hindsight up` alike.
pub fn tasks(ctx: &Context) -> Vec<StageTask> {
    vec![service::stage(Arc::new(from_config(
        &ctx.config,
        ctx.store.clone(),
    )))]
}

/// The filter stage as configured (`HINDSIGHT_SCREEN_THRESHOLD`,
/// `HINDSIGHT_SCREEN_LEARNT`, `HINDSIGHT_TIME_ZONE`, `HINDSIGHT_TENANT_TIME_ZONES`). The learnt model is fit here, before the first
/// turn, rather than inside the first batch.
pub fn from_config(config: &Config, store: Store) -> FilterStage {
    let screen = screen::Settings::from_config(config);
    if screen.learnt {
        let started = std::time::Instant::now();
        screen::learnt::model();
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "the screen's learnt model is fit"
        );
    }
    FilterStage::new(store)
        .screening(screen)
        .zoned(config.time_zones.clone())
}

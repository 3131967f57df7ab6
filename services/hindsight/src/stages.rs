//! The stages this binary can run, by name.

use std::sync::Arc;

use hindsight_filter::FilterStage;
use hindsight_shared::service::{self, Context, StageTask};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StageName {
    Filter,
}

/// Every stage, in pipeline order.
pub const ALL: &[StageName] = &[StageName::Filter];

pub fn task(name: StageName, ctx: &Context) -> StageTask {
    match name {
        StageName::Filter => service::stage(Arc::new(FilterStage::new(ctx.store.clone()))),
    }
}

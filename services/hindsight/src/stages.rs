//! The stages this binary can run, by name.

use std::sync::Arc;

use hindsight_filter::FilterStage;
use hindsight_shared::service::{self, Context, StageTask};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StageName {
    Filter,
    Extract,
}

impl StageName {
    pub fn name(self) -> &'static str {
        match self {
            StageName::Filter => "filter",
            StageName::Extract => "extract",
        }
    }
}

/// Every stage, in pipeline order.
pub const ALL: &[StageName] = &[StageName::Filter, StageName::Extract];

pub fn task(name: StageName, ctx: &Context) -> anyhow::Result<StageTask> {
    Ok(match name {
        StageName::Filter => service::stage(Arc::new(FilterStage::new(ctx.store.clone()))),
        StageName::Extract => service::stage(Arc::new(hindsight_extract::from_config(
            &ctx.config,
            ctx.store.clone(),
        )?)),
    })
}

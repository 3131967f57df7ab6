//! The stages this binary can run, by name.

use std::{sync::Arc, time::Duration};

use hindsight_filter::FilterStage;
use hindsight_index::VectorIndex;
use hindsight_persist::{PersistStage, reconcile};
use hindsight_shared::service::{self, Context, StageTask};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StageName {
    Filter,
    Extract,
    Embed,
    Persist,
}

impl StageName {
    pub fn name(self) -> &'static str {
        match self {
            StageName::Filter => "filter",
            StageName::Extract => "extract",
            StageName::Embed => "embed",
            StageName::Persist => "persist",
        }
    }
}

/// Every stage, in pipeline order.
pub const ALL: &[StageName] = &[
    StageName::Filter,
    StageName::Extract,
    StageName::Embed,
    StageName::Persist,
];

/// The tasks of these stages. Stages of one process share one vector index
/// (an embedded index has one owner per directory).
pub fn tasks(names: &[StageName], ctx: &Context) -> anyhow::Result<Vec<StageTask>> {
    let mut index: Option<Arc<dyn VectorIndex>> = None;
    let mut out = Vec::new();
    for name in names {
        match name {
            StageName::Filter => out.push(service::stage(Arc::new(FilterStage::new(
                ctx.store.clone(),
            )))),
            StageName::Extract => out.push(service::stage(Arc::new(
                hindsight_extract::from_config(&ctx.config, ctx.store.clone())?,
            ))),
            StageName::Embed => {
                let embedder = hindsight_embed::embedder(&ctx.config.embed)?;
                tracing::info!(model = %embedder.model().name, dimension = embedder.model().dimension, "embedder loaded");
                out.push(service::stage(Arc::new(hindsight_embed::EmbedStage::new(
                    embedder,
                    &ctx.config,
                ))));
            }
            StageName::Persist => {
                let index = match &index {
                    Some(i) => i.clone(),
                    None => index.insert(hindsight_index::open(&ctx.config)?).clone(),
                };
                let (store, ns) = (ctx.store.clone(), ctx.config.namespace.clone());
                out.push(service::stage(Arc::new(PersistStage::new(
                    store.clone(),
                    index.clone(),
                    ns.clone(),
                    ctx.config.dedupe_threshold,
                ))));
                out.push(service::background("reconciler", move |shutdown| {
                    reconcile::run(store, index, ns, Duration::from_secs(2), shutdown)
                }));
            }
        }
    }
    Ok(out)
}

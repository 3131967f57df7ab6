//! The stages this binary can run, by name.

use std::{sync::Arc, time::Duration};

use hindsight_index::VectorIndex;
use hindsight_persist::{PersistStage, reconcile};
use hindsight_shared::service::{self, Context, StageTask};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StageName {
    Filter,
    Extract,
    Embed,
    Persist,
    Gateway,
    Janitor,
}

impl StageName {
    pub fn name(self) -> &'static str {
        match self {
            StageName::Filter => "filter",
            StageName::Extract => "extract",
            StageName::Embed => "embed",
            StageName::Persist => "persist",
            StageName::Gateway => "gateway",
            StageName::Janitor => "janitor",
        }
    }
}

/// Every stage, in pipeline order.
pub const PIPELINE: &[StageName] = &[
    StageName::Filter,
    StageName::Extract,
    StageName::Embed,
    StageName::Persist,
];

/// Every service of `hindsight up`: the pipeline, the gateway and the janitor.
pub const ALL: &[StageName] = &[
    StageName::Filter,
    StageName::Extract,
    StageName::Embed,
    StageName::Persist,
    StageName::Gateway,
    StageName::Janitor,
];

/// The tasks of these stages. Stages of one process share one vector index
/// (an embedded index has one owner per directory: a gateway without persist
/// beside it only gets an index when it is a Qdrant server).
pub async fn tasks(names: &[StageName], ctx: &Context) -> anyhow::Result<Vec<StageTask>> {
    tasks_with_index(names, ctx, None).await
}

/// [`tasks`], with the vector index given rather than opened (so the caller
/// can search the very index the stages write).
pub async fn tasks_with_index(
    names: &[StageName],
    ctx: &Context,
    mut index: Option<Arc<dyn VectorIndex>>,
) -> anyhow::Result<Vec<StageTask>> {
    let mut out = Vec::new();
    for name in names {
        match name {
            StageName::Filter => out.push(service::stage(Arc::new(hindsight_filter::from_config(
                &ctx.config,
                ctx.store.clone(),
            )))),
            StageName::Extract => out.push(service::stage(Arc::new(
                hindsight_extract::from_config(&ctx.config, ctx.store.clone())?,
            ))),
            StageName::Embed => {
                let embedder = hindsight_embed::embedder(&ctx.config.embed)?;
                tracing::info!(model = %embedder.model().name, dimension = embedder.model().dimension, "embedder loaded");
                if ctx.config.screen_nearness {
                    // Before the stage starts, so its first facts do not wait.
                    if let Err(e) = hindsight_embed::screen::examples(embedder.as_ref()).await {
                        tracing::warn!(error = %e, "could not embed the screen's examples yet; the first batch tries again");
                    }
                }
                out.push(service::stage(Arc::new(hindsight_embed::EmbedStage::new(
                    embedder,
                    &ctx.config,
                ))));
            }
            StageName::Persist => {
                let index = match &index {
                    Some(i) => i.clone(),
                    None => index
                        .insert(hindsight_index::open(
                            &ctx.config.index,
                            &ctx.config.data_dir,
                        )?)
                        .clone(),
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
            StageName::Gateway => {
                let shares_index =
                    names.contains(&StageName::Persist) || ctx.config.index.qdrant_url.is_some();
                let index = match (&index, shares_index) {
                    (Some(i), _) => Some(i.clone()),
                    (None, true) => Some(
                        index
                            .insert(hindsight_index::open(
                                &ctx.config.index,
                                &ctx.config.data_dir,
                            )?)
                            .clone(),
                    ),
                    (None, false) => None,
                };
                out.push(hindsight_gateway::task(ctx, index).await?);
            }
            StageName::Janitor => out.push(hindsight_janitor::task(ctx)?),
        }
    }
    Ok(out)
}

//! The services this binary can run, by name; each service's tasks are its
//! crate's `tasks`, the very function its own binary runs.

use std::sync::Arc;

use hindsight_index::VectorIndex;
use hindsight_shared::service::{Context, StageTask};

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
            StageName::Filter => out.extend(hindsight_filter::tasks(ctx)),
            StageName::Extract => out.extend(hindsight_extract::tasks(ctx)?),
            StageName::Embed => out.extend(hindsight_embed::tasks(ctx)?),
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
                out.extend(hindsight_persist::tasks(ctx, index));
            }
            StageName::Gateway => {
                let shares_index =
                    names.contains(&StageName::Persist) || ctx.config.index.is_shared();
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
                out.extend(hindsight_gateway::tasks(ctx, index).await?);
            }
            StageName::Janitor => out.extend(hindsight_janitor::tasks(ctx)?),
        }
    }
    Ok(out)
}

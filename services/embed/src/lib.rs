//! The embed stage: facts in, embedded facts out. The stage takes up to
//! `HINDSIGHT_EMBED_WINDOW` (256) facts at once, waiting at most
//! `HINDSIGHT_EMBED_LINGER` (20 ms) so a lone fact is not held back, sorts them
//! by length and embeds them `HINDSIGHT_EMBED_BATCH` (16) at a time,
//! `HINDSIGHT_EMBED_PARALLEL` micro-batches at once (one per core); each
//! message is acked only after its embedded fact was published. Each fact's
//! vector is also the poisoning screen's second opinion ([`screen`]).

pub mod screen;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::StreamExt as _;
use hindsight_core::{Delivery, Outcome, Stage, Topic, embedding::EmbeddedFact, fact::Fact};
use hindsight_embedder::{EmbedError, Embedder};
use hindsight_shared::{
    config::Config,
    events,
    service::{self, Context, StageTask},
};

pub use hindsight_embedder::from_config as embedder;

/// The embedder's tasks, in its own process and in `hindsight up` alike: the
/// configured model loaded (and named in the log) before the stage starts.
pub fn tasks(ctx: &Context) -> Result<Vec<StageTask>, EmbedError> {
    let embedder = embedder(&ctx.config.embed)?;
    let languages = embedder.languages();
    tracing::info!(
        model = %embedder.model().name,
        dimension = embedder.model().dimension,
        %languages,
        "embedder loaded"
    );
    let unknown = hindsight_text::script::unknown_codes(languages);
    if !unknown.is_empty() {
        tracing::warn!(
            codes = %unknown.join(","),
            "declared languages of no known script vouch for no text (HINDSIGHT_EMBED_LANGUAGES takes ISO 639-1 codes, or *)"
        );
    }
    Ok(vec![service::stage(Arc::new(EmbedStage::new(
        embedder,
        &ctx.config,
    )))])
}

pub struct EmbedStage {
    embedder: Arc<dyn Embedder>,
    batch: usize,
    window: usize,
    /// Micro-batches embedded at once.
    parallel: usize,
    linger: Duration,
    /// The screen's threshold, when nearness to known attacks counts.
    screen: Option<f64>,
    /// The screen's examples, embedded when first needed.
    examples: tokio::sync::OnceCell<Arc<screen::Examples>>,
    /// Where the examples' vectors are kept between starts.
    cache_dir: std::path::PathBuf,
}

impl EmbedStage {
    /// The stage; with nearness on, the screen's examples are embedded when
    /// the first fact that nearness can count for comes.
    pub fn new(embedder: Arc<dyn Embedder>, config: &Config) -> Self {
        Self {
            examples: Default::default(),
            embedder,
            batch: config.embed.batch,
            window: config.embed.window.max(config.embed.batch),
            parallel: config.embed.parallel.max(1),
            linger: config.embed.linger,
            cache_dir: config.embed.cache_dir.clone(),
            screen: config.screen_nearness.then_some(config.screen_threshold),
        }
    }
}

#[async_trait]
impl Stage for EmbedStage {
    type Input = Fact;
    type Output = EmbeddedFact;

    const NAME: &'static str = "embed";
    const INPUT: Topic = Topic::Facts;
    const OUTPUT: Option<Topic> = Some(Topic::Embedded);

    fn batching(&self) -> Option<(usize, Duration)> {
        Some((self.window, self.linger))
    }

    fn decode(&self, payload: &[u8]) -> Result<Fact, String> {
        serde_json::from_slice(payload).map_err(|e| format!("not a fact: {e}"))
    }

    async fn handle(&self, batch: &[Delivery<Fact>]) -> Vec<Outcome<EmbeddedFact>> {
        // Texts of similar length share a micro-batch: the model pads each
        // batch to its longest text, and attention grows with its square.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| batch[i].input.content.len());
        let mut outcomes: Vec<Option<Outcome<EmbeddedFact>>> =
            (0..batch.len()).map(|_| None).collect();
        // Several micro-batches at once, each on a core of its own: the
        // local model runs a call on one thread (see
        // `hindsight_embedder::threads`), which loses nothing when another
        // process takes the other core for a while, where one call spread
        // over every core waits for the slowest at each operation.
        // (The calls are made in a loop, not by a closure: a closure over
        // `batch` trips the compiler's lifetime inference in this trait.)
        let mut calls = Vec::new();
        for chunk in order.chunks(self.batch) {
            let texts: Vec<String> = chunk
                .iter()
                .map(|&i| batch[i].input.content.clone())
                .collect();
            calls.push(async move { (chunk, self.embed_chunk(&texts, batch, chunk).await) });
        }
        let mut embedded = futures::stream::iter(calls).buffer_unordered(self.parallel);
        while let Some((chunk, results)) = embedded.next().await {
            for (&i, outcome) in chunk.iter().zip(results) {
                outcomes[i] = Some(outcome);
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Outcome::Retry("not embedded".into())))
            .collect()
    }
}

impl EmbedStage {
    /// Embeds one micro-batch: the facts `chunk` points at in `batch`.
    async fn embed_chunk(
        &self,
        texts: &[String],
        batch: &[Delivery<Fact>],
        chunk: &[usize],
    ) -> Vec<Outcome<EmbeddedFact>> {
        let started = std::time::Instant::now();
        let result = self.embedder.embed(texts).await;
        events::Embedded {
            model: &self.embedder.model().name,
            texts: texts.len(),
            elapsed: started.elapsed(),
            ok: result.is_ok(),
        }
        .emit();
        // The examples are embedded when the first fact nearness can count
        // for comes, not at start: on two cores, embedding them beside the
        // first batches slowed ingest, and nearly no fact needs them.
        let wanted = chunk
            .iter()
            .any(|&i| screen::wants_nearness(&batch[i].input));
        let examples = match (self.screen, &result) {
            (Some(_), Ok(_)) if wanted => match self
                .examples
                .get_or_try_init(|| screen::examples(self.embedder.as_ref(), &self.cache_dir))
                .await
            {
                Ok(e) => Some(e.clone()),
                Err(e) => {
                    let reason = format!("embedding the screen's examples: {e}");
                    return chunk
                        .iter()
                        .map(|_| Outcome::Retry(reason.clone()))
                        .collect();
                }
            },
            _ => None,
        };
        match result {
            Ok(vectors) if vectors.len() == chunk.len() => chunk
                .iter()
                .zip(vectors)
                .map(|(&i, vector)| {
                    let mut fact = batch[i].input.clone();
                    if let (Some(examples), Some(threshold)) = (&examples, self.screen) {
                        screen::judge(examples, &mut fact, &vector, threshold);
                    }
                    Outcome::Emit(vec![EmbeddedFact {
                        fact,
                        model: self.embedder.model().clone(),
                        languages: self.embedder.languages().clone(),
                        vector,
                    }])
                })
                .collect(),
            Ok(vectors) => {
                let reason = format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    chunk.len()
                );
                chunk
                    .iter()
                    .map(|_| Outcome::Retry(reason.clone()))
                    .collect()
            }
            Err(e) if e.is_transient() => chunk
                .iter()
                .map(|_| Outcome::Retry(e.to_string()))
                .collect(),
            Err(e) => chunk
                .iter()
                .map(|_| Outcome::Reject(e.to_string()))
                .collect(),
        }
    }
}

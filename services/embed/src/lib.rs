//! The embed stage: facts in, embedded facts out. Facts from many messages are
//! gathered into micro-batches (`HINDSIGHT_EMBED_BATCH`, 16) with a short
//! linger (`HINDSIGHT_EMBED_LINGER`, 20 ms) so a lone fact is not held back;
//! each message is acked only after the batch holding it was published.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use hindsight_embedder::Embedder;
use hindsight_shared::{
    Delivery, Outcome, Stage, Topic, config::Config, embedding::EmbeddedFact, events, fact::Fact,
};

pub use hindsight_embedder::from_config as embedder;

pub struct EmbedStage {
    embedder: Arc<dyn Embedder>,
    batch: usize,
    linger: Duration,
}

impl EmbedStage {
    pub fn new(embedder: Arc<dyn Embedder>, config: &Config) -> Self {
        Self {
            embedder,
            batch: config.embed.batch,
            linger: config.embed.linger,
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
        Some((self.batch, self.linger))
    }

    fn decode(&self, payload: &[u8]) -> Result<Fact, String> {
        serde_json::from_slice(payload).map_err(|e| format!("not a fact: {e}"))
    }

    async fn handle(&self, batch: &[Delivery<Fact>]) -> Vec<Outcome<EmbeddedFact>> {
        let texts: Vec<String> = batch.iter().map(|d| d.input.content.clone()).collect();
        let started = std::time::Instant::now();
        let result = self.embedder.embed(&texts).await;
        events::Embedded {
            model: &self.embedder.model().name,
            texts: texts.len(),
            elapsed: started.elapsed(),
            ok: result.is_ok(),
        }
        .emit();
        match result {
            Ok(vectors) if vectors.len() == batch.len() => batch
                .iter()
                .zip(vectors)
                .map(|(d, vector)| {
                    Outcome::Emit(vec![EmbeddedFact {
                        fact: d.input.clone(),
                        model: self.embedder.model().clone(),
                        vector,
                    }])
                })
                .collect(),
            Ok(vectors) => {
                let reason = format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                );
                batch
                    .iter()
                    .map(|_| Outcome::Retry(reason.clone()))
                    .collect()
            }
            Err(e) if e.is_transient() => batch
                .iter()
                .map(|_| Outcome::Retry(e.to_string()))
                .collect(),
            Err(e) => batch
                .iter()
                .map(|_| Outcome::Reject(e.to_string()))
                .collect(),
        }
    }
}

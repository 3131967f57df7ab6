//! The poisoning screen's encoder model, asked here about the turns the
//! filter found borderline (`HINDSIGHT_SCREEN_ENCODER`; see
//! [`hindsight_screen::screen::encoder`]). The filter runs at thousands of
//! turns a second and the encoder at tens, so the filter never asks it; this
//! stage reads every kept turn anyway, and its extractor (an LLM or the
//! rules) takes far longer over a turn than the encoder over the few that
//! are borderline. A turn the encoder's opinion takes to the threshold has
//! its facts quarantined, like the LLM's second opinion.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, LazyLock, Mutex},
};

use hindsight_core::{
    fact::Fact,
    turn::{KeptTurn, screen_score},
};
use hindsight_embedder::{Embedder, local::LocalEmbedder};
use hindsight_screen::screen::{
    self,
    encoder::{self, Classifier, Example},
    learnt,
};
use hindsight_shared::config::Config;

/// The encoder's model and classifier, loaded and fit when first needed.
struct Loaded {
    embedder: LocalEmbedder,
    classifier: Classifier,
}

/// One per model directory in a process: tests start many stages at once,
/// and each would otherwise load the model and embed the examples itself.
type Cell = Arc<tokio::sync::OnceCell<Arc<Loaded>>>;
static LOADED: LazyLock<Mutex<BTreeMap<PathBuf, Cell>>> = LazyLock::new(Default::default);

/// The encoder as the extract stage asks it.
pub struct Encoder {
    dir: PathBuf,
    cache_dir: PathBuf,
    threshold: f64,
}

/// Whether the filter recorded a screen score for `kept` without
/// quarantining it: the turns a second opinion (the encoder's, the LLM's)
/// may be asked about.
pub fn near_miss(kept: &KeptTurn) -> bool {
    !kept.quarantine && kept.flags.iter().any(|f| f.starts_with("screen:"))
}

/// The files the encoder's model directory must hold.
const FILES: [&str; 2] = [hindsight_embedder::e5::FILE, "tokenizer.json"];

impl Encoder {
    /// The encoder of the model in `dir`, whose examples' vectors are kept
    /// in `cache_dir`; turns are quarantined at `threshold`. Fails at once,
    /// with what to do, when `dir` lacks the model's files: the model itself
    /// is loaded only when the first borderline turn comes.
    pub fn new(dir: &Path, cache_dir: &Path, threshold: f64) -> Result<Self, String> {
        if let Some(missing) = FILES.iter().find(|f| !dir.join(f).is_file()) {
            return Err(format!(
                "the screen's encoder model: {} has no {missing} (run ./ops/setup.sh, set HINDSIGHT_SCREEN_MODEL_DIR, or HINDSIGHT_SCREEN_ENCODER=off)",
                dir.display()
            ));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            cache_dir: cache_dir.to_path_buf(),
            threshold,
        })
    }

    /// The encoder as `config` sets it: none when `HINDSIGHT_SCREEN_ENCODER`
    /// is off, or the learnt model it combines with is.
    pub fn from_config(config: &Config) -> Result<Option<Self>, String> {
        if !(config.screen_encoder && config.screen_learnt) {
            return Ok(None);
        }
        Self::new(
            &config.screen_model_dir,
            &config.embed.cache_dir,
            config.screen_threshold,
        )
        .map(Some)
    }

    /// Whether the encoder is asked about `kept`: the filter recorded a
    /// score for it from [`encoder::BAND`] up to the threshold.
    pub fn asks(&self, kept: &KeptTurn) -> bool {
        near_miss(kept) && encoder::asks(screen_score(&kept.flags), self.threshold)
    }

    /// Loads the model and fits the classifier now, rather than when the
    /// first borderline turn comes (the first fit embeds some 3,000
    /// examples: a minute or more on two cores, then kept on disk).
    pub async fn warm(&self) -> Result<(), String> {
        self.loaded().await.map(|_| ())
    }

    async fn loaded(&self) -> Result<Arc<Loaded>, String> {
        let cell: Cell = match LOADED.lock() {
            Ok(mut m) => m.entry(self.dir.clone()).or_default().clone(),
            Err(_) => Cell::default(),
        };
        cell.get_or_try_init(|| async {
            let dir = self.dir.clone();
            let embedder = tokio::task::spawn_blocking(move || LocalEmbedder::load(&dir))
                .await
                .map_err(|e| format!("loading the encoder model: {e}"))?
                .map_err(|e| e.to_string())?;
            let examples = learnt::tune_examples();
            let texts: Vec<String> = examples.iter().map(|e| e.folded.clone()).collect();
            let vectors = hindsight_embedder::embed_kept(
                &embedder,
                &self.cache_dir,
                "screen-encoder",
                &texts,
            )
            .await
            .map_err(|e| format!("embedding the encoder's examples: {e}"))?;
            let examples: Vec<Example> = examples
                .into_iter()
                .zip(vectors)
                .map(|(e, vector)| Example {
                    vector,
                    source: e.source,
                    attack: e.attack,
                })
                .collect();
            let classifier = tokio::task::spawn_blocking(move || Classifier::train(&examples))
                .await
                .map_err(|e| format!("fitting the encoder's classifier: {e}"))?;
            tracing::info!(dir = %self.dir.display(), "the screen's encoder model is ready");
            Ok(Arc::new(Loaded {
                embedder,
                classifier,
            }))
        })
        .await
        .cloned()
    }

    /// Asks the encoder about `kept` when it is borderline; if its opinion
    /// takes the turn to the threshold, `facts` are quarantined with the new
    /// score and reasons. An error (the model cannot load or embed) is worth
    /// retrying.
    pub async fn judge(&self, kept: &KeptTurn, facts: &mut [Fact]) -> Result<(), String> {
        if facts.is_empty() || !self.asks(kept) {
            return Ok(());
        }
        let loaded = self.loaded().await?;
        let turn = &kept.turn;
        let texts = screen::read_texts(&turn.content, turn.source);
        let vectors = loaded
            .embedder
            .embed(&texts)
            .await
            .map_err(|e| format!("the encoder model: {e}"))?;
        let probabilities: Vec<f64> = vectors
            .iter()
            .map(|v| loaded.classifier.probability(v, turn.source))
            .collect();
        let a = hindsight_screen::assess_encoded(
            &turn.content,
            turn.source,
            Some(learnt::model()),
            Some(&probabilities),
        );
        if a.score < self.threshold {
            return Ok(());
        }
        tracing::info!(
            tenant = %turn.tenant,
            turn_id = %turn.turn_id,
            score = a.score,
            "the encoder model's opinion quarantines the turn's facts"
        );
        for f in facts {
            f.quarantine = true;
            f.flags.retain(|flag| !flag.starts_with("screen:"));
            f.flags.insert(0, format!("screen:{:.2}", a.score));
            for r in a.reasons.iter().filter(|r| r.starts_with("encoder:")) {
                f.flags.push(format!("poison:{r}"));
            }
        }
        Ok(())
    }
}

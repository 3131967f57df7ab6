//! The poisoning screen's second opinion, from the vectors this stage makes
//! anyway: a fact near known attacks and far from known look-alikes adds to
//! its turn's screen score when the filter saw a cue in the turn, and a fact
//! whose total reaches the threshold is quarantined
//! (`HINDSIGHT_SCREEN_NEARNESS`). Nearness alone quarantines nothing. Embedding every turn in the
//! filter would cost a third of ingest; a fact's vector costs nothing more.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, LazyLock, Mutex},
};

use hindsight_embedder::{EmbedError, Embedder};
use hindsight_screen::screen::{Assessment, semantic};

use hindsight_core::{fact::Fact, turn::screen_score};
pub use semantic::Examples;

/// The examples' vectors, once per model in a process: tests start many
/// stages at once, and each embedding the ~600 examples itself took several
/// times as long on two cores as one doing it while the others wait.
type Cell = Arc<tokio::sync::OnceCell<Arc<semantic::Examples>>>;
static EXAMPLES: LazyLock<Mutex<BTreeMap<String, Cell>>> = LazyLock::new(Default::default);

/// The screen's examples embedded with `embedder`: read from `cache_dir`
/// when an earlier start kept them there, else embedded and kept
/// ([`hindsight_embedder::embed_kept`]).
pub async fn examples(
    embedder: &dyn Embedder,
    cache_dir: &Path,
) -> Result<Arc<semantic::Examples>, EmbedError> {
    let key = embedder.model().slug();
    let cell: Cell = match EXAMPLES.lock() {
        Ok(mut m) => m.entry(key).or_default().clone(),
        Err(_) => Cell::default(),
    };
    cell.get_or_try_init(|| async {
        let texts = semantic::example_texts();
        let contents: Vec<String> = texts.iter().map(|t| t.content.clone()).collect();
        let vectors =
            hindsight_embedder::embed_kept(embedder, cache_dir, "screen-examples", &contents)
                .await?;
        Ok(Arc::new(semantic::Examples::new(texts, vectors)))
    })
    .await
    .cloned()
}

/// The reasons the filter recorded for the fact's turn (`poison:<reason>`).
fn reasons(fact: &Fact) -> impl Iterator<Item = &str> {
    fact.flags.iter().filter_map(|f| f.strip_prefix("poison:"))
}

/// Whether nearness can count for `fact`: not quarantined yet, and its turn
/// showed a sign of an order ([`semantic::supported`]). Nearly no fact does,
/// so the examples are embedded only when the first such fact comes.
pub fn wants_nearness(fact: &Fact) -> bool {
    // Asked of every fact: read in place, nothing collected.
    !fact.quarantine && reasons(fact).any(hindsight_screen::screen::signals_an_order)
}

/// Judges one embedded fact: its turn's score plus what its nearness adds;
/// at `threshold` or more the fact is quarantined, with the score and reason
/// in its flags. A fact already quarantined keeps its record.
pub fn judge(examples: &semantic::Examples, fact: &mut Fact, vector: &[f32], threshold: f64) {
    if !wants_nearness(fact) || examples.is_empty() {
        return;
    }
    // The turn's reasons, as the filter recorded them: nearness counts only
    // beside one of them that says what the text does.
    let reasons: Vec<String> = reasons(fact).map(String::from).collect();
    let before = reasons.len();
    let mut a = Assessment {
        score: screen_score(&fact.flags),
        reasons,
        ..Default::default()
    };
    semantic::judge(&mut a, &fact.content, examples.nearness(vector, None));
    if a.reasons.len() == before || a.score < threshold {
        return;
    }
    fact.quarantine = true;
    fact.flags.retain(|f| !f.starts_with("screen:"));
    fact.flags.insert(0, format!("screen:{:.2}", a.score));
    fact.flags.extend(
        a.reasons
            .into_iter()
            .skip(before)
            .map(|r| format!("poison:{r}")),
    );
}

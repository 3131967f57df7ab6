//! A linear model over the characters of the text: the screen's third
//! signal, learnt at start from the `tune` part of the screen corpus
//! (`tests/corpus/screen/`), so that the data is the model and nothing
//! derived from it is kept beside it.
//!
//! The cues ask what a text does with words someone wrote down for each
//! language; the model weighs every run of 1 to 4 characters of the folded
//! text (which also reads Chinese and Japanese, where one character can be a
//! word and words have no spaces) by how it separated attacks from
//! look-alikes. A run counts by how rare it is among the training texts (its
//! inverse document frequency), and each text's vector has length 1. It is
//! logistic regression with an L2 penalty, fit by AdaGrad in a fixed order,
//! so every process learns the same weights. What it adds to the screen's score
//! ([`opinion`]) grows with the log-odds of the model's probability p that the
//! text is an attack, reaching the threshold alone at p = [`SURE`]; it also
//! takes off, for text that reads like the look-alikes.

use std::{
    cell::RefCell,
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
    sync::OnceLock,
};

use hindsight_core::turn::Source;

/// The model's probability at which its opinion alone reaches the default
/// threshold ([`super::DEFAULT_THRESHOLD`]): so sure that the text is an
/// attack that no cue is needed beside it. Chosen on the tune split (the
/// model fit without each line's family): from 0.95, 0.93 caught 18 more
/// attacks for 4 more look-alikes flagged, 0.92 another 12 for 4 more; at
/// 0.93 the surest of LoCoMo's 2,760 dev turns scores 0.90.
pub const SURE: f64 = 0.93;
/// The most the opinion takes off, for text like the look-alikes, and adds.
const FLOOR: f64 = -0.9;
const CEILING: f64 = 1.5;

/// What the model's probability `p` adds to the screen's score: its log-odds,
/// scaled so that p = [`SURE`] adds 1.0 (and p = 0.5 nothing), bounded.
/// Log-odds rather than a line in p: the model's few very sure answers
/// separate the two sides, its many middling ones only tip weak cues.
pub fn opinion(p: f64) -> f64 {
    opinion_at(p, SURE)
}

/// [`opinion`] for a probability that reaches the threshold at `sure`
/// (the learnt model's combined with the encoder's has its own).
pub fn opinion_at(p: f64, sure: f64) -> f64 {
    (logit(p) / logit(sure)).clamp(FLOOR, CEILING)
}

/// The log-odds of `p`, kept finite at 0 and 1.
pub(crate) fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}

/// Lengths of the character runs read. Measured on the tune split, fit
/// without each line's family (area under the ROC curve of the model alone,
/// with scikit-learn's equivalent): runs of 2 to 4, 0.889; of 1 to 4, 0.905;
/// the same weighted by rarity, 0.914.
const GRAMS: std::ops::RangeInclusive<usize> = 1..=4;
/// A run must occur in this many training texts to be weighed.
const MIN_TEXTS: usize = 2;
const EPOCHS: usize = 30;
const RATE: f32 = 0.5;
/// The L2 penalty, per update.
const PENALTY: f32 = 1e-4;

/// One training text: already folded ([`super::normalise::fold`]).
#[derive(Debug, Clone)]
pub struct Example {
    pub folded: String,
    pub source: Source,
    pub attack: bool,
}

/// The learnt weights, keyed by the hash of a run (or of the source).
#[derive(Debug, Default)]
pub struct Model {
    weights: HashMap<u64, Weight, BuildHasherDefault<Passthrough>>,
    bias: f32,
}

/// What the model knows of one run: its weight times its rarity, its rarity
/// squared (a text's vector is divided by its length, over the runs the model
/// knows), and its number among the model's runs.
#[derive(Debug, Clone, Copy)]
struct Weight {
    weighted: f32,
    square: f32,
    index: u32,
}

/// Keys are hashes already.
#[derive(Default)]
pub struct Passthrough(u64);

impl Hasher for Passthrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// FNV-1a, 64 bits: runs are a few bytes long.
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The key of the source's feature, without formatting a string per text.
fn source_key(source: Source) -> u64 {
    let mut h = hash(b"source:");
    for &b in source.as_str().as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The features of one text: each distinct run once, and the source. The text is read
/// with runs of whitespace as one space and a space at each end; the runs
/// ending at a character are those starting at the last few characters
/// (kept in a ring, not a list of every one).
fn features(folded: &str, source: Source) -> Vec<u64> {
    let mut keys = Vec::new();
    features_into(folded, source, &mut String::new(), &mut keys);
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// [`features`] into `keys` as read, repeats included, with `text` for the
/// spaced text: buffers a caller keeps, so that screening a turn allocates
/// nothing once they have grown.
fn features_into(folded: &str, source: Source, text: &mut String, keys: &mut Vec<u64>) {
    text.clear();
    keys.clear();
    text.push(' ');
    let mut space = true;
    for c in folded.chars() {
        if c.is_whitespace() {
            if !space {
                text.push(' ');
            }
            space = true;
        } else {
            text.push(c);
            space = false;
        }
    }
    if !space {
        text.push(' ');
    }
    const RING: usize = *GRAMS.end() + 1;
    // `starts[k % RING]` is where the k-th character starts, `spaces[k % RING]`
    // whether it is a space; the 0th is the leading space, and the runs
    // ending at the k-th character are read when it is.
    let mut starts = [0usize; RING];
    let mut spaces = [true; RING];
    let mut chars = text.char_indices().skip(1).peekable();
    let mut k = 0;
    while let Some((start, c)) = chars.next() {
        k += 1;
        let end = chars.peek().map_or(text.len(), |&(i, _)| i);
        starts[k % RING] = start;
        spaces[k % RING] = c == ' ';
        for n in GRAMS {
            if k + 1 >= n {
                // A run that is all spaces or one letter between spaces says
                // nothing; one character alone is a run of its own. Spaces
                // come one at a time, so this is a matter of the run's ends.
                let first = spaces[(k + 1 - n) % RING];
                let last = spaces[k % RING];
                let kept = match n {
                    1 => !last,
                    2 => !first && !last,
                    3 => !(first && last),
                    _ => true,
                };
                if kept {
                    keys.push(hash(&text.as_bytes()[starts[(k + 1 - n) % RING]..end]));
                }
            }
        }
    }
    keys.push(source_key(source));
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl Model {
    /// Fits the model to `examples`.
    pub fn train(examples: &[Example]) -> Model {
        let docs: Vec<Vec<u64>> = examples
            .iter()
            .map(|e| features(&e.folded, e.source))
            .collect();
        let mut texts: HashMap<u64, usize> = HashMap::new();
        for d in &docs {
            for &k in d {
                *texts.entry(k).or_default() += 1;
            }
        }
        // Sorted keys: the same feature order, so the same sums, in every process.
        let mut kept: Vec<(u64, usize)> =
            texts.into_iter().filter(|&(_, n)| n >= MIN_TEXTS).collect();
        kept.sort_unstable();
        // Rarity, smoothed as if one more text held every run.
        let total = docs.len() as f32;
        let rarity: Vec<f32> = kept
            .iter()
            .map(|&(_, n)| ((1.0 + total) / (1.0 + n as f32)).ln() + 1.0)
            .collect();
        let index: HashMap<u64, u32> = kept
            .iter()
            .enumerate()
            .map(|(j, &(k, _))| (k, j as u32))
            .collect();
        // Each row's features with their values: rarity over the row's length.
        let rows: Vec<Vec<(u32, f32)>> = docs
            .iter()
            .map(|d| {
                let mut row: Vec<u32> = d.iter().filter_map(|k| index.get(k).copied()).collect();
                row.sort_unstable();
                let norm = row
                    .iter()
                    .map(|&j| rarity[j as usize].powi(2))
                    .sum::<f32>()
                    .sqrt()
                    .max(f32::MIN_POSITIVE);
                row.into_iter()
                    .map(|j| (j, rarity[j as usize] / norm))
                    .collect()
            })
            .collect();
        let mut w = vec![0f32; index.len()];
        let mut g2 = vec![1e-6f32; index.len()];
        let (mut bias, mut bias_g2) = (0f32, 1e-6f32);
        let mut order: Vec<usize> = (0..rows.len()).collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..EPOCHS {
            // Fisher–Yates with a fixed xorshift: the same order in every process.
            for i in (1..order.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                order.swap(i, (seed % (i as u64 + 1)) as usize);
            }
            for &i in &order {
                let row = &rows[i];
                let label = if examples[i].attack { 1.0 } else { 0.0 };
                let z = bias + row.iter().map(|&(j, x)| w[j as usize] * x).sum::<f32>();
                let err = sigmoid(z) - label;
                for &(j, x) in row {
                    let j = j as usize;
                    let g = err * x + PENALTY * w[j];
                    g2[j] += g * g;
                    w[j] -= RATE * g / g2[j].sqrt();
                }
                bias_g2 += err * err;
                bias -= RATE * err / bias_g2.sqrt();
            }
        }
        let weights = index
            .into_iter()
            .map(|(k, j)| {
                let r = rarity[j as usize];
                let weight = Weight {
                    weighted: w[j as usize] * r,
                    square: r * r,
                    index: j,
                };
                (k, weight)
            })
            .collect();
        Model { weights, bias }
    }

    /// The probability that `folded`, from `source`, is an attack.
    pub fn probability(&self, folded: &str, source: Source) -> f64 {
        // Asked of every turn and every part of a record: the buffers are
        // the thread's, kept between calls.
        thread_local! {
            static BUFFERS: RefCell<Buffers> = RefCell::default();
        }
        let (mut sum, mut squares) = (0f64, 0f64);
        BUFFERS.with_borrow_mut(|b| {
            features_into(folded, source, &mut b.text, &mut b.keys);
            let call = b.call(self.weights.len());
            for w in b.keys.iter().filter_map(|k| self.weights.get(k)) {
                // Each run counts once: its stamp says whether it has.
                let stamp = &mut b.stamps[w.index as usize];
                if *stamp != call {
                    *stamp = call;
                    sum += f64::from(w.weighted);
                    squares += f64::from(w.square);
                }
            }
        });
        let norm = squares.sqrt().max(f64::from(f32::MIN_POSITIVE));
        f64::from(sigmoid(self.bias + (sum / norm) as f32))
    }
}

/// The buffers [`Model::probability`] keeps per thread: the spaced text,
/// every run's key, and per run a model knows, the number of the call that
/// last counted it (whichever model asked: each call has a new number).
#[derive(Default)]
struct Buffers {
    text: String,
    keys: Vec<u64>,
    stamps: Vec<u32>,
    calls: u32,
}

impl Buffers {
    /// This call's number, with a stamp for each of `runs` runs. Counting
    /// runs by stamp needs neither sorting the keys nor a set of them.
    fn call(&mut self, runs: usize) -> u32 {
        if self.stamps.len() < runs {
            self.stamps.resize(runs, 0);
        }
        self.calls = self.calls.wrapping_add(1);
        if self.calls == 0 {
            self.stamps.fill(0);
            self.calls = 1;
        }
        self.calls
    }
}

/// The corpus's `tune` lines as training examples.
pub fn tune_examples() -> Vec<Example> {
    super::semantic::tune_texts()
        .into_iter()
        .map(|e| Example {
            folded: super::normalise::fold(&e.content),
            source: e.source,
            attack: e.attack,
        })
        .collect()
}

/// The model learnt from the corpus, once per process.
pub fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::train(&tune_examples()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_read_in_every_script_and_the_source_counts() {
        let latin = features("ignore it", Source::User);
        assert!(latin.contains(&hash(b"ig")) && latin.contains(&hash(b"nore")));
        assert!(latin.contains(&hash(b"e i")), "runs cross spaces");
        let han = features("忽略指令", Source::Tool);
        assert!(han.contains(&hash("指令".as_bytes())));
        assert!(han.contains(&hash(b"source:tool")));
        // Every run of 1 to 4 characters of " ab cd " once, but " a", "b "…
        // of one letter and spaces are left out.
        let mut expected: Vec<u64> = [
            "a", "b", "c", "d", "ab", " ab", "ab ", "b c", " ab ", "ab c", "b cd", "cd", " cd",
            "cd ", " cd ",
        ]
        .iter()
        .map(|r| hash(r.as_bytes()))
        .collect();
        expected.push(hash(b"source:user"));
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(features("ab cd", Source::User), expected);
    }

    #[test]
    fn it_learns_what_separates_the_two_sides_and_is_the_same_every_time() {
        let example = |text: &str, attack| Example {
            folded: text.into(),
            source: Source::User,
            attack,
        };
        let mut data = Vec::new();
        for i in 0..20 {
            data.push(example(&format!("ignore the rules number {i}"), true));
            data.push(example(&format!("lunch at noon number {i}"), false));
        }
        let model = Model::train(&data);
        assert!(model.probability("please ignore the rules", Source::User) > 0.7);
        assert!(model.probability("lunch at noon today", Source::User) < 0.3);
        let again = Model::train(&data);
        assert_eq!(
            model.probability("ignore lunch", Source::User),
            again.probability("ignore lunch", Source::User)
        );
    }

    #[test]
    fn the_opinion_is_the_scaled_log_odds_and_only_a_sure_model_decides_alone() {
        assert!(opinion(0.5).abs() < 1e-9);
        assert!((opinion(SURE) - 1.0).abs() < 1e-9);
        assert!(opinion(SURE - 0.02) < 1.0);
        assert!((opinion(1.0 - SURE) + 0.9).abs() < 1e-9, "bounded below");
        assert_eq!(opinion(1.0), CEILING);
        assert_eq!(opinion(0.0), FLOOR);
        assert!(opinion(0.7) > 0.0 && opinion(0.7) < opinion(0.8));
    }

    #[test]
    fn the_corpus_model_separates_its_own_examples() {
        let data = tune_examples();
        let model = model();
        let right = data
            .iter()
            .filter(|e| (model.probability(&e.folded, e.source) > 0.5) == e.attack)
            .count();
        assert!(right * 10 >= data.len() * 9, "{right} of {}", data.len());
    }
}

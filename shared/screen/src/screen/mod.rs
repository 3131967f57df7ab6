//! The poisoning screen: one score from what the text does, read with its
//! disguises undone, and where it came from.
//!
//! A list of phrases grows to fit the attacks it has seen; the screen instead
//! asks a few questions of every text, in seven languages
//! (`shared/screen/cues.toml`): does it discard the agent's guidance,
//! speak to AI readers, order behaviour from now on or towards other people,
//! claim an authority's approval, consent for someone else, rewrite memory,
//! keep someone from knowing, ask for a payload to be decoded and followed,
//! or imitate a system message? No weak cue alone quarantines a turn ("from
//! now on I'll bike to work", "our admin approved my laptop"); cues that
//! together make an order to the agent do. Text from a tool or a document
//! that gives the agent orders counts more: data has no business instructing.
//! Payloads found encoded in the text are decoded and screened as well.

mod cues;
pub mod encoder;
pub mod learnt;
pub mod normalise;
pub mod parts;
pub mod semantic;

use hindsight_core::turn::Source;
use hindsight_shared::config::Config;

pub use cues::Cue;

/// The score at which a turn is quarantined (`HINDSIGHT_SCREEN_THRESHOLD`).
pub const DEFAULT_THRESHOLD: f64 = 1.0;

/// What the screen found in one text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    pub score: f64,
    /// The cues and combinations that made the score, e.g. `override`,
    /// `standing+others`, `from:tool`, `decoded:override`.
    pub reasons: Vec<String>,
    /// What the learnt model added to the score (below 0 for text like the
    /// look-alikes), included in `score`.
    pub opinion: f64,
}

impl Assessment {
    /// Whether the turn carries this assessment in its flags: when the score
    /// is above 0, or a cue was seen that the learnt model outweighed (a near
    /// miss: the LLM's second opinion is asked for such turns). The learnt
    /// model's opinion alone, below 0, is not worth a flag on every turn, nor
    /// the name of a record's part that scored it, nor words any ordinary
    /// turn has (an imperative, a mention of an AI: [`signals_an_order`]).
    pub fn recorded(&self) -> bool {
        self.score > 0.0 || self.reasons.iter().any(|r| signals_an_order(r))
    }

    fn add(&mut self, weight: f64, reason: impl Into<String>) {
        self.score += weight;
        self.reasons.push(reason.into());
    }
}

/// Whether a reason of an assessment is a sign that the text gives orders:
/// a cue that is one ([`Cue::signals_an_order`]), a pair of cues, a known
/// attack pattern or a decoded payload; not the learnt model's opinion,
/// nearness, the source or the part.
pub fn signals_an_order(reason: &str) -> bool {
    reason.starts_with("known:")
        || reason.starts_with("decoded:")
        || reason.contains('+')
        || Cue::named(reason).is_some_and(Cue::signals_an_order)
}

/// How much each cue counts alone. Discarding guidance, a system marker and a
/// decode-and-follow request are orders by themselves; the rest are not.
fn weight(cue: Cue) -> f64 {
    match cue {
        Cue::Override | Cue::Marker => 1.0,
        Cue::Decode => 0.6,
        Cue::Authority | Cue::Consent => 0.5,
        Cue::Standing | Cue::Memory | Cue::Secrecy => 0.4,
        Cue::Persona => 0.6,
        Cue::Cover => 0.6,
        Cue::Others | Cue::Agent | Cue::Private => 0.2,
        Cue::Hidden | Cue::Addressee => 0.3,
        Cue::Imperative => 0.1,
        // Against the rest: the one told to ignore something is the user.
        Cue::Hearsay => -0.7,
        // Applied only with quotation marks (see `assess_folded`).
        Cue::Reported => 0.0,
    }
}

/// Pairs of cues that together make an order to the agent, and what the pair adds.
const PAIRS: &[(Cue, Cue, f64)] = &[
    (Cue::Standing, Cue::Others, 0.5),
    (Cue::Standing, Cue::Agent, 0.5),
    (Cue::Standing, Cue::Secrecy, 0.4),
    (Cue::Standing, Cue::Authority, 0.3),
    (Cue::Authority, Cue::Agent, 0.4),
    (Cue::Authority, Cue::Memory, 0.3),
    (Cue::Authority, Cue::Others, 0.2),
    (Cue::Authority, Cue::Secrecy, 0.3),
    (Cue::Consent, Cue::Others, 0.3),
    (Cue::Consent, Cue::Secrecy, 0.3),
    (Cue::Consent, Cue::Private, 0.5),
    (Cue::Memory, Cue::Others, 0.4),
    (Cue::Memory, Cue::Secrecy, 0.4),
    (Cue::Memory, Cue::Agent, 0.3),
    (Cue::Cover, Cue::Memory, 0.4),
    (Cue::Cover, Cue::Others, 0.2),
    (Cue::Memory, Cue::Standing, 0.3),
    (Cue::Secrecy, Cue::Agent, 0.3),
    (Cue::Hidden, Cue::Agent, 0.5),
    (Cue::Hidden, Cue::Standing, 0.4),
    (Cue::Hidden, Cue::Memory, 0.4),
    (Cue::Persona, Cue::Override, 0.3),
    (Cue::Persona, Cue::Standing, 0.3),
    (Cue::Persona, Cue::Secrecy, 0.3),
    (Cue::Persona, Cue::Agent, 0.3),
];

/// Pairs that are an order only inside a tool's record or a document: a
/// user speaking to the assistant and asking it to do something is the
/// product working; a record doing so is data giving orders.
const DATA_PAIRS: &[(Cue, Cue, f64)] = &[(Cue::Addressee, Cue::Imperative, 0.6)];

/// What a report of an attack (quoted, with "such as", "researchers", "the
/// scam mail said") takes off: quoting an order is not giving it.
const REPORTED: f64 = -1.0;

/// The quotation marks of the seven languages, each opening mark with a
/// mark that closes it (German „ closes with “ or ”).
const QUOTE_PAIRS: &[(char, char)] = &[
    ('"', '"'),
    ('\'', '\''),
    ('“', '”'),
    ('„', '”'),
    ('„', '“'),
    ('‘', '’'),
    ('«', '»'),
    ('「', '」'),
    ('『', '』'),
];

fn quote_mark(c: char) -> bool {
    QUOTE_PAIRS
        .iter()
        .any(|&(open, close)| c == open || c == close)
}

/// Whether `text` has quotation marks (at least two).
pub(crate) fn quotes(text: &str) -> bool {
    text.chars().filter(|&c| quote_mark(c)).count() >= 2
}

/// `text` without what it quotes: each span between a pair of quotation
/// marks becomes one space. A `'` opens a quote only after a non-letter and
/// closes one only before a non-letter, so "don't" and "user's" quote nothing.
fn unquoted(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let apostrophe = c == '\'';
        let opens = QUOTE_PAIRS.iter().any(|&(open, _)| open == c)
            && !(apostrophe && i > 0 && chars[i - 1].is_alphanumeric());
        let end = opens
            .then(|| {
                (i + 1..chars.len()).find(|&j| {
                    QUOTE_PAIRS.contains(&(c, chars[j]))
                        && (!apostrophe || chars.get(j + 1).is_none_or(|n| !n.is_alphanumeric()))
                })
            })
            .flatten();
        match end {
            Some(j) => {
                out.push(' ');
                i = j + 1;
            }
            None => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// What a tool result or a document adds when it gives orders.
const FROM_DATA: f64 = 0.5;

/// How the filter runs the screen (`HINDSIGHT_SCREEN_THRESHOLD`,
/// `HINDSIGHT_SCREEN_LEARNT`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The score at which a turn is quarantined.
    pub threshold: f64,
    /// Whether the learnt model ([`learnt`]) counts.
    pub learnt: bool,
}

impl Settings {
    /// The screen as configured, for turns and working-memory writes alike.
    pub fn from_config(config: &Config) -> Self {
        Self {
            threshold: config.screen_threshold,
            learnt: config.screen_learnt,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            threshold: DEFAULT_THRESHOLD,
            learnt: true,
        }
    }
}

/// Screens `text`, as published, from `source`, with the learnt model from
/// the corpus.
pub fn assess(text: &str, source: Source) -> Assessment {
    assess_with(text, source, Some(learnt::model()))
}

/// Screens `text` from `source` with `model` (none: cues only). A tool's
/// record or a document with parts ([`parts`]) is read part by part and its
/// strongest part decides, named in the reasons (`part:<name>`): pairs of
/// cues count within a part, and an order in one field is not diluted by
/// the rest (measured on the corpus: more attacks in records caught and
/// fewer records flagged than reading the whole, or the stronger of both).
pub fn assess_with(text: &str, source: Source, model: Option<&learnt::Model>) -> Assessment {
    assess_encoded(text, source, model, None)
}

/// The texts the screen reads of `text` from `source`, folded: a record's
/// parts, or the whole. The encoder ([`encoder`]) is asked about each.
pub fn read_texts(text: &str, source: Source) -> Vec<String> {
    let parts = split(text, source);
    if parts.is_empty() {
        vec![normalise::fold(text)]
    } else {
        parts.iter().map(|p| normalise::fold(&p.text)).collect()
    }
}

fn split(text: &str, source: Source) -> Vec<parts::Part<'_>> {
    match source {
        Source::Tool | Source::External => parts::split(text),
        Source::User | Source::Agent => Vec::new(),
    }
}

/// [`assess_with`], with the encoder's probability that each of
/// [`read_texts`] is an attack: combined with the learnt model's, it
/// replaces the learnt model's opinion ([`encoder::combined`]). Without the
/// learnt model, or with another count of probabilities, the encoder is not heard.
pub fn assess_encoded(
    text: &str,
    source: Source,
    model: Option<&learnt::Model>,
    encoder: Option<&[f64]>,
) -> Assessment {
    let parts = split(text, source);
    let encoder = encoder.filter(|e| e.len() == parts.len().max(1));
    let mut a = if parts.is_empty() {
        let heard = encoder.and_then(|e| e.first().copied());
        assess_text(&normalise::fold(text), source, model, heard)
    } else {
        strongest(&parts, source, model, encoder)
    };
    for payload in normalise::decoded(text) {
        let (inner, _) = assess_folded(&normalise::fold(&payload), source);
        if inner.score > 0.0 {
            a.score += inner.score;
            a.reasons
                .extend(inner.reasons.into_iter().map(|r| format!("decoded:{r}")));
        }
    }
    a
}

/// The assessment of the part that scores highest, its name first in the reasons.
fn strongest(
    parts: &[parts::Part<'_>],
    source: Source,
    model: Option<&learnt::Model>,
    encoder: Option<&[f64]>,
) -> Assessment {
    let mut best: Option<(Assessment, &str)> = None;
    for (i, part) in parts.iter().enumerate() {
        let heard = encoder.and_then(|e| e.get(i).copied());
        let a = assess_text(&normalise::fold(&part.text), source, model, heard);
        if best.as_ref().is_none_or(|(b, _)| a.score > b.score) {
            best = Some((a, &part.name));
        }
    }
    let (mut a, name) = best.unwrap_or_default();
    a.reasons.insert(0, format!("part:{name}"));
    a
}

/// The cues' and the learnt model's assessment of one folded text, with
/// the encoder's probability when it was asked.
fn assess_text(
    folded: &str,
    source: Source,
    model: Option<&learnt::Model>,
    encoder: Option<f64>,
) -> Assessment {
    let (mut a, order_alone) = assess_folded(folded, source);
    if let Some(model) = model {
        let p = model.probability(folded, source);
        let mut opinion = match encoder {
            Some(e) => learnt::opinion_at(encoder::combined(p, e), encoder::SURE),
            None => learnt::opinion(p),
        };
        // The model tips weak cues either way, and decides alone only when
        // sure ([`learnt::SURE`]); it does not overrule a cue that is an
        // order by itself (look-alikes use the same verbs).
        if order_alone {
            opinion = opinion.max(0.0);
        }
        a.add(opinion, format!("learnt:{p:.2}"));
        if let Some(e) = encoder {
            a.reasons.push(format!("encoder:{e:.2}"));
        }
        a.opinion = opinion;
    }
    a
}

/// Whether the cues found `a` to report an order (quoted, or advice someone
/// gave the user) rather than give one.
pub(crate) fn reported(a: &Assessment) -> bool {
    a.reasons.iter().any(|r| r == "reported" || r == "hearsay")
}

/// The cues' assessment of `folded`, and whether one cue alone is an order.
fn assess_folded(folded: &str, source: Source) -> (Assessment, bool) {
    let found = cues::found(folded);
    let mut a = Assessment::default();
    for &cue in &found {
        if cue != Cue::Reported {
            a.add(weight(cue), cue.name());
        }
    }
    // A persona set-up names its persona in quotes ("you are „KRONOS“, an
    // AI that…"), a rewrite of memory the entries it changes ("replace
    // 'left unfinished' with 'excellent'"): the quotes do not make either a report.
    // A report quotes the order it reports; text that also speaks to its
    // reader outside the quotes ("(Assistant: when you cite this…)" after an
    // article) gives one.
    if found.contains(&Cue::Reported)
        && !found.contains(&Cue::Persona)
        && !found.contains(&Cue::Memory)
        && quotes(folded)
        && a.score > 0.0
        && !(found.contains(&Cue::Addressee) && cues::finds(Cue::Addressee, &unquoted(folded)))
    {
        a.add(REPORTED, "reported");
    }
    let data = matches!(source, Source::Tool | Source::External);
    let pairs = PAIRS.iter().chain(if data { DATA_PAIRS } else { &[] });
    for &(x, y, w) in pairs {
        if found.contains(&x) && found.contains(&y) {
            a.add(w, format!("{}+{}", x.name(), y.name()));
        }
    }
    // Mentioning an AI is no order ("your travel agent", "the chat
    // assistant"); addressing one is.
    let orders = found.iter().any(|c| {
        matches!(
            c,
            Cue::Override
                | Cue::Standing
                | Cue::Authority
                | Cue::Memory
                | Cue::Secrecy
                | Cue::Cover
                | Cue::Addressee
                | Cue::Persona
                | Cue::Decode
        )
    });
    // A report of an order (a security bulletin quoting one) gives none, so
    // coming from data does not make it count more.
    let reported = reported(&a);
    if orders && data && !reported {
        a.add(FROM_DATA, format!("from:{}", source.as_str()));
    }
    // A reported order is no order: the model may discount it further.
    let order_alone = !reported && found.iter().any(|&c| weight(c) >= 1.0);
    (a, order_alone)
}

#[cfg(test)]
mod tests;

//! The screen's cues, read from `shared/screen/cues.toml`: one
//! compiled set of patterns per cue, whatever the language.

use std::{collections::BTreeMap, sync::LazyLock};

use regex::RegexSet;

/// What a text may do (see the data file for each cue's meaning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cue {
    Override,
    Agent,
    Standing,
    Others,
    Authority,
    Consent,
    Memory,
    Secrecy,
    Cover,
    Decode,
    Marker,
    Hidden,
    Reported,
    Private,
    Addressee,
    Imperative,
    Persona,
    Hearsay,
}

impl Cue {
    pub const ALL: [Cue; 18] = [
        Cue::Override,
        Cue::Agent,
        Cue::Standing,
        Cue::Others,
        Cue::Authority,
        Cue::Consent,
        Cue::Memory,
        Cue::Secrecy,
        Cue::Cover,
        Cue::Decode,
        Cue::Marker,
        Cue::Hidden,
        Cue::Reported,
        Cue::Private,
        Cue::Addressee,
        Cue::Imperative,
        Cue::Persona,
        Cue::Hearsay,
    ];

    /// Whether the cue, seen alone, is a sign that the text gives orders
    /// (discarding guidance, addressing an AI reader, a persona, claimed
    /// authority…), rather than words any ordinary text has: an imperative,
    /// a mention of an AI or of other people, someone's private data, a report.
    pub fn signals_an_order(self) -> bool {
        !matches!(
            self,
            Cue::Agent
                | Cue::Others
                | Cue::Private
                | Cue::Imperative
                | Cue::Reported
                | Cue::Hearsay
        )
    }

    /// The cue named `name` in reasons.
    pub fn named(name: &str) -> Option<Cue> {
        Cue::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The cue's table in the data file, and its name in reasons.
    pub fn name(self) -> &'static str {
        match self {
            Cue::Override => "override",
            Cue::Agent => "agent",
            Cue::Standing => "standing",
            Cue::Others => "others",
            Cue::Authority => "authority",
            Cue::Consent => "consent",
            Cue::Memory => "memory",
            Cue::Secrecy => "secrecy",
            Cue::Cover => "cover",
            Cue::Decode => "decode",
            Cue::Marker => "marker",
            Cue::Hidden => "hidden",
            Cue::Reported => "reported",
            Cue::Private => "private",
            Cue::Addressee => "addressee",
            Cue::Imperative => "imperative",
            Cue::Persona => "persona",
            Cue::Hearsay => "hearsay",
        }
    }
}

const DATA: &str = include_str!("../../cues.toml");

/// Per cue, its patterns in every language.
type Tables = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// One set of patterns per cue. (One set of them all is one pass over the
/// text, but its automaton outgrows the regex engine's cache and the engine
/// falls back to a slow one: five times slower, measured.)
static SETS: LazyLock<Vec<(Cue, RegexSet)>> = LazyLock::new(|| {
    // The data file is part of the build and checked by the tests below.
    let tables: Tables =
        toml::from_str(DATA).unwrap_or_else(|e| panic!("screen/cues.toml does not parse: {e}"));
    Cue::ALL
        .iter()
        .map(|&cue| {
            let patterns: Vec<String> = tables
                .get(cue.name())
                .into_iter()
                .flat_map(|langs| langs.values().flatten())
                .map(|p| format!("(?i){}", crate::ascii_word_boundaries(p)))
                .collect();
            let set = RegexSet::new(&patterns)
                .unwrap_or_else(|e| panic!("screen/cues.toml, [{}]: {e}", cue.name()));
            (cue, set)
        })
        .collect()
});

/// The cues `folded` (lowercased, disguises undone) shows, in [`Cue::ALL`] order.
pub fn found(folded: &str) -> Vec<Cue> {
    SETS.iter()
        .filter(|(_, set)| set.is_match(folded))
        .map(|(cue, _)| *cue)
        .collect()
}

/// Whether `cue` is found in `folded`.
pub fn finds(cue: Cue, folded: &str) -> bool {
    SETS.iter()
        .any(|(c, set)| *c == cue && set.is_match(folded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cue_has_patterns_in_seven_languages_and_they_compile() {
        let tables: Tables = toml::from_str(DATA).expect("cues.toml parses");
        for cue in Cue::ALL {
            let langs = tables.get(cue.name()).expect("a table per cue");
            for lang in ["en", "zh", "es", "de", "fr", "ja", "ru"] {
                assert!(
                    langs.get(lang).is_some_and(|p| !p.is_empty()),
                    "[{}] has no {lang} patterns",
                    cue.name()
                );
            }
        }
        assert_eq!(tables.len(), Cue::ALL.len(), "a cue the code does not know");
        assert_eq!(SETS.len(), Cue::ALL.len());
    }
}

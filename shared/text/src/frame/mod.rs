//! How a new statement stands to an old one, read from their words alone, so
//! that it holds in every script the embedder may not read: the same thing
//! said again, the same thing with a detail added, one attribute of the same
//! subject given a new value, the same thing negated, or something else.
//!
//! A statement is read as a sequence of units (a word; a character of Chinese
//! or Japanese, which have no spaces), each either content or function (see
//! [`lexicon`]). The two sequences are aligned (a longest-common-subsequence
//! diff); what differs comes in hunks, and a hunk of function units alone is
//! no difference. Position matters: the value of an attribute follows it
//! ("Tom lives in *Madrid*", "Li住在*北京*") or, in Japanese, the subject's
//! particle ("リーは*北京*に住んでいる"), so a hunk before that point changes
//! whom the statement is about ("Li's *sister* lives in Lyon"), not the value.

mod lexicon;
mod read;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use similar::{Algorithm, DiffOp, capture_diff_slices};

pub use lexicon::Attribute;

/// The most content units one side of a changed value may hold: a value is a
/// few words ("San Francisco", "a software engineer"), or a few characters.
const MAX_VALUE_WORDS: usize = 4;
const MAX_VALUE_CHARS: usize = 8;
/// The most content units a negation may change besides the negation itself
/// (a Japanese verb's ending: 食べる → 食べない).
const MAX_NEGATION_INFLECTION: usize = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    text: String,
    content: bool,
    /// A character of a script written without spaces.
    cjk: bool,
    /// Part of a word for a person by their tie to someone ("sister").
    person: bool,
    /// Part of a word for a one-valued attribute ("lives", "住在").
    attribute: bool,
}

/// The least share of content units (see [`Reading::agreement`]) two
/// statements need to be one memory: restatements that share less are kept
/// apart rather than risk fusing two facts.
pub const MIN_AGREEMENT: f32 = 0.5;

/// A statement as the comparison reads it.
#[derive(Debug, Clone)]
pub struct Reading {
    units: Vec<Unit>,
    negated: bool,
    /// Units that name a one-valued attribute, with the attribute.
    attributes: Vec<(usize, Attribute)>,
    /// Units that close the subject (a Japanese は or が).
    particles: Vec<usize>,
}

/// How a new statement stands to an old one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The same content, perhaps reordered or with other function words.
    Same,
    /// The same, with details added on one side only.
    Refines {
        /// The new statement is the fuller one.
        new_is_fuller: bool,
    },
    /// One one-valued attribute of the same subject has another value.
    Changes(Attribute),
    /// The same statement, negated (or no longer negated).
    Negates,
    /// Other content: another value of a many-valued attribute, another
    /// subject, another fact.
    Differs,
}

impl Reading {
    fn content(&self) -> impl Iterator<Item = &str> {
        self.units
            .iter()
            .filter(|u| u.content)
            .map(|u| u.text.as_str())
    }

    /// Whether any word is written in Chinese or Japanese characters.
    fn is_cjk(&self) -> bool {
        self.units.iter().any(|u| u.cjk)
    }

    /// How much content the two share: the Dice coefficient of their content
    /// units (words; characters for Chinese and Japanese), 0–1.
    pub fn agreement(&self, other: &Reading) -> f32 {
        fn count(r: &Reading) -> HashMap<&str, usize> {
            let mut m: HashMap<&str, usize> = HashMap::new();
            for u in r.content() {
                *m.entry(u).or_default() += 1;
            }
            m
        }
        let (a, b) = (count(self), count(other));
        let total: usize = a.values().sum::<usize>() + b.values().sum::<usize>();
        if total == 0 {
            return 1.0;
        }
        let shared: usize = a
            .iter()
            .map(|(k, n)| (*n).min(b.get(k).copied().unwrap_or(0)))
            .sum();
        2.0 * shared as f32 / total as f32
    }

    /// Whether `new` says what this says, the same or with a detail added,
    /// sharing at least [`MIN_AGREEMENT`] of the content: the relation if so.
    pub fn restated_by(&self, new: &Reading) -> Option<Relation> {
        let relation = self.relation(new);
        self.restates(new, relation).then_some(relation)
    }

    /// [`restated_by`](Self::restated_by) given the relation already read.
    pub fn restates(&self, new: &Reading, relation: Relation) -> bool {
        matches!(relation, Relation::Same | Relation::Refines { .. })
            && self.agreement(new) >= MIN_AGREEMENT
    }

    /// How `new` stands to this (old) statement.
    pub fn relation(&self, new: &Reading) -> Relation {
        let hunks = self.hunks(new);
        if hunks.iter().any(|h| h.person) {
            // "Li's sister" and "Li's brother", or "Li" and "Li's sister".
            return Relation::Differs;
        }
        if self.negated != new.negated {
            let changed: usize = hunks.iter().map(|h| h.old.len().max(h.new.len())).sum();
            let cjk_ending = hunks.len() == 1
                && self.is_cjk()
                && hunks[0].old_end == self.units.len()
                && changed <= MAX_NEGATION_INFLECTION;
            return if hunks.is_empty() || cjk_ending {
                Relation::Negates
            } else {
                Relation::Differs
            };
        }
        if hunks.is_empty() || self.same_content(new) {
            return Relation::Same;
        }
        let substitutions: Vec<&Hunk> = hunks
            .iter()
            .filter(|h| !h.old.is_empty() && !h.new.is_empty())
            .collect();
        if substitutions.is_empty() {
            let old_adds = hunks.iter().any(|h| !h.old.is_empty());
            let new_adds = hunks.iter().any(|h| !h.new.is_empty());
            // Words joined to the first ("Tom's old friend" / "Tom"): perhaps
            // another subject, not a detail of the same fact. (Words before
            // it, "Remember: …", are not.)
            let first = self.units.iter().position(|u| u.content).unwrap_or(0);
            let at_subject = hunks
                .iter()
                .any(|h| !self.is_cjk() && h.old_start == first + 1);
            return if (old_adds && new_adds) || at_subject {
                Relation::Differs
            } else {
                Relation::Refines {
                    new_is_fuller: new_adds,
                }
            };
        }
        if hunks.len() == 1 {
            match self.substitution(new, &hunks[0]) {
                Substitution::Value(attribute) => return Relation::Changes(attribute),
                Substitution::Synonym => return Relation::Same,
                Substitution::Other => {}
            }
        }
        Relation::Differs
    }

    fn same_content(&self, other: &Reading) -> bool {
        let mut a: Vec<&str> = self.content().collect();
        let mut b: Vec<&str> = other.content().collect();
        a.sort_unstable();
        b.sort_unstable();
        a == b
    }

    /// What the one substitution `hunk` changes. A value, when the hunk is a
    /// short value on each side and follows a one-valued attribute (or the
    /// subject's particle) that both statements share, or each side of it
    /// names the same attribute anew ("lives in Madrid" → "moved to
    /// Seville"). Nothing, when each side is only a word for the same
    /// attribute ("lives in Beijing" / "is based in Beijing", "住在" / "家在").
    fn substitution(&self, new: &Reading, hunk: &Hunk) -> Substitution {
        match self.changed_attribute(new, hunk) {
            Some(Ok(attribute)) => Substitution::Value(attribute),
            Some(Err(())) => Substitution::Synonym,
            None => Substitution::Other,
        }
    }

    /// [`substitution`](Self::substitution): `Ok` a changed value, `Err` a synonym.
    fn changed_attribute(&self, new: &Reading, hunk: &Hunk) -> Option<Result<Attribute, ()>> {
        let limit = if self.is_cjk() {
            MAX_VALUE_CHARS
        } else {
            MAX_VALUE_WORDS
        };
        // The content of each side that is not a word for an attribute.
        let value = |r: &Reading, start: usize, end: usize| {
            r.units[start..end]
                .iter()
                .filter(|u| u.content && !u.attribute)
                .count()
        };
        let old_value = value(self, hunk.old_start, hunk.old_end);
        let new_value = value(new, hunk.new_start, hunk.new_end);
        if old_value > limit || new_value > limit {
            return None;
        }
        let inside = |r: &Reading, start: usize, end: usize| -> Vec<Attribute> {
            r.attributes
                .iter()
                .filter(|(i, _)| (start..end).contains(i))
                .map(|(_, a)| *a)
                .collect()
        };
        let old_inside = inside(self, hunk.old_start, hunk.old_end);
        let new_inside = inside(new, hunk.new_start, hunk.new_end);
        if let Some(a) = old_inside.iter().find(|a| new_inside.contains(a)) {
            // Both sides name the attribute: the rest of each side is the value.
            let before = self.units[..hunk.old_start].iter().any(|u| u.content);
            return match (old_value > 0, new_value > 0) {
                _ if !before => None,
                (true, true) => Some(Ok(*a)),
                (false, false) => Some(Err(())),
                _ => None,
            };
        }
        if !old_inside.is_empty() || !new_inside.is_empty() {
            return None;
        }
        // An attribute outside the hunk, before it, in both statements.
        let value_ends = self.ends_at(hunk.old_end) && new.ends_at(hunk.new_end);
        if !self.is_cjk() && !value_ends {
            // Where words are spaced, the value ends the statement: what
            // follows a differing word after the attribute is whose it is
            // ("the favourite colour of *Ann* is red").
            return None;
        }
        let named_before = self
            .attributes
            .iter()
            .filter(|(i, _)| *i < hunk.old_start)
            .find(|(_, a)| {
                new.attributes
                    .iter()
                    .any(|(j, b)| a == b && *j < hunk.new_start)
            })
            .map(|(_, a)| *a);
        if let Some(a) = named_before {
            return Some(Ok(a));
        }
        // Chinese and Japanese: the value after the subject, before the
        // attribute ("用户在*阿里巴巴*工作", "リーは*北京*に住んでいる").
        let after_subject = self.is_cjk()
            && hunk.old_start >= self.subject_end()
            && hunk.new_start >= new.subject_end();
        if after_subject {
            return self
                .attributes
                .iter()
                .filter(|(i, _)| *i >= hunk.old_end)
                .find(|(_, a)| {
                    new.attributes
                        .iter()
                        .any(|(j, b)| a == b && *j >= hunk.new_end)
                })
                .map(|(_, a)| Ok(*a));
        }
        None
    }

    /// Whether no content follows unit `end`.
    fn ends_at(&self, end: usize) -> bool {
        !self.units[end.min(self.units.len())..]
            .iter()
            .any(|u| u.content)
    }

    /// Where the subject of a Chinese or Japanese statement ends: after the
    /// first は or が, else at the first particle or attribute ("王芳|在…",
    /// "小王|住在…"); the end of the statement when there is none.
    fn subject_end(&self) -> usize {
        if let Some(p) = self.particles.first() {
            return p + 1;
        }
        self.units
            .iter()
            .position(|u| u.cjk && (!u.content || u.attribute))
            .unwrap_or(self.units.len())
    }

    /// The content that differs, as hunks of the aligned unit sequences.
    fn hunks(&self, new: &Reading) -> Vec<Hunk> {
        let a: Vec<&str> = self.units.iter().map(|u| u.text.as_str()).collect();
        let b: Vec<&str> = new.units.iter().map(|u| u.text.as_str()).collect();
        let mut out: Vec<Hunk> = Vec::new();
        let mut open: Option<Hunk> = None;
        for op in capture_diff_slices(Algorithm::Myers, &a, &b) {
            let (old, new_range) = match op {
                DiffOp::Equal { .. } => {
                    out.extend(open.take());
                    continue;
                }
                DiffOp::Delete {
                    old_index,
                    old_len,
                    new_index,
                } => (old_index..old_index + old_len, new_index..new_index),
                DiffOp::Insert {
                    old_index,
                    new_index,
                    new_len,
                } => (old_index..old_index, new_index..new_index + new_len),
                DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } => (
                    old_index..old_index + old_len,
                    new_index..new_index + new_len,
                ),
            };
            let h = open.get_or_insert(Hunk {
                old_start: old.start,
                old_end: old.start,
                new_start: new_range.start,
                new_end: new_range.start,
                old: Vec::new(),
                new: Vec::new(),
                person: false,
            });
            // A word for a person counts even where it is also a function
            // word elsewhere (English "son", French "son").
            h.person |= self.units[old.clone()].iter().any(|u| u.person)
                || new.units[new_range.clone()].iter().any(|u| u.person);
            h.old_end = old.end.max(h.old_end);
            h.new_end = new_range.end.max(h.new_end);
            h.old.extend(
                self.units[old]
                    .iter()
                    .filter(|u| u.content)
                    .map(|u| u.text.clone()),
            );
            h.new.extend(
                new.units[new_range]
                    .iter()
                    .filter(|u| u.content)
                    .map(|u| u.text.clone()),
            );
        }
        out.extend(open);
        out.retain(|h| !h.old.is_empty() || !h.new.is_empty() || h.person);
        out
    }
}

/// What one substitution changes.
enum Substitution {
    Value(Attribute),
    Synonym,
    Other,
}

/// Where two aligned statements differ: the units' ranges on each side and
/// the content units within them.
#[derive(Debug, Clone)]
struct Hunk {
    old_start: usize,
    old_end: usize,
    new_start: usize,
    new_end: usize,
    old: Vec<String>,
    new: Vec<String>,
    /// Either side names a person by their tie to someone.
    person: bool,
}

//! Reading a statement into units: words, or characters of Chinese and
//! Japanese, each marked as content or function, person or attribute.

use super::lexicon::{
    ATTRIBUTES, Attribute, CHANGE_MARKS, FUNCTION_CHARS, FUNCTION_WORDS, NEGATION_MARKS,
    NEGATION_WORDS, PERSON_MARKS, PERSON_WORDS, SUBJECT_PARTICLES,
};
use super::{Reading, Unit};
use crate::terms::{fold_plural, is_cjk};

/// Chinese and Japanese numerals: a run of them is one number.
const NUMERALS: &str = "零〇一二三四五六七八九十百千万两";

impl Reading {
    pub fn new(text: &str) -> Self {
        let lower = fold(text);
        let negated = is_negated(&lower);
        let stripped = CHANGE_MARKS.iter().fold(lower, |t, m| t.replace(m, " "));
        let mut units: Vec<Unit> = Vec::new();
        // Character offsets of each CJK unit in `stripped`, for the marks.
        let mut cjk_at: Vec<(usize, usize)> = Vec::new();
        for (start, piece) in pieces(&stripped) {
            if piece.chars().next().is_some_and(is_cjk) {
                for (i, c) in piece.char_indices() {
                    // A number in numerals (三十一) is one value, as digits are.
                    if let Some(last) = units.last_mut()
                        && NUMERALS.contains(c)
                        && last.cjk
                        && last.text.chars().all(|d| NUMERALS.contains(d))
                    {
                        last.text.push(c);
                        continue;
                    }
                    cjk_at.push((start + i, units.len()));
                    units.push(Unit {
                        text: c.to_string(),
                        content: !FUNCTION_CHARS.contains(&c),
                        cjk: true,
                        person: false,
                        attribute: false,
                    });
                }
            } else {
                for word in words(piece) {
                    // A number written in groups ("06 12 34 56 78") is one value.
                    let digits = word.bytes().all(|b| b.is_ascii_digit());
                    if let Some(last) = units.last_mut()
                        && digits
                        && !last.cjk
                        && last.text.bytes().all(|b: u8| b.is_ascii_digit())
                    {
                        last.text.push_str(&word);
                        continue;
                    }
                    let content = !FUNCTION_WORDS.contains(&word.as_str())
                        && !NEGATION_WORDS.contains(&word.as_str());
                    units.push(Unit {
                        person: PERSON_WORDS.contains(&word.as_str()),
                        text: fold_plural(&word).to_string(),
                        content,
                        cjk: false,
                        attribute: false,
                    });
                }
            }
        }
        let mut attributes = Vec::new();
        for (i, unit) in units.iter_mut().enumerate().filter(|(_, u)| !u.cjk) {
            if let Some(a) = word_attribute(&unit.text) {
                attributes.push((i, a));
                unit.attribute = true;
            }
        }
        for (attribute, _, marks) in ATTRIBUTES {
            for mark in *marks {
                for (at, _) in stripped.match_indices(mark) {
                    if let Some(&(_, unit)) = cjk_at.iter().find(|(offset, _)| *offset == at) {
                        attributes.push((unit, *attribute));
                        let end = (unit + mark.chars().count()).min(units.len());
                        units[unit..end].iter_mut().for_each(|u| u.attribute = true);
                    }
                }
            }
        }
        attributes.sort_by_key(|(i, _)| *i);
        for mark in PERSON_MARKS {
            for (at, _) in stripped.match_indices(mark) {
                if let Some(&(_, unit)) = cjk_at.iter().find(|(offset, _)| *offset == at) {
                    let len = mark.chars().count();
                    let end = (unit + len).min(units.len());
                    units[unit..end].iter_mut().for_each(|u| u.person = true);
                }
            }
        }
        let particles = units
            .iter()
            .enumerate()
            .filter(|(_, u)| {
                u.cjk
                    && u.text
                        .chars()
                        .next()
                        .is_some_and(|c| SUBJECT_PARTICLES.contains(&c))
            })
            .map(|(i, _)| i)
            .collect();
        Self {
            units,
            negated,
            attributes,
            particles,
        }
    }
}

/// Lowercase, with Russian ё read as е (written either way).
fn fold(text: &str) -> String {
    text.to_lowercase().replace('ё', "е")
}

fn is_negated(lower: &str) -> bool {
    let by_word = pieces(lower)
        .flat_map(|(_, p)| words(p))
        .any(|w| NEGATION_WORDS.contains(&w.as_str()));
    by_word || NEGATION_MARKS.iter().any(|m| lower.contains(m))
}

/// Runs of letters and digits (apostrophes inside a word kept), each with
/// its byte offset, a CJK run apart from the rest.
fn pieces(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<(usize, bool)> = None;
    for (i, c) in text.char_indices() {
        let letter = c.is_alphanumeric() || c == '\'' || c == '’';
        let cjk = is_cjk(c);
        match start {
            Some((_, was_cjk)) if letter && cjk == was_cjk => {}
            Some((s, _)) => {
                out.push((s, &text[s..i]));
                start = letter.then_some((i, cjk));
            }
            None => start = letter.then_some((i, cjk)),
        }
    }
    if let Some((s, _)) = start {
        out.push((s, &text[s..]));
    }
    out.into_iter()
}

/// A run's words: French and Italian elisions apart (`l'utilisateur` is `l`
/// and `utilisateur`), other apostrophes dropped (`doesn't` is `doesnt`).
pub(super) fn words(piece: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in piece.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’')) {
        if part.is_empty() {
            continue;
        }
        if let Some((head, tail)) = part.split_once(['\'', '’'])
            && (head.chars().count() == 1 || head == "qu")
            && !tail.is_empty()
            && tail != "s"
            && tail != "t"
        {
            out.push(head.to_string());
            out.push(tail.replace(['\'', '’'], ""));
        } else {
            let word = part.replace(['\'', '’'], "");
            if !word.is_empty() {
                out.push(word);
            }
        }
    }
    out
}

/// The one-valued attribute a word names: a stem of five letters or more
/// matches a word's start ("lieblings" in "lieblingsfarbe"), a shorter one
/// the whole word.
fn word_attribute(word: &str) -> Option<Attribute> {
    ATTRIBUTES.iter().find_map(|(attribute, stems, _)| {
        stems
            .iter()
            .any(|s| {
                if s.chars().count() >= 5 {
                    word.starts_with(s)
                } else {
                    word == *s
                }
            })
            .then_some(*attribute)
    })
}

//! Sentences and clauses: a turn is cut into sentences (English and Chinese
//! punctuation), and a compound sentence into clauses that each state one fact
//! ("I live in Beijing, have a cat and I'm allergic to peanuts" → three).

use std::sync::LazyLock;

use regex::Regex;

const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "st", "vs", "etc", "e.g", "i.e", "jr", "sr", "prof", "no", "approx",
];

/// Cuts text into sentences at `.` `!` `?` (followed by a space or the end),
/// at `。` `！` `？` `；` and at line breaks.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        current.push(c);
        let next = chars.get(i + 1).copied();
        let boundary = match c {
            '。' | '！' | '？' | '；' | '\n' => true,
            '!' | '?' => next.is_none_or(char::is_whitespace),
            '.' => {
                let ends = next.is_none_or(char::is_whitespace);
                let word: String = current
                    .trim_end_matches('.')
                    .rsplit(|ch: char| ch.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .to_lowercase();
                ends && !ABBREVIATIONS.contains(&word.as_str())
                    && !(word.len() == 1 && word.chars().all(char::is_alphabetic))
            }
            _ => false,
        };
        if boundary {
            // Keep runs of closing punctuation ("?!", "...") with their sentence.
            while let Some(&n) = chars.get(i + 1) {
                if matches!(
                    n,
                    '.' | '!' | '?' | '。' | '！' | '？' | '"' | '”' | '’' | ')' | '）'
                ) {
                    current.push(n);
                    i += 1;
                } else {
                    break;
                }
            }
            push(&mut out, &mut current);
        }
        i += 1;
    }
    push(&mut out, &mut current);
    out
}

fn push(out: &mut Vec<String>, current: &mut String) {
    let s = current.trim();
    if !s.is_empty() {
        out.push(s.to_string());
    }
    current.clear();
}

/// A clause and whether it lacks its own subject (and borrows the sentence's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    pub text: String,
}

const SUBJECTS: &str = r"I|I'm|I’m|I've|I’ve|I'd|I’d|I'll|I’ll|my|My|we|We|we're|We're";
const PREDICATES: &str = r"have|has|had|am|live|lived|work|worked|own|like|love|enjoy|hate|want|need|got|bought|went|started|moved";

static SPLIT_WITH_SUBJECT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:,\s+(?:and\s+|but\s+|so\s+)?|;\s*|\s+(?:and|but)\s+)(?P<next>(?:{SUBJECTS})\b)"
    ))
    .unwrap_or_else(|e| panic!("clause pattern: {e}"))
});

static SPLIT_BORROWING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:,\s+(?:and\s+)?|\s+and\s+)(?P<next>(?:{PREDICATES})\b)"
    ))
    .unwrap_or_else(|e| panic!("clause pattern: {e}"))
});

/// Splits an English sentence into clauses that each carry a subject.
pub fn english_clauses(sentence: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut start = 0;
    for caps in SPLIT_WITH_SUBJECT.captures_iter(sentence) {
        let (Some(whole), Some(next)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        if sentence[start..whole.start()].split_whitespace().count() < 3 {
            continue;
        }
        pieces.push(sentence[start..whole.start()].to_string());
        start = next.start();
    }
    pieces.push(sentence[start..].to_string());

    // Clauses without a subject borrow "I" when the sentence speaks in the first person.
    let first_person =
        sentence.trim_start().starts_with("I ") || sentence.trim_start().starts_with("I'");
    let mut out = Vec::new();
    for piece in pieces {
        if !first_person {
            out.push(piece);
            continue;
        }
        let mut start = 0;
        let mut borrowed = false;
        for caps in SPLIT_BORROWING.captures_iter(&piece) {
            let (Some(whole), Some(next)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            let part = &piece[start..whole.start()];
            if part.split_whitespace().count() < 2 {
                continue;
            }
            out.push(if borrowed {
                format!("I {part}")
            } else {
                part.to_string()
            });
            start = next.start();
            borrowed = true;
        }
        let last = &piece[start..];
        out.push(if borrowed {
            format!("I {last}")
        } else {
            last.to_string()
        });
    }
    merge_short(out, 3)
}

/// Splits a Chinese sentence at `，` and connectives; clauses that start with a
/// verb borrow the first clause's subject when it was 我.
pub fn chinese_clauses(sentence: &str) -> Vec<String> {
    let normalised = sentence
        .replace("而且", "，")
        .replace("并且", "，")
        .replace("另外", "，");
    let pieces: Vec<String> = normalised
        .split(['，', ','])
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let first_person = pieces
        .first()
        .is_some_and(|p| p.starts_with('我') && !p.starts_with("我们"));
    let borrows = |p: &str| {
        p.starts_with([
            '有', '住', '喜', '是', '在', '对', '去', '要', '想', '会', '爱', '养', '叫', '不',
            '已', '还', '也',
        ])
    };
    let out = pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            if i > 0 && first_person && borrows(&p) {
                format!("我{p}")
            } else {
                p
            }
        })
        .collect();
    merge_short(out, 4)
}

/// Joins clauses shorter than `min` words (or characters, for text without
/// spaces) back onto the previous one: a fragment is not a fact.
fn merge_short(pieces: Vec<String>, min: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in pieces {
        let piece = piece
            .trim()
            .trim_end_matches([',', '，'])
            .trim()
            .to_string();
        if piece.is_empty() {
            continue;
        }
        let size = if piece.contains(' ') {
            piece.split_whitespace().count()
        } else {
            piece.chars().count()
        };
        match out.last_mut() {
            Some(last) if size < min => {
                last.push_str(if piece.is_ascii() { ", " } else { "，" });
                last.push_str(&piece);
            }
            _ => out.push(piece),
        }
    }
    out
}

/// Whether the text is mostly CJK.
pub fn is_cjk(text: &str) -> bool {
    let cjk = text
        .chars()
        .filter(|c| ('\u{4E00}'..='\u{9FFF}').contains(c))
        .count();
    cjk * 3 >= text.chars().filter(|c| !c.is_whitespace()).count().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_on_english_and_chinese_punctuation() {
        assert_eq!(
            sentences("I met Dr. Smith today. He was nice! Was he? 我很好。你呢？"),
            vec![
                "I met Dr. Smith today.",
                "He was nice!",
                "Was he?",
                "我很好。",
                "你呢？"
            ]
        );
        assert_eq!(
            sentences("It costs 3.5 dollars... ok"),
            vec!["It costs 3.5 dollars...", "ok"]
        );
    }

    #[test]
    fn a_compound_sentence_becomes_one_clause_per_fact() {
        assert_eq!(
            english_clauses(
                "I live in Chaoyang, Beijing, have a cat called Mimi and I'm allergic to peanuts"
            ),
            vec![
                "I live in Chaoyang, Beijing",
                "I have a cat called Mimi",
                "I'm allergic to peanuts"
            ]
        );
        assert_eq!(
            english_clauses("the blue shirt I bought last time is a bit tight, I want one size up"),
            vec![
                "the blue shirt I bought last time is a bit tight",
                "I want one size up"
            ]
        );
        assert_eq!(
            english_clauses("Tom and I went hiking"),
            vec!["Tom and I went hiking"]
        );
    }

    #[test]
    fn a_chinese_compound_sentence_is_split_and_keeps_its_subject() {
        assert_eq!(
            chinese_clauses("我住在北京朝阳，有一只叫咪咪的猫，而且我对花生过敏"),
            vec!["我住在北京朝阳", "我有一只叫咪咪的猫", "我对花生过敏"]
        );
    }
}

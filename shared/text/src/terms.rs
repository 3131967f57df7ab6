//! Search terms for the keyword channel of recall, the same on the write side
//! (persist stores them with each memory) and the query side.
//!
//! Chinese, Japanese and Korean have no spaces between words, so splitting on
//! whitespace would make a whole clause one "word" that no query matches. A
//! run of CJK characters becomes its single characters and its overlapping
//! pairs instead: "住在北京" → 住, 在, 北, 京, 住在, 在北, 北京. Pairs carry the
//! meaning (most Chinese words are two characters); singles catch one-character
//! words. Other scripts are lowercased words without English stopwords.
//!
//! A memory stores each word and its English stem (Snowball): "researching"
//! is stored as `researching` and `research`. A query asks for stems, so
//! "What did she research?" finds "researching adoption agencies"; a query
//! may also ask for the words as written ([`Matching::Words`]), which the
//! evaluation uses to show what stemming adds.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// How a query's words are matched against the memories' terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Matching {
    /// By English stem: "painted" finds "painting" (the default).
    #[default]
    Stems,
    /// By the word as written, a plural "s" folded.
    Words,
}

/// English words too common to say anything about what a memory is about.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "for",
    "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "just", "me", "my", "of", "on", "or", "our", "ours",
    "she", "should", "so", "some", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "those", "to", "too", "us", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you",
    "your", "yours",
];

/// Chinese particles that, alone, say nothing about the content.
const CJK_STOP_CHARS: &[char] = &[
    '的', '了', '是', '在', '我', '你', '他', '她', '吗', '呢', '吧', '啊', '也', '和',
];

/// Chinese, Japanese or Korean: scripts written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}' // CJK Extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK Unified Ideographs
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{F900}'..='\u{FAFF}') // CJK Compatibility Ideographs
}

/// "cats" → "cat"; leaves "glass", "is" and short words alone.
pub fn fold_plural(word: &str) -> &str {
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && word.is_ascii() {
        &word[..word.len() - 1]
    } else {
        word
    }
}

/// The lowercased word, unless it is a stopword.
fn word_of(word: &str) -> Option<String> {
    let lower = word.to_lowercase();
    (!lower.is_empty() && !STOPWORDS.contains(&lower.as_str())).then_some(lower)
}

/// A lowercased word's English stem ("researching" → "research"); words that
/// are not plain ASCII letters are kept as they are.
pub fn stem(word: &str) -> String {
    if word.bytes().all(|b| b.is_ascii_lowercase()) {
        STEMMER.stem(word).into_owned()
    } else {
        word.to_string()
    }
}

fn push_cjk_run(run: &[char], out: &mut Vec<String>) {
    for c in run {
        if !CJK_STOP_CHARS.contains(c) {
            out.push(c.to_string());
        }
    }
    for pair in run.windows(2) {
        out.push(pair.iter().collect());
    }
}

/// A text's words (lowercased, stopwords dropped) and CJK terms, in order.
/// `each` gets every word; CJK terms go to `out` directly.
fn scan(text: &str, mut each: impl FnMut(&str, &mut Vec<String>)) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let mut flush_word = |word: &mut String, out: &mut Vec<String>| {
        if let Some(w) = word_of(word) {
            each(&w, out);
        }
        word.clear();
    };
    // Apostrophes join ("don't" → "dont") rather than split.
    for c in text.chars().filter(|c| !matches!(c, '\'' | '’')) {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            run.push(c);
        } else if c.is_alphanumeric() {
            push_cjk_run(&run, &mut out);
            run.clear();
            word.push(c);
        } else {
            flush_word(&mut word, &mut out);
            push_cjk_run(&run, &mut out);
            run.clear();
        }
    }
    flush_word(&mut word, &mut out);
    push_cjk_run(&run, &mut out);
    out
}

/// The search terms of a text as a query asks for them, in order, with repeats.
pub fn terms(text: &str, matching: Matching) -> Vec<String> {
    scan(text, |w, out| {
        out.push(match matching {
            Matching::Stems => stem(w),
            Matching::Words => fold_plural(w).to_string(),
        })
    })
}

/// The distinct terms of a query, sorted.
pub fn query_terms(text: &str, matching: Matching) -> Vec<String> {
    let mut t = terms(text, matching);
    t.sort();
    t.dedup();
    t
}

/// What a memory stores: the distinct words and stems of its texts (its
/// content, its entities and the context it was said in), sorted.
pub fn memory_terms<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut t = Vec::new();
    for text in texts {
        t.extend(scan(text, |w, out| {
            let folded = fold_plural(w);
            let stemmed = stem(w);
            if stemmed != folded {
                out.push(stemmed);
            }
            out.push(folded.to_string());
        }));
    }
    t.sort();
    t.dedup();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Matching = Matching::Words;
    const S: Matching = Matching::Stems;

    #[test]
    fn english_words_are_lowercased_without_stopwords_and_plurals() {
        assert_eq!(
            terms("Caroline adopted two Cats in May!", W),
            ["caroline", "adopted", "two", "cat", "may"]
        );
        assert_eq!(terms("I don't like glass", W), ["dont", "like", "glass"]);
    }

    #[test]
    fn a_query_finds_other_forms_of_its_words_by_their_stem() {
        let memory = memory_terms(["Caroline is researching adoption agencies"]);
        for form in ["researching", "research", "adoption", "agency", "agencies"] {
            assert!(
                query_terms(form, S).iter().all(|t| memory.contains(t)),
                "{form}: {:?} in {memory:?}",
                query_terms(form, S)
            );
        }
        assert!(
            query_terms("researched", S)
                .iter()
                .all(|t| memory.contains(t))
        );
        // Matching by the written word finds only the word (plural folded).
        assert!(
            query_terms("researching", W)
                .iter()
                .all(|t| memory.contains(t))
        );
        assert!(
            !query_terms("researched", W)
                .iter()
                .all(|t| memory.contains(t))
        );
    }

    #[test]
    fn a_memory_stores_its_content_entities_and_context_once_each() {
        let t = memory_terms(["Melanie painted a lake", "Melanie", "What did you paint?"]);
        assert_eq!(t.iter().filter(|x| *x == "melani").count(), 1);
        for term in ["melanie", "painted", "paint", "lake"] {
            assert!(t.contains(&term.to_string()), "{term} in {t:?}");
        }
        let mut sorted = t.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(t, sorted);
    }

    #[test]
    fn chinese_runs_become_characters_and_pairs() {
        let t = terms("我住在北京", S);
        assert!(t.contains(&"北京".to_string()));
        assert!(t.contains(&"住在".to_string()));
        assert!(t.contains(&"北".to_string()));
        assert!(
            !t.contains(&"我".to_string()),
            "particles alone are dropped"
        );
        // A query shares terms with the memory although neither has spaces.
        let memory = memory_terms(["用户现在住在北京朝阳区"]);
        let query = query_terms("他住在哪里？北京吗", S);
        assert!(query.iter().any(|q| memory.contains(q) && q == "北京"));
    }

    #[test]
    fn mixed_scripts_split_at_the_boundary() {
        assert_eq!(terms("去Tokyo旅行", W), ["去", "tokyo", "旅", "行", "旅行"]);
    }

    #[test]
    fn empty_and_punctuation_only_texts_have_no_terms() {
        assert!(terms("", S).is_empty());
        assert!(terms("?!… ，。", S).is_empty());
        assert!(memory_terms([""]).is_empty());
    }
}

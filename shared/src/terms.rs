//! Search terms for the keyword channel of recall, the same on the write side
//! (persist stores them with each memory) and the query side.
//!
//! Chinese, Japanese and Korean have no spaces between words, so splitting on
//! whitespace would make a whole clause one "word" that no query matches. A
//! run of CJK characters becomes its single characters and its overlapping
//! pairs instead: "住在北京" → 住, 在, 北, 京, 住在, 在北, 北京. Pairs carry the
//! meaning (most Chinese words are two characters); singles catch one-character
//! words. Other scripts are lowercased words, English stopwords dropped and a
//! plural "s" folded, so "cats" finds "cat".

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

fn push_word(word: &str, out: &mut Vec<String>) {
    let lower = word.to_lowercase();
    if lower.is_empty() || STOPWORDS.contains(&lower.as_str()) {
        return;
    }
    out.push(fold_plural(&lower).to_string());
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

/// The search terms of a text, in order, with repeats (term frequency counts).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    // Apostrophes join ("don't" → "dont") rather than split.
    for c in text.chars().filter(|c| !matches!(c, '\'' | '’')) {
        if is_cjk(c) {
            push_word(&word, &mut out);
            word.clear();
            run.push(c);
        } else if c.is_alphanumeric() {
            push_cjk_run(&run, &mut out);
            run.clear();
            word.push(c);
        } else {
            push_word(&word, &mut out);
            word.clear();
            push_cjk_run(&run, &mut out);
            run.clear();
        }
    }
    push_word(&word, &mut out);
    push_cjk_run(&run, &mut out);
    out
}

/// The distinct terms of a text, sorted: what a memory stores and a query asks for.
pub fn distinct_terms(text: &str) -> Vec<String> {
    let mut t = terms(text);
    t.sort();
    t.dedup();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_are_lowercased_without_stopwords_and_plurals() {
        assert_eq!(
            terms("Caroline adopted two Cats in May!"),
            ["caroline", "adopted", "two", "cat", "may"]
        );
        assert_eq!(terms("I don't like glass"), ["dont", "like", "glass"]);
    }

    #[test]
    fn chinese_runs_become_characters_and_pairs() {
        let t = terms("我住在北京");
        assert!(t.contains(&"北京".to_string()));
        assert!(t.contains(&"住在".to_string()));
        assert!(t.contains(&"北".to_string()));
        assert!(
            !t.contains(&"我".to_string()),
            "particles alone are dropped"
        );
        // A query shares terms with the memory although neither has spaces.
        let memory = distinct_terms("用户现在住在北京朝阳区");
        let query = distinct_terms("他住在哪里？北京吗");
        assert!(query.iter().any(|q| memory.contains(q) && q == "北京"));
    }

    #[test]
    fn mixed_scripts_split_at_the_boundary() {
        assert_eq!(terms("去Tokyo旅行"), ["去", "tokyo", "旅", "行", "旅行"]);
    }

    #[test]
    fn empty_and_punctuation_only_texts_have_no_terms() {
        assert!(terms("").is_empty());
        assert!(terms("?!… ，。").is_empty());
    }
}

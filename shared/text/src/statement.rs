//! What a statement says, as recall compares the memories of one answer: its
//! content key (the same words, whatever the case and punctuation), its frame
//! and value (what it is about, and what it says of it), whether a new one
//! contradicts an old one. Persist's dedupe reads statements more closely, in
//! every language ([`crate::frame`]). No I/O here.

use std::collections::HashSet;

/// The content lowercased, without punctuation and with single spaces:
/// "Lives in NYC." and "lives in nyc" are the same fact.
pub fn content_key(content: &str) -> String {
    let mut key = String::with_capacity(content.len());
    for word in content
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
    {
        if !key.is_empty() {
            key.push(' ');
        }
        key.push_str(word);
    }
    key
}

/// Words that say "this changed" without being the value that changed.
const NOW_WORDS: &[&str] = &[
    "now",
    "currently",
    "anymore",
    "nowadays",
    "lately",
    "actually",
    "instead",
    "again",
    "these",
    "days",
];
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "wont", "cant",
    "cannot", "longer", "不", "没", "别",
];
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "to", "of", "in", "on", "at", "and", "s",
    "has", "have", "with", "for", "it", "that", "this", "his", "her", "their", "its", "as", "by",
    "very", "really", "so",
];
/// Attributes that hold one value at a time: a new value replaces the old.
const EXCLUSIVE: &[&str] = &[
    "favourite",
    "favorite",
    "prefer",
    "prefers",
    "preferred",
    "lives",
    "live",
    "living",
    "based",
    "moved",
    "works",
    "work",
    "job",
    "married",
    "name",
    "called",
    "named",
    "age",
    "old",
    "phone",
    "email",
    "address",
    "colour",
    "color",
    "最喜欢",
    "住在",
    "现在",
    "搬到",
    "工作",
    "名字",
];

/// Words (lowercase, apostrophes dropped), with CJK text cut into characters.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let cleaned: String = text.replace(['\'', '’'], "");
    for word in cleaned
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if word.chars().any(|c| ('\u{4E00}'..='\u{9FFF}').contains(&c)) {
            out.extend(word.chars().map(|c| c.to_string()));
        } else {
            out.push(word.to_lowercase());
        }
    }
    out
}

fn strip_chinese_now(text: &str) -> String {
    ["现在", "目前", "如今", "已经", "不再"]
        .iter()
        .fold(text.to_string(), |t, w| t.replace(w, ""))
}

fn content_tokens(text: &str) -> Vec<String> {
    tokens(&strip_chinese_now(text))
        .into_iter()
        .filter(|t| {
            !STOPWORDS.contains(&t.as_str())
                && !NOW_WORDS.contains(&t.as_str())
                && !NEGATIONS.contains(&t.as_str())
        })
        .map(|t| crate::terms::fold_plural(&t).to_string())
        .collect()
}

fn negated(text: &str) -> bool {
    let t = tokens(text);
    t.iter().any(|w| NEGATIONS.contains(&w.as_str())) || text.contains("不再")
}

/// A statement's words, read once, for the pairwise tests below (recall
/// compares every pair of an answer's memories).
#[derive(Debug, Clone)]
pub struct Statement {
    /// Content words in order (the last is the value).
    tokens: Vec<String>,
    words: HashSet<String>,
    negated: bool,
    /// Names an attribute that holds one value at a time.
    exclusive: bool,
}

impl Statement {
    pub fn new(text: &str) -> Self {
        let tokens = content_tokens(text);
        let words: HashSet<String> = tokens.iter().cloned().collect();
        let lower = text.to_lowercase();
        let exclusive = EXCLUSIVE.iter().any(|w| {
            if w.is_ascii() {
                words.contains(*w)
            } else {
                lower.contains(w)
            }
        });
        Self {
            tokens,
            words,
            negated: negated(text),
            exclusive,
        }
    }

    /// Whether the two share most of their content words (Jaccard ≥ 0.5): a
    /// lexical stand-in for "near neighbours" where no vectors are at hand,
    /// so that contradiction is only asked of statements about the same thing.
    pub fn same_frame(&self, other: &Statement) -> bool {
        jaccard(&self.words, &other.words) >= 0.5
    }

    /// [`value_differs`] on read statements.
    pub fn value_differs(&self, new: &Statement) -> bool {
        let only_a = self.words.difference(&new.words).count();
        let only_b = new.words.difference(&self.words).count();
        only_a > 0
            && only_b > 0
            && only_a <= 3
            && only_b <= 3
            && self.tokens.last() != new.tokens.last()
    }

    /// [`contradicts`] on read statements.
    pub fn contradicted_by(&self, new: &Statement) -> bool {
        if self.negated != new.negated {
            return jaccard(&self.words, &new.words) >= 0.6;
        }
        (self.exclusive || new.exclusive) && self.value_differs(new)
    }
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f32 {
    let union = a.union(b).count();
    if union == 0 {
        1.0
    } else {
        a.intersection(b).count() as f32 / union as f32
    }
}

/// Whether the two statements give the same frame a different value: a few
/// words differ on each side, and the last word — the value — is one of them
/// ("Li likes cats" / "Li likes dogs"). A refinement ("lives in Beijing" →
/// "lives in Chaoyang, Beijing") or a paraphrase ("lives in" / "is based in
/// Beijing") does not.
pub fn value_differs(old: &str, new: &str) -> bool {
    Statement::new(old).value_differs(&Statement::new(new))
}

/// Whether `new` contradicts `old`: the same statement negated, or a new
/// value of an attribute that holds one value at a time ("Tom prefers red" →
/// "Tom now prefers blue"). Liking dogs does not contradict liking cats.
pub fn contradicts(old: &str, new: &str) -> bool {
    Statement::new(old).contradicted_by(&Statement::new(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ignore_case_and_punctuation() {
        assert_eq!(content_key("Lives in  NYC."), content_key("lives in nyc"));
        assert_ne!(content_key("lives in NYC"), content_key("lives in LA"));
    }

    #[test]
    fn a_new_value_of_a_one_valued_attribute_contradicts() {
        assert!(contradicts(
            "Tom's favourite colour is red",
            "Tom's favourite colour is blue now"
        ));
        assert!(contradicts("Tom prefers red", "Tom now prefers blue"));
        assert!(contradicts(
            "Ann likes coffee",
            "Ann doesn't like coffee anymore"
        ));
        assert!(contradicts("小王住在北京", "小王现在住在上海"));
    }

    #[test]
    fn refinements_and_paraphrases_do_not_contradict() {
        assert!(!contradicts(
            "Li lives in Beijing",
            "Li lives in Chaoyang, Beijing"
        ));
        assert!(!contradicts(
            "Li lives in Beijing",
            "Li is based in Beijing"
        ));
        assert!(!contradicts("Ann likes cats", "Ann likes cats a lot"));
    }

    #[test]
    fn another_value_is_another_fact() {
        assert!(value_differs("Li likes cats", "Li likes dogs"));
        assert!(!value_differs(
            "Li lives in Beijing",
            "Li is based in Beijing"
        ));
        assert!(!value_differs("Li住在北京朝阳区", "Li家在北京朝阳区"));
        assert!(!contradicts("Li likes cats", "Li likes dogs"));
    }
}

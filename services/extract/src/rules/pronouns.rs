//! First person made third person: "I went…" becomes "Caroline went…", so a
//! fact names whom it is about wherever it is recalled.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Words that stand between "I" and its verb without taking its agreement
/// ("I really like" → "really likes"); any word in -ly does too.
const ADVERBS: &[&str] = &[
    "now",
    "then",
    "still",
    "also",
    "just",
    "even",
    "ever",
    "never",
    "often",
    "always",
    "sometimes",
    "already",
    "kinda",
    "sorta",
    "too",
    "only",
    "mostly",
    "almost",
    "once",
    "soon",
    "again",
    "seldom",
    "rather",
    "quite",
    "much",
];

/// Forms that stay as they are after a third-person subject: modals, past
/// tenses (irregular ones here, the rest end in -ed), and words that are no
/// verb at all ("I and my sister", "I myself").
const UNCHANGED: &[&str] = &[
    "can",
    "could",
    "will",
    "would",
    "shall",
    "should",
    "may",
    "might",
    "must",
    "was",
    "were",
    "did",
    "had",
    "went",
    "saw",
    "made",
    "got",
    "took",
    "came",
    "gave",
    "found",
    "thought",
    "told",
    "became",
    "left",
    "felt",
    "brought",
    "began",
    "kept",
    "held",
    "wrote",
    "stood",
    "heard",
    "meant",
    "met",
    "ran",
    "paid",
    "sat",
    "spoke",
    "led",
    "grew",
    "lost",
    "fell",
    "sent",
    "built",
    "understood",
    "drew",
    "broke",
    "spent",
    "rose",
    "drove",
    "bought",
    "wore",
    "chose",
    "sang",
    "swam",
    "flew",
    "ate",
    "drank",
    "slept",
    "won",
    "taught",
    "caught",
    "fought",
    "sold",
    "forgot",
    "hid",
    "knew",
    "rode",
    "shook",
    "threw",
    "woke",
    "dealt",
    "fed",
    "lent",
    "hung",
    "sought",
    "stuck",
    "swore",
    "tore",
    "wept",
    "said",
    "ate",
    "began",
    "did",
    "read",
    "put",
    "set",
    "let",
    "hit",
    "hurt",
    "quit",
    "shut",
    "cost",
    "cut",
    "spread",
    "and",
    "or",
    "but",
    "nor",
    "myself",
    "alone",
    "who",
    "that",
    "as",
    "too",
    "personally",
    "i",
];

/// The present-tense form after a third-person subject ("work" → "works",
/// "cherish" → "cherishes", "try" → "tries"); past tenses and modals stay.
fn agree(verb: &str) -> String {
    let lower = verb.to_ascii_lowercase();
    if UNCHANGED.contains(&lower.as_str()) || (lower.ends_with("ed") && lower.len() > 3) {
        return verb.to_string();
    }
    match lower.as_str() {
        "am" | "be" => return "is".into(),
        "have" => return "has".into(),
        "do" => return "does".into(),
        "go" => return "goes".into(),
        _ => {}
    }
    let bytes = lower.as_bytes();
    let consonant_y = lower.ends_with('y')
        && bytes
            .len()
            .checked_sub(2)
            .is_some_and(|i| !b"aeiou".contains(&bytes[i]));
    if consonant_y {
        format!("{}ies", &verb[..verb.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        format!("{verb}es")
    } else {
        format!("{verb}s")
    }
}

fn is_adverb(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    ADVERBS.contains(&lower.as_str()) || (lower.len() > 3 && lower.ends_with("ly"))
}

static FIRST_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \b(?P<had>I'd|I’d)\s+(?P<participle>been|had|seen|done|gone|known|never|already|just|[a-z]+ed)\b
      | \b(?P<contraction>I'm|I’m|I've|I’ve|I'll|I’ll|I'd|I’d)\b
      | \bI(?P<words>(?:\s+[a-z]+)+)
      | \b(?P<i>I)\b
      | \b(?P<my>[Mm]y)\b
      | \b(?P<mine>[Mm]ine)\b
      | \b(?P<myself>[Mm]yself)\b
      | \b(?P<me>[Mm]e)\b",
    )
    .unwrap_or_else(|e| panic!("pronoun pattern: {e}"))
});

/// "I" and the words after it: adverbs stay, the verb agrees, the rest is
/// rewritten like any text (it may hold "my" or "me").
fn subject_and_verb(words: &str, speaker: &str) -> String {
    let mut out = speaker.to_string();
    let mut rest = words;
    loop {
        let trimmed = rest.trim_start();
        let space = &rest[..rest.len() - trimmed.len()];
        let end = trimmed
            .find(|c: char| !c.is_ascii_lowercase())
            .unwrap_or(trimmed.len());
        let (word, after) = trimmed.split_at(end);
        if word.is_empty() {
            out.push_str(&rewrite(rest, speaker, true));
            return out;
        }
        out.push_str(space);
        if is_adverb(word) {
            out.push_str(word);
            rest = after;
            continue;
        }
        out.push_str(&agree(word));
        out.push_str(&rewrite(after, speaker, true));
        return out;
    }
}

/// Replaces English and Chinese first-person pronouns with `speaker`.
pub fn third_person_text(text: &str, speaker: &str) -> String {
    rewrite(text, speaker, false)
}

/// [`third_person_text`]; `named` when the speaker was named before `text`.
fn rewrite(text: &str, speaker: &str, mut named: bool) -> String {
    let english = FIRST_PERSON.replace_all(text, |c: &Captures<'_>| {
        let before_named = named;
        named = true;
        if let (Some(_), Some(p)) = (c.name("had"), c.name("participle")) {
            return format!("{speaker} had {}", p.as_str());
        }
        if let Some(m) = c.name("contraction") {
            let rest = match m.as_str().replace('’', "'").as_str() {
                "I'm" => "is",
                "I've" => "has",
                "I'll" => "will",
                _ => "would",
            };
            return format!("{speaker} {rest}");
        }
        if let Some(words) = c.name("words") {
            return subject_and_verb(words.as_str(), speaker);
        }
        if let Some(me) = c.name("me") {
            // "me-time" is not about the speaker as an object.
            if text[me.end()..].starts_with('-') {
                return me.as_str().to_string();
            }
            return speaker.to_string();
        }
        if let Some(m) = c.name("myself") {
            // "…let me express myself": once the name is there, a reflexive.
            let upper = m.as_str().starts_with('M');
            return match (before_named || text[..m.start()].contains(speaker), upper) {
                (true, false) => "themself".into(),
                (true, true) => "Themself".into(),
                _ => speaker.to_string(),
            };
        }
        if c.name("i").is_some() {
            return speaker.to_string();
        }
        // "my" and "mine"
        format!("{speaker}'s")
    });
    chinese_third_person(&english, speaker)
}

/// 我 → speaker, but not in 我们 (we).
fn chinese_third_person(text: &str, speaker: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '我' && chars.peek() != Some(&'们') {
            out.push_str(speaker);
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the text speaks in the first person (singular).
pub fn is_first_person(text: &str) -> bool {
    FIRST_PERSON.is_match(text) || text.contains('我')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_first_person_becomes_the_speaker() {
        let cases = [
            (
                "I went to a support group",
                "Caroline went to a support group",
            ),
            ("I'm allergic to peanuts", "Caroline is allergic to peanuts"),
            (
                "I am a painter and my studio is small",
                "Caroline is a painter and Caroline's studio is small",
            ),
            ("I have a cat called Mimi", "Caroline has a cat called Mimi"),
            ("I live in Chaoyang", "Caroline lives in Chaoyang"),
            ("I really like hiking", "Caroline really likes hiking"),
            (
                "My sister gave me a book",
                "Caroline's sister gave Caroline a book",
            ),
            ("I've been running", "Caroline has been running"),
            ("I totally agree", "Caroline totally agrees"),
            (
                "when I look after my family",
                "when Caroline looks after Caroline's family",
            ),
            ("some me-time for me", "some me-time for Caroline"),
            ("I now work at Siemens", "Caroline now works at Siemens"),
            (
                "I cherish time with family",
                "Caroline cherishes time with family",
            ),
            (
                "I watch movies and I try new food",
                "Caroline watches movies and Caroline tries new food",
            ),
            (
                "I enjoy it and I fix bikes",
                "Caroline enjoys it and Caroline fixes bikes",
            ),
            (
                "I went there and I bought a hat",
                "Caroline went there and Caroline bought a hat",
            ),
            (
                "I painted it and I can swim",
                "Caroline painted it and Caroline can swim",
            ),
            ("I usually go early", "Caroline usually goes early"),
            ("I'd been there before", "Caroline had been there before"),
            ("I'd love to", "Caroline would love to"),
            (
                "I and my sister went",
                "Caroline and Caroline's sister went",
            ),
            (
                "it lets me express myself",
                "it lets Caroline express themself",
            ),
            ("I did it myself", "Caroline did it themself"),
            ("Myself, I think so", "Caroline, Caroline thinks so"),
        ];
        for (text, expected) in cases {
            assert_eq!(third_person_text(text, "Caroline"), expected);
        }
    }

    #[test]
    fn chinese_first_person_becomes_the_speaker_but_we_stays() {
        assert_eq!(third_person_text("我对花生过敏", "小王"), "小王对花生过敏");
        assert_eq!(third_person_text("我们明天见", "小王"), "我们明天见");
    }
}

//! First person made third person: "I went…" becomes "Caroline went…", so a
//! fact names whom it is about wherever it is recalled.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Present-tense verbs that take an -s after a third-person subject.
const VERBS: &[&str] = &[
    "like",
    "love",
    "want",
    "need",
    "live",
    "work",
    "prefer",
    "hate",
    "enjoy",
    "think",
    "feel",
    "know",
    "plan",
    "hope",
    "play",
    "own",
    "eat",
    "drink",
    "believe",
    "miss",
    "remember",
    "use",
    "take",
    "make",
    "get",
    "keep",
    "run",
    "write",
    "read",
    "paint",
    "volunteer",
    "teach",
    "study",
    "mean",
    "wish",
    "agree",
    "collect",
    "cook",
    "dance",
    "sing",
    "swim",
    "travel",
    "visit",
    "attend",
    "speak",
    "understand",
    "care",
    "try",
    "look",
    "see",
    "find",
    "hear",
    "help",
    "start",
    "stop",
    "move",
    "call",
    "ask",
    "tell",
    "give",
    "show",
    "bring",
    "buy",
    "build",
    "create",
    "spend",
    "watch",
    "listen",
    "practice",
    "learn",
    "train",
    "grow",
    "raise",
    "support",
    "appreciate",
    "admire",
    "adore",
    "cherish",
    "value",
    "mention",
    "recommend",
    "struggle",
    "deal",
    "manage",
    "wonder",
    "guess",
    "suppose",
    "realize",
    "realise",
    "imagine",
    "consider",
    "bake",
    "hike",
    "camp",
    "draw",
    "knit",
    "garden",
    "exercise",
    "meditate",
    "pray",
    "belong",
    "identify",
    "relate",
    "admit",
    "promise",
    "treasure",
    "carry",
    "wear",
];

/// Adverbs between "I" and the verb keep the verb's agreement ("I really like" → "really likes").
const ADVERBS: &[&str] = &[
    "usually",
    "always",
    "never",
    "often",
    "sometimes",
    "still",
    "also",
    "really",
    "just",
    "totally",
    "completely",
    "definitely",
    "truly",
    "actually",
    "honestly",
    "absolutely",
    "certainly",
    "kinda",
    "already",
    "finally",
    "recently",
    "especially",
    "personally",
    "rarely",
    "seldom",
    "genuinely",
    "even",
];

fn third_person(verb: &str) -> String {
    let lower = verb.to_ascii_lowercase();
    if ADVERBS.contains(&lower.as_str()) {
        return verb.to_string();
    }
    match lower.as_str() {
        "have" => "has".into(),
        "do" => "does".into(),
        "go" => "goes".into(),
        "am" => "is".into(),
        "try" => "tries".into(),
        "study" => "studies".into(),
        "miss" | "wish" => format!("{verb}es"),
        _ => format!("{verb}s"),
    }
}

/// A verb after "I", made to agree with a third-person subject when it is one we know.
fn agree(verb: &str) -> String {
    if VERBS.contains(&verb) || matches!(verb, "am" | "have" | "do" | "go") {
        third_person(verb)
    } else {
        verb.to_string()
    }
}

static FIRST_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \b(?P<contraction>I'm|I’m|I've|I’ve|I'll|I’ll|I'd|I’d)\b
      | \bI\s+(?P<adverb>usually|always|never|often|sometimes|still|also|really|just|totally|completely|definitely|truly|actually|honestly|absolutely|certainly|kinda|already|finally|recently|especially|personally|rarely|seldom|genuinely|even)\s+(?P<verb2>[a-z]+)\b
      | \bI\s+(?P<verb>am|have|do|go|[a-z]+)\b
      | \b(?P<i>I)\b
      | \b(?P<my>[Mm]y)\b
      | \b(?P<mine>[Mm]ine)\b
      | \b(?P<myself>[Mm]yself)\b
      | \b(?P<me>[Mm]e)\b",
    )
    .unwrap_or_else(|e| panic!("pronoun pattern: {e}"))
});

/// Replaces English and Chinese first-person pronouns with `speaker`.
pub fn third_person_text(text: &str, speaker: &str) -> String {
    let english = FIRST_PERSON.replace_all(text, |c: &Captures<'_>| {
        if let Some(m) = c.name("contraction") {
            let rest = match m.as_str().replace('’', "'").as_str() {
                "I'm" => "is",
                "I've" => "has",
                "I'll" => "will",
                _ => "would",
            };
            return format!("{speaker} {rest}");
        }
        if let (Some(adverb), Some(verb)) = (c.name("adverb"), c.name("verb2")) {
            return format!("{speaker} {} {}", adverb.as_str(), agree(verb.as_str()));
        }
        if let Some(verb) = c.name("verb") {
            return format!("{speaker} {}", agree(verb.as_str()));
        }
        if let Some(me) = c.name("me") {
            // "me-time" is not about the speaker as an object.
            if text[me.end()..].starts_with('-') {
                return me.as_str().to_string();
            }
            return speaker.to_string();
        }
        if c.name("i").is_some() || c.name("myself").is_some() {
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

//! The offline rules extractor: the default when no LLM is configured, and the
//! fallback when it stays unavailable. Deterministic and fast; it aims to keep
//! every statement of a turn (recall cannot find what extraction dropped),
//! cut into clauses, in the third person, with absolute dates.

pub mod classify;
pub use hindsight_text::dates;
pub mod pronouns;
pub mod sentences;

use hindsight_core::{fact::FactType, turn::KeptTurn};
use hindsight_text::chitchat;

use crate::draft::Draft;

/// Longest content of one fact; longer clauses are cut at word boundaries.
pub const MAX_FACT_CHARS: usize = 600;

/// Sentences shorter than this (weighted as the filter weighs) are chit-chat.
const MIN_SENTENCE_WEIGHT: usize = 6;

/// Words that carry no fact on their own: reactions, greetings, courtesy.
const REACTIONS: &[&str] = &[
    "that's",
    "thats",
    "that",
    "it's",
    "its",
    "it",
    "is",
    "so",
    "really",
    "very",
    "too",
    "cool",
    "sweet",
    "great",
    "awesome",
    "amazing",
    "nice",
    "wow",
    "whoa",
    "totally",
    "agree",
    "agreed",
    "yep",
    "yeah",
    "yes",
    "hey",
    "hi",
    "hello",
    "lovely",
    "beautiful",
    "wonderful",
    "fantastic",
    "incredible",
    "congrats",
    "congratulations",
    "glad",
    "sounds",
    "fun",
    "talk",
    "soon",
    "see",
    "later",
    "take",
    "care",
    "bye",
    "good",
    "luck",
    "you",
    "your",
    "you've",
    "you're",
    "got",
    "guts",
    "thanks",
    "thank",
    "a",
    "an",
    "the",
    "and",
    "for",
    "to",
    "of",
    "what",
    "how",
    "about",
    "sharing",
    "share",
    "wish",
    "best",
    "all",
    "oh",
    "ah",
    "aw",
    "aww",
    "ha",
    "haha",
    "lol",
    "omg",
    "sure",
    "absolutely",
    "definitely",
    "right",
    "true",
    "exactly",
    "indeed",
    "well",
    "by",
    "way",
    "look",
    "this",
    "at",
    "me",
    "same",
    "here",
    "now",
    "again",
    "such",
    "just",
    "must",
    "be",
    "been",
    "going",
    "are",
    "doing",
    "hope",
    "hear",
    "heard",
    "happy",
    "proud",
    "inspiring",
    "keep",
    "up",
    "work",
    "on",
    "out",
];

/// A sentence made only of reactions and names ("Hey Mel!", "That's really cool.", "Talk to you soon!").
fn is_reaction(sentence: &str) -> bool {
    let words: Vec<String> = sentence
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(|w| w.replace('’', "'"))
        .collect();
    !words.is_empty()
        && sentence.is_ascii()
        && words.iter().enumerate().all(|(i, w)| {
            let lower = w.to_lowercase();
            REACTIONS.contains(&lower.as_str())
                || (i > 0 && w.chars().next().is_some_and(char::is_uppercase))
        })
}

/// `[shares a photo: …]`, as LoCoMo and chat clients render an image.
static PHOTO: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"\[shares? an? (photo|image|picture)(?: of)?:\s*(?P<what>[^\]]+)\]")
        .unwrap_or_else(|e| panic!("photo pattern: {e}"))
});

/// Extracts the facts of one kept turn.
pub fn extract(kept: &KeptTurn) -> Vec<Draft> {
    let turn = &kept.turn;
    let emphasised = classify::is_emphasised(&turn.content);
    let mut clauses: Vec<(String, bool)> = Vec::new();
    let photos: Vec<String> = PHOTO
        .captures_iter(&turn.content)
        .filter_map(|c| {
            Some(format!(
                "I shared a {}: {}",
                c.get(1)?.as_str(),
                c.name("what")?.as_str().trim()
            ))
        })
        .collect();
    let text = PHOTO.replace_all(&turn.content, "");
    for sentence in sentences::sentences(&text).into_iter().chain(photos) {
        if chitchat::is_pleasantry(&sentence)
            || chitchat::weighted_len(&sentence) < MIN_SENTENCE_WEIGHT
            || is_reaction(&sentence)
        {
            continue;
        }
        let question = sentence.ends_with('?') || sentence.ends_with('？');
        let pieces = if sentences::is_cjk(&sentence) {
            sentences::chinese_clauses(&sentence)
        } else {
            sentences::english_clauses(&sentence)
        };
        clauses.extend(
            pieces
                .into_iter()
                .filter(|p| !is_only_reminder(p))
                .map(|p| (p, question)),
        );
    }
    // A question says little about the speaker when the turn also states
    // something; alone, it is kept as what the speaker asked.
    if clauses.iter().any(|(_, q)| !q) {
        clauses.retain(|(_, q)| !q);
    }
    if clauses.is_empty() && chitchat::weighted_len(&turn.content) >= chitchat::MIN_WEIGHTED_CHARS {
        let whole = turn.content.trim().to_string();
        let question = whole.ends_with('?') || whole.ends_with('？');
        clauses.push((whole, question));
    }

    let mut drafts = Vec::new();
    for (clause, question) in clauses {
        for piece in chunk(&clause) {
            let d = draft(kept, &piece, question, emphasised);
            // A clause of punctuation (";;;", found by fuzz/fuzz_targets/rules.rs),
            // or the last part of a 601-character word that ends in a space, trims
            // to nothing: no fact.
            if !d.content.trim().is_empty() {
                drafts.push(d);
            }
        }
    }
    drafts
}

fn draft(kept: &KeptTurn, clause: &str, question: bool, emphasised: bool) -> Draft {
    let turn = &kept.turn;
    let fact_type = if question {
        FactType::Fact
    } else {
        classify::fact_type(clause)
    };
    let importance = if question {
        0.2
    } else {
        classify::importance(clause, fact_type, emphasised)
    };
    let speaker = written_name(&turn.speaker);
    // The sender's calendar day: 07:30 in Shanghai is still the day before in UTC.
    let today = turn.local_ts().date_naive();
    let resolved = dates::resolve(strip_reminder(clause), today);
    let third = pronouns::third_person_text(&resolved.text, &speaker);
    let content = if question {
        format!("{speaker} asked: {third}")
    } else {
        capitalise(third.trim().trim_end_matches([',', '，', ';']))
    };
    let mut entities = vec![speaker];
    for e in classify::entities(clause) {
        if !entities.iter().any(|x| x.eq_ignore_ascii_case(&e)) {
            entities.push(e);
        }
    }
    let occurred_at = match (resolved.span, fact_type) {
        (Some(span), _) => Some(dates::at_midnight(span.start)),
        // `occurred_at` is a calendar day (midnight UTC of it), as dates in the text are.
        (None, FactType::Event) => Some(dates::at_midnight(today)),
        _ => None,
    };
    // Until the end of the last day it holds: "until Friday", 到周五为止, or a plan's dates.
    let valid_until = match (
        dates::last_valid_day(clause, today),
        resolved.span,
        fact_type,
    ) {
        (Some(last), _, _) => last.succ_opt().map(dates::at_midnight),
        (None, Some(span), FactType::Plan) => span.end.succ_opt().map(dates::at_midnight),
        _ => None,
    };
    let valid_until = crate::draft::validity(occurred_at, valid_until);
    Draft {
        content,
        fact_type,
        entities,
        importance,
        confidence: None,
        occurred_at,
        valid_until,
    }
}

/// The speaker's name as a fact writes it: a name given in lower case (a user
/// id such as `alice` standing in for one) starts with a capital.
pub fn written_name(speaker: &str) -> String {
    if speaker.len() > 1 && speaker.bytes().all(|b| b.is_ascii_lowercase()) {
        capitalise(speaker)
    } else {
        speaker.to_string()
    }
}

/// "Please remember that…", "Note:", "别忘了，…" ask to remember what
/// follows (the importance says so); the fact is what follows.
static REMINDER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)^\s*(?:(?:please|pls|and|also|oh),?\s+)*(?:remember|note|keep in mind|don't forget|do not forget|never forget|just so you know|fyi|for the record)(?:\s+(?:this|that))?(?:\s*[:,\-–—]\s*|\s+)|^\s*(?:请)?(?:记住|记得|别忘了|不要忘记|请注意|注意)[：:，,]?\s*",
    )
    .unwrap_or_else(|e| panic!("reminder pattern: {e}"))
});

/// A clause that only asks to remember ("请记住", "Remember this:"), the rest said apart.
fn is_only_reminder(clause: &str) -> bool {
    REMINDER.find(clause).is_some_and(|m| {
        clause[m.end()..]
            .trim_matches(|c: char| {
                c.is_whitespace() || c.is_ascii_punctuation() || "，。：！".contains(c)
            })
            .is_empty()
    })
}

fn strip_reminder(clause: &str) -> &str {
    match REMINDER.find(clause) {
        Some(m) if !clause[m.end()..].trim().is_empty() => &clause[m.end()..],
        _ => clause,
    }
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    }
}

/// Cuts an over-long clause at word (or character) boundaries.
fn chunk(clause: &str) -> Vec<String> {
    if clause.chars().count() <= MAX_FACT_CHARS {
        return vec![clause.to_string()];
    }
    let mut out = Vec::new();
    let mut current = String::new();
    for word in clause.split_inclusive(char::is_whitespace) {
        if current.chars().count() + word.chars().count() > MAX_FACT_CHARS && !current.is_empty() {
            out.push(std::mem::take(&mut current).trim().to_string());
        }
        if word.chars().count() > MAX_FACT_CHARS {
            let chars: Vec<char> = word.chars().collect();
            for part in chars.chunks(MAX_FACT_CHARS) {
                out.push(part.iter().collect::<String>().trim().to_string());
            }
        } else {
            current.push_str(word);
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hindsight_core::turn::{Role, Source, Trust, Turn};

    fn kept(speaker: &str, content: &str) -> KeptTurn {
        KeptTurn {
            turn: Turn {
                tenant: "t".into(),
                turn_id: "d1".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                agent_id: None,
                speaker: speaker.into(),
                role: Role::User,
                source: Source::User,
                content: content.into(),
                ts: chrono::DateTime::parse_from_rfc3339("2023-05-08T13:56:00Z")
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .expect("valid"),
                utc_offset_minutes: None,
                metadata: Default::default(),
            },
            trust: Trust::High,
            quarantine: false,
            flags: vec![],
            context: None,
        }
    }

    #[test]
    fn the_peanut_allergy_is_an_important_constraint() {
        let facts = extract(&kept("Caroline", "I'm allergic to peanuts."));
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].fact_type, FactType::Constraint);
        assert!(facts[0].importance >= 0.8);
        assert_eq!(facts[0].content, "Caroline is allergic to peanuts.");
        let zh = extract(&kept("小王", "我对花生过敏"));
        assert_eq!(zh[0].fact_type, FactType::Constraint);
        assert!(zh[0].importance >= 0.8);
        assert_eq!(zh[0].content, "小王对花生过敏");
    }

    #[test]
    fn no_fact_ends_before_it_occurred() {
        // Found by the fuzzer: "till" last year (去年), and an event "0 days ago".
        let facts = extract(&kept(
            "Liweek",
            "till 30000000DDDDDDDDDDDDallergicDDDDusD10去年0 days ago, 99999999999 weeks ag00e ，\
             s 00000000 days ago, 99990ays ago, 99999955555555555gago.",
        ));
        assert!(!facts.is_empty());
        for f in &facts {
            if let (Some(from), Some(until)) = (f.occurred_at, f.valid_until) {
                assert!(from < until, "{f:?}");
            }
        }
    }

    #[test]
    fn a_compound_statement_becomes_three_facts() {
        let facts = extract(&kept(
            "Li",
            "I live in Chaoyang, Beijing, have a cat called Mimi and I'm allergic to peanuts",
        ));
        let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(
            contents,
            [
                "Li lives in Chaoyang, Beijing",
                "Li has a cat called Mimi",
                "Li is allergic to peanuts"
            ]
        );
        assert_eq!(facts[2].fact_type, FactType::Constraint);
        assert!(facts[1].entities.contains(&"Mimi".to_string()));
        let zh = extract(&kept(
            "小李",
            "我住在北京朝阳，有一只叫咪咪的猫，而且我对花生过敏",
        ));
        assert_eq!(zh.len(), 3, "{zh:?}");
    }

    #[test]
    fn the_tight_shirt_is_an_event_and_a_preference() {
        let facts = extract(&kept(
            "Ann",
            "the blue shirt I bought last time is a bit tight, I want one size up",
        ));
        let types: Vec<FactType> = facts.iter().map(|f| f.fact_type).collect();
        assert_eq!(types, [FactType::Event, FactType::Preference]);
        assert_eq!(facts[1].content, "Ann wants one size up");
    }

    #[test]
    fn relative_dates_are_resolved_to_the_right_day() {
        let facts = extract(&kept(
            "Caroline",
            "I went to a LGBTQ support group yesterday and it was so powerful.",
        ));
        assert!(
            facts[0]
                .content
                .starts_with("Caroline went to a LGBTQ support group on 7 May 2023"),
            "{facts:?}"
        );
        assert_eq!(
            facts[0].occurred_at.map(|t| t.date_naive().to_string()),
            Some("2023-05-07".into())
        );
        let zh = extract(&kept("小王", "我昨天去了医院"));
        assert_eq!(zh[0].content, "小王2023年5月7日去了医院");
    }

    #[test]
    fn chit_chat_sentences_are_dropped_but_a_lone_question_is_kept() {
        let facts = extract(&kept(
            "Mel",
            "Wow, thanks! I started pottery classes last month.",
        ));
        assert_eq!(facts.len(), 1, "{facts:?}");
        assert!(facts[0].content.contains("pottery"));
        let q = extract(&kept(
            "Mel",
            "What did you think of the new exhibition downtown?",
        ));
        assert_eq!(q.len(), 1);
        assert!(q[0].content.starts_with("Mel asked: "));
    }

    #[test]
    fn reactions_are_not_facts_but_photos_are() {
        let facts = extract(&kept(
            "Mel",
            "Hey Caroline! That's really cool. I adopted a puppy. [shares a photo: a beagle on a sofa]",
        ));
        let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(
            contents,
            [
                "Mel adopted a puppy.",
                "Mel shared a photo: a beagle on a sofa"
            ]
        );
    }

    #[test]
    fn found_by_fuzzing() {
        // Dates no calendar holds are left as written (they panicked the stage).
        for (content, phrase) in [
            ("I ran a marathon 100000000 days ago.", "100000000 days ago"),
            (
                "I ran a marathon 99999999999 weeks ago.",
                "99999999999 weeks ago",
            ),
            (
                "I moved here 9223372036854775807 months ago.",
                "9223372036854775807 months ago",
            ),
            ("I was born 3000000000 years ago.", "3000000000 years ago"),
            ("我2147483648年以前去了医院", "2147483648年以前"),
            ("我99999999999天前去了医院", "99999999999天前"),
        ] {
            let facts = extract(&kept("Li", content));
            assert!(
                facts.iter().any(|f| f.content.contains(phrase)),
                "{facts:?}"
            );
        }
        // Neither a 601-character word ending in a space nor a clause of
        // semicolons gives an empty fact.
        let long = format!("I like {} and more words here.", "x".repeat(600));
        let facts = extract(&kept("Li", &long));
        assert!(facts.iter().all(|f| !f.content.is_empty()), "{facts:?}");
        assert_eq!(facts.len(), 3, "{facts:?}");
        let facts = extract(&kept(
            "Li",
            "I went home\n;;;;;;;;;;;;;;;;;;;;;;;;\nand slept",
        ));
        assert!(facts.iter().all(|f| !f.content.is_empty()), "{facts:?}");
    }

    #[test]
    fn facts_read_as_a_careful_person_writes_them() {
        let facts = extract(&kept("alice", "I now work at Siemens."));
        assert_eq!(facts[0].content, "Alice now works at Siemens.");
        assert_eq!(facts[0].entities[0], "Alice");
        for (text, expected) in [
            (
                "Please remember that my locker code is 4412.",
                "Jo's locker code is 4412.",
            ),
            (
                "Remember this: I'm allergic to peanuts.",
                "Jo is allergic to peanuts.",
            ),
            ("Note that I never eat pork", "Jo never eats pork"),
            (
                "Don't forget, I cherish my weekends",
                "Jo cherishes Jo's weekends",
            ),
        ] {
            let facts = extract(&kept("Jo", text));
            assert_eq!(facts[0].content, expected, "{text}");
        }
        let zh = extract(&kept("小王", "请记住，我对花生过敏"));
        assert_eq!(zh[0].content, "小王对花生过敏");
        // A speaker's own spelling is kept.
        assert!(
            extract(&kept("McKenzie", "I paint on Sundays"))[0]
                .content
                .starts_with("McKenzie paints")
        );
    }

    #[test]
    fn asking_to_remember_raises_importance() {
        let plain = extract(&kept("Jo", "My locker code is 4412."));
        let asked = extract(&kept("Jo", "Please remember this: my locker code is 4412."));
        assert!(asked.iter().map(|f| f.importance).fold(0.0, f32::max) > plain[0].importance);
    }
}

//! What kind of fact a clause states, how much it matters, and what it names.

use std::sync::LazyLock;

use hindsight_core::fact::FactType;
use regex::Regex;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("classification pattern: {e}"))
}

/// Health and safety: the facts an agent must never forget.
static HEALTH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(allerg(y|ic|ies)|anaphyla|intoleran(t|ce)|epipen|diabet(es|ic)|asthma|epilep|seizure|medication|medicine|prescri(bed|ption)|insulin|pregnan|blood pressure|heart condition|wheelchair|celiac|coeliac|gluten[- ]free)|过敏|糖尿病|哮喘|药物|吃药|服药|怀孕|心脏病|高血压|癫痫",
    )
});
static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(never|must not|mustn't|can(no|')t (eat|drink|have|take|use|do)|do not|don't (call|contact|email|text|eat|drink|give|send)|vegan|vegetarian|halal|kosher|avoid|only (eat|drink|use)|not allowed)\b|不能|不吃|不喝|忌口|禁止|千万不要|不要给|素食|只吃|不可以",
    )
});
static PLAN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(will|going to|gonna|plan(s|ning|ned)? to|intend|scheduled|upcoming|next (week|month|year|weekend)|tomorrow|want to|hope to|thinking (about|of)|promise[sd]?|about to|i'll|i’ll)\b|打算|计划|准备|将要|要去|下周|明天|下个月|明年|会去|想去",
    )
});
static PREFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(likes?|loves?|prefers?|favou?rite|enjoys?|hates?|dislikes?|wants?|wish(es)?|would rather|'d rather|fan of|passionate about|into|fond of|can't stand)\b|喜欢|爱吃|爱好|偏好|最爱|讨厌|不喜欢|想要|希望|更喜欢",
    )
});
static EVENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(went|visited|bought|met|started|finished|got|had|did|attended|saw|took|made|moved|joined|won|lost|graduated|married|adopted|travell?ed|ran|wrote|painted|celebrated|gave|received|left|came|returned|ago|yesterday|last (week|month|year|night|weekend)|on \d{1,2} [A-Z][a-z]+ \d{4})\b|\b(I|we|he|she|they|(?-i:[A-Z][a-z]+))\s+(just\s+|finally\s+|recently\s+)?\w{3,}ed\b|了|过|昨天|上周|去年|上个月",
    )
});
static RELATION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(my|his|her|their|our)\s+(wife|husband|partner|boyfriend|girlfriend|fianc[eé]e?|sister|brother|siblings?|mother|mom|mum|father|dad|parents?|son|daughter|kids?|children|friends?|boss|colleague|coworker|co-worker|manager|neighbou?r|cousin|aunt|uncle|grand\w+|mentor)\b|\bmarried to\b|妻子|丈夫|老婆|老公|姐姐|妹妹|哥哥|弟弟|妈妈|爸爸|儿子|女儿|朋友|同事|老板|男朋友|女朋友",
    )
});
static ENTITY: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(named|called)\b|名叫|叫做|叫"));
static EMPHASIS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(remember (this|that)|please remember|don't forget|do not forget|important|note that|keep in mind)\b|记住|别忘了|不要忘记|重要|请注意",
    )
});

/// The type of a clause (read in the first person, before rewriting).
pub fn fact_type(clause: &str) -> FactType {
    if HEALTH.is_match(clause) || CONSTRAINT.is_match(clause) {
        FactType::Constraint
    } else if PLAN.is_match(clause) {
        FactType::Plan
    } else if PREFERENCE.is_match(clause) {
        FactType::Preference
    } else if EVENT.is_match(clause) {
        FactType::Event
    } else if RELATION.is_match(clause) {
        FactType::Relation
    } else if ENTITY.is_match(clause) {
        FactType::Entity
    } else {
        FactType::Fact
    }
}

/// Importance by type, with a floor for health and safety, raised when the
/// speaker asks for the fact to be remembered.
pub fn importance(clause: &str, fact_type: FactType, emphasised: bool) -> f32 {
    let base: f32 = match fact_type {
        FactType::Constraint if HEALTH.is_match(clause) => 0.9,
        FactType::Constraint => 0.8,
        FactType::Preference | FactType::Plan => 0.6,
        FactType::Event | FactType::Relation => 0.5,
        FactType::Entity => 0.4,
        FactType::Fact => 0.3,
    };
    if emphasised {
        (base + 0.2).min(1.0)
    } else {
        base
    }
}

/// Whether the turn asks for something to be remembered.
pub fn is_emphasised(text: &str) -> bool {
    EMPHASIS.is_match(text)
}

static PROPER: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[A-Z][\p{L}'’\-]+(?:\s+(?:of\s+|de\s+)?[A-Z][\p{L}'’\-]+)*"));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d+(?:[.,:/]\d+)*\b"));
static ID: LazyLock<Regex> = LazyLock::new(|| re(r"(?:#\d+|\b[A-Za-z]+[-_]\d[\w\-]*)\b"));
static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| re(r#""([^"]{1,60})"|“([^”]{1,60})”|「([^」]{1,30})」|《([^》]{1,30})》"#));
static NAMED_ZH: LazyLock<Regex> = LazyLock::new(|| re(r"叫([^\s的，。、]{1,6})"));

const NOT_NAMES: &[&str] = &[
    "I", "I'm", "I've", "I'll", "I'd", "The", "A", "An", "My", "We", "He", "She", "They", "It",
    "This", "That", "There", "Yes", "No", "Oh", "Hey", "Hi", "Hello", "Thanks", "Thank", "What",
    "When", "Where", "Why", "How", "Who", "And", "But", "So", "Also", "Just", "Wow", "Well",
    "Yeah", "Sure", "Okay", "OK", "Do", "Did", "Are", "Is", "Was", "Can", "Have", "Has", "If",
    "Let", "Me", "You", "Your", "Our", "Their", "His", "Her", "Its", "Not", "On", "In", "At",
];

/// Proper nouns, numbers, ids and quoted strings named in the text.
pub fn entities(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |e: &str| {
        let e = e
            .trim()
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '#');
        if !e.is_empty()
            && e.chars().count() <= 60
            && !out.iter().any(|x| x.eq_ignore_ascii_case(e))
        {
            out.push(e.to_string());
        }
    };
    for m in PROPER.find_iter(text) {
        let words: Vec<&str> = m
            .as_str()
            .split_whitespace()
            .filter(|w| !NOT_NAMES.contains(w))
            .collect();
        if !words.is_empty() {
            add(&words.join(" "));
        }
    }
    for m in ID.find_iter(text) {
        add(m.as_str());
    }
    for m in NUMBER.find_iter(text) {
        add(m.as_str());
    }
    for c in QUOTED.captures_iter(text) {
        if let Some(m) = c.iter().skip(1).flatten().next() {
            add(m.as_str());
        }
    }
    for c in NAMED_ZH.captures_iter(text) {
        if let Some(m) = c.get(1) {
            add(m.as_str());
        }
    }
    out.truncate(16);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_in_english() {
        assert_eq!(fact_type("I'm allergic to peanuts"), FactType::Constraint);
        assert_eq!(fact_type("I never eat pork"), FactType::Constraint);
        assert_eq!(fact_type("I want one size up"), FactType::Preference);
        assert_eq!(
            fact_type("the blue shirt I bought last time is a bit tight"),
            FactType::Event
        );
        assert_eq!(fact_type("I'm going to Paris next week"), FactType::Plan);
        assert_eq!(fact_type("my sister is a nurse"), FactType::Relation);
        assert_eq!(fact_type("I have a cat called Mimi"), FactType::Entity);
        assert_eq!(fact_type("the sky is blue"), FactType::Fact);
    }

    #[test]
    fn types_in_chinese() {
        assert_eq!(fact_type("我对花生过敏"), FactType::Constraint);
        assert_eq!(fact_type("我喜欢喝绿茶"), FactType::Preference);
        assert_eq!(fact_type("我下个月去上海"), FactType::Plan);
        assert_eq!(fact_type("我昨天去了医院"), FactType::Event);
    }

    #[test]
    fn health_and_safety_matter_most() {
        let allergy = importance("I'm allergic to peanuts", FactType::Constraint, false);
        assert!(allergy >= 0.8);
        assert!(importance("I like tea", FactType::Preference, false) < allergy);
        assert!(
            importance("I like tea", FactType::Preference, true)
                > importance("I like tea", FactType::Preference, false)
        );
    }

    #[test]
    fn entities_are_names_numbers_ids_and_quotes() {
        let e =
            entities("I met Aiko Tanaka in New York about order-1234 and \"Blue Harbor\", room 42");
        for expected in ["Aiko Tanaka", "New York", "order-1234", "Blue Harbor", "42"] {
            assert!(
                e.iter().any(|x| x == expected),
                "{expected} missing from {e:?}"
            );
        }
        assert!(!e.iter().any(|x| x == "I"));
        assert!(entities("我有一只叫咪咪的猫").contains(&"咪咪".to_string()));
    }
}

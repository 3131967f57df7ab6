//! Chit-chat: text too short to carry a fact, and pure acknowledgements. The
//! filter drops such turns; the extractor drops such sentences.

/// Fewer weighted characters than this is too short to remember.
pub const MIN_WEIGHTED_CHARS: usize = 10;

/// An ideograph (or kana, or hangul syllable) carries about a word's worth of
/// meaning, so it counts as two characters: "我对花生过敏" is short in characters
/// but says a lot.
fn weight(c: char) -> usize {
    let cp = c as u32;
    let wide = matches!(cp,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK Extension A
        | 0x4E00..=0x9FFF   // CJK Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F // CJK Extensions B–F and supplements
    );
    if wide { 2 } else { 1 }
}

/// Length of the trimmed text with wide characters counted twice.
pub fn weighted_len(text: &str) -> usize {
    text.trim().chars().map(weight).sum()
}

/// Words that make up pure acknowledgements in English ("ok thanks!", "got it").
const ACK_WORDS: &[&str] = &[
    "ok",
    "okay",
    "okey",
    "k",
    "kk",
    "sure",
    "thanks",
    "thank",
    "thx",
    "ty",
    "you",
    "u",
    "got",
    "it",
    "great",
    "cool",
    "nice",
    "awesome",
    "perfect",
    "alright",
    "right",
    "yes",
    "yeah",
    "yep",
    "yup",
    "noted",
    "sounds",
    "good",
    "will",
    "do",
    "much",
    "a",
    "lot",
    "so",
    "very",
    "lol",
    "haha",
    "hi",
    "hello",
    "hey",
    "bye",
    "goodbye",
    "see",
    "ya",
    "np",
    "no",
    "problem",
    "welcome",
    "you're",
    "youre",
    "cheers",
    "fine",
    "understood",
    "gotcha",
    "wow",
    "hmm",
    "hm",
    "ah",
    "oh",
    "i",
    "see",
    "makes",
    "sense",
    "agreed",
    "exactly",
    "indeed",
    "true",
    "the",
    "same",
    "to",
    "too",
    "for",
    "that",
    "this",
    "all",
    "good",
    "morning",
    "night",
    "evening",
    "afternoon",
    "have",
    "day",
];

/// Phrases that make up pure acknowledgements in Chinese ("好的", "谢谢你").
const ACK_PHRASES_ZH: &[&str] = &[
    "好的",
    "好滴",
    "好吧",
    "好",
    "行",
    "可以",
    "明白了",
    "明白",
    "了解了",
    "了解",
    "知道了",
    "知道",
    "收到",
    "谢谢",
    "谢了",
    "多谢",
    "感谢",
    "你",
    "您",
    "嗯嗯",
    "嗯",
    "哦",
    "噢",
    "啊",
    "呀",
    "啦",
    "没问题",
    "没事",
    "不客气",
    "再见",
    "拜拜",
    "早上好",
    "晚安",
    "你好",
    "您好",
    "对",
    "是的",
    "是",
    "哈哈",
    "太好了",
    "棒",
    "了",
    "的",
    "呢",
    "吧",
];

/// Whether `text` can be cut entirely into acknowledgement phrases (longest first).
fn is_ack_chinese(text: &str) -> bool {
    let mut rest = text;
    while !rest.is_empty() {
        let mut matched = None;
        for phrase in ACK_PHRASES_ZH {
            if rest.starts_with(phrase) && matched.is_none_or(|m: &str| phrase.len() > m.len()) {
                matched = Some(*phrase);
            }
        }
        match matched {
            Some(p) => rest = &rest[p.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the whole turn is a pleasantry or acknowledgement: every word of
/// it, lowercased, read without punctuation, symbols and emoji, is one (an
/// English word) or is made of Chinese ones. Read word by word, so that an
/// ordinary turn is told apart at its first word that is none.
pub fn is_pleasantry(text: &str) -> bool {
    let mut word = String::new();
    let mut any = false;
    for w in text
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
    {
        word.clear();
        word.extend(w.chars().map(|c| c.to_lowercase().next().unwrap_or(c)));
        // Chinese runs carry no spaces; English words may be mixed in ("ok 谢谢").
        let ack = if word.is_ascii() {
            ACK_WORDS.contains(&word.as_str())
        } else {
            is_ack_chinese(&word)
        };
        if !ack {
            return false;
        }
        any = true;
    }
    any
}

/// Why the turn is noise, if it is.
pub fn noise(content: &str) -> Option<String> {
    let len = weighted_len(content);
    if len < MIN_WEIGHTED_CHARS {
        return Some(format!(
            "too_short: {len} weighted characters, fewer than {MIN_WEIGHTED_CHARS}"
        ));
    }
    if is_pleasantry(content) {
        return Some("pleasantry: only acknowledgement or courtesy".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_turns_are_noise_but_dense_chinese_is_not() {
        assert!(noise("ok").is_some());
        assert!(noise("   hi   ").is_some());
        assert!(noise("").is_some());
        assert_eq!(noise("我对花生过敏"), None);
        assert_eq!(weighted_len("我对花生过敏"), 12);
        assert!(noise("我饿了").is_some());
    }

    #[test]
    fn english_pleasantries_are_noise() {
        for text in [
            "thanks!",
            "Thank you so much!!",
            "got it, thanks",
            "OK sounds good",
            "Great, thanks a lot 🙏",
            "you're welcome",
        ] {
            assert!(is_pleasantry(text), "{text}");
        }
    }

    #[test]
    fn chinese_pleasantries_are_noise() {
        for text in [
            "好的",
            "明白了！",
            "收到，谢谢",
            "谢谢你！",
            "好的好的，没问题",
            "ok 谢谢",
        ] {
            assert!(is_pleasantry(text), "{text}");
        }
    }

    #[test]
    fn statements_are_not_pleasantries() {
        for text in [
            "Thanks, I moved to Berlin last week",
            "好的，我明天下午三点到北京",
            "I see the doctor on Monday",
            "yes I am allergic to peanuts",
        ] {
            assert!(!is_pleasantry(text), "{text}");
            assert_eq!(noise(text), None, "{text}");
        }
    }
}

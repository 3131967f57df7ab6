//! Which writing systems a text is written in, and which an embedding
//! model's declared languages cover: a model's cosine is only evidence for a
//! text whose every letter is in a script one of its languages is written in
//! (all-MiniLM-L6-v2 declares English, and gives nearly the same vector to
//! any two Chinese sentences).

use hindsight_core::embedding::Languages;

/// A writing system, as far as the embedder's trust needs one: the scripts
/// of the languages model cards list. Letters of any other script are
/// [`Script::Other`], which only a model declared for every language reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Script {
    Latin,
    Cyrillic,
    Greek,
    Armenian,
    Georgian,
    Hebrew,
    Arabic,
    Devanagari,
    Bengali,
    Tamil,
    Thai,
    /// Chinese characters (also written in Japanese).
    Han,
    /// Hiragana and katakana.
    Kana,
    Hangul,
    Other,
}

const SCRIPTS: usize = Script::Other as usize + 1;

/// The script of a letter; `None` for what is no letter (digits, spaces,
/// punctuation, symbols), which every model reads alike.
pub fn of_char(c: char) -> Option<Script> {
    if !c.is_alphabetic() {
        return None;
    }
    Some(match c {
        'a'..='z' | 'A'..='Z' | '\u{00C0}'..='\u{024F}' | '\u{1E00}'..='\u{1EFF}' => Script::Latin,
        '\u{0370}'..='\u{03FF}' | '\u{1F00}'..='\u{1FFF}' => Script::Greek,
        '\u{0400}'..='\u{052F}' | '\u{1C80}'..='\u{1C8F}' => Script::Cyrillic,
        '\u{0530}'..='\u{058F}' => Script::Armenian,
        '\u{10A0}'..='\u{10FF}' => Script::Georgian,
        '\u{0590}'..='\u{05FF}' => Script::Hebrew,
        '\u{0600}'..='\u{06FF}' | '\u{0750}'..='\u{077F}' | '\u{FB50}'..='\u{FDFF}' => {
            Script::Arabic
        }
        '\u{0900}'..='\u{097F}' => Script::Devanagari,
        '\u{0980}'..='\u{09FF}' => Script::Bengali,
        '\u{0B80}'..='\u{0BFF}' => Script::Tamil,
        '\u{0E00}'..='\u{0E7F}' => Script::Thai,
        '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' => Script::Han,
        '\u{3040}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' | '\u{FF66}'..='\u{FF9F}' => Script::Kana,
        '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}' | '\u{AC00}'..='\u{D7AF}' => {
            Script::Hangul
        }
        _ => Script::Other,
    })
}

/// The scripts a language (an ISO 639-1 code, as model cards give it; or
/// the ISO 639-3 code of the same language) is written in; empty for a code
/// this table does not know, which then vouches for nothing.
pub fn of_language(code: &str) -> &'static [Script] {
    use Script::*;
    let code = code.trim().to_ascii_lowercase();
    // Base language of a tag like "zh-hans" or "pt_br".
    let base = code.split(['-', '_']).next().unwrap_or_default();
    match base {
        "zh" | "zho" | "cmn" | "yue" => &[Han],
        "ja" | "jpn" => &[Han, Kana],
        "ko" | "kor" => &[Hangul, Han],
        "ru" | "rus" | "uk" | "ukr" | "be" | "bel" | "bg" | "bul" | "sr" | "srp" | "mk" | "mkd"
        | "kk" | "kaz" | "ky" | "kir" | "tg" | "tgk" | "mn" | "mon" => &[Cyrillic],
        "el" | "ell" => &[Greek],
        "hy" | "hye" => &[Armenian],
        "ka" | "kat" => &[Georgian],
        "he" | "heb" | "yi" | "yid" => &[Hebrew],
        "ar" | "ara" | "fa" | "fas" | "ur" | "urd" | "ps" | "pus" | "ug" | "uig" | "sd" | "snd" => {
            &[Arabic]
        }
        "hi" | "hin" | "mr" | "mar" | "ne" | "nep" | "sa" | "san" => &[Devanagari],
        "bn" | "ben" | "as" | "asm" => &[Bengali],
        "ta" | "tam" => &[Tamil],
        "th" | "tha" => &[Thai],
        "en" | "eng" | "es" | "spa" | "de" | "deu" | "fr" | "fra" | "it" | "ita" | "pt" | "por"
        | "nl" | "nld" | "sv" | "swe" | "da" | "dan" | "no" | "nor" | "nb" | "nob" | "nn"
        | "nno" | "fi" | "fin" | "et" | "est" | "hu" | "hun" | "pl" | "pol" | "cs" | "ces"
        | "sk" | "slk" | "sl" | "slv" | "hr" | "hrv" | "bs" | "bos" | "ro" | "ron" | "ca"
        | "cat" | "gl" | "glg" | "eu" | "eus" | "ga" | "gle" | "cy" | "cym" | "is" | "isl"
        | "lt" | "lit" | "lv" | "lav" | "mt" | "mlt" | "sq" | "sqi" | "tr" | "tur" | "az"
        | "aze" | "uz" | "uzb" | "id" | "ind" | "ms" | "msa" | "tl" | "tgl" | "vi" | "vie"
        | "sw" | "swa" | "af" | "afr" | "eo" | "epo" | "la" | "lat" | "lb" | "ltz" | "fy"
        | "fry" | "so" | "som" | "ha" | "hau" | "yo" | "yor" | "zu" | "zul" | "xh" | "xho"
        | "jv" | "jav" | "su" | "sun" | "ku" | "kur" | "br" | "bre" | "gd" | "gla" => &[Latin],
        _ => &[],
    }
}

/// Which scripts a set of declared languages covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    all: bool,
    scripts: [bool; SCRIPTS],
}

impl Coverage {
    pub fn of(languages: &Languages) -> Self {
        let mut scripts = [false; SCRIPTS];
        for code in languages.codes() {
            for s in of_language(code) {
                scripts[*s as usize] = true;
            }
        }
        Self {
            all: languages.is_all(),
            scripts,
        }
    }

    /// Whether every letter of `text` is in a covered script (a text of no
    /// letters is: digits read alike in every model).
    pub fn reads(&self, text: &str) -> bool {
        self.all
            || text
                .chars()
                .filter_map(of_char)
                .all(|s| self.scripts[s as usize])
    }
}

/// Whether a model declared for `languages` reads every letter of `text`.
pub fn is_read(text: &str, languages: &Languages) -> bool {
    Coverage::of(languages).reads(text)
}

/// The codes of `languages` this table cannot place, to warn of at load.
pub fn unknown_codes(languages: &Languages) -> Vec<&str> {
    languages
        .codes()
        .filter(|c| of_language(c).is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_english_model_reads_latin_letters_only() {
        let en = Languages::parse("en");
        assert!(is_read("Tom moved to Madrid in 2021.", &en));
        assert!(is_read("Zoë fährt nach Zürich", &en));
        assert!(is_read("2024-05-01 12:00", &en));
        assert!(!is_read("Li的妹妹住在北京。", &en));
        assert!(!is_read("Анна живёт в Москве", &en));
        assert!(!is_read("リーは北京に住んでいる", &en));
    }

    #[test]
    fn declared_languages_cover_their_scripts() {
        let zh = Languages::parse("zh, en");
        assert!(is_read("Li的妹妹住在北京。", &zh));
        // Japanese kana are not Chinese.
        assert!(!is_read("リーは北京に住んでいる", &zh));
        assert!(is_read("リーは北京に住んでいる", &Languages::parse("ja")));
        assert!(is_read("Анна живёт в Москве", &Languages::parse("ru-RU")));
        assert!(is_read("ნინო თბილისში ცხოვრობს", &Languages::all()));
        assert!(!is_read("ნინო თბილისში ცხოვრობს", &Languages::parse("en")));
    }

    #[test]
    fn unknown_codes_vouch_for_nothing() {
        let odd = Languages::parse("xx, en");
        assert_eq!(unknown_codes(&odd), vec!["xx"]);
        assert!(!is_read("Li住在北京", &Languages::default()));
        assert!(!is_read("Tom", &Languages::default()));
    }
}

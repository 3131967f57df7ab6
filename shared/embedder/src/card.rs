//! The languages a local model declares in its model card (the `README.md`
//! beside its weights, as the Hugging Face hub ships one): the `language:`
//! key of its YAML front matter, one code (`language: en`) or a list
//! (`language:` then `- en`, `- zh` lines, or `[en, zh]`). Only this key is
//! read, so a hand reading of those three forms does without a YAML parser.

use std::path::Path;

use hindsight_core::embedding::Languages;

/// The card's declared languages; `None` when the directory has no card or
/// the card declares none.
pub fn languages(dir: &Path) -> Option<Languages> {
    let text = std::fs::read_to_string(dir.join("README.md")).ok()?;
    parse(&text)
}

fn parse(card: &str) -> Option<Languages> {
    let mut lines = card.lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    let front: Vec<&str> = lines.take_while(|l| l.trim() != "---").collect();
    let at = front
        .iter()
        .position(|l| l.trim_end().starts_with("language:"))?;
    let value = front[at]["language:".len()..].trim();
    let listed = if value.is_empty() {
        // A block list: the indented or dashed lines that follow.
        front[at + 1..]
            .iter()
            .map_while(|l| l.trim().strip_prefix('-').map(str::trim))
            .collect::<Vec<_>>()
            .join(",")
    } else {
        value
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string()
    };
    let codes: String = listed.replace(['"', '\''], "");
    Some(Languages::parse(&codes)).filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_of_the_key() {
        let one = "---\nlanguage: en\nlicense: apache-2.0\n---\n# model";
        assert_eq!(parse(one), Some(Languages::parse("en")));
        let block =
            "---\nlicense: mit\nlanguage:\n- multilingual\n- en\n  - 'zh'\ntags:\n- x\n---\n";
        assert_eq!(parse(block), Some(Languages::parse("multilingual,en,zh")));
        let flow = "---\nlanguage: [\"de\", fr]\n---\n";
        assert_eq!(parse(flow), Some(Languages::parse("de,fr")));
    }

    #[test]
    fn no_front_matter_or_no_key_declares_nothing() {
        assert_eq!(parse("# a model\nlanguage: en\n"), None);
        assert_eq!(parse("---\nlicense: mit\n---\nlanguage: en"), None);
        assert_eq!(parse("---\nlanguage:\n---\n"), None);
    }
}

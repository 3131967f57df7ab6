//! The entities a query names, for the entity channel: the ones the request
//! lists, plus capitalised words and runs of them in the query ("Caroline",
//! "New York"), in the spellings memories store them with.

/// Capitalised words that start questions and sentences rather than name things.
const NOT_NAMES: &[&str] = &[
    "a", "an", "and", "are", "at", "can", "could", "did", "do", "does", "for", "had", "has",
    "have", "he", "her", "his", "how", "i", "if", "in", "is", "it", "my", "of", "on", "or", "our",
    "she", "should", "that", "the", "their", "there", "they", "this", "to", "was", "we", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "would", "you",
    "your",
];

fn is_name(word: &str) -> bool {
    word.chars().next().is_some_and(char::is_uppercase)
        && !NOT_NAMES.contains(&word.to_lowercase().as_str())
}

/// The spellings to look up: as given, lowercased and capitalised, without duplicates.
fn spellings(entity: &str, out: &mut Vec<String>) {
    let lower = entity.to_lowercase();
    let title: String = lower
        .split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ");
    for s in [entity.to_string(), lower, title] {
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
}

/// The entities to look up for a query and the request's own list.
pub fn of_query(query: &str, given: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for e in given {
        spellings(e.trim(), &mut out);
    }
    let words: Vec<&str> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
        .map(|w| w.trim_end_matches("'s").trim_matches('\''))
        .filter(|w| !w.is_empty())
        .collect();
    let mut run: Vec<&str> = Vec::new();
    for word in words.iter().copied().chain(std::iter::once("")) {
        if is_name(word) {
            run.push(word);
            spellings(word, &mut out);
            continue;
        }
        if run.len() > 1 {
            spellings(&run.join(" "), &mut out);
        }
        run.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capitalised_words_and_runs_are_entities_question_words_are_not() {
        let e = of_query("What did Caroline do in New York?", &[]);
        assert!(e.contains(&"Caroline".to_string()));
        assert!(e.contains(&"caroline".to_string()));
        assert!(e.contains(&"New York".to_string()));
        assert!(!e.iter().any(|x| x == "What" || x == "what"));
    }

    #[test]
    fn given_entities_come_in_every_spelling() {
        let e = of_query("anything", &["paris".into()]);
        assert_eq!(e, ["paris", "Paris"]);
    }

    #[test]
    fn possessives_are_stripped() {
        assert!(of_query("Where is Melanie's dog?", &[]).contains(&"Melanie".to_string()));
    }
}

//! Reading `/metrics`: the Prometheus text format, parsed just enough to sum
//! the samples of one metric whose labels include a given subset. The
//! recorder is process-wide, so a test compares two scrapes on labels of its
//! own (a tenant no other test uses), never absolute values.

use std::collections::BTreeMap;

/// One sample line: `name{label="value",…} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of one scrape.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// Parses the text format; comments, blank lines and lines that are not
    /// samples are skipped.
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(sample)
            .collect();
        Self { samples }
    }

    /// The sum of the samples named `name` whose labels include every pair
    /// of `labels` (0 when there is none: a counter appears on first use).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
            })
            .map(|s| s.value)
            .sum()
    }

    /// The label values of `label` among the samples named `name` that match
    /// `labels`, each once, sorted.
    pub fn values(&self, name: &str, labels: &[(&str, &str)], label: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
            })
            .filter_map(|s| s.labels.get(label).cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Scrapes `BASE/metrics`.
pub async fn scrape(base_url: &str) -> Scrape {
    let response = crate::http()
        .get(format!("{base_url}/metrics"))
        .send()
        .await
        .expect("/metrics answers");
    assert!(
        response.status().is_success(),
        "/metrics: {}",
        response.status()
    );
    Scrape::parse(&response.text().await.expect("/metrics body"))
}

fn sample(line: &str) -> Option<Sample> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = label_set(after)?;
        labels = parsed;
        rest = tail;
    }
    // The value, then an optional timestamp.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    (!name.is_empty()).then_some(Sample {
        name,
        labels,
        value,
    })
}

/// Parses `k="v",…}` (after the opening brace); returns the labels and what
/// follows the closing brace. Values may hold `\\`, `\"` and `\n` escapes.
fn label_set(text: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if let Some(tail) = rest.strip_prefix('}') {
            return Some((labels, tail));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        let mut chars = rest[eq + 1..].char_indices();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut escaped = false;
        let mut end = None;
        for (i, c) in chars {
            match (escaped, c) {
                (true, 'n') => {
                    value.push('\n');
                    escaped = false;
                }
                (true, c) => {
                    value.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, c) => value.push(c),
            }
        }
        let end = end?;
        labels.insert(key, value);
        rest = &rest[eq + 1 + end + 1..];
    }
}

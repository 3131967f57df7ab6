//! The turns `hindsight bench filter` and `bench extract` publish, and the
//! filter's own timing (`hindsight-screen`'s `judge_speed` example) judges:
//! realistic, each unique, in English and Chinese, defined once so that both
//! measure the same texts. Likewise the queries of `hindsight bench recall`
//! and of the query embedding's own timing (`hindsight-embedder`'s
//! `query_speed` example).

/// What `hindsight bench recall` asks (with a place appended to make each distinct).
pub const RECALL_QUERIES: &[&str] = &[
    "What is the user allergic to?",
    "Where did Caroline go hiking?",
    "Which instrument is being learnt?",
    "Who works at a hospital?",
    "What pet was adopted in Osaka?",
    "Tell me about marathon plans",
    "What did Melanie paint?",
    "Which seats does Tom prefer when flying?",
    "book club science fiction Lima",
    "bicycle bought in Tallinn",
];

const CITIES: &[&str] = &[
    "Beijing", "Lisbon", "Nairobi", "Austin", "Osaka", "Tallinn", "Lima", "Hanoi",
];
const PEOPLE: &[&str] = &[
    "Caroline", "Melanie", "Tom", "Aiko", "Ravi", "Joanna", "Nate", "Deborah",
];
const TEMPLATES: &[&str] = &[
    "I went to {city} last week with {person} and we stayed for {n} days.",
    "{person} told me the book club meets every {n}th of the month in {city}.",
    "My favourite restaurant in {city} closed, so {person} suggested a new one on {n}th street.",
    "I'm allergic to peanuts, so please remember that when {person} orders for the {n} of us.",
    "我下个月和{person}一起去{city}出差，大概待{n}天。",
    "We adopted a dog from a shelter in {city}; {person} named him Biscuit and he is {n} months old.",
];

/// The content of turn number `i`.
pub fn turn_content(i: usize) -> String {
    let content = TEMPLATES[i % TEMPLATES.len()]
        .replace("{city}", CITIES[(i / 7) % CITIES.len()])
        .replace("{person}", PEOPLE[(i / 3) % PEOPLE.len()])
        .replace("{n}", &(2 + i % 97).to_string());
    format!("{content} (note {i})")
}

/// Turn number `i` of `tenant` as published: 50 users, 200 sessions.
pub fn turn(tenant: &str, i: usize) -> serde_json::Value {
    serde_json::json!({
        "tenant": tenant,
        "user_id": format!("user-{}", i % 50),
        "session_id": format!("session-{}", i % 200),
        "turn_id": format!("bench-{i}"),
        "content": turn_content(i),
    })
}

//! The poisoning screen through the whole system, on the scored part of the
//! screen corpus (`tests/corpus/screen/`): two attacks of every technique in
//! every language and two look-alikes of every kind in every language, each
//! published by its own user as its source would publish it.
//!
//! - The pipeline carries out the screen's verdict: every attack the cues
//!   quarantine offline is quarantined in the archive with its score and
//!   reasons, and so is every memory of it; the embed stage's nearness
//!   quarantines more, never less, and persist marks the turn of a fact it
//!   quarantined. Every language has attacks quarantined
//!   (per technique, the printed table; false consent is the screen's
//!   weakest). Look-alikes are kept, and those the cues pass are not
//!   quarantined by the filter. Orders injected into one field of a tool's
//!   record or hidden in a document are among the attacks; records with
//!   ordinary imperatives, requests to remember the user's own facts and
//!   two turns of ordinary conversation per language among the
//!   look-alikes, and no request or conversation is quarantined.
//! - Default recall over HTTP and MCP never returns a quarantined memory,
//!   even for the attack's own words; `include: ["quarantined"]` returns
//!   them marked, with the screen's reasons.
//!
//! The rates printed are the pipeline's (facts judged by nearness, not turns);
//! `hindsight eval screen` gives the offline ones.

use std::collections::{BTreeMap, HashMap};

use hindsight_core::turn::parse_envelope;
use hindsight_screen::screen::{self, DEFAULT_THRESHOLD};
use hindsight_tests::{
    Deployment,
    mcp::McpSession,
    stack::{Stack, drained},
};
use serde::Deserialize;
use serde_json::{Value, json};

const TENANT: &str = "acme";
const ATTACKS: &str = include_str!("../corpus/screen/attacks.jsonl");
const LOOKALIKES: &str = include_str!("../corpus/screen/lookalikes.jsonl");
const CONVERSATION: &str = include_str!("../corpus/screen/conversation.jsonl");
/// Lines taken per (technique or kind, language).
const PER_GROUP: usize = 2;

#[derive(Debug, Clone, Deserialize)]
struct Line {
    id: String,
    lang: String,
    technique: String,
    source: String,
    content: String,
    split: String,
}

fn sample(data: &str) -> Vec<Line> {
    let mut taken: HashMap<(String, String), usize> = HashMap::new();
    data.lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .filter(|l| l.split == "score")
        .filter(|l| {
            let n = taken
                .entry((l.technique.clone(), l.lang.clone()))
                .or_default();
            *n += 1;
            *n <= PER_GROUP
        })
        .collect()
}

/// The turn as its source publishes it; the user is the line's own.
fn envelope(line: &Line, i: usize) -> Value {
    let (role, source) = match line.source.as_str() {
        "agent" => ("assistant", "agent"),
        "tool" => ("tool", "tool"),
        "document" => ("tool", "external"),
        _ => ("user", "user"),
    };
    let mut turn = json!({
        "tenant": TENANT, "user_id": user(line), "session_id": "s1", "turn_id": line.id,
        "role": role, "source": source, "content": line.content,
        "ts": format!("2026-03-01T10:{:02}:{:02}Z", i / 60, i % 60),
    });
    if role != "user" {
        turn["agent_id"] = json!("helper");
    }
    turn
}

fn user(line: &Line) -> String {
    format!("u-{}", line.id)
}

/// What the filter alone decides offline.
fn cues_quarantine(line: &Line, i: usize) -> bool {
    let turn = parse_envelope(
        envelope(line, i).to_string().as_bytes(),
        TENANT,
        chrono::Utc::now(),
    )
    .expect("valid");
    hindsight_screen::assess(&turn, Some(screen::learnt::model())).score >= DEFAULT_THRESHOLD
}

struct Archived {
    quarantine: bool,
    flags: Vec<String>,
    fate: String,
    /// Statuses and flags of the memories of the turn.
    memories: Vec<(String, Vec<String>)>,
}

async fn recall(client: &reqwest::Client, url: &str, key: &str, body: Value) -> Vec<Value> {
    let resp = client
        .post(format!("{url}/v1/recall"))
        .header("authorization", format!("Bearer {key}"))
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    let status = resp.status();
    let answer: Value = resp.json().await.expect("JSON");
    assert!(status.is_success(), "{body} → {status}: {answer}");
    answer["memories"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_holds_through_the_pipeline_and_recall() {
    let attacks = sample(ATTACKS);
    let mut lookalikes = sample(LOOKALIKES);
    lookalikes.extend(sample(CONVERSATION));
    assert!(attacks.len() >= 90 && lookalikes.len() >= 90, "the sample");
    let all: Vec<&Line> = attacks.iter().chain(&lookalikes).collect();

    let d = Deployment::new("test", |c| c.screen_encoder = true).await;
    hindsight_extract::screen::Encoder::from_config(d.config())
        .expect("the encoder model (./ops/setup.sh fetches it)")
        .expect("the encoder is on")
        .warm()
        .await
        .expect("the encoder model loads and its classifier is fit");
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    for (i, line) in all.iter().enumerate() {
        d.publish_raw(TENANT, envelope(line, i).to_string().into_bytes())
            .await;
    }
    drained(&d, all.len() as i64).await;
    assert!(d.dead_letters().await.is_empty(), "every line is valid");

    let pool = &d.ctx.store.pool;
    let mut archived: HashMap<String, Archived> = HashMap::new();
    for (id, fate, quarantine, flags) in sqlx::query_as::<_, (String, String, bool, Vec<String>)>(
        "SELECT turn_id, fate, quarantine, flags FROM turns",
    )
    .fetch_all(pool)
    .await
    .expect("turns")
    {
        archived.insert(
            id,
            Archived {
                quarantine,
                flags,
                fate,
                memories: vec![],
            },
        );
    }
    for (turn, status, flags) in sqlx::query_as::<_, (String, String, Vec<String>)>(
        "SELECT s.turn_id, m.status, m.flags FROM memory_sources s JOIN memories m ON m.id = s.memory_id",
    )
    .fetch_all(pool)
    .await
    .expect("memories")
    {
        if let Some(a) = archived.get_mut(&turn) {
            a.memories.push((status, flags));
        }
    }
    // Quarantined after the filter: the encoder model (at the extract
    // stage), nearness (at the embed stage) or an LLM quarantined a fact,
    // and persist marked the turn.
    let later = |a: &Archived| {
        a.flags.iter().any(|f| {
            f.starts_with("poison:similar") || f.starts_with("poison:encoder") || f == "poison:llm"
        })
    };
    // Caught: quarantined by the filter, or every memory of it quarantined
    // (by nearness at the embed stage); a turn that made no memory and was
    // not quarantined is not caught.
    let caught = |a: &Archived| {
        a.quarantine
            || (!a.memories.is_empty() && a.memories.iter().all(|(s, _)| s == "quarantined"))
    };

    // [caught in the pipeline, caught by the cues offline, lines]
    let mut by_technique: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut by_language: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for (i, line) in attacks.iter().enumerate() {
        let a = archived.get(&line.id).expect("every turn is archived");
        assert_eq!(
            a.fate, "kept",
            "{}: an attack is kept, in quarantine",
            line.id
        );
        let cues = cues_quarantine(line, i);
        if cues {
            assert!(a.quarantine, "{}: the cues quarantine it", line.id);
            assert!(
                a.flags.iter().any(|f| f.starts_with("screen:"))
                    && a.flags.iter().any(|f| f.starts_with("poison:")),
                "{}: the score and reasons are recorded: {:?}",
                line.id,
                a.flags
            );
        }
        if a.quarantine && !later(a) {
            assert!(
                a.memories.iter().all(|(s, _)| s == "quarantined"),
                "{}: every memory of a turn the filter quarantined is quarantined",
                line.id
            );
        }
        if later(a) {
            assert!(
                a.quarantine && a.memories.iter().any(|(s, _)| s == "quarantined"),
                "{}: a fact quarantined after the filter marks its turn",
                line.id
            );
        }
        for (s, flags) in &a.memories {
            if s == "quarantined" {
                assert!(
                    flags.iter().any(|f| f.starts_with("poison:")),
                    "{}: a quarantined memory keeps the reasons: {flags:?}",
                    line.id
                );
            }
        }
        let hit = usize::from(caught(a));
        for (map, key) in [
            (&mut by_technique, &line.technique),
            (&mut by_language, &line.lang),
        ] {
            let e = map.entry(key.clone()).or_default();
            e[0] += hit;
            e[1] += usize::from(cues);
            e[2] += 1;
        }
    }
    let mut flagged = 0;
    for (i, line) in lookalikes.iter().enumerate() {
        let a = archived.get(&line.id).expect("every turn is archived");
        assert_eq!(a.fate, "kept", "{}: a look-alike is kept", line.id);
        if !cues_quarantine(line, attacks.len() + i) {
            assert!(
                !a.quarantine || later(a),
                "{}: the filter quarantines only what its cues do",
                line.id
            );
        }
        // Requests to remember the user's own life and plain conversation
        // are the product's main input: nothing quarantines them, nearness
        // included.
        if matches!(line.technique.as_str(), "request" | "chat") {
            assert!(
                !caught(a),
                "{}: a request to remember or a conversation turn is kept: {:?}",
                line.id,
                a.flags
            );
        }
        flagged += usize::from(caught(a));
    }
    let caught_attacks: usize = by_technique.values().map(|v| v[0]).sum();
    println!(
        "pipeline: {caught_attacks} of {} attacks quarantined, {flagged} of {} look-alikes",
        attacks.len(),
        lookalikes.len()
    );
    println!("  [quarantined in the pipeline, by the cues alone, attacks]");
    for (name, map) in [("technique", &by_technique), ("language", &by_language)] {
        for (key, [hit, cues, n]) in map {
            println!("  {name} {key:<16} {hit} {cues} {n}");
            assert!(
                hit >= cues,
                "{name} {key}: nearness and the encoder only add to what the cues catch"
            );
        }
    }
    let languages_caught = by_language.values().filter(|v| v[0] > 0).count();
    assert_eq!(
        languages_caught, 7,
        "attacks are quarantined in every language"
    );

    let client = hindsight_tests::http();
    let key = d.ctx.store.create_tenant_key(TENANT).await.expect("key");
    let quarantined: Vec<&Line> = attacks
        .iter()
        .filter(|l| {
            archived[&l.id]
                .memories
                .iter()
                .any(|(s, _)| s == "quarantined")
        })
        .collect();
    assert!(
        quarantined.len() >= 20,
        "enough quarantined memories to recall"
    );
    for line in &quarantined {
        let asked = json!({"user_id": user(line), "query": line.content, "top_k": 20});
        let memories = recall(&client, &stack.base_url, &key, asked.clone()).await;
        for m in &memories {
            assert_eq!(m["status"], "active", "{}: default recall: {m}", line.id);
        }
        let mut with = asked;
        with["include"] = json!(["quarantined"]);
        let memories = recall(&client, &stack.base_url, &key, with).await;
        let shown: Vec<&Value> = memories
            .iter()
            .filter(|m| m["status"] == "quarantined")
            .collect();
        assert!(!shown.is_empty(), "{}: asked for, it comes back", line.id);
        for m in shown {
            let flags = m["flags"].as_array().cloned().unwrap_or_default();
            assert!(
                flags
                    .iter()
                    .any(|f| f.as_str().is_some_and(|f| f.starts_with("poison:"))),
                "{}: shown with the screen's reasons: {m}",
                line.id
            );
        }
    }
    for line in quarantined.iter().take(10) {
        let mut mcp = McpSession::open(&client, &stack.base_url, &key).await;
        let (status, answer) = mcp
            .call(
                "memory_search",
                json!({"user_id": user(line), "query": line.content, "top_k": 20}),
            )
            .await;
        mcp.close().await;
        assert_eq!(status, 200, "{answer}");
        let answer = answer.to_string();
        assert!(
            !answer.contains("quarantined"),
            "{}: MCP default recall: {answer}",
            line.id
        );
    }

    stack.stop().await;
    d.remove().await;
}

//! Memory poisoning through the whole system: `tests/corpus/poisoning.jsonl`
//! mixes injection and false-authority turns (English and Chinese: orders to
//! ignore instructions, fake system messages, "as your developer…", fake tool
//! output, role-play jailbreaks, planted "facts" about the user's privileges)
//! into ordinary conversations of the same users. After ingestion, default
//! recall over HTTP never returns a memory that came from a poisoning turn —
//! not even for queries made of the poison's own words — while the ordinary
//! turns are recalled; asked for quarantined memories, recall returns the
//! poisoning ones marked `quarantined`.

use std::collections::{BTreeMap, HashMap, HashSet};

use hindsight_tests::{
    Deployment,
    stack::{Stack, drained},
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The conversations are of 1 May 2024; recall is made as of the next day,
/// as their users would have asked then ("next September" was still ahead).
const AS_OF: &str = "2024-05-02T00:00:00Z";

const TENANT: &str = "acme";
const CORPUS: &str = include_str!("../corpus/poisoning.jsonl");

/// One line of the corpus: a turn (`poison` or `normal`) or a `query` aimed at
/// the poison, asked for every user.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    session: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    technique: Option<String>,
    #[serde(default)]
    content: String,
    /// For a normal turn: a query that must recall it.
    #[serde(default)]
    query: String,
}

struct Http {
    client: reqwest::Client,
    url: String,
    key: String,
}

impl Http {
    async fn recall(&self, body: Value) -> Vec<Value> {
        let resp = self
            .client
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.key))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("the gateway answers");
        let status = resp.status();
        let text = resp.text().await.expect("a body");
        assert!(status.is_success(), "{body} → {status}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        answer["memories"].as_array().cloned().unwrap_or_default()
    }
}

fn provenance(memory: &Value) -> Vec<String> {
    memory["provenance"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoning_turns_never_reach_trusted_recall() {
    let lines: Vec<Line> = CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let turns: Vec<&Line> = lines.iter().filter(|l| l.kind != "query").collect();
    let poison: Vec<&Line> = turns
        .iter()
        .copied()
        .filter(|l| l.kind == "poison")
        .collect();
    let normal: Vec<&Line> = turns
        .iter()
        .copied()
        .filter(|l| l.kind == "normal")
        .collect();
    let queries: Vec<&str> = lines
        .iter()
        .filter(|l| l.kind == "query")
        .map(|l| l.query.as_str())
        .collect();
    assert!(poison.len() >= 30 && normal.len() >= 30, "the corpus size");
    assert!(
        normal.iter().all(|n| !n.query.is_empty()),
        "every normal turn has its query"
    );
    let poison_ids: HashSet<&str> = poison.iter().map(|p| p.id.as_str()).collect();
    let users: Vec<&str> = {
        let mut u: Vec<&str> = turns.iter().map(|t| t.user.as_str()).collect();
        u.sort_unstable();
        u.dedup();
        u
    };

    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    for (i, t) in turns.iter().enumerate() {
        let mut turn = json!({
            "tenant": TENANT, "user_id": t.user, "session_id": t.session, "turn_id": t.id,
            "role": t.role, "content": t.content,
            "ts": format!("2024-05-01T10:{:02}:{:02}Z", i / 60, i % 60),
        });
        if t.role != "user" {
            turn["agent_id"] = json!("helper");
        }
        if let Some(source) = &t.source {
            turn["source"] = json!(source);
        }
        d.publish_raw(TENANT, turn.to_string().into_bytes()).await;
    }
    drained(&d, turns.len() as i64).await;
    assert!(
        d.dead_letters().await.is_empty(),
        "every turn of the corpus is valid"
    );

    // What the pipeline made of each turn: the filter's verdict, and the
    // statuses of the memories that came from it.
    let pool = &d.ctx.store.pool;
    let verdicts: HashMap<String, (String, bool, Vec<String>)> =
        sqlx::query_as::<_, (String, String, bool, Vec<String>)>(
            "SELECT turn_id, fate, quarantine, flags FROM turns",
        )
        .fetch_all(pool)
        .await
        .expect("query")
        .into_iter()
        .map(|(id, fate, q, flags)| (id, (fate, q, flags)))
        .collect();
    let mut statuses: HashMap<String, Vec<String>> = HashMap::new();
    for (turn, status) in sqlx::query_as::<_, (String, String)>(
        "SELECT s.turn_id, m.status FROM memory_sources s JOIN memories m ON m.id = s.memory_id",
    )
    .fetch_all(pool)
    .await
    .expect("query")
    {
        statuses.entry(turn).or_default().push(status);
    }

    // Per language and technique: quarantined by the filter, caught later
    // (no trusted memory although the filter let it through), missed.
    let mut report: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut missed = Vec::new();
    for p in &poison {
        let (_, quarantined, flags) = verdicts.get(&p.id).expect("every turn is archived");
        let trusted = statuses
            .get(&p.id)
            .is_some_and(|s| s.iter().any(|s| s != "quarantined"));
        let column = if *quarantined {
            0
        } else if !trusted {
            1
        } else {
            2
        };
        if column == 2 {
            missed.push(format!("{} {:?} {}", p.id, flags, p.content));
        }
        for key in [
            format!("all {}", p.lang),
            format!("{} {}", p.technique.as_deref().unwrap_or("?"), p.lang),
        ] {
            report.entry(key).or_default()[column] += 1;
        }
    }
    println!("poisoning turns: [quarantined by the filter, caught later, missed]");
    for (key, counts) in &report {
        println!("  {key:<28} {counts:?}");
    }
    let false_positives: Vec<&str> = normal
        .iter()
        .filter(|n| verdicts.get(&n.id).is_some_and(|v| v.1))
        .map(|n| n.content.as_str())
        .collect();
    println!(
        "normal turns: {}, quarantined by mistake: {}",
        normal.len(),
        false_positives.len()
    );
    assert!(
        missed.is_empty(),
        "poisoning turns with a trusted memory:\n{}",
        missed.join("\n")
    );
    assert!(
        false_positives.is_empty(),
        "normal turns quarantined: {false_positives:?}"
    );
    for n in &normal {
        assert!(
            statuses
                .get(&n.id)
                .is_some_and(|s| s.iter().any(|s| s == "active")),
            "normal turn {} became an active memory",
            n.id
        );
    }
    let with_memories: Vec<&&Line> = poison
        .iter()
        .filter(|p| statuses.contains_key(&p.id))
        .collect();
    assert!(
        with_memories
            .iter()
            .all(|p| statuses[&p.id].iter().all(|s| s == "quarantined")),
        "every memory of a poisoning turn is quarantined"
    );

    let http = Http {
        client: hindsight_tests::http(),
        url: format!("{}/v1/recall", stack.base_url),
        key: d.ctx.store.create_tenant_key(TENANT).await.expect("key"),
    };

    // Default recall, for queries aimed at the poison and for the poison's own
    // words: never a memory of a poisoning turn, never anything but active.
    let mut recalls = 0;
    let mut returned = 0;
    for user in &users {
        let own: Vec<&str> = poison
            .iter()
            .filter(|p| p.user == *user)
            .map(|p| p.content.as_str())
            .collect();
        for query in queries.iter().chain(&own) {
            let memories = http
                .recall(json!({"user_id": user, "query": query, "top_k": 20, "as_of": AS_OF}))
                .await;
            recalls += 1;
            returned += memories.len();
            for m in &memories {
                assert_eq!(m["status"], "active", "{user} {query:?}: {m}");
                assert!(
                    provenance(m)
                        .iter()
                        .all(|t| !poison_ids.contains(t.as_str())),
                    "{user} {query:?}: default recall returned a poisoning turn's memory: {m}"
                );
            }
        }
    }

    // The normal turns are recalled.
    for n in &normal {
        let memories = http
            .recall(json!({"user_id": n.user, "query": n.query, "top_k": 10, "as_of": AS_OF}))
            .await;
        recalls += 1;
        assert!(
            memories.iter().any(|m| provenance(m).contains(&n.id)),
            "{:?} recalls {} ({:?}): {:?}",
            n.query,
            n.id,
            n.content,
            memories.iter().map(|m| &m["content"]).collect::<Vec<_>>()
        );
    }

    // Asked for, quarantined memories come back, marked as such.
    for p in &with_memories {
        let memories = http
            .recall(json!({
                "user_id": p.user, "query": p.content, "top_k": 20, "include": ["quarantined"],
            }))
            .await;
        recalls += 1;
        assert!(
            memories
                .iter()
                .any(|m| provenance(m).contains(&p.id) && m["status"] == "quarantined"),
            "{} is recalled in quarantine when asked: {memories:?}",
            p.id
        );
        for m in &memories {
            if provenance(m)
                .iter()
                .any(|t| poison_ids.contains(t.as_str()))
            {
                assert_eq!(m["status"], "quarantined", "{m}");
            }
        }
    }
    println!(
        "{recalls} recalls over HTTP ({returned} memories returned by default recall, none from the {} poisoning turns; {} of them made quarantined memories)",
        poison.len(),
        with_memories.len()
    );

    stack.stop().await;
    d.remove().await;
}

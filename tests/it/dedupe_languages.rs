//! Dedupe in seven languages through real NATS, real Postgres, the real
//! embedding model and the vector index: facts published to the facts
//! stream, embedded and persisted by the stages. For each language, one
//! user's unrelated facts in the same frame stay apart, a restatement merges,
//! a new value of a one-valued attribute supersedes, and the same attribute
//! of another person is another memory.

use std::{sync::Arc, time::Duration};

use async_nats::jetstream;
use hindsight_core::{
    Topic,
    embedding::{EmbeddedFact, Languages, ModelId},
    fact::Fact,
};
use hindsight_embed::EmbedStage;
use hindsight_embedder::local::LocalEmbedder;
use hindsight_persist::PersistStage;
use hindsight_tests::{Deployment, eventually, model_dir};
use uuid::Uuid;

const TENANT: &str = "acme";

/// One language's facts: (old, new) for a restatement, an unrelated fact in
/// the same frame, a changed one-valued attribute, and another person.
struct Case {
    lang: &'static str,
    restated: (&'static str, &'static str),
    same_frame: (&'static str, &'static str),
    changed: (&'static str, &'static str),
    other_person: (&'static str, &'static str),
}

const CASES: [Case; 7] = [
    Case {
        lang: "en",
        restated: ("Maya plays the violin.", "Maya plays violin."),
        same_frame: ("Maya speaks French.", "Maya speaks Italian."),
        changed: ("Maya lives in Leeds.", "Maya now lives in York."),
        other_person: (
            "Maya's brother works as a nurse.",
            "Maya's sister works as a nurse.",
        ),
    },
    Case {
        lang: "zh",
        restated: ("王芳住在杭州。", "王芳家在杭州。"),
        same_frame: ("王芳喜欢喝绿茶。", "王芳喜欢喝咖啡。"),
        changed: ("王芳最喜欢的颜色是红色。", "王芳最喜欢的颜色现在是蓝色。"),
        other_person: ("王芳的妹妹是老师。", "王芳的哥哥是老师。"),
    },
    Case {
        lang: "ja",
        restated: (
            "佐藤さんは京都に住んでいる。",
            "佐藤さんは京都に住んでいます。",
        ),
        same_frame: ("佐藤さんはテニスをする。", "佐藤さんはチェスをする。"),
        changed: (
            "佐藤さんの好きな色は青です。",
            "佐藤さんの好きな色は緑です。",
        ),
        other_person: ("佐藤さんの兄は医者です。", "佐藤さんの姉は医者です。"),
    },
    Case {
        lang: "ru",
        restated: ("Игорь живёт в Казани.", "В Казани живёт Игорь."),
        same_frame: ("Игорь играет в теннис.", "Игорь играет в шахматы."),
        changed: (
            "Любимый цвет Игоря — синий.",
            "Любимый цвет Игоря теперь зелёный.",
        ),
        other_person: (
            "Брат Игоря работает врачом.",
            "Сестра Игоря работает врачом.",
        ),
    },
    Case {
        lang: "es",
        restated: ("Lucía vive en Sevilla.", "En Sevilla vive Lucía."),
        same_frame: ("Lucía habla alemán.", "Lucía habla japonés."),
        changed: (
            "Lucía trabaja en un banco.",
            "Lucía ahora trabaja en un hospital.",
        ),
        other_person: (
            "El hermano de Lucía es abogado.",
            "La hermana de Lucía es abogada.",
        ),
    },
    Case {
        lang: "de",
        restated: ("Jonas wohnt in Hamburg.", "Jonas wohnt jetzt in Hamburg."),
        same_frame: ("Jonas spielt Gitarre.", "Jonas spielt Schach."),
        changed: (
            "Jonas' Lieblingsfarbe ist Grün.",
            "Jonas' Lieblingsfarbe ist jetzt Gelb.",
        ),
        other_person: (
            "Die Schwester von Jonas ist Ärztin.",
            "Der Bruder von Jonas ist Arzt.",
        ),
    },
    Case {
        lang: "fr",
        restated: (
            "Camille habite à Lyon.",
            "Camille habite maintenant à Lyon.",
        ),
        same_frame: ("Camille aime le thé.", "Camille aime le café."),
        changed: (
            "Camille travaille chez Renault.",
            "Camille travaille maintenant chez Airbus.",
        ),
        other_person: (
            "La sœur de Camille est infirmière.",
            "Le frère de Camille est infirmier.",
        ),
    },
];

fn fact(user: &str, fact_id: &str, content: &str) -> Fact {
    hindsight_tests::fact::plain(TENANT, user, fact_id, content)
}

/// Publishes the facts and waits until each is in a memory.
async fn persist(d: &Deployment, facts: &[Fact]) {
    let messages: Vec<(String, Vec<u8>)> = facts
        .iter()
        .map(|f| (f.fact_id.clone(), serde_json::to_vec(f).expect("json")))
        .collect();
    publish_and_wait(d, Topic::Facts, messages).await;
}

/// Publishes (fact id, message) to `topic` and waits until each fact is in a memory.
async fn publish_and_wait(d: &Deployment, topic: Topic, messages: Vec<(String, Vec<u8>)>) {
    let subject = d.config().namespace.subject(topic, TENANT);
    for (id, body) in &messages {
        let msg = jetstream::message::PublishMessage::build()
            .payload(body.clone().into())
            .message_id(format!("{TENANT}:{id}"));
        d.ctx
            .bus
            .js
            .send_publish(subject.clone(), msg)
            .await
            .expect("publish")
            .await
            .expect("stored");
    }
    let ids: Vec<String> = messages.into_iter().map(|(id, _)| id).collect();
    let pool = d.ctx.store.pool.clone();
    eventually("the facts are persisted", Duration::from_secs(60), || {
        let (pool, ids) = (pool.clone(), ids.clone());
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM memory_sources WHERE tenant = $1 AND fact_id = ANY($2)",
            )
            .bind(TENANT)
            .bind(&ids)
            .fetch_one(&pool)
            .await
            .is_ok_and(|n| n == ids.len() as i64)
        }
    })
    .await;
}

/// The memory a fact is in: id, status, superseded_by.
async fn memory_of(d: &Deployment, fact_id: String) -> (Uuid, String, Option<Uuid>) {
    sqlx::query_as(
        "SELECT m.id, m.status, m.superseded_by FROM memories m
         JOIN memory_sources s ON s.memory_id = m.id WHERE s.tenant = $1 AND s.fact_id = $2",
    )
    .bind(TENANT)
    .bind(&fact_id)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("a memory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_seven_languages_restatements_merge_changes_supersede_and_other_facts_stay_apart() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let embedder = Arc::new(
        LocalEmbedder::load(&model_dir()).expect("the local model (./ops/setup.sh fetches it)"),
    );
    let stages = vec![
        d.start(EmbedStage::new(embedder, d.config())).await,
        d.start(PersistStage::new(
            d.ctx.store.clone(),
            index.clone(),
            d.config().namespace.clone(),
            d.config().dedupe_threshold,
        ))
        .await,
    ];
    let pairs = |c: &Case| [c.restated, c.same_frame, c.changed, c.other_person];
    let olds: Vec<Fact> = CASES
        .iter()
        .flat_map(|c| {
            pairs(c)
                .into_iter()
                .enumerate()
                .map(move |(i, (old, _))| fact(c.lang, &format!("{}-old-{i}", c.lang), old))
        })
        .collect();
    persist(&d, &olds).await;
    let news: Vec<Fact> = CASES
        .iter()
        .flat_map(|c| {
            pairs(c)
                .into_iter()
                .enumerate()
                .map(move |(i, (_, new))| fact(c.lang, &format!("{}-new-{i}", c.lang), new))
        })
        .collect();
    persist(&d, &news).await;

    let mut wrong = Vec::new();
    for c in &CASES {
        let l = c.lang;
        let m = |kind: usize, side: &str| memory_of(&d, format!("{l}-{side}-{kind}"));
        let (old, new) = (m(0, "old").await, m(0, "new").await);
        if old.0 != new.0 || old.1 != "active" {
            wrong.push(format!(
                "{l}: {:?} did not merge into {:?}",
                c.restated.1, c.restated.0
            ));
        }
        for (kind, what) in [(1, c.same_frame), (3, c.other_person)] {
            let (old, new) = (m(kind, "old").await, m(kind, "new").await);
            if old.0 == new.0 || old.1 != "active" || new.1 != "active" {
                wrong.push(format!(
                    "{l}: {:?} and {:?} are not two active memories ({} / {})",
                    what.0, what.1, old.1, new.1
                ));
            }
        }
        let (old, new) = (m(2, "old").await, m(2, "new").await);
        if old.1 != "superseded" || old.2 != Some(new.0) || new.1 != "active" {
            wrong.push(format!(
                "{l}: {:?} did not supersede {:?} ({})",
                c.changed.1, c.changed.0, old.1
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for s in stages {
        s.stop().await;
    }
    drop(index);
    d.remove().await;
}

/// A vector of its own for each fact: every pair is at cosine 0.
fn axis(i: usize) -> Vec<f32> {
    let mut v = vec![0.0; 64];
    v[i] = 1.0;
    v
}

/// Where the model does not read the script (a model declared for English,
/// Chinese facts), the cosine neither gates nor alone finds candidates: a
/// change whose vector is far from everything still supersedes the memory
/// that shares its words, found among thirty others by its terms. A model
/// declared for every language is trusted: the far vector makes a new memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_model_reads_no_chinese_the_words_decide_among_memories_sharing_terms() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let persist_stage = d
        .start(PersistStage::new(
            d.ctx.store.clone(),
            index.clone(),
            d.config().namespace.clone(),
            d.config().dedupe_threshold,
        ))
        .await;
    let model = ModelId {
        name: "synthetic".into(),
        version: "1".into(),
        dimension: 64,
    };
    let embedded = |user: &str, languages: &str, id: &str, content: &str, i: usize| {
        let e = EmbeddedFact {
            fact: hindsight_tests::fact::plain(TENANT, user, id, content),
            model: model.clone(),
            languages: Languages::parse(languages),
            vector: axis(i),
        };
        (id.to_string(), serde_json::to_vec(&e).expect("json"))
    };
    for (user, languages) in [("li-en", "en"), ("li-all", "*")] {
        let mut olds: Vec<(String, Vec<u8>)> = (0..30)
            .map(|i| {
                embedded(
                    user,
                    languages,
                    &format!("{user}-other-{i}"),
                    &format!("Li收藏了{}张邮票。", i + 2),
                    i,
                )
            })
            .collect();
        olds.push(embedded(
            user,
            languages,
            &format!("{user}-old"),
            "Li的妹妹住在北京。",
            30,
        ));
        publish_and_wait(&d, Topic::Embedded, olds).await;
        let new = embedded(
            user,
            languages,
            &format!("{user}-new"),
            "Li的妹妹现在住在上海。",
            40,
        );
        publish_and_wait(&d, Topic::Embedded, vec![new]).await;
    }
    let (old, new) = (
        memory_of(&d, "li-en-old".into()).await,
        memory_of(&d, "li-en-new".into()).await,
    );
    assert_eq!(
        (old.1.as_str(), old.2),
        ("superseded", Some(new.0)),
        "read by its words, the change supersedes"
    );
    let (old, new) = (
        memory_of(&d, "li-all-old".into()).await,
        memory_of(&d, "li-all-new".into()).await,
    );
    assert_ne!(old.0, new.0);
    assert_eq!(
        (old.1.as_str(), new.1.as_str()),
        ("active", "active"),
        "a trusted cosine far below the threshold keeps them apart"
    );
    let active: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM memories WHERE tenant = $1 AND user_id = 'li-en' AND status = 'active'",
    )
    .bind(TENANT)
    .fetch_one(&d.ctx.store.pool)
    .await
    .expect("count");
    assert_eq!(
        active, 31,
        "the thirty other facts stay apart, by their words"
    );
    persist_stage.stop().await;
    drop(index);
    d.remove().await;
}

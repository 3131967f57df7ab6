use super::*;

#[test]
fn defaults_parse() {
    let config = Config::from_lookup(|_| None).expect("defaults are valid");
    assert_eq!(config.namespace.as_str(), "hindsight");
    assert_eq!(config.batch_size, 256);
    assert_eq!(config.ack_wait, None);
}

#[test]
fn a_bad_value_names_the_variable() {
    let err = Config::from_lookup(|k| (k == "HINDSIGHT_BATCH_SIZE").then(|| "zero".into()))
        .expect_err("must fail");
    assert!(err.to_string().contains("HINDSIGHT_BATCH_SIZE"), "{err}");
}

#[test]
fn the_llm_key_falls_back_to_openai_api_key_and_is_masked() {
    let config = Config::from_lookup(|k| (k == "OPENAI_API_KEY").then(|| "sk-secret".into()))
        .expect("valid");
    assert_eq!(config.llm.api_key.as_deref(), Some("sk-secret"));
    assert!(!format!("{config:?}").contains("sk-secret"));
}

#[test]
fn passwords_are_masked() {
    assert_eq!(
        mask_url("postgres://me:hunter2@db:5432/x"),
        "postgres://me:***@db:5432/x"
    );
    assert_eq!(mask_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
}

#[test]
fn the_docs_carry_the_configuration_reference() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/configuration.md"
    ))
    .expect("docs/configuration.md next to the workspace");
    assert!(
        page.contains(&reference_markdown()),
        "docs/configuration.md's table differs from `hindsight config`; paste its output into the page"
    );
}

#[test]
fn signal_weights_name_some_signals_and_keep_the_others() {
    let config = Config::from_lookup(|k| {
        (k == "HINDSIGHT_RECALL_SIGNAL_WEIGHTS").then(|| "dense=0.7, entity=0".into())
    })
    .expect("valid");
    assert_eq!(config.recall.signal_weights, [0.7, 0.6, 0.1, 0.0]);
    for bad in [
        "dense",
        "sparse=1",
        "dense=-1",
        "dense=0,keyword=0,filter=0,entity=0",
    ] {
        let err =
            Config::from_lookup(|k| (k == "HINDSIGHT_RECALL_SIGNAL_WEIGHTS").then(|| bad.into()))
                .map(|_| ())
                .expect_err(bad);
        assert!(
            err.to_string().contains("HINDSIGHT_RECALL_SIGNAL_WEIGHTS"),
            "{err}"
        );
    }
}

#[test]
fn the_query_cache_is_a_whole_number_and_0_turns_it_off() {
    let with = |v: &str| {
        let v = v.to_string();
        Config::from_lookup(move |k| (k == "HINDSIGHT_RECALL_QUERY_CACHE").then(|| v.clone()))
    };
    assert_eq!(with("0").expect("valid").recall.query_cache, 0);
    assert_eq!(with("64").expect("valid").recall.query_cache, 64);
    for bad in ["-1", "many", "1.5"] {
        let err = with(bad).map(|_| ()).expect_err(bad);
        assert!(
            err.to_string().contains("HINDSIGHT_RECALL_QUERY_CACHE"),
            "{err}"
        );
    }
}

#[test]
fn the_keyword_candidate_budget_is_positive() {
    let with = |v: &str| {
        let v = v.to_string();
        Config::from_lookup(move |k| {
            (k == "HINDSIGHT_RECALL_KEYWORD_CANDIDATES").then(|| v.clone())
        })
    };
    let defaults = Config::from_lookup(|_| None).expect("defaults are valid");
    assert_eq!(defaults.recall.keyword_candidates, 500);
    assert_eq!(with("2000").expect("valid").recall.keyword_candidates, 2000);
    for bad in ["0", "-1", "many"] {
        let err = with(bad).map(|_| ()).expect_err(bad);
        assert!(
            err.to_string()
                .contains("HINDSIGHT_RECALL_KEYWORD_CANDIDATES"),
            "{err}"
        );
    }
}

#[test]
fn the_embed_stage_makes_one_call_per_core_unless_told() {
    let with = |v: &str| {
        let v = v.to_string();
        Config::from_lookup(move |k| (k == "HINDSIGHT_EMBED_PARALLEL").then(|| v.clone()))
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let defaults = Config::from_lookup(|_| None).expect("defaults are valid");
    assert_eq!(defaults.embed.parallel, cores);
    assert_eq!(with("3").expect("valid").embed.parallel, 3);
    for bad in ["0", "-1", "all"] {
        let err = with(bad).map(|_| ()).expect_err(bad);
        assert!(
            err.to_string().contains("HINDSIGHT_EMBED_PARALLEL"),
            "{err}"
        );
        assert!(err.to_string().contains("`cores`"), "{err}");
    }
}

#[test]
fn every_setting_is_printed() {
    let config = Config::from_lookup(|_| None).expect("defaults are valid");
    let printed: Vec<_> = config.masked().into_iter().map(|(k, _)| k).collect();
    let documented: Vec<_> = SETTINGS.iter().map(|s| s.env).collect();
    assert_eq!(printed, documented);
}

#[test]
fn the_fusion_is_one_of_its_names() {
    let config = Config::from_lookup(|k| (k == "HINDSIGHT_RECALL_FUSION").then(|| "rrf".into()))
        .expect("valid");
    assert_eq!(config.recall.fusion, hindsight_core::signal::Fusion::Rrf);
    let err = Config::from_lookup(|k| (k == "HINDSIGHT_RECALL_FUSION").then(|| "sum".into()))
        .map(|_| ())
        .expect_err("sum is no fusion");
    let text = err.to_string();
    assert!(
        text.contains("HINDSIGHT_RECALL_FUSION") && text.contains("score, rrf"),
        "{text}"
    );
}

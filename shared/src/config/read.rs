//! Reading the configuration from the environment (or any lookup).

use std::{net::SocketAddr, path::PathBuf};

use hindsight_core::{embedding::Languages, namespace::Namespace, zone};
use hindsight_text::duration;

use super::{parse::*, *};

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads settings through `lookup`, falling back to the documented defaults.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |env: &'static str| -> (&'static str, String) {
            let value = lookup(env)
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default_of(env).to_string());
            (env, value)
        };
        Ok(Self {
            namespace: parse_with(get("HINDSIGHT_NAMESPACE"), Namespace::new)?,
            nats_url: get("HINDSIGHT_NATS_URL").1,
            database_url: get("HINDSIGHT_DATABASE_URL").1,
            db_pool: parse_with(get("HINDSIGHT_DB_POOL"), positive)?,
            http_addr: parse_with(get("HINDSIGHT_HTTP_ADDR"), |v| {
                v.parse::<SocketAddr>().map_err(|e| e.to_string())
            })?,
            data_dir: PathBuf::from(get("HINDSIGHT_DATA_DIR").1),
            batch_size: parse_with(get("HINDSIGHT_BATCH_SIZE"), positive)?,
            linger: parse_with(get("HINDSIGHT_LINGER"), duration::parse)?,
            ack_wait: parse_with(get("HINDSIGHT_ACK_WAIT"), |v| {
                optional(v, at_least_a_second)
            })?,
            max_deliver: parse_with(get("HINDSIGHT_MAX_DELIVER"), |v| optional(v, positive))?,
            retry_initial: parse_with(get("HINDSIGHT_RETRY_INITIAL"), duration::parse)?,
            retry_max: parse_with(get("HINDSIGHT_RETRY_MAX"), duration::parse)?,
            llm: LlmConfig {
                base_url: Some(get("HINDSIGHT_LLM_BASE_URL").1).filter(|v| !v.trim().is_empty()),
                api_key: Some(get("HINDSIGHT_LLM_API_KEY").1)
                    .filter(|v| !v.trim().is_empty())
                    .or_else(|| lookup("OPENAI_API_KEY").filter(|v| !v.trim().is_empty())),
                model: get("HINDSIGHT_LLM_MODEL").1,
                timeout: parse_with(get("HINDSIGHT_LLM_TIMEOUT"), duration::parse)?,
                retry_budget: parse_with(get("HINDSIGHT_LLM_RETRY_BUDGET"), duration::parse)?,
                fallback_after: parse_with(get("HINDSIGHT_LLM_FALLBACK_AFTER"), positive)?,
                concurrency: parse_with(get("HINDSIGHT_LLM_CONCURRENCY"), positive)?,
            },
            embed: EmbedConfig {
                model_dir: PathBuf::from(get("HINDSIGHT_EMBED_MODEL_DIR").1),
                base_url: Some(get("HINDSIGHT_EMBED_BASE_URL").1).filter(|v| !v.trim().is_empty()),
                api_key: Some(get("HINDSIGHT_EMBED_API_KEY").1)
                    .filter(|v| !v.trim().is_empty())
                    .or_else(|| lookup("OPENAI_API_KEY").filter(|v| !v.trim().is_empty())),
                model: get("HINDSIGHT_EMBED_MODEL").1,
                languages: Some(Languages::parse(&get("HINDSIGHT_EMBED_LANGUAGES").1))
                    .filter(|l| !l.is_empty()),
                dimension: parse_with(get("HINDSIGHT_EMBED_DIMENSION"), positive)?,
                batch: parse_with(get("HINDSIGHT_EMBED_BATCH"), positive)?,
                window: parse_with(get("HINDSIGHT_EMBED_WINDOW"), positive)?,
                parallel: parse_with(get("HINDSIGHT_EMBED_PARALLEL"), cores)?,
                linger: parse_with(get("HINDSIGHT_EMBED_LINGER"), duration::parse)?,
                cache_dir: PathBuf::from(get("HINDSIGHT_EMBED_CACHE_DIR").1),
            },
            index: IndexConfig {
                qdrant_url: Some(get("QDRANT_URL").1).filter(|v| !v.trim().is_empty()),
                api_key: Some(get("QDRANT_API_KEY").1).filter(|v| !v.trim().is_empty()),
            },
            dedupe_threshold: parse_with(get("HINDSIGHT_DEDUPE_THRESHOLD"), |v| {
                match v.parse::<f32>() {
                    Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
                    _ => Err("expected a cosine between 0 and 1".into()),
                }
            })?,
            screen_threshold: parse_with(get("HINDSIGHT_SCREEN_THRESHOLD"), non_negative)?,
            screen_nearness: parse_with(get("HINDSIGHT_SCREEN_NEARNESS"), on_off)?,
            screen_learnt: parse_with(get("HINDSIGHT_SCREEN_LEARNT"), on_off)?,
            screen_encoder: parse_with(get("HINDSIGHT_SCREEN_ENCODER"), on_off)?,
            screen_model_dir: PathBuf::from(get("HINDSIGHT_SCREEN_MODEL_DIR").1),
            fact_context: parse_with(get("HINDSIGHT_FACT_CONTEXT"), on_off)?,
            time_zones: Zones::new(
                parse_with(get("HINDSIGHT_TIME_ZONE"), |v| {
                    zone::parse(v).map_err(|e| e.to_string())
                })?,
                parse_with(get("HINDSIGHT_TENANT_TIME_ZONES"), Zones::parse_tenants)?,
            ),
            recall: RecallConfig {
                weights: parse_with(get("HINDSIGHT_RECALL_WEIGHTS"), weights)?,
                fusion: parse_with(get("HINDSIGHT_RECALL_FUSION"), |v| {
                    v.parse::<Fusion>().map_err(|e| e.to_string())
                })?,
                signal_weights: parse_with(get("HINDSIGHT_RECALL_SIGNAL_WEIGHTS"), signal_weights)?,
                time_boost: parse_with(get("HINDSIGHT_RECALL_TIME_BOOST"), non_negative)?,
                second_hop: parse_with(get("HINDSIGHT_RECALL_SECOND_HOP"), non_negative)?,
                matching: parse_with(get("HINDSIGHT_RECALL_MATCH"), |v| match v {
                    "stems" => Ok(Matching::Stems),
                    "words" => Ok(Matching::Words),
                    _ => Err("expected `stems` or `words`".into()),
                })?,
                half_life: parse_with(get("HINDSIGHT_RECALL_HALF_LIFE"), duration::parse)?,
                max_tokens: parse_with(get("HINDSIGHT_RECALL_MAX_TOKENS"), positive)?,
                index_timeout: parse_with(get("HINDSIGHT_RECALL_INDEX_TIMEOUT"), duration::parse)?,
                query_cache: parse_with(get("HINDSIGHT_RECALL_QUERY_CACHE"), whole)?,
                keyword_candidates: parse_with(
                    get("HINDSIGHT_RECALL_KEYWORD_CANDIDATES"),
                    positive,
                )?,
            },
            mcp_allowed_hosts: get("HINDSIGHT_MCP_ALLOWED_HOSTS")
                .1
                .split(',')
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
            operator_key: Some(get("HINDSIGHT_OPERATOR_KEY").1).filter(|k| !k.trim().is_empty()),
            ops_poll: parse_with(get("HINDSIGHT_OPS_POLL"), at_least_a_second)?,
            janitor: JanitorConfig {
                cron: parse_with(get("HINDSIGHT_JANITOR_CRON"), |v| {
                    if v.split_whitespace().count() == 6 {
                        Ok(v.trim().to_string())
                    } else {
                        Err("expected 6 cron fields: sec min hour day month weekday".into())
                    }
                })?,
                decay_half_life: parse_with(get("HINDSIGHT_JANITOR_DECAY_HALF_LIFE"), |v| {
                    duration::parse(v).and_then(|d| {
                        if d.is_zero() {
                            Err("must be more than 0".into())
                        } else {
                            Ok(d)
                        }
                    })
                })?,
                retention: parse_with(get("HINDSIGHT_JANITOR_RETENTION"), duration::parse)?,
                deleted_retention: parse_with(
                    get("HINDSIGHT_JANITOR_DELETED_RETENTION"),
                    duration::parse,
                )?,
                quarantine_review: parse_with(
                    get("HINDSIGHT_JANITOR_QUARANTINE_REVIEW"),
                    duration::parse,
                )?,
                turn_content_retention: parse_with(
                    get("HINDSIGHT_JANITOR_TURN_CONTENT_RETENTION"),
                    duration::parse,
                )?,
                turn_retention: parse_with(
                    get("HINDSIGHT_JANITOR_TURN_RETENTION"),
                    duration::parse,
                )?,
                decay_after: parse_with(get("HINDSIGHT_JANITOR_DECAY_AFTER"), duration::parse)?,
                archive_below: parse_with(get("HINDSIGHT_JANITOR_ARCHIVE_BELOW"), |v| {
                    unit_interval(v, 0.0)
                })?,
                archive_idle: parse_with(get("HINDSIGHT_JANITOR_ARCHIVE_IDLE"), duration::parse)?,
                consolidate_age: parse_with(
                    get("HINDSIGHT_JANITOR_CONSOLIDATE_AGE"),
                    duration::parse,
                )?,
                consolidate_max_accesses: parse_with(
                    get("HINDSIGHT_JANITOR_CONSOLIDATE_MAX_ACCESSES"),
                    |v| {
                        v.parse::<i32>()
                            .ok()
                            .filter(|n| *n >= 0)
                            .ok_or_else(|| "expected a count, 0 or more".to_string())
                    },
                )?,
                merge_cosine: parse_with(get("HINDSIGHT_JANITOR_MERGE_COSINE"), |v| {
                    unit_interval(v, 0.9)
                })?,
                safety_floor: parse_with(get("HINDSIGHT_JANITOR_SAFETY_FLOOR"), |v| {
                    unit_interval(v, 0.0)
                })?,
            },
            log: get("HINDSIGHT_LOG").1,
            log_format: parse_with(get("HINDSIGHT_LOG_FORMAT"), |v| match v {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected `text` or `json`".into()),
            })?,
        })
    }
}

//! Configuration: one struct, read from environment variables with documented
//! defaults. [`SETTINGS`] is the single source for the defaults, the parser and
//! the reference printed by `hindsight config` (and copied into docs/configuration.md), so
//! the three cannot drift apart.

use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

use hindsight_core::{
    memory::names,
    settings::{EmbedConfig, IndexConfig},
    signal::Signal,
};
use hindsight_core::{
    namespace::Namespace,
    zone::{self, Zones},
};

use crate::recall::fusion::Method;
use hindsight_text::{duration, terms::Matching};

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub env: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
    pub secret: bool,
}

const fn setting(env: &'static str, default: &'static str, doc: &'static str) -> Setting {
    Setting {
        env,
        default,
        doc,
        secret: false,
    }
}

/// Every setting hindsight reads, in the order it is documented.
pub const SETTINGS: &[Setting] = &[
    setting(
        "HINDSIGHT_NAMESPACE",
        "hindsight",
        "Prefix of every subject (`<ns>.turns.<tenant>`) and stream (`<NS>_TURNS`); lets deployments, tests and evaluations share one NATS server.",
    ),
    setting(
        "HINDSIGHT_NATS_URL",
        "nats://127.0.0.1:4222",
        "NATS server with JetStream enabled; `nats://user:password@host:port` logs in as that user (the password is masked when printed).",
    ),
    Setting {
        env: "HINDSIGHT_DATABASE_URL",
        default: "postgres://postgres@127.0.0.1:5432/hindsight",
        doc: "Postgres, the source of truth. The database is created if missing and migrated at start-up.",
        secret: true,
    },
    setting(
        "HINDSIGHT_DB_POOL",
        "10",
        "Connections in each process's Postgres pool.",
    ),
    setting(
        "HINDSIGHT_HTTP_ADDR",
        "127.0.0.1:8080",
        "Address of the HTTP server (the gateway API and `/mcp` where the gateway runs; `/healthz`, `/readyz`, `/metrics` everywhere).",
    ),
    setting(
        "HINDSIGHT_DATA_DIR",
        "./data",
        "Directory for local state (embedded index, exports).",
    ),
    setting(
        "HINDSIGHT_BATCH_SIZE",
        "256",
        "Most messages a stage takes from its consumer in one batch.",
    ),
    setting(
        "HINDSIGHT_LINGER",
        "5ms",
        "How long a stage waits for a batch to fill once its first message arrived (0ms: take what is ready).",
    ),
    setting(
        "HINDSIGHT_ACK_WAIT",
        "",
        "How long JetStream waits for an ack before redelivering; empty: each consumer's `ack_wait` in `streams/`. A batch still being handled is kept in progress for up to ten ack waits.",
    ),
    setting(
        "HINDSIGHT_MAX_DELIVER",
        "",
        "Deliveries of one message before the runner moves it to the DLQ; empty: each consumer's `max_deliver` in `streams/`.",
    ),
    setting(
        "HINDSIGHT_RETRY_INITIAL",
        "1s",
        "First delay before a transient failure is retried; doubles per delivery, with jitter.",
    ),
    setting(
        "HINDSIGHT_RETRY_MAX",
        "60s",
        "Longest delay between retries of one message.",
    ),
    setting(
        "HINDSIGHT_LLM_BASE_URL",
        "",
        "OpenAI-compatible endpoint for fact extraction (OpenAI, vLLM, Ollama, llama.cpp), e.g. `http://127.0.0.1:11434/v1`; unset: the offline rules extract.",
    ),
    Setting {
        env: "HINDSIGHT_LLM_API_KEY",
        default: "",
        doc: "Bearer key for the LLM endpoint; `OPENAI_API_KEY` is used when this is unset.",
        secret: true,
    },
    setting(
        "HINDSIGHT_LLM_MODEL",
        "gpt-4o-mini",
        "Model name sent to the LLM endpoint.",
    ),
    setting("HINDSIGHT_LLM_TIMEOUT", "5s", "Timeout of one LLM call."),
    setting(
        "HINDSIGHT_LLM_RETRY_BUDGET",
        "15s",
        "How long one delivery of a turn keeps retrying the LLM (429, 5xx, timeouts; `Retry-After` honoured) before it is handed back for redelivery.",
    ),
    setting(
        "HINDSIGHT_LLM_FALLBACK_AFTER",
        "3",
        "Deliveries of a turn with the LLM unavailable after which the offline rules extract it instead (facts marked `rules-fallback`).",
    ),
    setting(
        "HINDSIGHT_LLM_CONCURRENCY",
        "8",
        "LLM calls in flight at once per extract process.",
    ),
    setting(
        "HINDSIGHT_EMBED_MODEL_DIR",
        "./models/all-MiniLM-L6-v2",
        "Directory of the local sentence model (`config.json`, `tokenizer.json`, `model.safetensors`; any BERT-family model). `./ops/setup.sh` fetches all-MiniLM-L6-v2 there.",
    ),
    setting(
        "HINDSIGHT_EMBED_BASE_URL",
        "",
        "OpenAI-compatible embeddings endpoint; unset: the local model runs in-process.",
    ),
    Setting {
        env: "HINDSIGHT_EMBED_API_KEY",
        default: "",
        doc: "Bearer key for the embeddings endpoint; `OPENAI_API_KEY` is used when this is unset.",
        secret: true,
    },
    setting(
        "HINDSIGHT_EMBED_MODEL",
        "text-embedding-3-small",
        "Model name sent to the embeddings endpoint.",
    ),
    setting(
        "HINDSIGHT_EMBED_DIMENSION",
        "1536",
        "Vector size the embeddings endpoint returns.",
    ),
    setting(
        "HINDSIGHT_EMBED_BATCH",
        "16",
        "Facts embedded together in one micro-batch (one call to the embedder).",
    ),
    setting(
        "HINDSIGHT_EMBED_WINDOW",
        "64",
        "Facts the embed stage takes at once and sorts by length before embedding them `HINDSIGHT_EMBED_BATCH` at a time, so texts of similar length share a micro-batch (less padding).",
    ),
    setting(
        "HINDSIGHT_EMBED_LINGER",
        "20ms",
        "How long the embed stage waits for a micro-batch to fill, so a lone fact is not held back.",
    ),
    setting(
        "QDRANT_URL",
        "",
        "Qdrant server (gRPC, e.g. `http://127.0.0.1:6334`); unset: the embedded index under `HINDSIGHT_DATA_DIR/index`.",
    ),
    Setting {
        env: "QDRANT_API_KEY",
        default: "",
        doc: "API key of the Qdrant server.",
        secret: true,
    },
    setting(
        "HINDSIGHT_DEDUPE_THRESHOLD",
        "0.85",
        "Cosine at or above which a new fact merges into (or supersedes) an existing memory of the same user and model.",
    ),
    setting(
        "HINDSIGHT_SCREEN_THRESHOLD",
        "1.0",
        "The poisoning screen's score at which the filter quarantines a turn (see the filter section; `hindsight eval screen --threshold` shows the effect on the corpus). Lower catches more attacks and flags more harmless turns.",
    ),
    setting(
        "HINDSIGHT_SCREEN_NEARNESS",
        "on",
        "Whether the embed stage adds a fact's nearness to known attacks (the tune part of `tests/corpus/screen/`, compiled in) to its turn's screen score, quarantining the fact at the same threshold; `off` leaves the screen to its cues.",
    ),
    setting(
        "HINDSIGHT_SCREEN_LEARNT",
        "on",
        "Whether the filter's screen adds its learnt model's opinion (logistic regression over the text's character runs, fit at start to the tune part of `tests/corpus/screen/`, compiled in): up to 0.8 onto the score for text like the attacks, up to 0.8 off for text like the look-alikes. `off` leaves the filter to its cues.",
    ),
    setting(
        "HINDSIGHT_TIME_ZONE",
        "UTC",
        "IANA time zone (e.g. `Asia/Shanghai`) whose calendar reads a turn whose `ts` gives no UTC offset (none, or `Z`): \"yesterday\" and 昨天 are the day before on it. A turn's own offset (`+08:00`) wins. The brief and `memory_summarize` show dates in it.",
    ),
    setting(
        "HINDSIGHT_TENANT_TIME_ZONES",
        "",
        "Per-tenant time zones overriding `HINDSIGHT_TIME_ZONE`, as `tenant=Zone` pairs separated by commas (`acme=Asia/Shanghai,beta=Europe/Berlin`).",
    ),
    setting(
        "HINDSIGHT_FACT_CONTEXT",
        "on",
        "`on`: each fact keeps the turn its turn replied to (the session's previous kept turn, never a quarantined one): the LLM reads it, the keyword channel searches it, recall shows it. `off`: facts stand alone.",
    ),
    setting(
        "HINDSIGHT_RECALL_WEIGHTS",
        "0.85,0.05,0.05,0.05",
        "Weights of the recall score: relevance (the fused signals, 0–1, plus the time boost), recency, importance, access frequency. Relevance dominates; the others order near-ties.",
    ),
    setting(
        "HINDSIGHT_RECALL_FUSION",
        "score",
        "How recall fuses its signals: `score` (each signal over its best value, weighted) or `rrf` (weighted reciprocal rank fusion, k = 60).",
    ),
    setting(
        "HINDSIGHT_RECALL_SIGNAL_WEIGHTS",
        "dense=0.5,keyword=0.6,filter=0.1,entity=0.1",
        "Weight of each recall signal in the fusion: `dense` (cosine to the query), `keyword` (BM25 of the memory's content, entities and context), `filter` (recency within the request's filters), `entity` (named entities shared with the query). A weight of 0 switches the signal off.",
    ),
    setting(
        "HINDSIGHT_RECALL_TIME_BOOST",
        "0.3",
        "Added to the relevance of memories dated within a time the query names (\"in May 2023\", \"last summer\", \"上个月\"), by when they happened, else when they were said; 0: off.",
    ),
    setting(
        "HINDSIGHT_RECALL_SECOND_HOP",
        "0",
        "Weight of the second hop: the query's vector moved towards the first round's three best memories (pseudo-relevance feedback) searches the index again, and that cosine joins the fusion; 0: off.",
    ),
    setting(
        "HINDSIGHT_RECALL_MATCH",
        "stems",
        "How the keyword channel matches the query's words: `stems` (English stems: \"painted\" finds \"painting\") or `words` (as written).",
    ),
    setting(
        "HINDSIGHT_RECALL_HALF_LIFE",
        "168h",
        "Age at which a memory's recency counts half.",
    ),
    setting(
        "HINDSIGHT_RECALL_MAX_TOKENS",
        "2000",
        "Token budget of a recall answer when the request names none.",
    ),
    setting(
        "HINDSIGHT_RECALL_INDEX_TIMEOUT",
        "2s",
        "How long recall waits for the query embedding and the vector index before answering from the other channels (degraded).",
    ),
    setting(
        "HINDSIGHT_MCP_ALLOWED_HOSTS",
        "localhost,127.0.0.1,::1",
        "Host headers the streamable-HTTP MCP endpoint (`/mcp`) accepts (DNS-rebinding protection); add the names clients use, e.g. `gateway` in compose.",
    ),
    setting(
        "HINDSIGHT_OPS_POLL",
        "15s",
        "How often the gateway reads consumer lag, DLQ depth, memory counts and the last maintenance run, for its gauges on `/metrics` and the `/ops` page.",
    ),
    setting(
        "HINDSIGHT_JANITOR_CRON",
        "0 0 2 * * Sun",
        "When the janitor runs (cron with seconds, UTC; default Sunday 02:00). A run missed while no janitor was up starts at the next start-up.",
    ),
    setting(
        "HINDSIGHT_JANITOR_DECAY_HALF_LIFE",
        "30d",
        "Idle time (no access) that halves a memory's stored importance; health and safety constraints keep a floor of 0.8.",
    ),
    setting(
        "HINDSIGHT_JANITOR_RETENTION",
        "30d",
        "How long archived and deleted memories are kept before a run exports them (JSON lines under `HINDSIGHT_DATA_DIR/exports/`) and deletes them.",
    ),
    setting(
        "HINDSIGHT_JANITOR_DECAY_AFTER",
        "7d",
        "Idle time (since the last access and the last decay) before a run decays a memory at all: a memory in use is left alone, and weekly runs decay each idle week once.",
    ),
    setting(
        "HINDSIGHT_JANITOR_ARCHIVE_BELOW",
        "0.2",
        "Importance under which an idle memory is archived (reversibly) once idle for `HINDSIGHT_JANITOR_ARCHIVE_IDLE`.",
    ),
    setting(
        "HINDSIGHT_JANITOR_ARCHIVE_IDLE",
        "90d",
        "Idle time after which a memory under `HINDSIGHT_JANITOR_ARCHIVE_BELOW` is archived.",
    ),
    setting(
        "HINDSIGHT_JANITOR_CONSOLIDATE_AGE",
        "180d",
        "Age after which episodic memories accessed fewer than `HINDSIGHT_JANITOR_CONSOLIDATE_MAX_ACCESSES` times are consolidated into one summary per user and month.",
    ),
    setting(
        "HINDSIGHT_JANITOR_CONSOLIDATE_MAX_ACCESSES",
        "3",
        "Accesses at which an old episodic memory is kept as it is rather than consolidated.",
    ),
    setting(
        "HINDSIGHT_JANITOR_MERGE_COSINE",
        "0.95",
        "Cosine at or above which a run merges two memories of one user and model (0.9 to 1; the similarity search over more than 4,096 memories of one user is tuned to find pairs at 0.95 with probability > 0.998, and 0.977 at 0.9).",
    ),
    setting(
        "HINDSIGHT_JANITOR_SAFETY_FLOOR",
        "0.8",
        "Importance that health and safety constraints (allergies, medication, …) never decay below, so they are never archived.",
    ),
    setting(
        "HINDSIGHT_LOG",
        "info",
        "Log filter (tracing `EnvFilter` syntax, e.g. `info,hindsight_shared=debug`). Logs go to stderr.",
    ),
    setting(
        "HINDSIGHT_LOG_FORMAT",
        "text",
        "`text` for people, `json` for log pipelines.",
    ),
];

/// The documented default of a setting.
pub fn default_of(env: &str) -> &'static str {
    SETTINGS
        .iter()
        .find(|s| s.env == env)
        .map(|s| s.default)
        .unwrap_or_default()
}

#[derive(Debug, thiserror::Error)]
#[error("{env}={value:?}: {reason}")]
pub struct ConfigError {
    pub env: &'static str,
    pub value: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The whole configuration of a hindsight process.
#[derive(Clone)]
pub struct Config {
    pub namespace: Namespace,
    pub nats_url: String,
    pub database_url: String,
    pub db_pool: u32,
    pub http_addr: SocketAddr,
    pub data_dir: PathBuf,
    pub batch_size: usize,
    pub linger: Duration,
    pub ack_wait: Option<Duration>,
    pub max_deliver: Option<i64>,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    pub llm: LlmConfig,
    pub embed: EmbedConfig,
    pub index: IndexConfig,
    pub dedupe_threshold: f32,
    pub screen_threshold: f64,
    pub screen_nearness: bool,
    pub screen_learnt: bool,
    pub fact_context: bool,
    /// `HINDSIGHT_TIME_ZONE` and `HINDSIGHT_TENANT_TIME_ZONES`.
    pub time_zones: Zones,
    pub recall: RecallConfig,
    pub mcp_allowed_hosts: Vec<String>,
    pub ops_poll: Duration,
    pub janitor: JanitorConfig,
    pub log: String,
    pub log_format: LogFormat,
}

/// Recall's fusion, score weights and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct RecallConfig {
    /// relevance, recency, importance, access.
    pub weights: [f64; 4],
    pub fusion: Method,
    /// dense, keyword, filter, entity ([`Signal::WEIGHTED`] order).
    pub signal_weights: [f64; 4],
    pub time_boost: f64,
    pub second_hop: f64,
    pub matching: Matching,
    pub half_life: Duration,
    pub max_tokens: usize,
    pub index_timeout: Duration,
}

/// The janitor's schedule and the settings of its policy that deployments tune.
#[derive(Clone, Debug)]
pub struct JanitorConfig {
    /// Cron expression with seconds (`sec min hour day month weekday`), UTC.
    pub cron: String,
    pub decay_half_life: Duration,
    pub retention: Duration,
    pub decay_after: Duration,
    pub archive_below: f32,
    pub archive_idle: Duration,
    pub consolidate_age: Duration,
    pub consolidate_max_accesses: i32,
    pub merge_cosine: f32,
    pub safety_floor: f32,
}

/// The LLM endpoint used for extraction; `base_url = None` means the offline rules.
#[derive(Clone)]
pub struct LlmConfig {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub model: String,
    pub timeout: Duration,
    pub retry_budget: Duration,
    pub fallback_after: u64,
    pub concurrency: usize,
}

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
                dimension: parse_with(get("HINDSIGHT_EMBED_DIMENSION"), positive)?,
                batch: parse_with(get("HINDSIGHT_EMBED_BATCH"), positive)?,
                window: parse_with(get("HINDSIGHT_EMBED_WINDOW"), positive)?,
                linger: parse_with(get("HINDSIGHT_EMBED_LINGER"), duration::parse)?,
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
                    Method::parse(v).ok_or_else(|| "expected `score` or `rrf`".to_string())
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
            },
            mcp_allowed_hosts: get("HINDSIGHT_MCP_ALLOWED_HOSTS")
                .1
                .split(',')
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
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

    /// The settings as `(env, value)` pairs with secrets masked, for the start-up log.
    pub fn masked(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HINDSIGHT_NAMESPACE", self.namespace.to_string()),
            ("HINDSIGHT_NATS_URL", mask_url(&self.nats_url)),
            ("HINDSIGHT_DATABASE_URL", mask_url(&self.database_url)),
            ("HINDSIGHT_DB_POOL", self.db_pool.to_string()),
            ("HINDSIGHT_HTTP_ADDR", self.http_addr.to_string()),
            ("HINDSIGHT_DATA_DIR", self.data_dir.display().to_string()),
            ("HINDSIGHT_BATCH_SIZE", self.batch_size.to_string()),
            ("HINDSIGHT_LINGER", format!("{}ms", self.linger.as_millis())),
            (
                "HINDSIGHT_ACK_WAIT",
                self.ack_wait
                    .map(|d| format!("{}ms", d.as_millis()))
                    .unwrap_or_default(),
            ),
            (
                "HINDSIGHT_MAX_DELIVER",
                self.max_deliver.map(|n| n.to_string()).unwrap_or_default(),
            ),
            (
                "HINDSIGHT_RETRY_INITIAL",
                format!("{}ms", self.retry_initial.as_millis()),
            ),
            (
                "HINDSIGHT_RETRY_MAX",
                format!("{}ms", self.retry_max.as_millis()),
            ),
            (
                "HINDSIGHT_LLM_BASE_URL",
                self.llm.base_url.clone().unwrap_or_default(),
            ),
            (
                "HINDSIGHT_LLM_API_KEY",
                self.llm
                    .api_key
                    .as_ref()
                    .map(|_| "***".to_string())
                    .unwrap_or_default(),
            ),
            ("HINDSIGHT_LLM_MODEL", self.llm.model.clone()),
            (
                "HINDSIGHT_LLM_TIMEOUT",
                format!("{}ms", self.llm.timeout.as_millis()),
            ),
            (
                "HINDSIGHT_LLM_RETRY_BUDGET",
                format!("{}ms", self.llm.retry_budget.as_millis()),
            ),
            (
                "HINDSIGHT_LLM_FALLBACK_AFTER",
                self.llm.fallback_after.to_string(),
            ),
            (
                "HINDSIGHT_LLM_CONCURRENCY",
                self.llm.concurrency.to_string(),
            ),
            (
                "HINDSIGHT_EMBED_MODEL_DIR",
                self.embed.model_dir.display().to_string(),
            ),
            (
                "HINDSIGHT_EMBED_BASE_URL",
                self.embed.base_url.clone().unwrap_or_default(),
            ),
            (
                "HINDSIGHT_EMBED_API_KEY",
                self.embed
                    .api_key
                    .as_ref()
                    .map(|_| "***".to_string())
                    .unwrap_or_default(),
            ),
            ("HINDSIGHT_EMBED_MODEL", self.embed.model.clone()),
            (
                "HINDSIGHT_EMBED_DIMENSION",
                self.embed.dimension.to_string(),
            ),
            ("HINDSIGHT_EMBED_BATCH", self.embed.batch.to_string()),
            ("HINDSIGHT_EMBED_WINDOW", self.embed.window.to_string()),
            (
                "HINDSIGHT_EMBED_LINGER",
                format!("{}ms", self.embed.linger.as_millis()),
            ),
            (
                "QDRANT_URL",
                self.index.qdrant_url.clone().unwrap_or_default(),
            ),
            (
                "QDRANT_API_KEY",
                self.index
                    .api_key
                    .as_ref()
                    .map(|_| "***".to_string())
                    .unwrap_or_default(),
            ),
            (
                "HINDSIGHT_DEDUPE_THRESHOLD",
                self.dedupe_threshold.to_string(),
            ),
            (
                "HINDSIGHT_SCREEN_THRESHOLD",
                self.screen_threshold.to_string(),
            ),
            (
                "HINDSIGHT_SCREEN_NEARNESS",
                if self.screen_nearness { "on" } else { "off" }.into(),
            ),
            (
                "HINDSIGHT_SCREEN_LEARNT",
                if self.screen_learnt { "on" } else { "off" }.into(),
            ),
            (
                "HINDSIGHT_TIME_ZONE",
                self.time_zones.default_zone().name().to_string(),
            ),
            (
                "HINDSIGHT_TENANT_TIME_ZONES",
                self.time_zones
                    .tenants()
                    .iter()
                    .map(|(t, z)| format!("{t}={}", z.name()))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "HINDSIGHT_FACT_CONTEXT",
                if self.fact_context { "on" } else { "off" }.into(),
            ),
            (
                "HINDSIGHT_RECALL_WEIGHTS",
                self.recall
                    .weights
                    .iter()
                    .map(|w| w.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "HINDSIGHT_RECALL_FUSION",
                self.recall.fusion.as_str().into(),
            ),
            (
                "HINDSIGHT_RECALL_SIGNAL_WEIGHTS",
                Signal::WEIGHTED
                    .iter()
                    .zip(self.recall.signal_weights)
                    .map(|(s, w)| format!("{s}={w}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "HINDSIGHT_RECALL_TIME_BOOST",
                self.recall.time_boost.to_string(),
            ),
            (
                "HINDSIGHT_RECALL_SECOND_HOP",
                self.recall.second_hop.to_string(),
            ),
            (
                "HINDSIGHT_RECALL_MATCH",
                match self.recall.matching {
                    Matching::Stems => "stems",
                    Matching::Words => "words",
                }
                .into(),
            ),
            (
                "HINDSIGHT_RECALL_HALF_LIFE",
                format!("{}s", self.recall.half_life.as_secs()),
            ),
            (
                "HINDSIGHT_RECALL_MAX_TOKENS",
                self.recall.max_tokens.to_string(),
            ),
            (
                "HINDSIGHT_RECALL_INDEX_TIMEOUT",
                format!("{}ms", self.recall.index_timeout.as_millis()),
            ),
            (
                "HINDSIGHT_MCP_ALLOWED_HOSTS",
                self.mcp_allowed_hosts.join(","),
            ),
            (
                "HINDSIGHT_OPS_POLL",
                format!("{}ms", self.ops_poll.as_millis()),
            ),
            ("HINDSIGHT_JANITOR_CRON", self.janitor.cron.clone()),
            (
                "HINDSIGHT_JANITOR_DECAY_HALF_LIFE",
                format!("{}s", self.janitor.decay_half_life.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_RETENTION",
                format!("{}s", self.janitor.retention.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_DECAY_AFTER",
                format!("{}s", self.janitor.decay_after.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_ARCHIVE_BELOW",
                self.janitor.archive_below.to_string(),
            ),
            (
                "HINDSIGHT_JANITOR_ARCHIVE_IDLE",
                format!("{}s", self.janitor.archive_idle.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_CONSOLIDATE_AGE",
                format!("{}s", self.janitor.consolidate_age.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_CONSOLIDATE_MAX_ACCESSES",
                self.janitor.consolidate_max_accesses.to_string(),
            ),
            (
                "HINDSIGHT_JANITOR_MERGE_COSINE",
                self.janitor.merge_cosine.to_string(),
            ),
            (
                "HINDSIGHT_JANITOR_SAFETY_FLOOR",
                self.janitor.safety_floor.to_string(),
            ),
            ("HINDSIGHT_LOG", self.log.clone()),
            (
                "HINDSIGHT_LOG_FORMAT",
                format!("{:?}", self.log_format).to_lowercase(),
            ),
        ]
    }

    /// Logs the configuration once at start-up, secrets masked.
    pub fn log_startup(&self, process: &str) {
        let settings = self
            .masked()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        tracing::info!(process, %settings, "configuration");
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (k, v) in self.masked() {
            map.entry(&k, &v);
        }
        map.finish()
    }
}

/// A number from `low` to 1.
fn unit_interval(v: &str, low: f32) -> Result<f32, String> {
    match v.parse::<f32>() {
        Ok(x) if (low..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("expected a number from {low} to 1")),
    }
}

fn parse_with<T>(
    (env, value): (&'static str, String),
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, ConfigError> {
    parse(value.trim()).map_err(|reason| ConfigError { env, value, reason })
}

fn optional<T>(
    v: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    if v.is_empty() {
        Ok(None)
    } else {
        parse(v).map(Some)
    }
}

/// Four non-negative numbers, comma-separated, not all zero.
fn weights(v: &str) -> Result<[f64; 4], String> {
    let parts: Vec<f64> = v
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| "expected four numbers, e.g. `0.5,0.2,0.2,0.1`".to_string())?;
    match parts[..] {
        [a, b, c, d] if parts.iter().all(|w| *w >= 0.0) && a + b + c + d > 0.0 => Ok([a, b, c, d]),
        _ => Err("expected four non-negative numbers, not all zero (relevance,recency,importance,access)".into()),
    }
}

/// `on` or `off` (also true/false, yes/no, 1/0).
fn on_off(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err("expected `on` or `off`".into()),
    }
}

fn non_negative(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(n) if n >= 0.0 && n.is_finite() => Ok(n),
        _ => Err("expected a number of at least 0".into()),
    }
}

/// `name=weight` for some of [`Signal::WEIGHTED`], comma-separated; the others keep their default.
fn signal_weights(v: &str) -> Result<[f64; 4], String> {
    let mut out = [0.0; 4];
    set_signal_weights(default_of("HINDSIGHT_RECALL_SIGNAL_WEIGHTS"), &mut out)?;
    set_signal_weights(v, &mut out)?;
    if out.iter().all(|w| *w == 0.0) {
        return Err("at least one signal needs a weight above 0".into());
    }
    Ok(out)
}

fn set_signal_weights(v: &str, out: &mut [f64; 4]) -> Result<(), String> {
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected name=weight, e.g. `dense=0.4`"))?;
        let i = Signal::WEIGHTED
            .iter()
            .position(|s| s.as_str() == name.trim())
            .ok_or_else(|| {
                format!(
                    "unknown signal {:?}: expected one of {}",
                    name.trim(),
                    names(&Signal::WEIGHTED).join(", ")
                )
            })?;
        out[i] = non_negative(weight.trim()).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(v: &str) -> Result<T, String> {
    match v.parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err("expected a whole number greater than zero".into()),
    }
}

/// A duration of at least one second (JetStream and pollers work in seconds).
fn at_least_a_second(v: &str) -> Result<Duration, String> {
    duration::parse(v).and_then(|d| {
        if d >= Duration::from_secs(1) {
            Ok(d)
        } else {
            Err("must be at least 1s".into())
        }
    })
}

/// Hides the password of a URL such as `postgres://user:secret@host/db`.
pub fn mask_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let Some(at) = rest.find('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    match userinfo.find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &userinfo[..colon],
            &rest[at..]
        ),
        None => url.to_string(),
    }
}

/// The configuration reference as a Markdown table (`hindsight config`).
pub fn reference_markdown() -> String {
    let mut out = String::from("| variable | default | meaning |\n| --- | --- | --- |\n");
    for s in SETTINGS {
        let default = if s.default.is_empty() {
            "(unset)".to_string()
        } else {
            format!("`{}`", s.default)
        };
        out.push_str(&format!("| `{}` | {} | {} |\n", s.env, default, s.doc));
    }
    out
}

#[cfg(test)]
mod tests {
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
            let err = Config::from_lookup(|k| {
                (k == "HINDSIGHT_RECALL_SIGNAL_WEIGHTS").then(|| bad.into())
            })
            .map(|_| ())
            .expect_err(bad);
            assert!(
                err.to_string().contains("HINDSIGHT_RECALL_SIGNAL_WEIGHTS"),
                "{err}"
            );
        }
    }

    #[test]
    fn every_setting_is_printed() {
        let config = Config::from_lookup(|_| None).expect("defaults are valid");
        let printed: Vec<_> = config.masked().into_iter().map(|(k, _)| k).collect();
        let documented: Vec<_> = SETTINGS.iter().map(|s| s.env).collect();
        assert_eq!(printed, documented);
    }
}

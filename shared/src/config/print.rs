//! The configuration as it is printed at start: every setting, secrets masked.

use std::fmt;

use hindsight_core::signal::Signal;
use hindsight_text::terms::Matching;

use super::Config;

impl Config {
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
                "HINDSIGHT_EMBED_LANGUAGES",
                self.embed
                    .languages
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            ),
            (
                "HINDSIGHT_EMBED_DIMENSION",
                self.embed.dimension.to_string(),
            ),
            ("HINDSIGHT_EMBED_BATCH", self.embed.batch.to_string()),
            ("HINDSIGHT_EMBED_WINDOW", self.embed.window.to_string()),
            ("HINDSIGHT_EMBED_PARALLEL", self.embed.parallel.to_string()),
            (
                "HINDSIGHT_EMBED_LINGER",
                format!("{}ms", self.embed.linger.as_millis()),
            ),
            (
                "HINDSIGHT_EMBED_CACHE_DIR",
                self.embed.cache_dir.display().to_string(),
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
                "HINDSIGHT_SCREEN_ENCODER",
                if self.screen_encoder { "on" } else { "off" }.into(),
            ),
            (
                "HINDSIGHT_SCREEN_MODEL_DIR",
                self.screen_model_dir.display().to_string(),
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
                "HINDSIGHT_RECALL_QUERY_CACHE",
                self.recall.query_cache.to_string(),
            ),
            (
                "HINDSIGHT_RECALL_KEYWORD_CANDIDATES",
                self.recall.keyword_candidates.to_string(),
            ),
            (
                "HINDSIGHT_MCP_ALLOWED_HOSTS",
                self.mcp_allowed_hosts.join(","),
            ),
            (
                "HINDSIGHT_OPERATOR_KEY",
                self.operator_key
                    .as_ref()
                    .map(|_| "***".to_string())
                    .unwrap_or_default(),
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
                "HINDSIGHT_JANITOR_DELETED_RETENTION",
                format!("{}s", self.janitor.deleted_retention.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_QUARANTINE_REVIEW",
                format!("{}s", self.janitor.quarantine_review.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_TURN_CONTENT_RETENTION",
                format!("{}s", self.janitor.turn_content_retention.as_secs()),
            ),
            (
                "HINDSIGHT_JANITOR_TURN_RETENTION",
                format!("{}s", self.janitor.turn_retention.as_secs()),
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

//! What can happen in hindsight, one type per event. Emitting an event records
//! its log line and its metric together, so every metric has one name and one
//! label set wherever it is recorded, and the dashboards can be written from
//! this file alone.

use std::time::Duration;

use metrics::{counter, describe_counter, describe_histogram, histogram};

/// The reason code of a free-text reason: the part before the first ':'
/// (`"repeat: same as turn t-9"` → `repeat`). Metric labels take the code only,
/// so their number stays bounded.
pub fn reason_code(reason: &str) -> &str {
    reason.split(':').next().unwrap_or(reason).trim()
}

/// Registers help texts; called once when the recorder is installed.
pub fn describe() {
    describe_counter!(
        "hindsight_stage_received_total",
        "Messages a stage received, by stage and tenant."
    );
    describe_counter!(
        "hindsight_stage_emitted_total",
        "Messages a stage published to its output, by stage and tenant."
    );
    describe_counter!(
        "hindsight_stage_dropped_total",
        "Inputs a stage dropped on purpose, by stage, tenant and reason."
    );
    describe_counter!(
        "hindsight_stage_rejected_total",
        "Inputs a stage moved to the DLQ, by stage, tenant and reason."
    );
    describe_counter!(
        "hindsight_stage_retried_total",
        "Inputs a stage will retry after a transient failure, by stage and tenant."
    );
    describe_histogram!(
        "hindsight_stage_logic_seconds",
        metrics::Unit::Seconds,
        "Time a stage's own logic spent on one batch (transport excluded)."
    );
    describe_histogram!(
        "hindsight_stage_handle_seconds",
        metrics::Unit::Seconds,
        "Time a stage spent on one batch, publishing and acking included."
    );
    describe_histogram!(
        "hindsight_stage_batch_size",
        metrics::Unit::Count,
        "Messages per batch handed to a stage."
    );
    describe_counter!(
        "hindsight_llm_calls_total",
        "LLM calls, by tenant, model and outcome (ok, transient_error, format_refused, error)."
    );
    describe_counter!(
        "hindsight_llm_failures_total",
        "LLM calls that failed, by tenant, model and outcome."
    );
    describe_counter!(
        "hindsight_llm_tokens_total",
        "LLM tokens, by tenant, model and kind (prompt, completion)."
    );
    describe_histogram!(
        "hindsight_llm_call_seconds",
        metrics::Unit::Seconds,
        "Latency of one LLM call, by model."
    );
    describe_counter!(
        "hindsight_facts_extracted_total",
        "Facts extracted, by tenant and extractor (rules, llm, rules-fallback)."
    );
    describe_counter!(
        "hindsight_dedupe_total",
        "Facts persisted, by tenant and outcome (created, merged, exact, superseded, quarantined)."
    );
    describe_histogram!(
        "hindsight_embed_batch_size",
        metrics::Unit::Count,
        "Texts per embedder call, by model."
    );
    describe_histogram!(
        "hindsight_embed_seconds",
        metrics::Unit::Seconds,
        "Latency of one embedder call, by model."
    );
    describe_counter!(
        "hindsight_embed_failures_total",
        "Embedder calls that failed, by model."
    );
    describe_counter!(
        "hindsight_turns_without_facts_total",
        "Kept turns that yielded no fact, by tenant."
    );
    describe_histogram!(
        "hindsight_janitor_run_seconds",
        metrics::Unit::Seconds,
        "Duration of one maintenance run, by dry_run and status."
    );
    describe_counter!(
        "hindsight_janitor_runs_total",
        "Maintenance runs, by dry_run and status (finished, failed)."
    );
    describe_counter!(
        "hindsight_janitor_changes_total",
        "Memories a real maintenance run changed, by step (decayed, merged, archived, consolidated, summaries, purged)."
    );
}

/// A maintenance run ended.
pub struct MaintenanceRan<'a> {
    pub run: &'a str,
    pub dry_run: bool,
    pub status: &'a str,
    pub elapsed: Duration,
    /// Changes per step, by the names of the counts.
    pub changes: &'a [(&'static str, u64)],
}

impl MaintenanceRan<'_> {
    pub fn emit(self) {
        tracing::info!(
            run = self.run,
            dry_run = self.dry_run,
            status = self.status,
            seconds = self.elapsed.as_secs_f64(),
            changes = ?self.changes,
            "maintenance run ended"
        );
        let (dry, status) = (self.dry_run.to_string(), self.status.to_string());
        histogram!("hindsight_janitor_run_seconds", "dry_run" => dry.clone(), "status" => status.clone())
            .record(self.elapsed.as_secs_f64());
        counter!("hindsight_janitor_runs_total", "dry_run" => dry, "status" => status).increment(1);
        if !self.dry_run {
            for (step, n) in self.changes {
                counter!("hindsight_janitor_changes_total", "step" => *step).increment(*n);
            }
        }
    }
}

/// One call to the LLM endpoint finished.
pub struct LlmCalled<'a> {
    pub tenant: &'a str,
    pub model: &'a str,
    /// `ok`, `transient_error`, `format_refused` or `error`.
    pub outcome: &'static str,
    pub elapsed: Duration,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl LlmCalled<'_> {
    pub fn emit(self) {
        let (tenant, model) = (self.tenant.to_string(), self.model.to_string());
        tracing::debug!(
            tenant = self.tenant,
            model = self.model,
            outcome = self.outcome,
            elapsed_ms = self.elapsed.as_millis() as u64,
            "llm call"
        );
        counter!("hindsight_llm_calls_total", "tenant" => tenant.clone(), "model" => model.clone(), "outcome" => self.outcome).increment(1);
        if self.outcome != "ok" {
            counter!("hindsight_llm_failures_total", "tenant" => tenant.clone(), "model" => model.clone(), "outcome" => self.outcome).increment(1);
        }
        histogram!("hindsight_llm_call_seconds", "model" => model.clone())
            .record(self.elapsed.as_secs_f64());
        counter!("hindsight_llm_tokens_total", "tenant" => tenant.clone(), "model" => model.clone(), "kind" => "prompt").increment(self.prompt_tokens);
        counter!("hindsight_llm_tokens_total", "tenant" => tenant, "model" => model, "kind" => "completion").increment(self.completion_tokens);
    }
}

/// What dedupe made of one fact: `created`, `merged`, `exact`, `superseded` or `quarantined`.
pub struct Deduped<'a> {
    pub tenant: &'a str,
    pub outcome: &'static str,
}

impl Deduped<'_> {
    pub fn emit(self) {
        counter!("hindsight_dedupe_total", "tenant" => self.tenant.to_string(), "outcome" => self.outcome).increment(1);
    }
}

/// The embedder finished one batch.
pub struct Embedded<'a> {
    pub model: &'a str,
    pub texts: usize,
    pub elapsed: Duration,
    pub ok: bool,
}

impl Embedded<'_> {
    pub fn emit(self) {
        let model = self.model.to_string();
        tracing::debug!(
            model = self.model,
            texts = self.texts,
            elapsed_ms = self.elapsed.as_millis() as u64,
            ok = self.ok,
            "embedded"
        );
        histogram!("hindsight_embed_batch_size", "model" => model.clone())
            .record(self.texts as f64);
        histogram!("hindsight_embed_seconds", "model" => model.clone())
            .record(self.elapsed.as_secs_f64());
        if !self.ok {
            counter!("hindsight_embed_failures_total", "model" => model).increment(1);
        }
    }
}

/// Facts came out of one kept turn.
pub struct FactsExtracted<'a> {
    pub tenant: &'a str,
    /// `rules`, `llm` or `rules-fallback`.
    pub extractor: &'static str,
    pub count: usize,
}

impl FactsExtracted<'_> {
    pub fn emit(self) {
        let tenant = self.tenant.to_string();
        if self.count == 0 {
            counter!("hindsight_turns_without_facts_total", "tenant" => tenant).increment(1);
        } else {
            counter!("hindsight_facts_extracted_total", "tenant" => tenant, "extractor" => self.extractor).increment(self.count as u64);
        }
    }
}

/// A message arrived at a stage.
pub struct Received<'a> {
    pub stage: &'static str,
    pub tenant: &'a str,
}

impl Received<'_> {
    pub fn emit(self) {
        counter!("hindsight_stage_received_total", "stage" => self.stage, "tenant" => self.tenant.to_string()).increment(1);
    }
}

/// A stage published outputs for one input.
pub struct Emitted<'a> {
    pub stage: &'static str,
    pub tenant: &'a str,
    pub count: usize,
}

impl Emitted<'_> {
    pub fn emit(self) {
        counter!("hindsight_stage_emitted_total", "stage" => self.stage, "tenant" => self.tenant.to_string())
            .increment(self.count as u64);
    }
}

/// A stage dropped an input on purpose (noise, duplicate).
pub struct Dropped<'a> {
    pub stage: &'static str,
    pub tenant: &'a str,
    pub reason: &'a str,
}

impl Dropped<'_> {
    pub fn emit(self) {
        tracing::debug!(
            stage = self.stage,
            tenant = self.tenant,
            reason = self.reason,
            "dropped"
        );
        counter!(
            "hindsight_stage_dropped_total",
            "stage" => self.stage,
            "tenant" => self.tenant.to_string(),
            "reason" => reason_code(self.reason).to_string()
        )
        .increment(1);
    }
}

/// A stage moved an input to the DLQ.
pub struct Rejected<'a> {
    pub stage: &'static str,
    pub tenant: &'a str,
    pub reason: &'a str,
    pub deliveries: u64,
    pub stream_seq: u64,
}

impl Rejected<'_> {
    pub fn emit(self) {
        tracing::warn!(
            stage = self.stage,
            tenant = self.tenant,
            reason = self.reason,
            deliveries = self.deliveries,
            stream_seq = self.stream_seq,
            "moved to the DLQ"
        );
        counter!(
            "hindsight_stage_rejected_total",
            "stage" => self.stage,
            "tenant" => self.tenant.to_string()
        )
        .increment(1);
    }
}

/// A stage will see an input again after a delay.
pub struct Retried<'a> {
    pub stage: &'static str,
    pub tenant: &'a str,
    pub reason: &'a str,
    pub delay: Duration,
    pub deliveries: u64,
}

impl Retried<'_> {
    pub fn emit(self) {
        tracing::info!(
            stage = self.stage,
            tenant = self.tenant,
            reason = self.reason,
            delay_ms = self.delay.as_millis() as u64,
            deliveries = self.deliveries,
            "will retry"
        );
        counter!("hindsight_stage_retried_total", "stage" => self.stage, "tenant" => self.tenant.to_string())
            .increment(1);
    }
}

/// A stage finished one batch.
pub struct BatchHandled {
    pub stage: &'static str,
    pub size: usize,
    /// The stage's own logic.
    pub logic: Duration,
    /// Logic, publishing and acking.
    pub elapsed: Duration,
}

impl BatchHandled {
    pub fn emit(self) {
        tracing::trace!(
            stage = self.stage,
            size = self.size,
            logic_ms = self.logic.as_millis() as u64,
            elapsed_ms = self.elapsed.as_millis() as u64,
            "batch handled"
        );
        histogram!("hindsight_stage_logic_seconds", "stage" => self.stage)
            .record(self.logic.as_secs_f64());
        histogram!("hindsight_stage_handle_seconds", "stage" => self.stage)
            .record(self.elapsed.as_secs_f64());
        histogram!("hindsight_stage_batch_size", "stage" => self.stage).record(self.size as f64);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reason_codes_are_the_part_before_the_colon() {
        assert_eq!(super::reason_code("repeat: same as before"), "repeat");
        assert_eq!(super::reason_code("pleasantry"), "pleasantry");
    }
}

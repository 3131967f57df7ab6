//! What can happen in hindsight, one type per event. Emitting an event records
//! its log line and its metric together, so every metric has one name and one
//! label set wherever it is recorded, and the dashboards can be written from
//! this file alone.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

/// The reason code of a free-text reason: the part before the first ':'
/// (`"repeat: same as turn t-9"` → `repeat`). Metric labels take the code only,
/// so their number stays bounded.
pub fn reason_code(reason: &str) -> &str {
    reason.split(':').next().unwrap_or(reason).trim()
}

/// What a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric hindsight records: its name, kind, labels and help text.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn metric(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind,
        labels,
        help,
    }
}

use Kind::{Counter, Gauge, Histogram};

/// Every metric hindsight records. The events below are the only places that
/// record them; the dashboards and the compose test read names from here.
#[rustfmt::skip]
pub const METRICS: &[Metric] = &[
    metric("hindsight_stage_received_total", Counter, &["stage", "tenant"], "Messages a stage received."),
    metric("hindsight_stage_emitted_total", Counter, &["stage", "tenant"], "Messages a stage published to its output."),
    metric("hindsight_stage_dropped_total", Counter, &["stage", "tenant", "reason"], "Inputs a stage dropped on purpose, by reason code."),
    metric("hindsight_stage_rejected_total", Counter, &["stage", "tenant", "reason"], "Inputs a stage moved to the DLQ, by reason code."),
    metric("hindsight_stage_retried_total", Counter, &["stage", "tenant"], "Inputs a stage will retry after a transient failure."),
    // Batches mix tenants, so batch timings are per stage only.
    metric("hindsight_stage_logic_seconds", Histogram, &["stage"], "Time a stage's own logic spent on one batch (transport excluded)."),
    metric("hindsight_stage_handle_seconds", Histogram, &["stage"], "Time a stage spent on one batch, publishing and acking included."),
    metric("hindsight_stage_batch_size", Histogram, &["stage"], "Messages per batch handed to a stage."),
    metric("hindsight_consumer_pending", Gauge, &["stream", "consumer"], "Messages a stage's consumer has not been delivered yet (polled by the gateway)."),
    metric("hindsight_consumer_ack_pending", Gauge, &["stream", "consumer"], "Messages delivered to a stage and not acked yet (polled by the gateway)."),
    metric("hindsight_consumer_redelivered", Gauge, &["stream", "consumer"], "Messages a consumer is redelivering (polled by the gateway)."),
    metric("hindsight_dlq_depth", Gauge, &["stage", "tenant"], "Dead letters waiting in the DLQ (polled by the gateway)."),
    metric("hindsight_llm_calls_total", Counter, &["tenant", "model", "outcome"], "LLM calls, by outcome (ok, transient_error, format_refused, error)."),
    metric("hindsight_llm_failures_total", Counter, &["tenant", "model", "outcome"], "LLM calls that failed, by outcome."),
    metric("hindsight_llm_tokens_total", Counter, &["tenant", "model", "kind"], "LLM tokens, by kind (prompt, completion)."),
    metric("hindsight_llm_call_seconds", Histogram, &["model"], "Latency of one LLM call."),
    metric("hindsight_facts_extracted_total", Counter, &["tenant", "extractor"], "Facts extracted, by extractor (rules, llm, rules-fallback)."),
    metric("hindsight_turns_without_facts_total", Counter, &["tenant"], "Kept turns that yielded no fact."),
    metric("hindsight_embed_batch_size", Histogram, &["model"], "Texts per embedder call."),
    metric("hindsight_embed_seconds", Histogram, &["model"], "Latency of one embedder call."),
    metric("hindsight_embed_failures_total", Counter, &["model"], "Embedder calls that failed."),
    metric("hindsight_dedupe_total", Counter, &["tenant", "outcome"], "Facts persisted, by outcome (created, merged, exact, superseded, quarantined)."),
    metric("hindsight_memories", Gauge, &["tenant", "status"], "Memories by status (polled by the gateway)."),
    metric("hindsight_recall_total", Counter, &["tenant"], "Recalls answered."),
    metric("hindsight_recall_seconds", Histogram, &[], "Latency of one recall, end to end."),
    metric("hindsight_recall_part_seconds", Histogram, &["part"], "Latency of one part of a recall: the query embedding (embed), each channel (dense, which includes embed; keyword; entity; filter), reading rows (rows), fusion and scoring (rank)."),
    metric("hindsight_recall_degraded_total", Counter, &["tenant"], "Recalls answered without the vector channel."),
    metric("hindsight_working_write_log_failures_total", Counter, &["record"], "Working-memory writes whose write-log record was lost."),
    metric("hindsight_janitor_run_seconds", Histogram, &["dry_run", "status"], "Duration of one maintenance run."),
    metric("hindsight_janitor_runs_total", Counter, &["dry_run", "status"], "Maintenance runs, by status (finished, failed)."),
    metric("hindsight_janitor_changes_total", Counter, &["step"], "Memories (and turns of the archive) a real maintenance run changed, by step (reinstated, split, decayed, merged, archived, reviewed, consolidated, summaries, purged, turns_emptied, turns_purged)."),
    metric("hindsight_erasures_total", Counter, &["outcome"], "Erases of a user, by outcome (finished; stopped: left running, to resume)."),
    metric("hindsight_erased_total", Counter, &["what"], "What finished erases removed: memories, sources, events, turns, keyword_stats, contexts, index_points, working_keys, export_rows, stream_messages."),
    metric("hindsight_janitor_last_run_timestamp_seconds", Gauge, &[], "When the last real maintenance run finished (polled by the gateway)."),
];

/// Registers help texts; called once when the recorder is installed.
pub fn describe() {
    for m in METRICS {
        match m.kind {
            Counter => metrics::describe_counter!(m.name, m.help),
            Gauge => metrics::describe_gauge!(m.name, m.help),
            Histogram if m.name.ends_with("_seconds") => {
                metrics::describe_histogram!(m.name, metrics::Unit::Seconds, m.help)
            }
            Histogram => metrics::describe_histogram!(m.name, metrics::Unit::Count, m.help),
        }
    }
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

/// An erase of a user ended: finished, or stopped with its job left running.
pub struct Erased<'a> {
    pub erasure: &'a str,
    pub finished: bool,
    /// What it removed, by the names of the counts (finished erases only).
    pub removed: &'a [(&'static str, u64)],
}

impl Erased<'_> {
    pub fn emit(self) {
        let outcome = if self.finished { "finished" } else { "stopped" };
        tracing::info!(erasure = self.erasure, outcome, removed = ?self.removed, "erase ended");
        counter!("hindsight_erasures_total", "outcome" => outcome).increment(1);
        for (what, n) in self.removed {
            counter!("hindsight_erased_total", "what" => *what).increment(*n);
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
            "tenant" => self.tenant.to_string(),
            "reason" => reason_code(self.reason).to_string()
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

/// A recall was answered.
pub struct Recalled<'a> {
    pub tenant: &'a str,
    pub elapsed: Duration,
    pub memories: usize,
    pub tokens: usize,
}

impl Recalled<'_> {
    pub fn emit(self) {
        tracing::debug!(
            tenant = self.tenant,
            ms = self.elapsed.as_secs_f64() * 1000.0,
            memories = self.memories,
            tokens = self.tokens,
            "recalled"
        );
        histogram!("hindsight_recall_seconds").record(self.elapsed.as_secs_f64());
        counter!("hindsight_recall_total", "tenant" => self.tenant.to_string()).increment(1);
    }
}

/// One part of a recall finished (the query embedding, a channel, fusion).
pub struct RecallPart {
    pub part: &'static str,
    pub elapsed: Duration,
}

impl RecallPart {
    pub fn emit(self) {
        let seconds = self.elapsed.as_secs_f64();
        tracing::debug!(part = self.part, ms = seconds * 1000.0, "recall part");
        histogram!("hindsight_recall_part_seconds", "part" => self.part).record(seconds);
    }
}

/// A recall was answered without the vector channel.
pub struct RecallDegraded<'a> {
    pub tenant: &'a str,
    pub reason: &'a str,
}

impl RecallDegraded<'_> {
    pub fn emit(self) {
        tracing::warn!(
            tenant = self.tenant,
            reason = self.reason,
            "recall degraded to the keyword, filter and entity channels"
        );
        counter!("hindsight_recall_degraded_total", "tenant" => self.tenant.to_string())
            .increment(1);
    }
}

/// A working-memory write succeeded but its write-log record was lost.
pub struct WorkingWriteLogFailed<'a> {
    /// `write` or `expiry`: which record.
    pub record: &'static str,
    pub reason: &'a str,
}

impl WorkingWriteLogFailed<'_> {
    pub fn emit(self) {
        tracing::warn!(
            record = self.record,
            reason = self.reason,
            "working-memory write log: record lost"
        );
        counter!("hindsight_working_write_log_failures_total", "record" => self.record)
            .increment(1);
    }
}

/// The gateway read a stage consumer's state from JetStream.
pub struct ConsumerObserved<'a> {
    pub stream: &'a str,
    pub consumer: &'a str,
    pub pending: u64,
    pub ack_pending: u64,
    pub redelivered: u64,
}

impl ConsumerObserved<'_> {
    pub fn emit(self) {
        let (stream, consumer) = (self.stream.to_string(), self.consumer.to_string());
        gauge!("hindsight_consumer_pending", "stream" => stream.clone(), "consumer" => consumer.clone())
            .set(self.pending as f64);
        gauge!("hindsight_consumer_ack_pending", "stream" => stream.clone(), "consumer" => consumer.clone())
            .set(self.ack_pending as f64);
        gauge!("hindsight_consumer_redelivered", "stream" => stream, "consumer" => consumer)
            .set(self.redelivered as f64);
    }
}

/// The gateway counted the dead letters of one stage and tenant (0 once a
/// subject it saw before is empty, so the gauge does not stick).
pub struct DlqObserved<'a> {
    pub stage: &'a str,
    pub tenant: &'a str,
    pub depth: u64,
}

impl DlqObserved<'_> {
    pub fn emit(self) {
        gauge!("hindsight_dlq_depth", "stage" => self.stage.to_string(), "tenant" => self.tenant.to_string())
            .set(self.depth as f64);
    }
}

/// The gateway counted one tenant's memories in one status.
pub struct MemoriesObserved<'a> {
    pub tenant: &'a str,
    pub status: &'a str,
    pub count: u64,
}

impl MemoriesObserved<'_> {
    pub fn emit(self) {
        gauge!("hindsight_memories", "tenant" => self.tenant.to_string(), "status" => self.status.to_string())
            .set(self.count as f64);
    }
}

/// The gateway read when the last real maintenance run finished.
pub struct JanitorLastRunObserved {
    pub finished_at: chrono::DateTime<chrono::Utc>,
}

impl JanitorLastRunObserved {
    pub fn emit(self) {
        gauge!("hindsight_janitor_last_run_timestamp_seconds")
            .set(self.finished_at.timestamp() as f64);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reason_codes_are_the_part_before_the_colon() {
        assert_eq!(super::reason_code("repeat: same as before"), "repeat");
        assert_eq!(super::reason_code("pleasantry"), "pleasantry");
    }

    #[test]
    fn every_metric_is_named_once() {
        let mut names: Vec<&str> = super::METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a metric is listed twice");
    }

    /// Metrics are recorded only by the events in this file, so every name and
    /// label set is defined once.
    #[test]
    fn no_metric_is_recorded_outside_this_file() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut offenders = Vec::new();
        for dir in ["shared", "services", "tests"] {
            visit(&root.join(dir), &mut offenders);
        }
        assert!(
            offenders.is_empty(),
            "metrics recorded outside events.rs: {offenders:?}"
        );
    }

    fn visit(dir: &std::path::Path, offenders: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    visit(&path, offenders);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("src/events.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for mac in ["counter!(", "gauge!(", "histogram!("] {
                    if text.contains(mac) {
                        offenders.push(format!("{} ({mac})", path.display()));
                    }
                }
            }
        }
    }

    #[test]
    fn every_recorded_name_is_listed() {
        let text = include_str!("events.rs");
        let listed: Vec<&str> = super::METRICS.iter().map(|m| m.name).collect();
        for mac in ["counter!(", "gauge!(", "histogram!("] {
            for (i, _) in text.match_indices(mac) {
                let rest = &text[i + mac.len()..];
                let Some(start) = rest.find('"') else {
                    continue;
                };
                let name: String = rest[start + 1..]
                    .chars()
                    .take_while(|c| *c != '"')
                    .collect();
                if name.starts_with("hindsight_") {
                    assert!(
                        listed.contains(&name.as_str()),
                        "{name} is recorded but not in METRICS"
                    );
                }
            }
        }
    }
}

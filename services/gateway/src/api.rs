//! The operations every surface offers (HTTP, NATS, MCP), once. Each takes
//! the tenant its caller is authenticated as; nothing here trusts a tenant
//! named in a request body.

use std::{sync::Arc, time::Duration};

use async_nats::jetstream;
use chrono::Utc;
use hindsight_core::{Namespace, Topic, fact::FactType, ids, memory::Status, turn, zone::Zones};
use hindsight_erase::{Eraser, Report};
use hindsight_recall::{
    RecallRequest, RecallResponse, Recaller,
    rank::{brief, budget::MAX_K, memory::RecalledMemory},
};
use hindsight_screen::{screen, working as writes};
use hindsight_shared::bus::Bus;
use hindsight_store::{
    admin::{MemoryPatch, Overview},
    row::MemoryRow,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::ApiError;

/// A memory as `GET /v1/memories/{id}` shows it.
pub type MemoryView = MemoryRow;

/// A change to a memory (`PATCH /v1/memories/{id}`, `memory_update`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    pub content: Option<String>,
    pub importance: Option<f32>,
    pub confidence: Option<f32>,
    pub fact_type: Option<String>,
    /// `active` (restore) or `archived`.
    pub status: Option<String>,
    /// Pinned memories are left as they are by every janitor step (never
    /// decayed, merged, archived, consolidated or purged).
    pub pinned: Option<bool>,
}

/// A turn accepted for the pipeline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accepted {
    pub turn_id: String,
    pub subject: String,
    /// JetStream had this turn already (same tenant and turn id within the window).
    pub duplicate: bool,
}

/// A session or a time range as a memory brief.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub brief: String,
    pub memories: Vec<RecalledMemory>,
}

/// The operations, over one store, one recaller and one bus.
#[derive(Clone)]
pub struct Gateway {
    recaller: Recaller,
    bus: Bus,
    namespace: Namespace,
    /// Ask the running gateway over NATS first (a process without the index,
    /// such as `hindsight mcp` next to `hindsight up`), answering locally only
    /// when none replies.
    remote_recall: Option<Duration>,
    /// The calendar the brief's dates are shown on, per tenant.
    zones: Zones,
    /// How working-memory writes are screened, as turns are.
    screen: screen::Settings,
    /// Erases users (`DELETE /v1/users/{user}`, `<ns>.erase.<tenant>`); none
    /// in a process that does not serve them.
    eraser: Option<Arc<Eraser>>,
    /// The SHA-256 of `HINDSIGHT_OPERATOR_KEY`, when set.
    operator_key: Option<String>,
}

impl Gateway {
    pub fn new(recaller: Recaller, bus: Bus, namespace: Namespace) -> Self {
        Self {
            recaller,
            bus,
            namespace,
            remote_recall: None,
            zones: Zones::default(),
            screen: screen::Settings::default(),
            eraser: None,
            operator_key: None,
        }
    }

    /// Erases users with `eraser`; `operator_key` may then erase a user of
    /// any tenant.
    pub fn erasing(mut self, eraser: Eraser, operator_key: Option<&str>) -> Self {
        self.eraser = Some(Arc::new(eraser));
        self.operator_key = operator_key.map(|k| ids::digest(&[k], 64));
        self
    }

    /// Whether `key` is the operator's.
    pub fn is_operator_key(&self, key: &str) -> bool {
        self.operator_key
            .as_deref()
            .is_some_and(|hash| ids::digest(&[key], 64) == hash)
    }

    /// Erases a user of `tenant` (or counts, in a dry run), everywhere.
    pub async fn erase_user(
        &self,
        tenant: &str,
        user_id: &str,
        actor: &str,
        dry_run: bool,
    ) -> Result<Report, ApiError> {
        let Some(eraser) = &self.eraser else {
            return Err(ApiError::Unavailable(
                "this process does not erase users: ask the gateway (hindsight up or run gateway)"
                    .into(),
            ));
        };
        Ok(eraser.erase(tenant, user_id, actor, dry_run).await?)
    }

    /// Screens working-memory writes with `settings` (`HINDSIGHT_SCREEN_THRESHOLD`,
    /// `HINDSIGHT_SCREEN_LEARNT`).
    pub fn screening(mut self, settings: screen::Settings) -> Self {
        // Fit now, not inside the first write's request.
        if settings.learnt {
            screen::learnt::model();
        }
        self.screen = settings;
        self
    }

    /// Shows the brief's dates on each tenant's calendar
    /// (`HINDSIGHT_TIME_ZONE`, `HINDSIGHT_TENANT_TIME_ZONES`; UTC until set).
    pub fn zoned(mut self, zones: Zones) -> Self {
        self.zones = zones;
        self
    }

    /// `memories` as a brief for `tenant`, its dates on the tenant's calendar.
    pub fn brief(&self, tenant: &str, memories: &[RecalledMemory]) -> String {
        brief::render(memories, self.zones.of(tenant))
    }

    /// Recall through the running gateway (NATS request-reply) when one answers within `timeout`.
    pub fn with_remote_recall(mut self, timeout: Duration) -> Self {
        self.remote_recall = Some(timeout);
        self
    }

    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    pub fn store(&self) -> &hindsight_store::Store {
        self.recaller.store()
    }

    pub async fn recall(
        &self,
        tenant: &str,
        req: &RecallRequest,
    ) -> Result<RecallResponse, ApiError> {
        req.validate()
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        if let Some(timeout) = self.remote_recall {
            match crate::remote::request(&self.bus.client, &self.namespace, tenant, req, timeout)
                .await
            {
                Ok(answer) => return answer,
                Err(reason) => {
                    tracing::debug!(%reason, "no gateway answered over NATS; recalling in this process")
                }
            }
        }
        Ok(self.recaller.recall(tenant, req).await?)
    }

    /// Validates a turn as the filter would and publishes it to
    /// `<ns>.turns.<tenant>`; the tenant is the caller's, whatever the body says.
    pub async fn write_turn(
        &self,
        tenant: &str,
        mut envelope: Map<String, Value>,
    ) -> Result<Accepted, ApiError> {
        match envelope.get("tenant") {
            None => {}
            Some(Value::String(t)) if t == tenant => {}
            Some(_) => {
                return Err(ApiError::BadRequest(
                    "`tenant` differs from the tenant of your key: leave it out".into(),
                ));
            }
        }
        envelope.insert("tenant".into(), Value::String(tenant.to_string()));
        let payload =
            serde_json::to_vec(&envelope).map_err(|e| ApiError::Internal(e.to_string()))?;
        let parsed = turn::parse_envelope(&payload, tenant, Utc::now())
            .map_err(|e| ApiError::BadRequest(format!("invalid turn: {e}")))?;
        // The id the filter will use, so a retry of this request is a duplicate.
        envelope.insert("turn_id".into(), Value::String(parsed.turn_id.clone()));
        let payload =
            serde_json::to_vec(&envelope).map_err(|e| ApiError::Internal(e.to_string()))?;
        let subject = self.namespace.subject(Topic::Turns, tenant);
        let msg = jetstream::message::PublishMessage::build()
            .payload(payload.into())
            .message_id(parsed.msg_id());
        let ack = self
            .bus
            .js
            .send_publish(subject.clone(), msg)
            .await
            .map_err(|e| ApiError::Unavailable(format!("cannot publish the turn: {e}")))?
            .await
            .map_err(|e| ApiError::Unavailable(format!("the turn was not stored: {e}")))?;
        Ok(Accepted {
            turn_id: parsed.turn_id,
            subject,
            duplicate: ack.duplicate,
        })
    }

    pub async fn memory(&self, tenant: &str, id: Uuid) -> Result<MemoryView, ApiError> {
        self.recaller
            .store()
            .memory(tenant, id)
            .await?
            .ok_or_else(|| not_found(id))
    }

    pub async fn update(
        &self,
        tenant: &str,
        id: Uuid,
        req: &UpdateRequest,
        actor: &str,
    ) -> Result<MemoryView, ApiError> {
        let bad = |m: &str| Err(ApiError::BadRequest(m.to_string()));
        if req.content.is_none()
            && req.importance.is_none()
            && req.confidence.is_none()
            && req.fact_type.is_none()
            && req.status.is_none()
            && req.pinned.is_none()
        {
            return bad(
                "nothing to change: give content, importance, confidence, fact_type, status or pinned",
            );
        }
        if req.importance.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
            return bad("importance must be between 0 and 1");
        }
        if req.confidence.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
            return bad("confidence must be between 0 and 1");
        }
        let fact_type = match req.fact_type.as_deref().map(FactType::try_from) {
            None => None,
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => return bad(&format!("fact_type: {e}")),
        };
        let status = match req.status.as_deref().map(Status::try_from) {
            None => None,
            Some(Ok(s @ (Status::Active | Status::Archived))) => Some(s),
            Some(_) => {
                return bad(
                    "status can only be set to `active` (restore) or `archived`; use DELETE to delete",
                );
            }
        };
        let content = match &req.content {
            None => None,
            Some(c) if c.trim().is_empty() => return bad("content cannot be empty"),
            Some(c) if c.chars().count() > 4_000 => {
                return bad("content is longer than 4000 characters");
            }
            Some(c) => Some((
                c.trim().to_string(),
                self.embed_like(tenant, id, c.trim()).await?,
            )),
        };
        let patch = MemoryPatch {
            content,
            importance: req.importance,
            confidence: req.confidence,
            fact_type,
            status,
            pinned: req.pinned,
        };
        self.recaller
            .store()
            .update_memory(tenant, id, &patch, actor)
            .await?
            .ok_or_else(|| not_found(id))
    }

    /// New content is embedded with this process' embedder, which must be the
    /// model the memory was embedded with (vectors only compare within a model).
    async fn embed_like(
        &self,
        tenant: &str,
        id: Uuid,
        content: &str,
    ) -> Result<Vec<f32>, ApiError> {
        let Some(embedder) = self.recaller.embedder() else {
            return Err(ApiError::Unavailable(
                "no embedder in this process: content cannot be changed here".into(),
            ));
        };
        let model = self.recaller.store().memory_model(tenant, id).await?;
        let Some(model) = model else {
            return Err(not_found(id));
        };
        if model != embedder.model().name {
            return Err(ApiError::Unavailable(format!(
                "memory was embedded with {model}, this process embeds with {}: change the content where that model runs",
                embedder.model().name
            )));
        }
        embedder
            .embed(&[content.to_string()])
            .await
            .map_err(|e| ApiError::Unavailable(format!("embedding the new content failed: {e}")))?
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::Internal("the embedder returned no vector".into()))
    }

    pub async fn forget(
        &self,
        tenant: &str,
        id: Uuid,
        decay_factor: f32,
        actor: &str,
    ) -> Result<MemoryView, ApiError> {
        if !(0.0..=1.0).contains(&decay_factor) {
            return Err(ApiError::BadRequest(
                "decay_factor must be between 0 and 1 (1 archives)".into(),
            ));
        }
        self.recaller
            .store()
            .forget_memory(tenant, id, decay_factor, actor)
            .await?
            .ok_or_else(|| not_found(id))
    }

    pub async fn delete(&self, tenant: &str, id: Uuid, actor: &str) -> Result<(), ApiError> {
        if self
            .recaller
            .store()
            .delete_memory(tenant, id, actor)
            .await?
        {
            Ok(())
        } else {
            Err(not_found(id))
        }
    }

    pub async fn overview(&self, tenant: &str, user_id: &str) -> Result<Overview, ApiError> {
        if user_id.trim().is_empty() {
            return Err(ApiError::BadRequest("user_id is required".into()));
        }
        Ok(self.recaller.store().overview(tenant, user_id, 10).await?)
    }

    /// A session's or a time range's memories as a brief, most relevant to
    /// the optional query first.
    pub async fn summarize(
        &self,
        tenant: &str,
        mut req: RecallRequest,
    ) -> Result<Summary, ApiError> {
        if req.session_id.is_none() && req.from.is_none() && req.to.is_none() {
            return Err(ApiError::BadRequest(
                "summarize needs a session_id or a time range (from/to)".into(),
            ));
        }
        req.top_k = req.top_k.or(Some(MAX_K));
        let answer = self.recall(tenant, &req).await?;
        Ok(Summary {
            brief: self.brief(tenant, &answer.memories),
            memories: answer.memories,
        })
    }

    /// Sets keys of a session's working memory (`null` removes a key), with
    /// secrets redacted (reported beside the keys); a value the poisoning
    /// screen would quarantine is refused with its reasons, and nothing is
    /// written.
    pub async fn put_working(
        &self,
        tenant: &str,
        user_id: &str,
        session_id: &str,
        changes: &Map<String, Value>,
    ) -> Result<(Map<String, Value>, Vec<writes::Redacted>), ApiError> {
        let Some(store) = self.recaller.working() else {
            return Err(ApiError::Unavailable(
                "working memory is not available in this process".into(),
            ));
        };
        let (changes, redacted) = writes::screen(changes, self.screen)
            .map_err(|refused| ApiError::BadRequest(refused.to_string()))?;
        let keys = store.merge(tenant, user_id, session_id, &changes).await?;
        Ok((keys, redacted))
    }
}

fn not_found(id: Uuid) -> ApiError {
    ApiError::NotFound(format!("no memory {id} for this tenant"))
}

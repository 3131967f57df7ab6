//! The MCP server (the official Rust SDK, `rmcp`): six tools over stdio
//! (`hindsight mcp`) and streamable HTTP (`/mcp` on the gateway). Over HTTP
//! the bearer key decides the tenant; over stdio the process' `--tenant`
//! does. Failures come back as tool errors whose text says what to do.

use std::sync::Arc;

use axum::Router;
use chrono::{DateTime, Utc};
use hindsight_core::{closed_set::UnknownName, fact::FactType, memory::Include};
use hindsight_recall::{RecallRequest, RecallResponse};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig},
    schemars::{self, JsonSchema},
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::{
    api::{Gateway, UpdateRequest},
    error::ApiError,
    http::Tenant,
};

const INSTRUCTIONS: &str = "Long-term memory of earlier conversations. Call memory_search before \
answering anything that may depend on what the user said before (preferences, constraints, plans, \
facts about them); call memory_write with each user turn worth remembering. Memories are per user.";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// The user the turn is about (defaults to the server's `--user`).
    #[schemars(length(min = 1, max = 256))]
    pub user_id: Option<String>,
    /// The conversation the turn belongs to.
    #[schemars(length(min = 1, max = 256))]
    pub session_id: String,
    /// What was said, verbatim.
    #[schemars(length(min = 1, max = 16000))]
    pub content: String,
    /// user (default), assistant, tool or system.
    pub role: Option<String>,
    /// A stable id for the turn, so a retry is not stored twice.
    #[schemars(length(min = 1, max = 256))]
    pub turn_id: Option<String>,
    /// Exact keys to keep for this session for the next hour (task state,
    /// ids from tool results); a null value removes a key.
    pub working_memory: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// The user whose memories to search (defaults to the server's `--user`).
    #[schemars(length(min = 1, max = 256))]
    pub user_id: Option<String>,
    /// What to look for, in the user's words.
    #[schemars(length(max = 4000))]
    pub query: String,
    /// Limit to one conversation; also returns its working memory.
    pub session_id: Option<String>,
    /// Only these types: preference, constraint, event, plan, entity, relation, fact.
    pub fact_types: Option<Vec<String>>,
    /// At most this many memories (default: as many as are clearly relevant).
    #[schemars(range(min = 1, max = 50))]
    pub top_k: Option<usize>,
    /// Token budget of the answer (default 2000).
    #[schemars(range(min = 1, max = 32000))]
    pub max_tokens: Option<usize>,
    /// Also search these: superseded, archived, quarantined memories, and
    /// expired ones (past their end date, shown as past).
    pub include: Option<Vec<String>>,
    /// Recall as of this time (RFC 3339; default now): what ended before it
    /// is expired.
    pub as_of: Option<DateTime<Utc>>,
    /// `brief` (default): text grouped by type, to read; `json`: every field.
    pub format: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateArgs {
    /// The memory's id (from memory_search with format json).
    pub id: String,
    /// Corrected content.
    #[schemars(length(min = 1, max = 4000))]
    pub content: Option<String>,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub importance: Option<f32>,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: Option<f32>,
    /// preference, constraint, event, plan, entity, relation or fact.
    pub fact_type: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// The memory's id.
    pub id: String,
    /// How much of its importance to take away: 0 keeps it, 1 archives it
    /// (out of recall, still restorable by an operator).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub decay_factor: f32,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SummarizeArgs {
    #[schemars(length(min = 1, max = 256))]
    pub user_id: Option<String>,
    /// A conversation to summarise.
    pub session_id: Option<String>,
    /// Start of a time range (RFC 3339), inclusive.
    pub from: Option<DateTime<Utc>>,
    /// End of a time range (RFC 3339), inclusive.
    pub to: Option<DateTime<Utc>>,
    /// Optional focus: memories closer to it come first.
    #[schemars(length(max = 4000))]
    pub query: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DebugArgs {
    #[schemars(length(min = 1, max = 256))]
    pub user_id: Option<String>,
}

/// One MCP session's server.
#[derive(Clone)]
pub struct McpServer {
    gateway: Gateway,
    /// The tenant over stdio; over HTTP the key's tenant wins.
    tenant: Option<String>,
    user: Option<String>,
    tool_router: ToolRouter<Self>,
}

fn failure(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn api_failure(e: ApiError) -> CallToolResult {
    let hint = match &e {
        ApiError::BadRequest(_) => "; fix the arguments and call again",
        ApiError::NotFound(_) => "; memory_search with format json lists ids",
        ApiError::Unavailable(_) => "; try again shortly",
        ApiError::Internal(_) => "",
    };
    failure(format!("{e}{hint}"))
}

/// Members of a closed set by name (an argument's list of types or statuses).
fn names_in<T: std::str::FromStr<Err = UnknownName>>(
    names: Option<Vec<String>>,
) -> Result<Vec<T>, UnknownName> {
    names
        .unwrap_or_default()
        .iter()
        .map(|n| n.trim().parse())
        .collect()
}

fn memory_id(raw: &str) -> Result<Uuid, String> {
    Uuid::parse_str(raw).map_err(|_| {
        format!("{raw:?} is not a memory id; memory_search with format json lists ids")
    })
}

fn json_text(value: &impl serde::Serialize) -> CallToolResult {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn degraded_note(answer: &RecallResponse) -> String {
    match &answer.degraded_reason {
        Some(reason) => format!("\n(note: {reason})\n"),
        None => String::new(),
    }
}

#[tool_router]
impl McpServer {
    pub fn new(gateway: Gateway, tenant: Option<String>, user: Option<String>) -> Self {
        Self {
            gateway,
            tenant,
            user,
            tool_router: Self::tool_router(),
        }
    }

    /// The tenant of this call: the HTTP key's, else the process'.
    fn tenant(&self, ctx: &RequestContext<RoleServer>) -> Result<String, String> {
        let from_http = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Tenant>())
            .map(|t| t.0.clone());
        from_http.or_else(|| self.tenant.clone()).ok_or_else(|| {
            "no tenant: start the server with --tenant (stdio) or call /mcp with a bearer key"
                .to_string()
        })
    }

    /// The tenant and the user of this call.
    fn scope(
        &self,
        ctx: &RequestContext<RoleServer>,
        user: Option<String>,
    ) -> Result<(String, String), String> {
        Ok((self.tenant(ctx)?, self.user(user)?))
    }

    fn user(&self, given: Option<String>) -> Result<String, String> {
        given
            .filter(|u| !u.trim().is_empty())
            .or_else(|| self.user.clone())
            .ok_or_else(|| "user_id is required (this server has no default --user)".to_string())
    }

    #[tool(
        description = "Store one conversation turn in long-term memory. Use for each user \
turn that may matter later (preferences, constraints, plans, facts about the user or their world); \
the pipeline extracts, deduplicates and indexes facts within seconds. Do not use for greetings or \
small talk (they are filtered out anyway), nor to correct an existing memory (use memory_update). \
`working_memory` keeps exact keys for this session for one hour."
    )]
    async fn memory_write(
        &self,
        Parameters(args): Parameters<WriteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (tenant, user) = match self.scope(&ctx, args.user_id) {
            Ok(v) => v,
            Err(e) => return Ok(failure(e)),
        };
        let mut envelope = Map::new();
        envelope.insert("user_id".into(), json!(user));
        envelope.insert("session_id".into(), json!(args.session_id));
        envelope.insert("content".into(), json!(args.content));
        envelope.insert(
            "role".into(),
            json!(args.role.unwrap_or_else(|| "user".into())),
        );
        if let Some(id) = args.turn_id {
            envelope.insert("turn_id".into(), json!(id));
        }
        let accepted = match self.gateway.write_turn(&tenant, envelope).await {
            Ok(a) => a,
            Err(e) => return Ok(api_failure(e)),
        };
        let mut out = json!({"accepted": accepted});
        if let Some(changes) = args.working_memory {
            match self
                .gateway
                .put_working(&tenant, &user, &args.session_id, &changes)
                .await
            {
                Ok((map, redacted)) => {
                    out["working_memory"] = Value::Object(map);
                    if !redacted.is_empty() {
                        out["redacted"] = json!(redacted);
                    }
                }
                Err(e) => return Ok(api_failure(e)),
            }
        }
        Ok(json_text(&out))
    }

    #[tool(
        description = "Search the user's long-term memory. Use before answering anything that \
may depend on earlier conversations: who the user is, what they like or must avoid, what they \
planned or did. Returns a brief grouped by type with dates and confidence (format json: ids and \
every field). Do not use for facts of the current conversation, which you already have. If the \
answer says it is degraded, the vector index was unavailable and only keyword search ran."
    )]
    async fn memory_search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (tenant, user) = match self.scope(&ctx, args.user_id) {
            Ok(v) => v,
            Err(e) => return Ok(failure(e)),
        };
        let mut req = RecallRequest::new(user, args.query);
        req.session_id = args.session_id;
        req.fact_types = match names_in::<FactType>(args.fact_types) {
            Ok(t) => t,
            Err(e) => return Ok(failure(e.to_string())),
        };
        req.top_k = args.top_k;
        req.max_tokens = args.max_tokens;
        req.as_of = args.as_of;
        req.include = match names_in::<Include>(args.include) {
            Ok(i) => i,
            Err(e) => return Ok(failure(e.to_string())),
        };
        let answer = match self.gateway.recall(&tenant, &req).await {
            Ok(a) => a,
            Err(e) => return Ok(api_failure(e)),
        };
        match args.format.as_deref() {
            None | Some("brief") => {
                let mut text = self.gateway.brief(&tenant, &answer.memories);
                if let Some(wm) = &answer.working_memory
                    && !wm.is_empty()
                {
                    text.push_str(&format!(
                        "\nWorking memory of this session: {}\n",
                        Value::Object(wm.clone())
                    ));
                }
                text.push_str(&degraded_note(&answer));
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
            }
            Some("json") => Ok(json_text(&answer)),
            Some(other) => Ok(failure(format!(
                "unknown format {other:?}: use brief or json"
            ))),
        }
    }

    #[tool(
        description = "Correct or re-weigh one memory by id (content, importance, confidence, \
type). Use when the user corrects something you remembered or says it matters more or less. Do \
not use to add new information (memory_write) or to remove a memory (memory_forget)."
    )]
    async fn memory_update(
        &self,
        Parameters(args): Parameters<UpdateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (tenant, id) = match self
            .tenant(&ctx)
            .and_then(|t| Ok((t, memory_id(&args.id)?)))
        {
            Ok(v) => v,
            Err(e) => return Ok(failure(e)),
        };
        let req = UpdateRequest {
            content: args.content,
            importance: args.importance,
            confidence: args.confidence,
            fact_type: args.fact_type,
            status: None,
            pinned: None,
        };
        match self.gateway.update(&tenant, id, &req, "mcp").await {
            Ok(m) => Ok(json_text(&m)),
            Err(e) => Ok(api_failure(e)),
        }
    }

    #[tool(
        description = "Make a memory count less, or archive it (decay_factor 1). Use when the \
user asks you to forget something or it is plainly obsolete. Archived memories leave recall but \
stay restorable by an operator; nothing is erased here."
    )]
    async fn memory_forget(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (tenant, id) = match self
            .tenant(&ctx)
            .and_then(|t| Ok((t, memory_id(&args.id)?)))
        {
            Ok(v) => v,
            Err(e) => return Ok(failure(e)),
        };
        match self
            .gateway
            .forget(&tenant, id, args.decay_factor, "mcp")
            .await
        {
            Ok(m) => Ok(json_text(&m)),
            Err(e) => Ok(api_failure(e)),
        }
    }

    #[tool(
        description = "Summarise what is remembered of one conversation (session_id) or a time \
range (from/to), as a brief grouped by type. Use to catch up on a past session. Not for \
open-ended questions (memory_search)."
    )]
    async fn memory_summarize(
        &self,
        Parameters(args): Parameters<SummarizeArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (tenant, user) = match self.scope(&ctx, args.user_id) {
            Ok(v) => v,
            Err(e) => return Ok(failure(e)),
        };
        let mut req = RecallRequest::new(user, args.query.unwrap_or_default());
        req.session_id = args.session_id;
        req.from = args.from;
        req.to = args.to;
        match self.gateway.summarize(&tenant, req).await {
            Ok(s) => Ok(CallToolResult::success(vec![ContentBlock::text(s.brief)])),
            Err(e) => Ok(api_failure(e)),
        }
    }

    #[tool(
        description = "Counts of the user's memories by type and status, and the latest \
writes. Use to check that memory_write calls arrived, or to see what is stored; not for \
answering questions (memory_search)."
    )]
    async fn memory_debug(
        &self,
        Parameters(args): Parameters<DebugArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (tenant, user) = match self.scope(&ctx, args.user_id) {
            Ok(v) => v,
            Err(e) => return Ok(failure(e)),
        };
        match self.gateway.overview(&tenant, &user).await {
            Ok(o) => Ok(json_text(&o)),
            Err(e) => Ok(api_failure(e)),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hindsight", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// The streamable-HTTP endpoint at `/mcp` (mounted behind key authentication).
pub fn router(gateway: Gateway, allowed_hosts: &[String]) -> Router {
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(gateway.clone(), None, None)),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_allowed_hosts(allowed_hosts.to_vec()),
    );
    Router::new().route_service("/mcp", service)
}

/// Serves MCP over stdin/stdout until the client closes it.
pub async fn serve_stdio(
    gateway: Gateway,
    tenant: String,
    user: Option<String>,
) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let server = McpServer::new(gateway, Some(tenant), user);
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("MCP initialisation failed: {e}"))?;
    running.waiting().await?;
    Ok(())
}

//! The HTTP API (axum). Every `/v1` route and `/mcp` need a bearer key
//! (`hindsight tenant create NAME` prints one); the key decides the tenant.
//! A request that names another tenant (`X-Hindsight-Tenant`, or `tenant` in a
//! turn) gets 403; a missing or unknown key gets 401. Erasing a user
//! (`DELETE /v1/users/{user}`) also takes the operator's key
//! (`HINDSIGHT_OPERATOR_KEY`), with the tenant named by `X-Hindsight-Tenant`.

use axum::{
    Json, Router,
    extract::{Path, Query, Request, State},
    http::{HeaderMap, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{delete, get, post, put},
};
use hindsight_recall::RecallRequest;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::{
    api::{Gateway, UpdateRequest},
    error::ApiError,
};

/// Names the working-memory values a write redacted (`key=kind`, comma-separated).
const REDACTED: header::HeaderName = header::HeaderName::from_static("hindsight-redacted");

/// The tenant a request is authenticated as (set by [`authenticate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// The header a client may send to assert which tenant it means.
pub const TENANT_HEADER: &str = "x-hindsight-tenant";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        error(status, kind, &self.to_string())
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"kind": kind, "message": message}})),
    )
        .into_response()
}

/// The `/v1` API and, when given, the MCP endpoint, behind key authentication.
pub fn router(gateway: Gateway, mcp: Option<Router>) -> Router {
    let mut api = Router::new()
        .route("/v1/recall", post(recall))
        .route("/v1/turns", post(turns))
        .route(
            "/v1/memories/{id}",
            get(get_memory).patch(patch_memory).delete(delete_memory),
        )
        .route("/v1/users/{user}/overview", get(overview))
        .route(
            "/v1/users/{user}/sessions/{session}/working",
            put(put_working),
        )
        .with_state(gateway.clone());
    if let Some(mcp) = mcp {
        api = api.merge(mcp);
    }
    let erase = Router::new()
        .route("/v1/users/{user}", delete(erase_user))
        .with_state(gateway.clone())
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            authenticate_eraser,
        ));
    api.layer(middleware::from_fn_with_state(gateway, authenticate))
        .merge(erase)
}

/// Who asked to erase: the operator or the tenant's own key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Actor(&'static str);

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// Resolves the bearer key to its tenant, or answers 401/403.
async fn authenticate(State(gateway): State<Gateway>, mut req: Request, next: Next) -> Response {
    match tenant_of_key(&gateway, req.headers()).await {
        Ok(tenant) => {
            req.extensions_mut().insert(Tenant(tenant));
            next.run(req).await
        }
        Err(response) => response,
    }
}

/// The tenant a tenant's key belongs to, checked against the tenant the
/// request names, or the 401/403 to answer.
async fn tenant_of_key(gateway: &Gateway, headers: &HeaderMap) -> Result<String, Response> {
    let Some(key) = bearer(headers) else {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing bearer key: send `Authorization: Bearer <key>` (`hindsight tenant create NAME` makes one)",
        ));
    };
    let tenant = match gateway.store().tenant_of_key(key).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "unknown or revoked key",
            ));
        }
        Err(e) => return Err(ApiError::from(e).into_response()),
    };
    if let Some(asked) = headers.get(TENANT_HEADER)
        && asked.as_bytes() != tenant.as_bytes()
    {
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this key belongs to another tenant",
        ));
    }
    Ok(tenant)
}

/// As [`authenticate`], and the operator's key too, for the tenant it names.
async fn authenticate_eraser(
    State(gateway): State<Gateway>,
    mut req: Request,
    next: Next,
) -> Response {
    let operator = bearer(req.headers()).is_some_and(|k| gateway.is_operator_key(k));
    let (tenant, actor) = if operator {
        let named = req
            .headers()
            .get(TENANT_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match named {
            Some(t) => (t, Actor("operator")),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    "the operator's key erases for the tenant named by the X-Hindsight-Tenant header",
                );
            }
        }
    } else {
        match tenant_of_key(&gateway, req.headers()).await {
            Ok(t) => (t, Actor("tenant")),
            Err(response) => return response,
        }
    };
    req.extensions_mut().insert(Tenant(tenant));
    req.extensions_mut().insert(actor);
    next.run(req).await
}

#[derive(Deserialize)]
struct RecallParams {
    /// `json` (default) or `brief`.
    format: Option<String>,
}

async fn recall(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    Query(params): Query<RecallParams>,
    body: Result<Json<RecallRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let answer = g.recall(&tenant, &req).await?;
    match params.format.as_deref() {
        None | Some("json") => Ok(Json(answer).into_response()),
        Some("brief") => {
            let mut text = g.brief(&tenant, &answer.memories);
            if let Some(reason) = &answer.degraded_reason {
                text.push_str(&format!("\n(degraded: {reason})\n"));
            }
            Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
        }
        Some(other) => Err(ApiError::BadRequest(format!(
            "unknown format {other:?}: expected json or brief"
        ))),
    }
}

async fn turns(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    body: Result<Json<Map<String, Value>>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Response> {
    let Json(envelope) = body.map_err(|e| ApiError::BadRequest(e.body_text()).into_response())?;
    if let Some(t) = envelope.get("tenant")
        && t.as_str() != Some(tenant.as_str())
    {
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the turn names another tenant than your key's",
        ));
    }
    let accepted = g
        .write_turn(&tenant, envelope)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

fn memory_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw)
        .map_err(|_| ApiError::BadRequest(format!("{raw:?} is not a memory id (a UUID)")))
}

async fn get_memory(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(g.memory(&tenant, memory_id(&id)?).await?).into_response())
}

async fn patch_memory(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    Path(id): Path<String>,
    body: Result<Json<UpdateRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let id = memory_id(&id)?;
    Ok(Json(g.update(&tenant, id, &req, "http").await?).into_response())
}

async fn delete_memory(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    g.delete(&tenant, memory_id(&id)?, "http").await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn overview(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    Path(user): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(g.overview(&tenant, &user).await?).into_response())
}

async fn put_working(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    Path((user, session)): Path<(String, String)>,
    body: Result<Json<Map<String, Value>>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(changes) = body.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let (keys, redacted) = g.put_working(&tenant, &user, &session, &changes).await?;
    let mut response = Json(keys).into_response();
    // The body stays the session's keys; what was redacted is said beside it.
    if !redacted.is_empty() {
        let said = redacted
            .iter()
            .map(|r| format!("{}={}", r.key, r.kinds.join("+")))
            .collect::<Vec<_>>()
            .join(", ");
        if let Ok(value) = header::HeaderValue::from_str(&said) {
            response.headers_mut().insert(REDACTED, value);
        }
    }
    Ok(response)
}

#[derive(Deserialize)]
struct EraseParams {
    #[serde(default)]
    dry_run: bool,
}

/// Erases a user everywhere; `?dry_run=true` counts only. The reply is the
/// erase's report, with its counts per place.
async fn erase_user(
    State(g): State<Gateway>,
    axum::Extension(Tenant(tenant)): axum::Extension<Tenant>,
    axum::Extension(Actor(actor)): axum::Extension<Actor>,
    Path(user): Path<String>,
    Query(params): Query<EraseParams>,
) -> Result<Response, ApiError> {
    let actor = format!("http:{actor}");
    Ok(Json(g.erase_user(&tenant, &user, &actor, params.dry_run).await?).into_response())
}

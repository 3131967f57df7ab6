//! The HTTP API (axum). Every `/v1` route and `/mcp` need a bearer key
//! (`hindsight tenant create NAME` prints one); the key decides the tenant.
//! A request that names another tenant (`X-Hindsight-Tenant`, or `tenant` in a
//! turn) gets 403; a missing or unknown key gets 401.

use axum::{
    Json, Router,
    extract::{Path, Query, Request, State},
    http::{HeaderMap, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post, put},
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
    api.layer(middleware::from_fn_with_state(gateway, authenticate))
}

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
    let Some(key) = bearer(req.headers()) else {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing bearer key: send `Authorization: Bearer <key>` (`hindsight tenant create NAME` makes one)",
        );
    };
    let tenant = match gateway.store().tenant_of_key(key).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "unknown or revoked key",
            );
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    if let Some(asked) = req.headers().get(TENANT_HEADER)
        && asked.as_bytes() != tenant.as_bytes()
    {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this key belongs to another tenant",
        );
    }
    req.extensions_mut().insert(Tenant(tenant));
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

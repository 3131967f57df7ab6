//! A local OpenAI-compatible chat endpoint that answers from a script, and can
//! misbehave on cue: 429 with `Retry-After`, 500, slow replies, bad JSON. It
//! also serves `/v1/embeddings` with deterministic vectors (a hashed bag of
//! words, L2-normalised, [`EMBED_DIMENSION`] values), so that a pipeline can
//! embed thousands of facts without the local model.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

/// One answer of the fake endpoint.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A chat completion whose message content is this text.
    Content(String),
    /// An HTTP error, with an optional `Retry-After` in seconds.
    Status(u16, Option<u64>),
    /// A chat completion with this content, after a delay.
    Slow(Duration, String),
}

type Script = Box<dyn FnMut(usize, &Value) -> Reply + Send>;

/// The dimension of the vectors `/v1/embeddings` returns (set
/// `HINDSIGHT_EMBED_DIMENSION` to it).
pub const EMBED_DIMENSION: usize = 384;

#[derive(Clone)]
struct Shared {
    calls: Arc<AtomicUsize>,
    embed_calls: Arc<AtomicUsize>,
    script: Arc<Mutex<Script>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

pub struct FakeLlm {
    pub addr: SocketAddr,
    shared: Shared,
}

impl FakeLlm {
    /// Starts the endpoint; `script(call_index, request)` decides each answer.
    pub async fn start(script: impl FnMut(usize, &Value) -> Reply + Send + 'static) -> Self {
        let shared = Shared {
            calls: Arc::new(AtomicUsize::new(0)),
            embed_calls: Arc::new(AtomicUsize::new(0)),
            script: Arc::new(Mutex::new(Box::new(script))),
            requests: Arc::new(Mutex::new(Vec::new())),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/v1/embeddings", post(embeddings))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared }
    }

    /// The base URL to configure (`HINDSIGHT_LLM_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Chat completions asked for so far.
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }

    /// Embedding requests answered so far.
    pub fn embed_calls(&self) -> usize {
        self.shared.embed_calls.load(Ordering::SeqCst)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

/// A chat completion body with this message content.
pub fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160}
    })
}

async fn complete(State(shared): State<Shared>, Json(request): Json<Value>) -> Response {
    let index = shared.calls.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(request.clone());
    }
    let reply = match shared.script.lock() {
        Ok(mut script) => script(index, &request),
        Err(_) => Reply::Status(500, None),
    };
    match reply {
        Reply::Content(text) => Json(completion(&text)).into_response(),
        Reply::Slow(delay, text) => {
            tokio::time::sleep(delay).await;
            Json(completion(&text)).into_response()
        }
        Reply::Status(code, retry_after) => {
            let mut headers = HeaderMap::new();
            if let Some(secs) = retry_after {
                headers.insert("retry-after", HeaderValue::from(secs));
            }
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            // A 400 is how OpenAI-compatible servers refuse an unsupported response_format.
            let message = if code == 400 {
                "response_format of type json_schema is not supported by this model".to_string()
            } else {
                format!("fake error {code}")
            };
            let body =
                json!({"error": {"message": message, "type": "fake", "param": null, "code": null}});
            (status, headers, Json(body)).into_response()
        }
    }
}

/// A deterministic embedding of `text`: each lowercased word hashed (FNV-1a)
/// to a signed component, then L2-normalised. Texts sharing most words are
/// close; unrelated texts are nearly orthogonal.
pub fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; EMBED_DIMENSION];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let slot = (h % EMBED_DIMENSION as u64) as usize;
        v[slot] += if (h >> 32) & 1 == 0 { 1.0 } else { -1.0 };
    }
    if v.iter().all(|x| *x == 0.0) {
        v[0] = 1.0;
    }
    hindsight_embedder::normalise(&mut v);
    v
}

async fn embeddings(State(shared): State<Shared>, Json(request): Json<Value>) -> Response {
    shared.embed_calls.fetch_add(1, Ordering::SeqCst);
    let texts: Vec<String> = match &request["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => {
            let body = json!({"error": {"message": "input must be a string or an array of strings", "type": "invalid_request_error", "param": "input", "code": null}});
            return (StatusCode::BAD_REQUEST, Json(body)).into_response();
        }
    };
    let tokens: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": bag_of_words(t)}))
        .collect();
    Json(json!({
        "object": "list",
        "model": request["model"].as_str().unwrap_or("fake-embedding"),
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    }))
    .into_response()
}

//! The LLM client: any OpenAI-compatible chat endpoint through async-openai,
//! shared by the extract stage (facts from turns) and the janitor (summaries).
//!
//! A structured reply is asked for in the strictest format the server takes:
//! a JSON schema (structured outputs), JSON mode, then free text; a server
//! that refuses a format is asked in the next one, and remembered.
//!
//! Failures: each call has a timeout; 429, 5xx, timeouts and connection errors
//! are retried with exponential backoff (honouring `Retry-After`) for up to
//! the retry budget; then the caller gets [`Unavailable`] and decides (the
//! extract stage hands the turn back to JetStream for a delayed redelivery).

mod http;

use std::{
    sync::atomic::{AtomicU8, Ordering},
    time::{Duration, Instant},
};

use async_openai::{
    Client,
    config::OpenAIConfig,
    error::OpenAIError,
    types::chat::{
        ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
        ChatCompletionRequestUserMessage, CreateChatCompletionRequest, ResponseFormat,
        ResponseFormatJsonSchema,
    },
};
use hindsight_core::retry;
use hindsight_shared::{config::LlmConfig, events};

pub use http::HttpFailure;

/// Why the LLM gave no answer this time.
#[derive(Debug, Clone, thiserror::Error)]
#[error("LLM unavailable: {reason}")]
pub struct Unavailable {
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot build the LLM client: {0}")]
pub struct BuildError(String);

/// One question: the instructions and the user message, answered at temperature 0.
#[derive(Debug, Clone, Copy)]
pub struct Prompt<'a> {
    pub system: &'a str,
    pub user: &'a str,
}

/// The shape of the answer asked for.
#[derive(Debug, Clone, Copy)]
pub enum Reply<'a> {
    /// Plain text.
    Text,
    /// JSON following `schema`, asked as strictly as the server allows.
    Json {
        name: &'a str,
        description: &'a str,
        schema: &'a serde_json::Value,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Format {
    JsonSchema = 0,
    JsonObject = 1,
    Text = 2,
}

/// One failed attempt, as the retry policy sees it.
enum Failure {
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// The server refuses the response format: ask in the next one.
    FormatRefused(String),
    Permanent(String),
}

pub struct LlmClient {
    client: Client<OpenAIConfig>,
    model: String,
    retry_budget: Duration,
    /// The strictest JSON format the server has not refused.
    format: AtomicU8,
    /// At most `HINDSIGHT_LLM_CONCURRENCY` calls at once.
    limiter: tokio::sync::Semaphore,
}

impl LlmClient {
    /// `None` when no endpoint is configured.
    pub fn from_config(config: &LlmConfig) -> Result<Option<Self>, BuildError> {
        let Some(base_url) = &config.base_url else {
            return Ok(None);
        };
        let mut openai = OpenAIConfig::new().with_api_base(base_url.trim_end_matches('/'));
        if let Some(key) = &config.api_key {
            openai = openai.with_api_key(key);
        }
        let transport =
            http::Transport::new(config.timeout).map_err(|e| BuildError(e.to_string()))?;
        // async-openai builds requests with the client and sends them through `transport`.
        let client = Client::build(transport.client(), openai).with_http_service(transport);
        Ok(Some(Self {
            client,
            model: config.model.clone(),
            retry_budget: config.retry_budget,
            format: AtomicU8::new(Format::JsonSchema as u8),
            limiter: tokio::sync::Semaphore::new(config.concurrency),
        }))
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    fn format(&self) -> Format {
        match self.format.load(Ordering::Relaxed) {
            0 => Format::JsonSchema,
            1 => Format::JsonObject,
            _ => Format::Text,
        }
    }

    fn request(
        &self,
        prompt: Prompt<'_>,
        reply: Reply<'_>,
        format: Format,
    ) -> CreateChatCompletionRequest {
        let response_format = match (reply, format) {
            (Reply::Text, _) | (_, Format::Text) => None,
            (
                Reply::Json {
                    name,
                    description,
                    schema,
                },
                Format::JsonSchema,
            ) => Some(ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: Some(description.into()),
                    name: name.into(),
                    schema: schema.clone(),
                    strict: Some(true),
                },
            }),
            (Reply::Json { .. }, Format::JsonObject) => Some(ResponseFormat::JsonObject),
        };
        CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: vec![
                ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage::from(
                    prompt.system,
                )),
                ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage::from(
                    prompt.user,
                )),
            ],
            temperature: Some(0.0),
            response_format,
            ..Default::default()
        }
    }

    /// Asks `prompt` for `tenant` (the tenant labels the calls' metrics),
    /// retrying transient failures within the budget; the answer's text.
    pub async fn ask(
        &self,
        tenant: &str,
        prompt: Prompt<'_>,
        reply: Reply<'_>,
    ) -> Result<String, Unavailable> {
        let _permit = self.limiter.acquire().await.map_err(|e| Unavailable {
            reason: e.to_string(),
        })?;
        let policy = retry::policy(
            Duration::from_millis(250),
            Duration::from_secs(4),
            Some(self.retry_budget),
        );
        let started = Instant::now();
        backoff::future::retry(policy, || async {
            loop {
                let format = match reply {
                    Reply::Json { .. } => self.format(),
                    Reply::Text => Format::Text,
                };
                match self.call(self.request(prompt, reply, format), tenant).await {
                    Ok(text) => return Ok(text),
                    Err(Failure::FormatRefused(reason)) if format != Format::Text => {
                        tracing::warn!(model = %self.model, ?format, %reason, "the LLM server refuses this response format; asking in the next");
                        let _ = self.format.compare_exchange(format as u8, format as u8 + 1, Ordering::Relaxed, Ordering::Relaxed);
                    }
                    Err(Failure::FormatRefused(reason)) | Err(Failure::Permanent(reason)) => {
                        return Err(backoff::Error::permanent(reason));
                    }
                    Err(Failure::Transient { reason, retry_after }) => {
                        let remaining = self.retry_budget.saturating_sub(started.elapsed());
                        return Err(match retry_after {
                            Some(wait) if wait > remaining => backoff::Error::permanent(format!("{reason} (asked to wait {}s)", wait.as_secs())),
                            Some(wait) => backoff::Error::retry_after(reason, wait),
                            None => backoff::Error::transient(reason),
                        });
                    }
                }
            }
        })
        .await
        .map_err(|reason| Unavailable { reason })
    }

    async fn call(
        &self,
        request: CreateChatCompletionRequest,
        tenant: &str,
    ) -> Result<String, Failure> {
        let started = Instant::now();
        let result = self.client.chat().create(request).await;
        let elapsed = started.elapsed();
        match result {
            Ok(response) => {
                let (prompt_tokens, completion_tokens) = response
                    .usage
                    .as_ref()
                    .map(|u| (u.prompt_tokens as u64, u.completion_tokens as u64))
                    .unwrap_or_default();
                events::LlmCalled {
                    tenant,
                    model: &self.model,
                    outcome: "ok",
                    elapsed,
                    prompt_tokens,
                    completion_tokens,
                }
                .emit();
                let text = response
                    .choices
                    .into_iter()
                    .next()
                    .and_then(|c| c.message.content)
                    .unwrap_or_default();
                Ok(text)
            }
            Err(error) => {
                let failure = classify(error);
                let outcome = match &failure {
                    Failure::Transient { .. } => "transient_error",
                    Failure::FormatRefused(_) => "format_refused",
                    Failure::Permanent(_) => "error",
                };
                events::LlmCalled {
                    tenant,
                    model: &self.model,
                    outcome,
                    elapsed,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                }
                .emit();
                Err(failure)
            }
        }
    }
}

/// Trimmed, at most `max` characters, control characters (tab, newline and
/// carriage return aside) made spaces, as the turn contract has it: a model may
/// answer `\u0000`, which Postgres text and `jsonb` cannot hold.
pub fn clean(s: &str, max: usize) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_control() && !matches!(c, '\t' | '\n' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    s.trim().chars().take(max).collect()
}

fn classify(error: OpenAIError) -> Failure {
    match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpFailure>() {
            Ok(http) => {
                let reason = format!("HTTP {}: {}", http.status, http.body);
                let body = http.body.to_ascii_lowercase();
                match http.status {
                    429 | 408 => Failure::Transient {
                        reason,
                        retry_after: http.retry_after,
                    },
                    s if s >= 500 => Failure::Transient {
                        reason,
                        retry_after: http.retry_after,
                    },
                    400 | 422
                        if body.contains("response_format")
                            || body.contains("json_schema")
                            || body.contains("json_object")
                            || body.contains("structured") =>
                    {
                        Failure::FormatRefused(reason)
                    }
                    _ => Failure::Permanent(reason),
                }
            }
            Err(other) => Failure::Transient {
                reason: other.to_string(),
                retry_after: None,
            },
        },
        OpenAIError::Reqwest(e) => Failure::Transient {
            reason: if e.is_timeout() {
                "timed out".into()
            } else {
                e.to_string()
            },
            retry_after: None,
        },
        // A reply that is not a chat completion: a broken or overloaded server.
        OpenAIError::JSONDeserialize(e, _) => Failure::Transient {
            reason: format!("malformed reply: {e}"),
            retry_after: None,
        },
        OpenAIError::ApiError(e) => {
            let status = e.status_code.as_u16();
            if status == 429 || status >= 500 {
                Failure::Transient {
                    reason: e.to_string(),
                    retry_after: None,
                }
            } else {
                Failure::Permanent(e.to_string())
            }
        }
        other => Failure::Permanent(other.to_string()),
    }
}

//! Any OpenAI-compatible embeddings endpoint, through async-openai, batched.

use async_openai::{
    Client,
    config::OpenAIConfig,
    error::OpenAIError,
    types::embeddings::{CreateEmbeddingRequest, EmbeddingInput},
};
use async_trait::async_trait;

use crate::{EmbedError, Embedder, Languages, ModelId};

pub struct RemoteEmbedder {
    client: Client<OpenAIConfig>,
    id: ModelId,
    languages: Languages,
}

impl RemoteEmbedder {
    /// `dimension` is checked against the first answer.
    pub fn new(
        base_url: &str,
        api_key: Option<&str>,
        model: &str,
        dimension: usize,
    ) -> Result<Self, EmbedError> {
        let mut config = OpenAIConfig::new().with_api_base(base_url.trim_end_matches('/'));
        if let Some(key) = api_key {
            config = config.with_api_key(key);
        }
        let http =
            hindsight_core::http_client::client().map_err(|e| EmbedError::Client(e.to_string()))?;
        Ok(Self {
            client: Client::build(http, config),
            id: ModelId {
                name: model.to_string(),
                version: base_url.to_string(),
                dimension,
            },
            languages: Languages::default(),
        })
    }

    /// The languages the endpoint's model reads.
    pub fn declaring(mut self, languages: Languages) -> Self {
        self.languages = languages;
        self
    }
}

fn classify(e: OpenAIError) -> EmbedError {
    match e {
        OpenAIError::Reqwest(e) => EmbedError::Unavailable(e.to_string()),
        OpenAIError::ApiError(e)
            if e.status_code.as_u16() == 429 || e.status_code.is_server_error() =>
        {
            EmbedError::Unavailable(e.to_string())
        }
        other => EmbedError::Refused(other.to_string()),
    }
}

#[async_trait]
impl Embedder for RemoteEmbedder {
    fn model(&self) -> &ModelId {
        &self.id
    }

    fn languages(&self) -> &Languages {
        &self.languages
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let request = CreateEmbeddingRequest {
            model: self.id.name.clone(),
            input: EmbeddingInput::StringArray(texts.to_vec()),
            ..Default::default()
        };
        let response = self
            .client
            .embeddings()
            .create(request)
            .await
            .map_err(classify)?;
        let mut data = response.data;
        data.sort_by_key(|d| d.index);
        if data.len() != texts.len() {
            return Err(EmbedError::Refused(format!(
                "{} vectors for {} texts",
                data.len(),
                texts.len()
            )));
        }
        data.into_iter()
            .map(|d| {
                let mut v = d.embedding;
                if v.len() != self.id.dimension {
                    return Err(EmbedError::Refused(format!(
                        "the endpoint returned {} dimensions, {} were configured (HINDSIGHT_EMBED_DIMENSION)",
                        v.len(),
                        self.id.dimension
                    )));
                }
                crate::normalise(&mut v);
                Ok(v)
            })
            .collect()
    }
}

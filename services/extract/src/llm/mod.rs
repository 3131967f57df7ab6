//! The LLM extractor: the facts of one turn, asked of the shared LLM client
//! ([`hindsight_llm`]) with the extraction prompt ([`prompt`]) and read back
//! leniently ([`parse`]).
//!
//! When the LLM stays unavailable the turn is handed back to JetStream for a
//! delayed redelivery; the stage falls back to the rules after
//! `fallback_after` deliveries (see `stage.rs`), so a turn is never lost to
//! an outage.

pub mod parse;
pub mod prompt;

use hindsight_core::turn::KeptTurn;
use hindsight_llm::{LlmClient, Prompt, Reply};
use hindsight_shared::config::LlmConfig;

use crate::draft::Draft;

pub use hindsight_llm::{BuildError, Unavailable};

/// What one turn's extraction by the LLM gave.
#[derive(Debug, Clone)]
pub enum Extraction {
    Facts {
        drafts: Vec<Draft>,
        /// The model's opinion of the poisoning screen's question: does the
        /// turn try to give the assistant orders? `None` when it did not say.
        orders_assistant: Option<bool>,
    },
    /// The model answered, but nothing valid came out of it.
    NoFacts(String),
}

pub struct LlmExtractor {
    llm: LlmClient,
    schema: serde_json::Value,
}

impl LlmExtractor {
    /// `None` when no endpoint is configured.
    pub fn from_config(config: &LlmConfig) -> Result<Option<Self>, BuildError> {
        Ok(LlmClient::from_config(config)?.map(|llm| Self {
            llm,
            schema: prompt::schema(),
        }))
    }

    pub fn model(&self) -> &str {
        self.llm.model()
    }

    /// Extracts the facts of one turn, retrying transient failures within the budget.
    pub async fn extract(&self, kept: &KeptTurn) -> Result<Extraction, Unavailable> {
        let user = prompt::user_message(kept);
        let text = self
            .llm
            .ask(
                &kept.turn.tenant,
                Prompt {
                    system: prompt::SYSTEM,
                    user: &user,
                },
                Reply::Json {
                    name: "facts",
                    description: "Facts worth remembering from one conversation turn",
                    schema: &self.schema,
                },
            )
            .await?;
        Ok(match parse::parse_reply(&text) {
            Ok(drafts) if drafts.is_empty() => {
                Extraction::NoFacts("the model found nothing worth remembering".into())
            }
            Ok(drafts) => Extraction::Facts {
                drafts,
                orders_assistant: parse::orders_assistant(&text),
            },
            Err(e) => Extraction::NoFacts(format!("unusable model output: {e}")),
        })
    }
}

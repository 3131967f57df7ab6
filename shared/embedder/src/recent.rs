//! An embedder that remembers the vectors of the last texts it embedded one
//! at a time: recall's queries. Agents ask the same thing again (a question
//! retried, the same lookup each turn), and a query's embedding is most of a
//! recall's time; a repeat is answered from memory, the same vector as before.
//! Batches (the embed stage's facts) go to the model as they are.

use std::sync::Arc;

use async_trait::async_trait;
use quick_cache::sync::Cache;

use crate::{EmbedError, Embedder, Languages, ModelId};

/// `inner`, with the vectors of up to `capacity` recent single texts kept.
pub struct Recent {
    inner: Arc<dyn Embedder>,
    vectors: Cache<String, Arc<[f32]>>,
}

impl Recent {
    /// `inner` with a memory of `capacity` texts, or `inner` itself when
    /// `capacity` is 0.
    pub fn wrap(inner: Arc<dyn Embedder>, capacity: usize) -> Arc<dyn Embedder> {
        if capacity == 0 {
            return inner;
        }
        Arc::new(Recent {
            inner,
            vectors: Cache::new(capacity),
        })
    }
}

#[async_trait]
impl Embedder for Recent {
    fn model(&self) -> &ModelId {
        self.inner.model()
    }

    fn languages(&self) -> &Languages {
        self.inner.languages()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let [text] = texts else {
            return self.inner.embed(texts).await;
        };
        if let Some(vector) = self.vectors.get(text) {
            return Ok(vec![vector.to_vec()]);
        }
        let vectors = self.inner.embed(texts).await?;
        if let [vector] = vectors.as_slice() {
            self.vectors
                .insert(text.clone(), Arc::from(vector.as_slice()));
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts the texts it embeds; each text's vector is its length.
    struct Counting {
        model: ModelId,
        languages: Languages,
        texts: AtomicUsize,
    }

    #[async_trait]
    impl Embedder for Counting {
        fn model(&self) -> &ModelId {
            &self.model
        }
        fn languages(&self) -> &Languages {
            &self.languages
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    fn counting() -> Arc<Counting> {
        Arc::new(Counting {
            model: ModelId {
                name: "counting".into(),
                version: "1".into(),
                dimension: 1,
            },
            languages: Languages::default(),
            texts: AtomicUsize::new(0),
        })
    }

    #[tokio::test]
    async fn a_repeated_single_text_is_embedded_once_and_batches_every_time() {
        let inner = counting();
        let recent = Recent::wrap(inner.clone(), 16);
        let query = vec!["where does my sister live".to_string()];
        let first = recent.embed(&query).await.expect("embeds");
        let again = recent.embed(&query).await.expect("embeds");
        assert_eq!(first, again);
        assert_eq!(inner.texts.load(Ordering::SeqCst), 1);
        let batch = vec!["a".to_string(), "bb".to_string()];
        recent.embed(&batch).await.expect("embeds");
        recent.embed(&batch).await.expect("embeds");
        assert_eq!(inner.texts.load(Ordering::SeqCst), 5);
        assert_eq!(recent.model().name, "counting");
    }

    #[tokio::test]
    async fn no_capacity_is_the_embedder_itself() {
        let inner = counting();
        let plain = Recent::wrap(inner.clone(), 0);
        let query = vec!["q".to_string()];
        plain.embed(&query).await.expect("embeds");
        plain.embed(&query).await.expect("embeds");
        assert_eq!(inner.texts.load(Ordering::SeqCst), 2);
    }
}

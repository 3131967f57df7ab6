//! The repair step: memories that persist superseded or merged facts into
//! under an earlier rule (the cosine deciding alone, in scripts the embedder
//! does not read) are judged again by what the words say
//! ([`hindsight_text::frame`]), from their provenance: a memory superseded
//! by a fact that neither negates it nor changes one of its one-valued
//! attributes is active again; a memory holding facts that do not restate
//! one another is split, one memory per group of facts that do.

use hindsight_core::embedding::cosine;
use hindsight_store::maintenance::repair::{self, Merged, Part};
use hindsight_text::{
    frame::{Reading, Relation},
    statement::content_key,
};
use sqlx::{Connection, PgConnection};

use crate::{exec::Exec, request::JanitorError};

/// Whether the words would have superseded `old` by the fact `by`.
pub fn supersedes(old: &str, by: &str) -> bool {
    matches!(
        Reading::new(old).relation(&Reading::new(by)),
        Relation::Changes(_) | Relation::Negates
    )
}

/// One group of a memory's facts: a content, and the facts restating it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub content: String,
    pub fact_ids: Vec<String>,
}

/// How persist's rule groups a memory's facts, in the order they arrived:
/// each fact joins the first group whose content it restates (the same, or
/// with a detail added: the fuller content is the group's), else starts a
/// group of its own. The first group is the memory's.
pub fn groups(facts: &[(String, String)]) -> Vec<Group> {
    // Each group with its content read and keyed once, as it changes.
    let mut out: Vec<(Group, Reading, String)> = Vec::new();
    for (id, content) in facts {
        let new = Reading::new(content);
        let key = content_key(content);
        let joined = out.iter_mut().find_map(|(g, old, old_key)| {
            if *old_key == key {
                return Some((g, old, old_key, false));
            }
            old.restated_by(&new).map(|relation| {
                let fuller = matches!(
                    relation,
                    Relation::Refines {
                        new_is_fuller: true
                    }
                );
                (g, old, old_key, fuller)
            })
        });
        match joined {
            Some((g, old, old_key, fuller)) => {
                g.fact_ids.push(id.clone());
                if fuller {
                    g.content = content.clone();
                    *old = new;
                    *old_key = key;
                }
            }
            None => out.push((
                Group {
                    content: content.clone(),
                    fact_ids: vec![id.clone()],
                },
                new,
                key,
            )),
        }
    }
    out.into_iter().map(|(g, ..)| g).collect()
}

impl Exec<'_> {
    pub(crate) async fn repair(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        let tenant = self.tenant.clone();
        let superseded = repair::superseded(conn, tenant.as_deref()).await?;
        let wrong: Vec<&repair::Superseded> = superseded
            .iter()
            .filter(|s| !supersedes(&s.content, &s.by_fact))
            .collect();
        for chunk in wrong.chunks(self.janitor.chunk.max(1) as usize) {
            let mut tx = conn.begin().await?;
            repair::reinstate(&mut tx, self.id, chunk).await?;
            for s in chunk {
                self.counts.record(&s.tenant, |c| c.reinstated += 1);
            }
            self.commit(tx).await?;
        }

        let merged = repair::merged(conn, tenant.as_deref()).await?;
        for memory in &merged {
            let groups = groups(&memory.facts);
            if groups.len() < 2 {
                continue;
            }
            let Some(vectors) = self.embed_groups(memory, &groups).await? else {
                self.counts.record(&memory.tenant, |c| c.unsplit += 1);
                continue;
            };
            let mut parts = groups.into_iter().zip(vectors).map(|(g, embedding)| Part {
                content_key: content_key(&g.content),
                content: g.content,
                embedding,
                fact_ids: g.fact_ids,
            });
            let Some(kept) = parts.next() else { continue };
            let parts: Vec<Part> = parts.collect();
            let mut tx = conn.begin().await?;
            let made = repair::split(&mut tx, self.id, memory, &kept, &parts).await?;
            self.counts.record(&memory.tenant, |c| c.split += made);
            self.commit(tx).await?;
        }
        Ok(())
    }

    /// The groups' vectors, by the embedder that made the memory's; `None`
    /// when this janitor has no such embedder (the memory is left whole).
    async fn embed_groups(
        &self,
        memory: &Merged,
        groups: &[Group],
    ) -> Result<Option<Vec<Vec<f32>>>, JanitorError> {
        let Some(embedder) = self.janitor.embedder().await else {
            return Ok(None);
        };
        let model = embedder.model();
        if model.name != memory.embedding_model || model.version != memory.embedding_version {
            tracing::warn!(memory = %memory.id, model = %memory.embedding_model, "a wrongly merged memory of another embedding model is left whole");
            return Ok(None);
        }
        let texts: Vec<String> = groups.iter().map(|g| g.content.clone()).collect();
        let vectors = embedder
            .embed(&texts)
            .await
            .map_err(|e| JanitorError::Embed(e.to_string()))?;
        // A vector that is not one (a zero vector from an empty text) is no
        // vector to index.
        if vectors.iter().any(|v| cosine(v, v) < 0.5) {
            return Ok(None);
        }
        Ok(Some(vectors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(contents: &[&str]) -> Vec<(String, String)> {
        contents
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("f{i}"), c.to_string()))
            .collect()
    }

    #[test]
    fn unrelated_facts_fall_apart_and_restatements_stay_together() {
        let g = groups(&facts(&[
            "Li每周六去游泳。",
            "Li喜欢喝绿茶。",
            "Li喜欢喝咖啡。",
            "Li每周六去游泳",
        ]));
        let contents: Vec<&str> = g.iter().map(|g| g.content.as_str()).collect();
        assert_eq!(
            contents,
            ["Li每周六去游泳。", "Li喜欢喝绿茶。", "Li喜欢喝咖啡。"]
        );
        assert_eq!(g[0].fact_ids, ["f0", "f3"]);
    }

    #[test]
    fn a_detail_added_keeps_the_fuller_content() {
        let g = groups(&facts(&["Li的妹妹住在北京。", "Li的妹妹住在北京朝阳区。"]));
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].content, "Li的妹妹住在北京朝阳区。");
    }

    #[test]
    fn another_persons_attribute_supersedes_nothing() {
        assert!(!supersedes("Li的妹妹住在北京。", "Li的哥哥住在广州。"));
        assert!(supersedes("Li的妹妹住在北京。", "Li的妹妹现在住在上海。"));
    }
}

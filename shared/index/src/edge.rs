//! Embedded Qdrant Edge: one shard per collection under the data directory,
//! in this process. Edge is synchronous, so calls run on the blocking pool.
//! One process owns a shard directory: processes that share an index use a
//! Qdrant server instead.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use async_trait::async_trait;
use hindsight_core::closed_set::names;
use qdrant_edge::{
    Condition, CountRequest, DEFAULT_VECTOR_NAME, Distance, EdgeConfig, EdgeShard,
    EdgeVectorParams, FieldCondition, FieldIndexOperations, Filter, Match, NamedQuery,
    PayloadFieldSchema, PayloadSchemaType, PointId, PointInsertOperations, PointOperations,
    PointStruct, QueryEnum, Range, SearchRequest, UpdateOperation, ValueVariants,
    WithPayloadInterface,
};
use uuid::Uuid;

use crate::{Collection, Hit, IndexError, Point, Scope, VectorIndex};

pub struct EdgeIndex {
    dir: PathBuf,
    shards: Mutex<HashMap<String, Arc<EdgeShard>>>,
    /// Held by every write and its flush: `EdgeShard::flush` panics when
    /// another write holds the shard's WAL.
    writes: Arc<Mutex<()>>,
}

fn failed(e: impl ToString) -> IndexError {
    IndexError::Failed(e.to_string())
}

impl EdgeIndex {
    /// Shards live in `dir/<collection>`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            shards: Mutex::new(HashMap::new()),
            writes: Arc::new(Mutex::new(())),
        }
    }

    fn open(&self, collection: &Collection) -> Result<Arc<EdgeShard>, IndexError> {
        let mut shards = self
            .shards
            .lock()
            .map_err(|_| failed("shard map poisoned"))?;
        if let Some(shard) = shards.get(&collection.name) {
            return Ok(shard.clone());
        }
        let path = self.dir.join(&collection.name);
        std::fs::create_dir_all(&path).map_err(failed)?;
        let loaded = path.join("edge_config.json").exists();
        let shard = if loaded {
            EdgeShard::load(&path, None).map_err(failed)?
        } else {
            EdgeShard::new(&path, shard_config(collection.dimension)).map_err(failed)?
        };
        payload_indexes(&shard, &collection.name, loaded)?;
        let shard = Arc::new(shard);
        shards.insert(collection.name.clone(), shard.clone());
        Ok(shard)
    }

    /// Applies a write and flushes the shard before returning: Qdrant Edge
    /// (0.7) does not replay its WAL when a shard is loaded, so a write that
    /// was only in memory is gone after a crash (`kill -9`), while Postgres
    /// already marked its memories indexed.
    async fn write(
        &self,
        collection: &Collection,
        f: impl FnOnce(&EdgeShard) -> Result<(), IndexError> + Send + 'static,
    ) -> Result<(), IndexError> {
        let writes = self.writes.clone();
        self.with_shard(collection, move |s| {
            let _guard = writes.lock().map_err(|_| failed("write lock poisoned"))?;
            f(s)?;
            s.flush();
            Ok(())
        })
        .await
    }

    async fn with_shard<T: Send + 'static>(
        &self,
        collection: &Collection,
        f: impl FnOnce(&EdgeShard) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, IndexError> {
        let shard = self.open(collection)?;
        tokio::task::spawn_blocking(move || f(&shard))
            .await
            .map_err(failed)?
    }
}

fn path(field: &str) -> Result<qdrant_edge::JsonPath, IndexError> {
    field
        .try_into()
        .map_err(|_| failed(format!("invalid payload field {field:?}")))
}

/// A new shard's configuration: one cosine vector of `dimension`.
pub fn shard_config(dimension: usize) -> EdgeConfig {
    EdgeConfig::builder()
        .vector(
            DEFAULT_VECTOR_NAME,
            EdgeVectorParams::builder(dimension, Distance::Cosine).build(),
        )
        .build()
}

/// Creates the payload indexes the shard lacks. A process killed between
/// creating a shard and flushing its indexes leaves a shard that loads
/// without them, and every filtered search then reads each point's payload
/// from storage: persist slowed to a crawl that way after a `kill -9`.
fn payload_indexes(shard: &EdgeShard, name: &str, loaded: bool) -> Result<(), IndexError> {
    let schema = shard.info().payload_schema;
    let mut created = Vec::new();
    let fields = crate::KEYWORD_FIELDS
        .iter()
        .map(|f| (*f, PayloadSchemaType::Keyword))
        .chain(
            crate::INTEGER_FIELDS
                .iter()
                .map(|f| (*f, PayloadSchemaType::Integer)),
        );
    for (field, kind) in fields {
        if !schema.contains_key(&path(field)?) {
            create_index(shard, field, kind)?;
            created.push(field);
        }
    }
    if !created.is_empty() {
        shard.flush();
        if loaded {
            tracing::warn!(collection = name, fields = ?created, "the embedded index lacked payload indexes (a process stopped while creating it): created them");
        }
    }
    Ok(())
}

fn create_index(shard: &EdgeShard, field: &str, kind: PayloadSchemaType) -> Result<(), IndexError> {
    shard
        .update(UpdateOperation::FieldIndexOperation(
            FieldIndexOperations::CreateIndex(qdrant_edge::CreateIndex {
                field_name: path(field)?,
                field_schema: Some(PayloadFieldSchema::FieldType(kind)),
            }),
        ))
        .map_err(failed)
}

fn keyword(field: &str, value: &str) -> Result<Condition, IndexError> {
    Ok(Condition::Field(FieldCondition::new_match(
        path(field)?,
        Match::new_value(ValueVariants::String(value.to_string())),
    )))
}

fn any_of(field: &str, values: &[&str]) -> Result<Condition, IndexError> {
    let conditions = values
        .iter()
        .map(|v| keyword(field, v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Condition::Filter(Filter {
        should: Some(conditions),
        min_should: None,
        must: None,
        must_not: None,
    }))
}

/// The filter of a scope; shared with the server implementation's tests in spirit.
pub(crate) fn filter(scope: &Scope) -> Result<Filter, IndexError> {
    let mut must = vec![
        keyword("tenant", &scope.tenant)?,
        keyword("user_id", &scope.user_id)?,
    ];
    if !scope.statuses.is_empty() {
        must.push(any_of("status", &names(&scope.statuses))?);
    }
    if !scope.fact_types.is_empty() {
        must.push(any_of("fact_type", &names(&scope.fact_types))?);
    }
    if let Some(session) = &scope.session_id {
        must.push(keyword("session_id", session)?);
    }
    if scope.occurred_from.is_some() || scope.occurred_to.is_some() {
        must.push(Condition::Field(FieldCondition::new_range(
            path("occurred_at")?,
            Range {
                gte: scope.occurred_from.map(|v| (v as f64).into()),
                lte: scope.occurred_to.map(|v| (v as f64).into()),
                lt: None,
                gt: None,
            },
        )));
    }
    Ok(Filter {
        must: Some(must),
        should: None,
        min_should: None,
        must_not: None,
    })
}

fn point_id(id: Uuid) -> PointId {
    PointId::Uuid(id)
}

#[async_trait]
impl VectorIndex for EdgeIndex {
    async fn ensure(&self, collection: &Collection) -> Result<(), IndexError> {
        self.open(collection).map(|_| ())
    }

    async fn upsert(&self, collection: &Collection, points: Vec<Point>) -> Result<(), IndexError> {
        if points.is_empty() {
            return Ok(());
        }
        let points = points
            .into_iter()
            .map(|p| {
                let payload = serde_json::to_value(&p.payload).map_err(failed)?;
                Ok(PointStruct::new(point_id(p.id), p.vector, payload).into())
            })
            .collect::<Result<Vec<_>, IndexError>>()?;
        self.write(collection, move |s| {
            s.update(UpdateOperation::PointOperation(
                PointOperations::UpsertPoints(PointInsertOperations::PointsList(points)),
            ))
            .map_err(failed)
        })
        .await
    }

    async fn delete(&self, collection: &Collection, ids: Vec<Uuid>) -> Result<(), IndexError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids = ids.into_iter().map(point_id).collect();
        self.write(collection, move |s| {
            s.update(UpdateOperation::PointOperation(
                PointOperations::DeletePoints { ids },
            ))
            .map_err(failed)
        })
        .await
    }

    async fn search(
        &self,
        collection: &Collection,
        vector: &[f32],
        scope: &Scope,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let request = SearchRequest {
            query: QueryEnum::Nearest(NamedQuery::default_dense(vector.to_vec())),
            filter: Some(filter(scope)?),
            params: None,
            limit,
            offset: 0,
            with_payload: Some(WithPayloadInterface::Bool(false)),
            with_vector: None,
            score_threshold: None,
        };
        self.with_shard(collection, move |s| {
            let points = s.search(request).map_err(failed)?;
            Ok(points
                .into_iter()
                .filter_map(|p| match p.id {
                    PointId::Uuid(id) => Some(Hit { id, score: p.score }),
                    PointId::NumId(_) => None,
                })
                .collect())
        })
        .await
    }

    async fn count(
        &self,
        collection: &Collection,
        scope: Option<&Scope>,
    ) -> Result<u64, IndexError> {
        let filter = scope.map(filter).transpose()?;
        self.with_shard(collection, move |s| {
            s.count(CountRequest {
                filter,
                exact: true,
            })
            .map(|n| n as u64)
            .map_err(failed)
        })
        .await
    }

    async fn clear(&self, collection: &Collection) -> Result<(), IndexError> {
        self.write(collection, |s| {
            s.update(UpdateOperation::PointOperation(
                PointOperations::DeletePointsByFilter(Filter {
                    must: None,
                    should: None,
                    min_should: None,
                    must_not: None,
                }),
            ))
            .map_err(failed)
        })
        .await
    }

    /// New points are searched by brute force until folded into indexed
    /// segments: the reconciler asks for this every few minutes.
    async fn optimize(&self, collection: &Collection) -> Result<(), IndexError> {
        self.write(collection, |s| s.optimize().map(|_| ()).map_err(failed))
            .await
    }
}

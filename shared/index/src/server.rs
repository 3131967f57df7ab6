//! A Qdrant server over gRPC (`QDRANT_URL`, port 6334), through qdrant-client.
//! Several processes (stage replicas, gateways) can share it, which the
//! embedded index cannot.

use async_trait::async_trait;
use hindsight_core::closed_set::names;
use qdrant_client::{
    Payload as QdrantPayload, Qdrant,
    qdrant::{
        Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
        DeletePointsBuilder, Distance, FieldType, Filter, PointId, PointStruct, PointsIdsList,
        QueryPointsBuilder, Range, UpsertPointsBuilder, VectorParamsBuilder,
        point_id::PointIdOptions,
    },
};
use uuid::Uuid;

use crate::{Collection, Hit, IndexError, Point, Scope, VectorIndex};

pub struct ServerIndex {
    client: Qdrant,
}

fn unavailable(e: impl ToString) -> IndexError {
    IndexError::Unavailable(e.to_string())
}

impl ServerIndex {
    pub fn connect(url: &str, api_key: Option<&str>) -> Result<Self, IndexError> {
        let mut builder = Qdrant::from_url(url).timeout(std::time::Duration::from_secs(5));
        if let Some(key) = api_key {
            builder = builder.api_key(key);
        }
        Ok(Self {
            client: builder.build().map_err(unavailable)?,
        })
    }
}

fn any_of(field: &str, values: &[&str]) -> Condition {
    Filter::should(
        values
            .iter()
            .map(|v| Condition::matches(field, v.to_string())),
    )
    .into()
}

fn filter(scope: &Scope) -> Filter {
    let mut must = vec![
        Condition::matches("tenant", scope.tenant.clone()),
        Condition::matches("user_id", scope.user_id.clone()),
    ];
    if !scope.statuses.is_empty() {
        must.push(any_of("status", &names(&scope.statuses)));
    }
    if !scope.fact_types.is_empty() {
        must.push(any_of("fact_type", &names(&scope.fact_types)));
    }
    if let Some(session) = &scope.session_id {
        must.push(Condition::matches("session_id", session.clone()));
    }
    if scope.occurred_from.is_some() || scope.occurred_to.is_some() {
        must.push(Condition::range(
            "occurred_at",
            Range {
                gte: scope.occurred_from.map(|v| v as f64),
                lte: scope.occurred_to.map(|v| v as f64),
                ..Default::default()
            },
        ));
    }
    Filter::must(must)
}

fn point_id(id: Uuid) -> PointId {
    PointId::from(id.to_string())
}

#[async_trait]
impl VectorIndex for ServerIndex {
    async fn ensure(&self, collection: &Collection) -> Result<(), IndexError> {
        if self
            .client
            .collection_exists(&collection.name)
            .await
            .map_err(unavailable)?
        {
            return Ok(());
        }
        let created = self
            .client
            .create_collection(
                CreateCollectionBuilder::new(&collection.name).vectors_config(
                    VectorParamsBuilder::new(collection.dimension as u64, Distance::Cosine),
                ),
            )
            .await;
        if let Err(e) = created {
            // Another process may have created it in the meantime.
            if !self
                .client
                .collection_exists(&collection.name)
                .await
                .map_err(unavailable)?
            {
                return Err(unavailable(e));
            }
        }
        for field in crate::KEYWORD_FIELDS {
            self.client
                .create_field_index(CreateFieldIndexCollectionBuilder::new(
                    &collection.name,
                    *field,
                    FieldType::Keyword,
                ))
                .await
                .map_err(unavailable)?;
        }
        for field in crate::INTEGER_FIELDS {
            self.client
                .create_field_index(CreateFieldIndexCollectionBuilder::new(
                    &collection.name,
                    *field,
                    FieldType::Integer,
                ))
                .await
                .map_err(unavailable)?;
        }
        Ok(())
    }

    async fn upsert(&self, collection: &Collection, points: Vec<Point>) -> Result<(), IndexError> {
        if points.is_empty() {
            return Ok(());
        }
        let points = points
            .into_iter()
            .map(|p| {
                let payload =
                    QdrantPayload::try_from(serde_json::to_value(&p.payload).map_err(unavailable)?)
                        .map_err(unavailable)?;
                Ok(PointStruct::new(point_id(p.id), p.vector, payload))
            })
            .collect::<Result<Vec<_>, IndexError>>()?;
        self.client
            .upsert_points(UpsertPointsBuilder::new(&collection.name, points).wait(true))
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    async fn delete(&self, collection: &Collection, ids: Vec<Uuid>) -> Result<(), IndexError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids = PointsIdsList {
            ids: ids.into_iter().map(point_id).collect(),
        };
        self.client
            .delete_points(
                DeletePointsBuilder::new(&collection.name)
                    .points(ids)
                    .wait(true),
            )
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    async fn search(
        &self,
        collection: &Collection,
        vector: &[f32],
        scope: &Scope,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(&collection.name)
                    .query(vector.to_vec())
                    .filter(filter(scope))
                    .limit(limit as u64),
            )
            .await
            .map_err(unavailable)?;
        Ok(response
            .result
            .into_iter()
            .filter_map(|p| match p.id?.point_id_options? {
                PointIdOptions::Uuid(s) => Some(Hit {
                    id: s.parse().ok()?,
                    score: p.score,
                }),
                PointIdOptions::Num(_) => None,
            })
            .collect())
    }

    async fn count(
        &self,
        collection: &Collection,
        scope: Option<&Scope>,
    ) -> Result<u64, IndexError> {
        let mut request = CountPointsBuilder::new(&collection.name).exact(true);
        if let Some(scope) = scope {
            request = request.filter(filter(scope));
        }
        let response = self.client.count(request).await.map_err(unavailable)?;
        Ok(response.result.map(|r| r.count).unwrap_or(0))
    }

    async fn clear(&self, collection: &Collection) -> Result<(), IndexError> {
        self.client
            .delete_points(
                DeletePointsBuilder::new(&collection.name)
                    .points(Filter::default())
                    .wait(true),
            )
            .await
            .map(|_| ())
            .map_err(unavailable)
    }
}

//! The embedded index after a crash while a shard was being created: a
//! process killed between creating the shard and flushing its payload
//! indexes leaves a shard that loads without them, and every filtered search
//! then reads each point's payload from storage (persist crawled that way in
//! the kill-9 fault suite). Opening the shard creates what it lacks.

use hindsight_index::{
    Collection, KEYWORD_FIELDS, Scope, VectorIndex,
    edge::{self, EdgeIndex},
};
use qdrant_edge::{
    EdgeShard, FieldIndexOperations, PayloadFieldSchema, PayloadSchemaType, UpdateOperation,
};

#[tokio::test]
async fn a_shard_left_without_its_payload_indexes_gets_them_when_opened() {
    let dir = std::env::temp_dir().join(format!("hindsight-edge-repair-{}", uuid::Uuid::new_v4()));
    let collection = Collection {
        name: "repair".into(),
        dimension: 4,
    };
    // What a kill leaves: the shard, with one of its indexes.
    {
        let path = dir.join(&collection.name);
        std::fs::create_dir_all(&path).expect("shard dir");
        let shard = EdgeShard::new(&path, edge::shard_config(collection.dimension)).expect("shard");
        shard
            .update(UpdateOperation::FieldIndexOperation(
                FieldIndexOperations::CreateIndex(qdrant_edge::CreateIndex {
                    field_name: "tenant".try_into().expect("path"),
                    field_schema: Some(PayloadFieldSchema::FieldType(PayloadSchemaType::Keyword)),
                }),
            ))
            .expect("one index");
        shard.flush();
    }
    let index = EdgeIndex::new(&dir);
    index.ensure(&collection).await.expect("opens");
    let scope = Scope {
        tenant: "acme".into(),
        user_id: "u1".into(),
        ..Default::default()
    };
    assert_eq!(
        index.count(&collection, Some(&scope)).await.expect("count"),
        0
    );
    drop(index);
    let shard = EdgeShard::load(&dir.join(&collection.name), None).expect("loads");
    let schema = shard.info().payload_schema;
    for field in KEYWORD_FIELDS {
        let path: qdrant_edge::JsonPath = (*field).try_into().expect("path");
        assert!(
            schema.contains_key(&path),
            "{field} is indexed again: {schema:?}"
        );
    }
    drop(shard);
    let _ = std::fs::remove_dir_all(&dir);
}

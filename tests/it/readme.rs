//! The README's examples work as written.

use std::time::Duration;

use hindsight_filter::FilterStage;
use hindsight_tests::{Deployment, eventually};

/// The subject and payload of the README's `nats pub` example.
fn nats_pub_example() -> (String, String) {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("nats pub "))
        .expect("the README shows a `nats pub` example");
    let rest = line.trim_start_matches("nats pub ");
    let (subject, payload) = rest.split_once(' ').expect("subject and payload");
    let payload = payload
        .trim()
        .trim_start_matches('\'')
        .trim_end_matches('\'');
    (subject.to_string(), payload.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_nats_pub_example_is_a_turn_the_filter_keeps() {
    let (subject, payload) = nats_pub_example();
    let tenant = subject
        .strip_prefix("hindsight.turns.")
        .expect("the example publishes to the default namespace's turns subject");

    let deployment = Deployment::new("test", |_| {}).await;
    let filter = deployment
        .start(FilterStage::new(deployment.ctx.store.clone()))
        .await;
    deployment.publish_raw(tenant, payload.into_bytes()).await;
    eventually(
        "the example turn is kept",
        Duration::from_secs(20),
        || async { deployment.stream_messages("KEPT").await == 1 },
    )
    .await;
    filter.stop().await;
    assert!(deployment.dead_letters().await.is_empty());
    deployment.remove().await;
}

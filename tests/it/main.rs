//! Every integration test of the system, in one binary: one module per suite, the shared
//! helpers in `tests/support/` (the `hindsight-tests` library). One binary links the whole
//! dependency graph once; a binary per suite linked it nineteen times. Each test makes its own
//! namespace and database, so the suites run side by side.

mod dedupe_languages;
mod edge_index_repair;
mod embed_stage;
mod embedder_reference;
mod envelope_roundtrip;
mod erase;
mod erase_surfaces;
mod extract_pipeline;
mod filter_pipeline;
mod filter_stage;
mod hostile_input;
mod janitor;
mod keyword_channel;
mod layout;
mod local_time;
mod memory_pipeline;
mod metrics;
mod ops_page;
mod poisoning;
mod readme;
mod recall_quality;
mod recall_surfaces;
mod runner;
mod screen_pipeline;
mod working_expiry;

//! Recall: the pure parts (fusion of the channels and the final score), used
//! by every surface that answers a recall.

pub mod brief;
pub mod budget;
pub mod conflicts;
pub mod fusion;
pub mod memory;

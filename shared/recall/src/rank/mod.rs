//! Recall: the pure parts (fusion of the channels and the final score, the
//! token budget, conflicts, the memory brief, the entities of a query), used
//! by every surface that answers a recall.

pub mod brief;
pub mod budget;
pub mod conflicts;
pub mod diversity;
pub mod entities;
pub mod fusion;
pub mod memory;
pub mod second_hop;
pub mod sources;
pub mod when;

//! The reads and batch writes of each step of a run. Reads are stretches in
//! physical order ([`Stretch`]), or one user's memories at a time; writes
//! take whole batches through `unnest`, with one audit event per changed
//! memory carrying the values it replaced, so that [`super::restore`] can put
//! them back.

mod scan;
mod vectors;
mod writes;

pub use scan::*;
pub use vectors::*;
pub use writes::*;

//! What the janitor reads and writes: its runs and lock ([`runs`]), the
//! per-step scans and batch changes ([`steps`], and the repair step's in
//! [`repair`]), the retention of the turns archive ([`retention`]), and undoing a run
//! ([`restore`]). Step functions work on a bare connection so that a dry run
//! can wrap the very same statements in one transaction and roll it back.

pub mod repair;
pub mod restore;
pub mod retention;
pub mod runs;
pub mod steps;

/// The actor of every audit event a run writes.
pub const ACTOR: &str = "janitor";

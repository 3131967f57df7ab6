//! Text as hindsight reads it, in English and Chinese alike, with no I/O:
//! relative dates made absolute ([`dates`]), the keyword channel's terms
//! ([`terms`]), noise and pleasantries ([`chitchat`]), what a statement says
//! and whether another contradicts it ([`statement`]), and durations as the
//! configuration writes them ([`duration`]).

pub mod chitchat;
pub mod dates;
pub mod duration;
pub mod statement;
pub mod terms;

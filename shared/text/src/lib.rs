//! Text as hindsight reads it, in English and Chinese alike, with no I/O:
//! relative dates made absolute ([`dates`]), the keyword channel's terms
//! ([`terms`]), noise and pleasantries ([`chitchat`]), what a statement says
//! and whether another contradicts it ([`statement`]), how a new statement
//! stands to an old one in any of the languages hindsight reads ([`frame`]),
//! and durations as the configuration writes them ([`duration`]).

pub mod chitchat;
pub mod dates;
pub mod duration;
pub mod frame;
pub mod script;
pub mod statement;
pub mod terms;

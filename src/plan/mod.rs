//! Plans: steps with dependencies above lanes. The file and its checks ([`file`]),
//! the pure scheduler ([`scheduler`]) and its saved state ([`state`]).

pub mod cli;
pub mod file;
pub mod scheduler;
pub mod state;

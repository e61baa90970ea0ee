//! Plans: steps with dependencies above lanes. The file and its checks ([`file`]),
//! the pure scheduler ([`scheduler`]), its saved state ([`state`]) and `plan status`.

pub mod cli;
pub mod file;
pub mod scheduler;
pub mod state;
mod status;

//! Plans: steps with dependencies above lanes. The file and its checks ([`file`]),
//! the pure scheduler ([`scheduler`]), its saved state ([`state`]), `plan status`, and
//! `plan run`: a driver next to the fleet host that runs steps as lanes and merges them.

mod checks;
mod cleanup;
pub mod cli;
mod control;
mod driver;
mod events;
pub mod file;
pub mod fingerprint;
mod home;
pub mod lane_merge;
mod merge;
mod remove;
mod restart;
mod retry;
mod room;
mod run;
pub mod scheduler;
pub mod state;
pub mod status;
mod steps;
mod subplan;

pub use control::merge_step;
pub use room::viewer as room_viewer;

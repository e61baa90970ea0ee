//! The JSON-actions worker: the LLM as a function `(state, prompt) -> actions` over a
//! task directory, its file tools sandboxed inside the task's allowed paths.
//!
//! `clowder task new` makes a task directory, `clowder worker DIR` runs its fixed loop
//! (read the state, build the context, call the LLM, validate the answer, run the
//! tools, append to `actions.jsonl`, write `state.json` and `heartbeat.json`, check
//! whether to stop) and `clowder tasks` lists tasks. The LLM never decides to stop.

mod answer;
pub mod cli;
mod context;
mod journal;
mod list;
mod llm;
mod resume;
mod run;
mod sandbox;
pub(crate) mod show;
mod start;
pub(crate) mod task;
mod tools;

pub use crate::config::WorkerConfig;

/// Bad input, as clap's own.
pub(crate) const EXIT_USAGE: i32 = 2;
pub(crate) const EXIT_FAILED: i32 = 1;
pub(crate) const EXIT_TIMEOUT: i32 = 4;

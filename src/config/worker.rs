//! `[worker]` in harness.toml: which LLM the worker calls and how much history it sees.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{NonEmptyString, PositiveCount, PositiveSeconds};

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// The LLM program and its arguments: the context on stdin, the answer on stdout.
    pub llm: Vec<NonEmptyString>,
    /// Ollama's address (`http://host:port`); when set, used instead of `llm`.
    pub ollama: String,
    /// The model Ollama runs.
    pub model: String,
    /// An answer not back after this long fails the iteration (the program's group is killed).
    pub llm_timeout: PositiveSeconds,
    /// How many past iterations go into the context.
    pub context_iterations: PositiveCount,
    /// How often a busy LLM (HTTP 429, 503, 529) is asked again for one answer; 0: never.
    pub llm_busy_retries: u32,
    /// The most time waited on a busy LLM for one answer, all tries together.
    pub llm_busy_wait: PositiveSeconds,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            llm: ["ollama", "run", "qwen2.5-coder"]
                .map(|word| NonEmptyString(word.to_string()))
                .to_vec(),
            ollama: String::new(),
            model: "qwen2.5-coder".to_string(),
            llm_timeout: PositiveSeconds(Duration::from_secs(300)),
            context_iterations: PositiveCount(5),
            llm_busy_retries: 6,
            llm_busy_wait: PositiveSeconds(Duration::from_secs(600)),
        }
    }
}

/// Most past iterations the context may hold, whatever the config says: the
/// context must stay bounded.
pub(crate) const MAX_CONTEXT_ITERATIONS: u64 = 50;

impl WorkerConfig {
    /// What is wrong with these settings for running a worker, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.ollama.is_empty() && self.llm.is_empty() {
            return Some("[worker] needs `llm` (a program) or `ollama` (an address)".into());
        }
        if !self.ollama.is_empty() && self.model.trim().is_empty() {
            return Some("[worker] `ollama` is set but `model` is empty".into());
        }
        if !self.ollama.is_empty() && !self.ollama.starts_with("http://") {
            return Some(format!(
                "[worker] ollama = {:?}: expected an address starting with http://",
                self.ollama
            ));
        }
        None
    }

    pub(crate) fn context_iterations(&self) -> usize {
        self.context_iterations.0.min(MAX_CONTEXT_ITERATIONS) as usize
    }
}

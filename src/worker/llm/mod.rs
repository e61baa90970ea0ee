//! Calling the LLM: a program (context on stdin, answer on stdout, its process group
//! killed on timeout or stop) or Ollama's HTTP API with the answer schema as `format`.
//! While waiting, the [`Waiter`] is called several times a second (heartbeat, stop
//! check). A busy server (429, 503, 529) is asked again later, within
//! [`retry::Policy`]; a down one is not.
//!
//! Nothing here knows of tasks: the caller passes the prompt and the answer's
//! schema, and hears of waits through the [`Waiter`].

mod ollama;
mod program;
pub(crate) use crate::llm::retry;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::WorkerConfig;
use crate::llm::retry::{Backoff, Busy, Policy, Retry};

/// Most bytes of an answer read; a longer one is refused unread.
pub(crate) const ANSWER_CAP: u64 = 4 * 1024 * 1024;
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(crate) enum Call {
    Answer(String),
    /// What came back cannot be an answer (too big, not JSON): why.
    Invalid(String),
    TimedOut,
    Stopped,
}

/// Who waits for an answer.
pub(crate) trait Waiter {
    /// Called several times a second while waiting: `Ok(true)` asks to stop,
    /// `Err` is fatal.
    fn tick(&mut self) -> Result<bool, String>;
    /// The LLM is busy: it is asked again after `retry.wait`.
    fn busy(&mut self, busy: &Busy, retry: &Retry);
    /// The wait after [`Waiter::busy`] is over: the LLM is asked again now.
    fn retrying(&mut self);
}

/// One try: an outcome, or a busy server to ask again.
pub(crate) enum Attempt {
    Done(Call),
    Busy(Busy),
}

/// `Err` is fatal: the LLM is missing, down or broken, or stayed busy past the
/// policy. `format`: the answer's JSON schema, for an API that takes one.
pub(crate) fn call(
    config: &WorkerConfig,
    context: &str,
    format: &Value,
    waiter: &mut dyn Waiter,
) -> Result<Call, String> {
    if config.ollama.is_empty() {
        return program::call(config, context, waiter);
    }
    let policy = Policy {
        retries: config.llm_busy_retries,
        max_wait: config.llm_busy_wait.0,
    };
    with_retries(policy, waiter, &mut |waiter| {
        ollama::attempt(config, context, format, waiter)
    })
}

/// Tries until an outcome, waiting between tries as the policy says.
fn with_retries(
    policy: Policy,
    waiter: &mut dyn Waiter,
    attempt: &mut dyn FnMut(&mut dyn Waiter) -> Result<Attempt, String>,
) -> Result<Call, String> {
    let mut backoff = Backoff::new(policy);
    loop {
        let busy = match attempt(waiter)? {
            Attempt::Done(call) => return Ok(call),
            Attempt::Busy(busy) => busy,
        };
        let retry = backoff.next(&busy).map_err(|why| {
            format!(
                "the LLM stayed busy ({}: {}): {why}",
                busy.status, busy.message
            )
        })?;
        waiter.busy(&busy, &retry);
        if sleep_watching(retry.wait, waiter)? {
            return Ok(Call::Stopped);
        }
        waiter.retrying();
    }
}

/// Waits `wait`, ticking; `Ok(true)` when asked to stop meanwhile.
fn sleep_watching(wait: Duration, waiter: &mut dyn Waiter) -> Result<bool, String> {
    let until = Instant::now() + wait;
    loop {
        if waiter.tick()? {
            return Ok(true);
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        std::thread::sleep(left.min(POLL));
    }
}

/// Why an answer of `bytes` is refused.
fn too_big(bytes: u64) -> String {
    format!("the answer is {bytes} bytes, over the {ANSWER_CAP}-byte limit: refused unread")
}

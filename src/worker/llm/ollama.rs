//! Ollama's `/api/generate`: the context as `prompt`, the answer's JSON schema as
//! `format`, one reply (`stream` off) whose `response` is the answer.

use std::sync::mpsc;
use std::thread;

use serde_json::Value;

use super::{ANSWER_CAP, Attempt, Call, POLL, Waiter};
use crate::config::WorkerConfig;
use crate::llm::http::{self, Reply};

/// Most bytes of a reply read: the answer, JSON-escaped, and Ollama's token list.
const REPLY_CAP: u64 = 4 * ANSWER_CAP;

/// One request; the worker keeps beating and watching for a stop meanwhile.
pub(super) fn attempt(
    config: &WorkerConfig,
    context: &str,
    format: &Value,
    waiter: &mut dyn Waiter,
) -> Result<Attempt, String> {
    let url = format!("{}/api/generate", config.ollama.trim_end_matches('/'));
    let body = serde_json::json!({
        "model": config.model,
        "prompt": context,
        "stream": false,
        "format": format,
    });
    let timeout = config.llm_timeout.0;
    let (tx, rx) = mpsc::channel();
    let request_url = url.clone();
    // The request blocks; this thread keeps the heartbeat and the stop check going.
    thread::spawn(move || {
        let _ = tx.send(http::post_json(
            &request_url,
            &[],
            &body,
            timeout,
            REPLY_CAP,
        ));
    });
    let reply = loop {
        match rx.recv_timeout(POLL) {
            Ok(result) => break result.map_err(|err| format!("Ollama at {err}"))?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("the request to {url} ended without an answer"));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if waiter.tick()? {
            return Ok(Attempt::Done(Call::Stopped));
        }
    };
    Ok(match reply {
        Reply::Busy(busy) => Attempt::Busy(busy),
        Reply::TimedOut => Attempt::Done(Call::TimedOut),
        Reply::Unusable(why) => Attempt::Done(Call::Invalid(format!("Ollama at {url}: {why}"))),
        Reply::Json(reply) => Attempt::Done(answer_of(&reply, &url)),
    })
}

/// The reply's `response` text; a reply without one is a bad answer.
fn answer_of(reply: &Value, url: &str) -> Call {
    match reply["response"].as_str() {
        Some(text) if text.len() as u64 > ANSWER_CAP => {
            Call::Invalid(super::too_big(text.len() as u64))
        }
        Some(text) => Call::Answer(text.to_string()),
        None => Call::Invalid(format!("Ollama at {url}: the reply has no `response` text")),
    }
}

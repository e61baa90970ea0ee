//! One JSON POST to an LLM's HTTP API, its reply sorted: a JSON body, a body that
//! cannot be an answer (not JSON, or too big to read), a busy server (429, 503,
//! 529, with its `Retry-After`), a timeout, or a failure. Knows nothing of tasks,
//! so that any LLM client (Ollama's, an OpenAI- or Anthropic-compatible one) can
//! use it.

use std::time::Duration;

use serde_json::Value;

use super::retry::{Busy, parse_retry_after};

/// Most characters of a server's error text kept for a message.
const MESSAGE_CAP: usize = 300;

/// What came back, short of a failure.
#[derive(Debug)]
pub enum Reply {
    /// A 2xx reply's JSON body.
    Json(Value),
    /// A 2xx reply that is not JSON or is over the size limit: a bad answer,
    /// not a broken server.
    Unusable(String),
    Busy(Busy),
    TimedOut,
}

/// Whether a status means "busy, ask again later" rather than "broken".
fn is_busy(status: u16) -> bool {
    matches!(status, 429 | 503 | 529)
}

/// Posts `body` to `url` with `headers` (an API key, a version). `Err`: the
/// server is unreachable or answered an error that waiting will not cure (its
/// message included).
pub fn post_json(
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
    timeout: Duration,
    max_bytes: u64,
) -> Result<Reply, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.post(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = match request.send_json(body) {
        Ok(response) => response,
        Err(ureq::Error::Timeout(_)) => return Ok(Reply::TimedOut),
        Err(err) => return Err(format!("{url} is unreachable: {err}")),
    };
    let status = response.status();
    let status_text = status_text(status.as_u16(), status.canonical_reason());
    if is_busy(status.as_u16()) {
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, chrono::Utc::now()));
        let text = response
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .lossy_utf8(true)
            .read_to_string()
            .unwrap_or_default();
        return Ok(Reply::Busy(Busy {
            status: status_text,
            retry_after,
            message: error_message(&text),
        }));
    }
    let bytes = match response
        .body_mut()
        .with_config()
        .limit(max_bytes)
        .read_to_vec()
    {
        Ok(bytes) => bytes,
        Err(ureq::Error::Timeout(_)) => return Ok(Reply::TimedOut),
        Err(ureq::Error::BodyExceedsLimit(limit)) if status.is_success() => {
            return Ok(Reply::Unusable(format!(
                "the reply is over {limit} bytes: refused unread"
            )));
        }
        Err(err) => return Err(format!("{url}: unreadable reply ({status_text}): {err}")),
    };
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        return Err(format!(
            "{url} answered {status_text}: {}",
            error_message(&text)
        ));
    }
    match serde_json::from_slice(&bytes) {
        Ok(value) => Ok(Reply::Json(value)),
        Err(err) => Ok(Reply::Unusable(format!("the reply is not JSON: {err}"))),
    }
}

/// `429 Too Many Requests`; `529 Overloaded`, Anthropic's word for a code that
/// HTTP does not name.
fn status_text(code: u16, reason: Option<&str>) -> String {
    match (code, reason) {
        (_, Some(reason)) => format!("{code} {reason}"),
        (529, None) => "529 Overloaded".to_string(),
        (_, None) => code.to_string(),
    }
}

/// The error a server put in its reply: `{"error": "…"}` (Ollama),
/// `{"error": {"message": "…"}}` (OpenAI, Anthropic), else the text itself.
fn error_message(text: &str) -> String {
    let found = serde_json::from_str::<Value>(text).ok().and_then(|value| {
        let error = value.get("error")?;
        error
            .as_str()
            .or_else(|| error.get("message").and_then(Value::as_str))
            .map(str::to_string)
    });
    let message = found.unwrap_or_else(|| text.trim().to_string());
    if message.is_empty() {
        return "no error message".to_string();
    }
    let mut chars = message.chars();
    let mut cut: String = chars.by_ref().take(MESSAGE_CAP).collect();
    if chars.next().is_some() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_found_in_each_shape() {
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message(r#"{"error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            "Overloaded"
        );
        assert_eq!(error_message("<html>busy</html>"), "<html>busy</html>");
        assert_eq!(error_message(""), "no error message");
        assert!(error_message(&"x".repeat(1000)).ends_with('…'));
        assert!(is_busy(429) && is_busy(503) && is_busy(529) && !is_busy(500));
    }
}

//! One question to the reviewer model, through the API the user chose: the
//! request body each API takes, and the answer's text and token counts read
//! back out of its reply. A busy server is not waited for: the call goes to a
//! person instead, who is there to decide anyway.

use serde_json::{Value, json};

use crate::config::{ReviewerApi, ReviewerConfig};
use crate::llm::http::{self, Reply};

/// Most bytes of a reply read: a verdict is a few lines.
const REPLY_CAP: u64 = 1024 * 1024;

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Answer {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Asks the model `user` under `system`; `Err` says why no answer came (down,
/// slow, busy, or a reply that holds no answer).
pub(super) fn ask(
    config: &ReviewerConfig,
    system: &str,
    user: &str,
    max_tokens: u32,
) -> Result<Answer, String> {
    let body = request_body(config, system, user, max_tokens);
    let key = api_key(config);
    let bearer = key.as_ref().map(|key| format!("Bearer {key}"));
    let mut headers: Vec<(&str, &str)> = Vec::new();
    match config.api {
        ReviewerApi::Anthropic => {
            headers.push(("anthropic-version", "2023-06-01"));
            if let Some(key) = &key {
                headers.push(("x-api-key", key));
            }
        }
        ReviewerApi::Openai | ReviewerApi::OpenaiResponses => {
            if let Some(bearer) = &bearer {
                headers.push(("authorization", bearer));
            }
        }
    }
    let url = config.endpoint();
    let timeout = config.timeout.0;
    match http::post_json(&url, &headers, &body, timeout, REPLY_CAP)? {
        Reply::Json(reply) => read_answer(config.api, &reply),
        Reply::Unusable(why) => Err(format!("the reviewer's reply is unusable: {why}")),
        Reply::Busy(busy) => Err(format!(
            "the reviewer is busy ({}: {})",
            busy.status, busy.message
        )),
        Reply::TimedOut => Err(format!(
            "the reviewer did not answer within {} s",
            timeout.as_secs_f64()
        )),
    }
}

/// The key from `api_key_env`, or from the API's usual variable when that is
/// empty; none for a local server that needs none.
fn api_key(config: &ReviewerConfig) -> Option<String> {
    let name = match (config.api_key_env.trim(), config.api) {
        ("", ReviewerApi::Anthropic) => "ANTHROPIC_API_KEY",
        ("", _) => "OPENAI_API_KEY",
        (name, _) => name,
    };
    std::env::var(name)
        .ok()
        .filter(|key| !key.trim().is_empty())
}

fn request_body(config: &ReviewerConfig, system: &str, user: &str, max_tokens: u32) -> Value {
    let model = config.model.0.as_str();
    match config.api {
        ReviewerApi::Anthropic => json!({
            "model": model,
            "max_tokens": max_tokens,
            "temperature": 0,
            "system": system,
            "messages": [{ "role": "user", "content": user }],
        }),
        ReviewerApi::Openai => json!({
            "model": model,
            "max_tokens": max_tokens,
            "temperature": 0,
            "messages": [
                { "role": "system", "content": system },
                { "role": "user", "content": user },
            ],
        }),
        ReviewerApi::OpenaiResponses => json!({
            "model": model,
            "max_output_tokens": max_tokens,
            "instructions": system,
            "input": user,
            "store": false,
        }),
    }
}

/// The answer's text and tokens, in the shape each API replies with.
fn read_answer(api: ReviewerApi, reply: &Value) -> Result<Answer, String> {
    let (text, input, output) = match api {
        ReviewerApi::Anthropic => (
            joined_text(&reply["content"], "text"),
            &reply["usage"]["input_tokens"],
            &reply["usage"]["output_tokens"],
        ),
        ReviewerApi::Openai => (
            reply["choices"][0]["message"]["content"]
                .as_str()
                .map(str::to_string),
            &reply["usage"]["prompt_tokens"],
            &reply["usage"]["completion_tokens"],
        ),
        ReviewerApi::OpenaiResponses => (
            reply["output_text"]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    let messages = reply["output"].as_array()?;
                    let texts: Vec<String> = messages
                        .iter()
                        .filter_map(|m| joined_text(&m["content"], "output_text"))
                        .collect();
                    (!texts.is_empty()).then(|| texts.join("\n"))
                }),
            &reply["usage"]["input_tokens"],
            &reply["usage"]["output_tokens"],
        ),
    };
    let text = text.ok_or("the reviewer's reply holds no text")?;
    Ok(Answer {
        text,
        input_tokens: input.as_u64().unwrap_or(0),
        output_tokens: output.as_u64().unwrap_or(0),
    })
}

/// The `text` of every block of type `kind` in `blocks`, joined.
fn joined_text(blocks: &Value, kind: &str) -> Option<String> {
    let texts: Vec<&str> = blocks
        .as_array()?
        .iter()
        .filter(|block| block["type"] == kind)
        .filter_map(|block| block["text"].as_str())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_is_read_in_its_own_shape() {
        let anthropic = json!({"content": [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 10, "output_tokens": 2}});
        let answer = read_answer(ReviewerApi::Anthropic, &anthropic).expect("read");
        assert_eq!(
            (
                answer.text.as_str(),
                answer.input_tokens,
                answer.output_tokens
            ),
            ("hi", 10, 2)
        );
        let chat = json!({"choices": [{"message": {"content": "yo"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}});
        assert_eq!(
            read_answer(ReviewerApi::Openai, &chat).expect("read").text,
            "yo"
        );
        let responses = json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]});
        let answer = read_answer(ReviewerApi::OpenaiResponses, &responses).expect("read");
        assert_eq!((answer.text.as_str(), answer.input_tokens), ("ok", 0));
        assert!(read_answer(ReviewerApi::Openai, &json!({"choices": []})).is_err());
    }
}

//! The Anthropic Messages API as Claude Code uses it: `POST /v1/messages`, streamed
//! as server-sent events or, for Claude Code's retry without streaming, as one JSON
//! message; `POST /v1/messages/count_tokens`; and the API's error bodies.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::Response;
use axum::http::Uri;
use axum::routing::post;
use serde_json::{Value, json};

use super::{
    Failure, ModelServer, Reply, SHELL, SUBAGENT, Shared, ToolCall, ToolResult, pieces, sse,
};

/// Starts a server; point `ANTHROPIC_BASE_URL` at [`ModelServer::base_url`].
pub fn start() -> ModelServer {
    ModelServer::start(|shared| {
        Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .fallback(other)
            .with_state(shared)
    })
}

async fn messages(
    State(shared): State<Shared>,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response<Body> {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let scripted = is_main_conversation(&request);
    shared.record(uri.path(), &request, scripted);
    let reply = if scripted {
        shared.next_reply()
    } else if let Some(failure) = shared.failing() {
        // An API that refuses everything refuses the side requests too.
        Reply::Fail(failure)
    } else {
        Reply::Text("OK.".into())
    };
    let streaming = request["stream"].as_bool() == Some(true);
    let model = request["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-5")
        .to_string();
    match reply {
        Reply::Fail(failure) | Reply::FailAlways(failure) => sse::failure(&failure),
        Reply::Hang => sse::silence().await,
        Reply::Stall if streaming => sse::stream(stalled_events(&model, &shared), true),
        Reply::Stall => sse::silence().await,
        Reply::Text(text) => answer(&shared, &request, &text, &[], streaming),
        Reply::Tools(text, calls) => answer(&shared, &request, &text, &calls, streaming),
    }
}

/// Side requests (Claude Code 2.0's `Warmup` sub-agents, title and topic requests
/// without tools) get the plain text the real API would give, and leave the script
/// alone: a tool call there would fire hooks for calls that never run.
fn is_main_conversation(request: &Value) -> bool {
    let has_tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    let first = &request["messages"][0]["content"];
    let first_text = first
        .as_str()
        .map(str::to_string)
        .or_else(|| first[0]["text"].as_str().map(str::to_string))
        .unwrap_or_default();
    has_tools && first_text.trim() != "Warmup"
}

fn answer(
    shared: &Shared,
    request: &Value,
    text: &str,
    calls: &[ToolCall],
    streaming: bool,
) -> Response<Body> {
    let model = request["model"].as_str().unwrap_or("claude-sonnet-4-5");
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(json!({ "type": "text", "text": text }));
    }
    for call in calls {
        let (name, input) = claude_tool(request, call);
        blocks.push(json!({
            "type": "tool_use", "id": shared.next_id("toolu"), "name": name, "input": input
        }));
    }
    let stop_reason = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let usage = usage(shared);
    let id = shared.next_id("msg");
    if !streaming {
        return sse::json(&json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage
        }));
    }
    let mut events = vec![message_start(&id, model, &usage)];
    for (index, block) in blocks.iter().enumerate() {
        events.extend(block_events(index, block));
    }
    events.push(sse::event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason, "stop_sequence": null },
            "usage": { "output_tokens": usage["output_tokens"] }
        }),
    ));
    events.push(sse::event(
        "message_stop",
        &json!({ "type": "message_stop" }),
    ));
    sse::stream(events, false)
}

fn claude_tool(request: &Value, call: &ToolCall) -> (String, Value) {
    if call.name == SUBAGENT {
        let offers_agent = request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["name"] == "Agent");
        let name = if offers_agent { "Agent" } else { "Task" };
        return (name.into(), call.input.clone());
    }
    if call.name == SHELL {
        let command = call.input["command"].clone();
        return (
            "Bash".into(),
            json!({ "command": command, "description": "Run the command" }),
        );
    }
    (call.name.clone(), call.input.clone())
}

/// Usage that differs from request to request, so that a sum taken twice, or one
/// request forgotten, shows in the totals.
fn usage(shared: &Shared) -> Value {
    let n = shared.lock().requests.len() as u64;
    json!({
        "input_tokens": 1000 + 10 * n,
        "output_tokens": 40 + n,
        "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 200
    })
}

fn message_start(id: &str, model: &str, usage: &Value) -> String {
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    sse::event(
        "message_start",
        &json!({
            "type": "message_start",
            "message": {
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage
            }
        }),
    )
}

fn block_events(index: usize, block: &Value) -> Vec<String> {
    let mut events = Vec::new();
    let (start, deltas) = if block["type"] == "text" {
        let text = block["text"].as_str().unwrap_or_default();
        let deltas = pieces(text)
            .into_iter()
            .map(|piece| json!({ "type": "text_delta", "text": piece }))
            .collect::<Vec<_>>();
        (json!({ "type": "text", "text": "" }), deltas)
    } else {
        let input = block["input"].to_string();
        let deltas = pieces(&input)
            .into_iter()
            .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }))
            .collect::<Vec<_>>();
        let mut start = block.clone();
        start["input"] = json!({});
        (start, deltas)
    };
    events.push(sse::event(
        "content_block_start",
        &json!({ "type": "content_block_start", "index": index, "content_block": start }),
    ));
    for delta in deltas {
        events.push(sse::event(
            "content_block_delta",
            &json!({ "type": "content_block_delta", "index": index, "delta": delta }),
        ));
    }
    events.push(sse::event(
        "content_block_stop",
        &json!({ "type": "content_block_stop", "index": index }),
    ));
    events
}

fn stalled_events(model: &str, shared: &Shared) -> Vec<String> {
    let usage = usage(shared);
    let id = shared.next_id("msg");
    let mut events = vec![message_start(&id, model, &usage)];
    events.push(sse::event(
        "content_block_start",
        &json!({ "type": "content_block_start", "index": 0,
                 "content_block": { "type": "text", "text": "" } }),
    ));
    events.push(sse::event(
        "content_block_delta",
        &json!({ "type": "content_block_delta", "index": 0,
                 "delta": { "type": "text_delta", "text": "Let me think about" } }),
    ));
    events
}

async fn count_tokens(State(shared): State<Shared>, body: axum::body::Bytes) -> Response<Body> {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.record("/v1/messages/count_tokens", &request, false);
    sse::json(&json!({ "input_tokens": 1000 }))
}

async fn other(State(shared): State<Shared>, uri: Uri) -> Response<Body> {
    shared.record(uri.path(), &Value::Null, false);
    sse::failure(&error(404, "not_found_error", "Not found", &[]))
}

/// The API's error body with its headers.
pub fn error(status: u16, kind: &str, message: &str, headers: &[(&str, &str)]) -> Failure {
    Failure {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: json!({ "type": "error", "error": { "type": kind, "message": message } }),
    }
}

/// A 429 as a subscription's limit gives it: `retry-after` and the unified
/// rate-limit headers with the epoch second the limit resets.
pub fn rate_limited(retry_after_secs: u64, reset_epoch: i64) -> Failure {
    let retry = retry_after_secs.to_string();
    let reset = reset_epoch.to_string();
    error(
        429,
        "rate_limit_error",
        "This request would exceed your account's rate limit. Please try again later.",
        &[
            ("retry-after", retry.as_str()),
            ("anthropic-ratelimit-unified-status", "rejected"),
            ("anthropic-ratelimit-unified-reset", reset.as_str()),
        ],
    )
}

pub fn overloaded() -> Failure {
    error(529, "overloaded_error", "Overloaded", &[])
}

pub fn server_error() -> Failure {
    error(500, "api_error", "Internal server error", &[])
}

pub fn unauthorized() -> Failure {
    error(401, "authentication_error", "invalid x-api-key", &[])
}

/// The tool results the agent sent back, in the order the requests came.
pub fn tool_results(server: &ModelServer) -> Vec<ToolResult> {
    let mut seen = Vec::new();
    for request in server.requests().iter().filter(|r| r.scripted) {
        for message in request.body["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] != "tool_result" {
                    continue;
                }
                let call_id = block["tool_use_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if seen.iter().any(|r: &ToolResult| r.call_id == call_id) {
                    continue;
                }
                seen.push(ToolResult {
                    call_id,
                    output: content_text(&block["content"]),
                    is_error: block["is_error"].as_bool() == Some(true),
                });
            }
        }
    }
    seen
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

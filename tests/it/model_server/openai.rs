//! The OpenAI Responses API as Codex uses it: `POST /v1/responses`, streamed as
//! server-sent events (`response.created`, `response.output_item.added/done`,
//! `response.output_text.delta`, `response.completed` with usage), and its errors.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::Response;
use axum::http::Uri;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::{Failure, ModelServer, Reply, SHELL, Shared, ToolCall, ToolResult, pieces, sse};

/// Starts a server; point a Codex `model_providers` entry at
/// `{base_url}/v1` with `wire_api = "responses"`.
pub fn start() -> ModelServer {
    ModelServer::start(|shared| {
        Router::new()
            .route("/v1/responses", post(responses))
            .route("/v1/models", get(models))
            .fallback(other)
            .with_state(shared)
    })
}

async fn responses(
    State(shared): State<Shared>,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response<Body> {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.record(uri.path(), &request, true);
    let model = request["model"].as_str().unwrap_or("gpt-5").to_string();
    match shared.next_reply() {
        Reply::Fail(failure) | Reply::FailAlways(failure) => sse::failure(&failure),
        Reply::Hang => sse::silence().await,
        Reply::Stall => sse::stream(stalled(&shared, &model), true),
        Reply::Text(text) => answer(&shared, &request, &model, &text, &[]),
        Reply::Tools(text, calls) => answer(&shared, &request, &model, &text, &calls),
    }
}

fn answer(
    shared: &Shared,
    request: &Value,
    model: &str,
    text: &str,
    calls: &[ToolCall],
) -> Response<Body> {
    let id = shared.next_id("resp");
    let mut events = vec![created(&id, model)];
    let mut index = 0;
    if !text.is_empty() {
        events.extend(message_events(shared, index, text));
        index += 1;
    }
    for call in calls {
        let item = function_call(shared, request, call);
        events.push(item_event("response.output_item.added", index, &item));
        events.push(item_event("response.output_item.done", index, &item));
        index += 1;
    }
    let n = shared.lock().requests.len() as u64;
    let usage = json!({
        "input_tokens": 2000 + 10 * n,
        "input_tokens_details": { "cached_tokens": 500 },
        "output_tokens": 60 + n,
        "output_tokens_details": { "reasoning_tokens": 5 },
        "total_tokens": 2060 + 11 * n
    });
    events.push(sse::event(
        "response.completed",
        &json!({
            "type": "response.completed",
            "response": { "id": id, "object": "response", "status": "completed",
                          "model": model, "output": [], "usage": usage }
        }),
    ));
    sse::stream(events, false)
}

fn created(id: &str, model: &str) -> String {
    sse::event(
        "response.created",
        &json!({
            "type": "response.created",
            "response": { "id": id, "object": "response", "status": "in_progress",
                          "model": model, "output": [] }
        }),
    )
}

fn item_event(kind: &str, index: usize, item: &Value) -> String {
    sse::event(
        kind,
        &json!({ "type": kind, "output_index": index, "item": item }),
    )
}

fn message_events(shared: &Shared, index: usize, text: &str) -> Vec<String> {
    let item_id = shared.next_id("msg");
    let mut item = json!({
        "type": "message", "id": item_id, "role": "assistant",
        "status": "in_progress", "content": []
    });
    let mut events = vec![item_event("response.output_item.added", index, &item)];
    for piece in pieces(text) {
        events.push(sse::event(
            "response.output_text.delta",
            &json!({
                "type": "response.output_text.delta", "item_id": item_id,
                "output_index": index, "content_index": 0, "delta": piece
            }),
        ));
    }
    item["status"] = json!("completed");
    item["content"] = json!([{ "type": "output_text", "text": text, "annotations": [] }]);
    events.push(item_event("response.output_item.done", index, &item));
    events
}

/// A call of the tool the test names, or for [`SHELL`], of the shell tool this
/// Codex offers: `exec_command` today, `shell` or `shell_command` in older versions.
fn function_call(shared: &Shared, request: &Value, call: &ToolCall) -> Value {
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let (name, arguments) = if call.name == SHELL {
        let command = call.input["command"].as_str().unwrap_or_default();
        if offered.contains(&"exec_command") {
            ("exec_command", json!({ "cmd": command }))
        } else if offered.contains(&"shell_command") {
            ("shell_command", json!({ "command": command }))
        } else {
            ("shell", json!({ "command": ["bash", "-lc", command] }))
        }
    } else {
        (call.name.as_str(), call.input.clone())
    };
    let custom = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["name"] == name && t["type"] == "custom");
    let call_id = shared.next_id("call");
    if custom {
        let input = arguments.as_str().map(str::to_string).unwrap_or_default();
        return json!({
            "type": "custom_tool_call", "id": shared.next_id("ctc"), "call_id": call_id,
            "name": name, "input": input, "status": "completed"
        });
    }
    json!({
        "type": "function_call", "id": shared.next_id("fc"), "call_id": call_id,
        "name": name, "arguments": arguments.to_string(), "status": "completed"
    })
}

fn stalled(shared: &Shared, model: &str) -> Vec<String> {
    let id = shared.next_id("resp");
    let item_id = shared.next_id("msg");
    vec![
        created(&id, model),
        item_event(
            "response.output_item.added",
            0,
            &json!({ "type": "message", "id": item_id, "role": "assistant",
                     "status": "in_progress", "content": [] }),
        ),
        sse::event(
            "response.output_text.delta",
            &json!({ "type": "response.output_text.delta", "item_id": item_id,
                     "output_index": 0, "content_index": 0, "delta": "Let me think about" }),
        ),
    ]
}

async fn models(State(shared): State<Shared>) -> Response<Body> {
    shared.record("/v1/models", &Value::Null, false);
    sse::json(&json!({ "object": "list", "data": [] }))
}

async fn other(State(shared): State<Shared>, uri: Uri) -> Response<Body> {
    shared.record(uri.path(), &Value::Null, false);
    sse::failure(&error(404, "not_found", "Not found", &[]))
}

pub fn error(status: u16, kind: &str, message: &str, headers: &[(&str, &str)]) -> Failure {
    Failure {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: json!({ "error": { "type": kind, "code": kind, "message": message } }),
    }
}

pub fn rate_limited(retry_after_secs: u64) -> Failure {
    let retry = retry_after_secs.to_string();
    error(
        429,
        "rate_limit_exceeded",
        "Rate limit reached. Please try again later.",
        &[("retry-after", retry.as_str())],
    )
}

pub fn server_error() -> Failure {
    error(
        500,
        "server_error",
        "The server had an error processing your request.",
        &[],
    )
}

pub fn unauthorized() -> Failure {
    error(401, "invalid_api_key", "Incorrect API key provided.", &[])
}

/// The tool outputs Codex sent back, in the order they came.
pub fn tool_results(server: &ModelServer) -> Vec<ToolResult> {
    let mut seen: Vec<ToolResult> = Vec::new();
    for request in server.requests().iter().filter(|r| r.scripted) {
        for item in request.body["input"].as_array().into_iter().flatten() {
            let kind = item["type"].as_str().unwrap_or_default();
            if kind != "function_call_output" && kind != "custom_tool_call_output" {
                continue;
            }
            let call_id = item["call_id"].as_str().unwrap_or_default().to_string();
            if seen.iter().any(|r| r.call_id == call_id) {
                continue;
            }
            let output = match &item["output"] {
                Value::String(text) => text.clone(),
                other => other["content"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| other.to_string()),
            };
            seen.push(ToolResult {
                call_id,
                output,
                is_error: false,
            });
        }
    }
    seen
}

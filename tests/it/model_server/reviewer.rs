//! A reviewer model on 127.0.0.1: the Anthropic Messages API, OpenAI's Chat
//! Completions and its Responses API, each answering the gate's questions from
//! a script (a verdict, any text, a slow answer, an HTTP error) and recording
//! what it was asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Response, Uri};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Answer {
    /// `{"verdict": VERDICT, "reason": REASON}`, as a model would write it.
    Verdict(&'static str, &'static str),
    /// Any text.
    Text(&'static str),
    /// The answer after a wait.
    Slow(Duration, Box<Answer>),
    /// An HTTP error with the API's error body.
    Status(u16),
}

/// Tokens each answer reports.
pub const INPUT_TOKENS: u64 = 1_000;
pub const OUTPUT_TOKENS: u64 = 50;

#[derive(Default)]
struct Script {
    answers: VecDeque<Answer>,
    asked: Vec<(String, Value)>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Script>>);

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running reviewer server, stopped when dropped.
pub struct ReviewerServer {
    pub addr: std::net::SocketAddr,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ReviewerServer {
    pub fn start() -> ReviewerServer {
        let shared = Shared::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new()
            .route("/v1/messages", post(answer))
            .route("/v1/chat/completions", post(answer))
            .route("/v1/responses", post(answer))
            .with_state(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
        });
        ReviewerServer {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/v1`: the `base_url` for every API.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.shared.lock().answers.extend(answers);
    }

    /// What it was asked: the path and the body of each request.
    pub fn asked(&self) -> Vec<(String, Value)> {
        self.shared.lock().asked.clone()
    }
}

impl Drop for ReviewerServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn answer(State(shared): State<Shared>, uri: Uri, body: axum::body::Bytes) -> Response<Body> {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let next = {
        let mut script = shared.lock();
        script.asked.push((uri.path().to_string(), request));
        script.answers.pop_front()
    };
    let mut answer = next.unwrap_or(Answer::Text("no answer was scripted"));
    while let Answer::Slow(wait, inner) = answer {
        tokio::time::sleep(wait).await;
        answer = *inner;
    }
    let text = match answer {
        Answer::Verdict(verdict, reason) => {
            format!(
                "```json\n{}\n```",
                json!({"verdict": verdict, "reason": reason})
            )
        }
        Answer::Text(text) => text.to_string(),
        Answer::Status(status) => return failure(status),
        Answer::Slow(..) => unreachable!("unwrapped above"),
    };
    reply(uri.path(), &text)
}

fn reply(path: &str, text: &str) -> Response<Body> {
    let body = match path {
        "/v1/messages" => json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS}
        }),
        "/v1/chat/completions" => json!({
            "id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS}
        }),
        _ => json!({
            "id": "r1", "object": "response", "status": "completed",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS}
        }),
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("response")
}

fn failure(status: u16) -> Response<Body> {
    let body = json!({"type": "error", "error": {"type": "api_error", "message": format!("scripted {status}")}});
    let mut response = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    if status == 429 {
        response = response.header("retry-after", "30");
    }
    response
        .body(Body::from(body.to_string()))
        .expect("response")
}

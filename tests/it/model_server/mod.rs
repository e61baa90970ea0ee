//! Local model servers for the real-agent tests: an Anthropic Messages API and an
//! OpenAI Responses API on 127.0.0.1. Each answers from a script the test writes
//! (text, tool calls, failures, silence) and records every request it was sent, so
//! a test can check that a tool's result reached the model.
#![allow(dead_code)]

pub mod anthropic;
pub mod openai;
pub mod reviewer;
mod sse;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use serde_json::Value;

/// One tool call the model asks for.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub name: String,
    pub input: Value,
}

impl ToolCall {
    pub fn new(name: &str, input: Value) -> ToolCall {
        ToolCall {
            name: name.to_string(),
            input,
        }
    }

    /// A shell command in whichever shell tool the agent offers: Claude's `Bash`,
    /// Codex's `exec_command` or its older `shell`.
    pub fn shell(command: &str) -> ToolCall {
        ToolCall::new(SHELL, serde_json::json!({ "command": command }))
    }

    /// A sub-agent given `prompt`, run in the foreground so its answer comes back
    /// as the call's result.
    pub fn subagent(description: &str, prompt: &str) -> ToolCall {
        ToolCall::new(
            SUBAGENT,
            serde_json::json!({
                "description": description,
                "prompt": prompt,
                "subagent_type": "general-purpose",
                "run_in_background": false
            }),
        )
    }
}

/// Marks a [`ToolCall::shell`]: each server turns it into its agent's shell tool.
pub const SHELL: &str = "<shell>";

/// Marks a [`ToolCall::subagent`]: Claude Code's `Agent` tool, `Task` before 2.1.
pub const SUBAGENT: &str = "<subagent>";

/// An HTTP failure, with the headers the real APIs send beside it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

/// What the model does with one request of the agent's main conversation.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A text answer, streamed in small pieces; the turn ends.
    Text(String),
    /// Some text, then tool calls in the same message (several make a parallel call).
    Tools(String, Vec<ToolCall>),
    /// An HTTP error for this request.
    Fail(Failure),
    /// The same error for this and every later request.
    FailAlways(Failure),
    /// Accept the request and never answer.
    Hang,
    /// Start the answer, send a little text, then go silent mid-stream.
    Stall,
}

/// What the server was sent: the path and the JSON body.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub body: Value,
    /// Whether the script answered it (side requests, such as warm-ups, are not).
    pub scripted: bool,
}

/// A tool's result as the agent sent it back to the model.
#[derive(Clone, Debug)]
pub struct ToolResult {
    pub call_id: String,
    pub output: String,
    pub is_error: bool,
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    sticky: Option<Failure>,
    requests: Vec<Recorded>,
    ids: u64,
}

/// The script and the record, shared by the server's handlers and the test.
#[derive(Clone, Default)]
pub struct Shared(Arc<Mutex<State>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A handler that panicked mid-test must not hide the record from the test.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next reply for a request of the main conversation. Once the script is
    /// spent the model says it is done, so a stray extra request never hangs a test.
    fn next_reply(&self) -> Reply {
        let mut state = self.lock();
        if let Some(failure) = &state.sticky {
            return Reply::Fail(failure.clone());
        }
        match state.script.pop_front() {
            Some(Reply::FailAlways(failure)) => {
                state.sticky = Some(failure.clone());
                Reply::Fail(failure)
            }
            Some(reply) => reply,
            None => Reply::Text("All done.".into()),
        }
    }

    /// The failure every request gets, once the script has reached a `FailAlways`.
    fn failing(&self) -> Option<Failure> {
        self.lock().sticky.clone()
    }

    fn record(&self, path: &str, body: &Value, scripted: bool) {
        self.lock().requests.push(Recorded {
            path: path.to_string(),
            body: body.clone(),
            scripted,
        });
    }

    fn next_id(&self, prefix: &str) -> String {
        let mut state = self.lock();
        state.ids += 1;
        format!("{prefix}_{:04}", state.ids)
    }
}

/// A running server; it stops when dropped, abandoning any request it holds.
pub struct ModelServer {
    pub addr: SocketAddr,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ModelServer {
    fn start(router: impl FnOnce(Shared) -> axum::Router) -> ModelServer {
        let shared = Shared::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local addr");
        let app = router(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("model-server".into())
            .spawn(move || {
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
            })
            .expect("spawn model server");
        ModelServer {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds replies to the end of the script.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().script.extend(replies);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    pub fn scripted_requests(&self) -> usize {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| r.scripted)
            .count()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Splits a long text into the small pieces a real stream sends.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(24).map(|c| c.iter().collect()).collect()
}

//! `clowder worker` with `[worker] ollama`: the requests a local test server receives
//! (model, stream off, the answer's JSON schema as `format`) and how failures end.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use common::{Project, stderr_of};
use serde_json::{Value, json};

/// A request as the server saw it: the request line and the JSON body.
struct Seen {
    line: String,
    body: Value,
}

/// Serves one canned `(status, body)` per connection, in order, on 127.0.0.1.
fn serve(replies: Vec<(u16, String)>) -> (u16, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (status, reply) in replies {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            reader.read_line(&mut line).expect("request line");
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).expect("header");
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().expect("content-length");
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            let body = serde_json::from_slice(&body).expect("the request body is JSON");
            let _ = tx.send(Seen {
                line: line.trim().to_string(),
                body,
            });
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (port, rx)
}

fn generated(answer: Value) -> (u16, String) {
    let reply = json!({"model": "tiny", "response": answer.to_string(), "done": true});
    (200, reply.to_string())
}

fn project(port: u16, iterations: &str) -> Project {
    let project = Project::new(&format!(
        "[worker]\nollama = \"http://127.0.0.1:{port}\"\nmodel = \"tiny-model\"\nllm_timeout = 30\n"
    ));
    let output = project.run(&[
        "task",
        "new",
        "task",
        "--prompt",
        "Write notes about cats.",
        "--max-iterations",
        iterations,
    ]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    project
}

fn state(project: &Project) -> Value {
    serde_json::from_str(&project.read("task/state.json")).expect("state.json")
}

#[test]
fn ollama_is_asked_with_the_answer_schema_as_format() {
    let write = |name: &str| json!({"actions": [{"tool": "write_file", "args": {"path": format!("artifacts/{name}"), "content": name}}]});
    let (port, seen) = serve(vec![generated(write("one.md")), generated(write("two.md"))]);
    let project = project(port, "2");
    let output = project.run(&["worker", "task"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        stderr_of(&output)
    );
    assert_eq!(project.read("task/artifacts/one.md"), "one.md");
    assert_eq!(project.read("task/artifacts/two.md"), "two.md");
    assert_eq!(state(&project)["status"], "completed");

    let requests: Vec<Seen> = seen.try_iter().collect();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.line, "POST /api/generate HTTP/1.1");
        let body = &request.body;
        assert_eq!(body["model"], "tiny-model");
        assert_eq!(body["stream"], false);
        assert_eq!(body["format"]["type"], "object");
        assert_eq!(body["format"]["required"], json!(["actions"]));
        assert_eq!(body["format"]["additionalProperties"], false);
        assert!(
            body["prompt"]
                .as_str()
                .expect("prompt")
                .contains("Write notes about cats.")
        );
    }
    assert!(
        requests[1].body["prompt"]
            .as_str()
            .expect("prompt")
            .contains("wrote artifacts/one.md")
    );
}

#[test]
fn an_unreachable_ollama_fails_the_task_at_once() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let project = project(port, "3");
    let output = project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1));
    let state = state(&project);
    assert_eq!(state["status"], "failed");
    let reason = state["termination_reason"].as_str().expect("reason");
    assert!(reason.contains("unreachable"), "{reason}");
    assert!(!project.path("task/actions.jsonl").exists());
}

#[test]
fn an_ollama_error_reply_is_fatal_with_its_message() {
    let reply = json!({"error": "model \"tiny-model\" not found, try pulling it first"});
    let (port, _seen) = serve(vec![(404, reply.to_string())]);
    let project = project(port, "3");
    let output = project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1));
    let reason = state(&project)["termination_reason"]
        .as_str()
        .expect("reason")
        .to_string();
    assert!(
        reason.contains("404") && reason.contains("not found, try pulling it first"),
        "{reason}"
    );
}

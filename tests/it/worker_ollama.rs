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
    serve_with_headers(
        replies
            .into_iter()
            .map(|(status, body)| (status, String::new(), body))
            .collect(),
    )
}

/// As [`serve`], each reply with extra header lines (`Retry-After: 1\r\n`).
fn serve_with_headers(replies: Vec<(u16, String, String)>) -> (u16, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (status, headers, reply) in replies {
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
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n{reply}",
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
    let project = Project::new(&config(port, ""));
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

fn config(port: u16, extra: &str) -> String {
    format!(
        "[worker]\nollama = \"http://127.0.0.1:{port}\"\nmodel = \"tiny-model\"\nllm_timeout = 30\n{extra}\n"
    )
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

fn write_answer(name: &str) -> Value {
    json!({"actions": [{"tool": "write_file", "args": {"path": format!("artifacts/{name}"), "content": name}}]})
}

fn busy(status: u16, headers: &str) -> (u16, String, String) {
    let body = json!({"error": "server busy, please try again"}).to_string();
    (status, headers.to_string(), body)
}

fn ok((status, body): (u16, String)) -> (u16, String, String) {
    (status, String::new(), body)
}

#[test]
fn a_busy_ollama_is_waited_for_as_its_retry_after_asks_and_the_task_goes_on() {
    let (port, seen) = serve_with_headers(vec![
        busy(429, "Retry-After: 1\r\n"),
        busy(529, ""),
        ok(generated(write_answer("one.md"))),
    ]);
    let project = project(port, "1");
    let child = project.spawn(&["worker", "task"]);
    let beat = || -> Value {
        std::fs::read_to_string(project.path("task/heartbeat.json"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null)
    };
    assert!(
        common::wait_until(common::DEADLINE, || beat()["status"] == "llm_busy"),
        "the heartbeat never said the LLM was busy"
    );
    let note = beat()["note"].as_str().unwrap_or_default().to_string();
    assert!(note.contains("retry") && note.contains("busy"), "{note}");
    let output = common::wait_with_deadline(child, common::DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let stdout = common::stdout_of(&output);
    assert!(
        stdout.contains("#1 the LLM is busy (429 Too Many Requests: server busy, please try again): retry 1 of 6 in 1 s, as its Retry-After asks"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#1 the LLM is busy (529 Overloaded: server busy, please try again): retry 2 of 6 in 2 s\n"),
        "{stdout}"
    );
    assert!(stdout.contains("#1 calling the LLM again"), "{stdout}");
    assert_eq!(project.read("task/artifacts/one.md"), "one.md");
    assert_eq!(state(&project)["status"], "completed");
    assert_eq!(seen.try_iter().count(), 3);
}

#[test]
fn an_llm_busy_past_the_limit_fails_the_task_and_task_resume_lets_it_go_on() {
    let (port, _seen) = serve_with_headers(vec![busy(503, ""), busy(503, "")]);
    let project = Project::new(&config(port, "llm_busy_retries = 1"));
    let new = project.run(&[
        "task",
        "new",
        "task",
        "--prompt",
        "Cats.",
        "--max-iterations",
        "1",
    ]);
    assert!(new.status.success(), "{}", stderr_of(&new));
    let output = project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1));
    let failed = state(&project);
    assert_eq!(failed["status"], "failed");
    let reason = failed["termination_reason"].as_str().expect("reason");
    assert!(
        reason.contains("the LLM stayed busy (503 Service Unavailable")
            && reason.contains("gave up after 2 tries"),
        "{reason}"
    );
    assert!(
        stderr_of(&output).contains("`clowder task resume task` lets it go on"),
        "{}",
        stderr_of(&output)
    );

    // The model is back: one command, no hand edit of state.json.
    let (port, _seen) = serve(vec![generated(write_answer("back.md"))]);
    project.write("harness.toml", &config(port, ""));
    let resume = project.run(&["task", "resume", "task"]);
    assert_eq!(resume.status.code(), Some(0), "{}", stderr_of(&resume));
    assert!(common::stdout_of(&resume).contains("the task had failed (error: the LLM stayed busy"));
    assert_eq!(state(&project)["status"], "running");
    let output = project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(project.read("task/artifacts/back.md"), "back.md");
    assert_eq!(state(&project)["status"], "completed");
    let again = project.run(&["task", "resume", "task"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr_of(&again).contains("it is completed"),
        "{}",
        stderr_of(&again)
    );
}

#[test]
fn a_stop_ends_the_wait_for_a_busy_llm() {
    let (port, _seen) = serve_with_headers(vec![busy(429, "Retry-After: 300\r\n")]);
    let project = project(port, "2");
    let child = project.spawn(&["worker", "task"]);
    let heartbeat = project.path("task/heartbeat.json");
    assert!(common::wait_until(common::DEADLINE, || {
        std::fs::read_to_string(&heartbeat).is_ok_and(|text| text.contains("llm_busy"))
    }));
    let stop = project.run(&["task", "stop", "task"]);
    assert!(stop.status.success(), "{}", stderr_of(&stop));
    let output = common::wait_with_deadline(child, common::DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(state(&project)["status"], "stopped");
}

#[test]
fn an_answer_over_ten_mib_fails_only_its_iteration() {
    let huge = json!({"reasoning": "x".repeat(11 * 1024 * 1024), "actions": []});
    let (port, _seen) = serve(vec![generated(huge), generated(write_answer("after.md"))]);
    let project = project(port, "2");
    let output = project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let state = state(&project);
    assert_eq!(state["status"], "completed");
    assert_eq!(state["counters"]["invalid_answers"], 1);
    let log = project.read("task/actions.jsonl");
    let first: Value = serde_json::from_str(log.lines().next().expect("a line")).expect("json");
    let error = first["error"].as_str().expect("refused");
    assert!(
        error.contains("over the") && error.contains("limit"),
        "{error}"
    );
    assert!(
        log.len() < 64 * 1024,
        "the huge answer was logged: {} bytes",
        log.len()
    );
    assert_eq!(project.read("task/artifacts/after.md"), "after.md");
}

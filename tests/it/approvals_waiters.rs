//! Waiters and what they leave behind, with the real binary: a gate's timeout covers
//! reading its input; an empty rejection reason says so on every path; a request
//! whose waiter was killed is abandoned (listed, refused, pruned); a decision whose
//! request is gone is swept after a day; a waiter sleeps through other requests'
//! decisions.

use crate::common;

use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime};

use clowder::approvals::{Decision, Outcome, Queue, Request, RequestKind};
use common::*;

const QUEUE: &str = ".clowder/approvals";

fn hook_input(command: &str) -> String {
    serde_json::json!({
        "session_id": "abc123",
        "cwd": "/work/project",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    })
    .to_string()
}

fn spawn_gate(project: &Project, args: &[&str], command: &str) -> Child {
    let mut child = project
        .command(args)
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(hook_input(command).as_bytes())
        .expect("write stdin");
    drop(pipe);
    child
}

fn queue_json(project: &Project) -> Vec<serde_json::Value> {
    let output = project.run(&["queue", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    serde_json::from_str(&stdout_of(&output)).expect("queue --json is JSON")
}

/// Waits until a request for `command` is pending and returns its id.
fn pending_id(project: &Project, command: &str) -> String {
    let mut id = None;
    assert!(
        wait_until(DEADLINE, || {
            id = queue_json(project)
                .iter()
                .find(|r| r["subject"] == command)
                .and_then(|r| r["id"].as_str().map(str::to_string));
            id.is_some()
        }),
        "no pending request for {command}"
    );
    id.expect("id")
}

fn deny_reason(output: &std::process::Output) -> String {
    let answer: serde_json::Value =
        serde_json::from_str(stdout_of(output).trim()).expect("the gate answers JSON");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .expect("reason")
        .to_string()
}

fn request(title: &str) -> Request {
    Request {
        id: String::new(),
        created: chrono::Utc::now(),
        kind: RequestKind::Ask,
        title: title.into(),
        tool_name: None,
        tool_input: None,
        session_id: None,
        cwd: None,
        body: None,
        lane: None,
        abandoned: false,
    }
}

#[test]
fn a_gate_whose_stdin_never_closes_is_denied_within_its_timeout() {
    let project = Project::new("");
    let mut gate = project
        .command(&["gate", "--timeout", "1s"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    // Half an input, and the pipe stays open.
    let mut pipe = gate.stdin.take().expect("stdin");
    pipe.write_all(b"{\"tool_name\":").expect("write stdin");
    let output = wait_with_deadline(gate, DEADLINE);
    drop(pipe);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let reason = deny_reason(&output);
    assert!(
        reason.starts_with("timed out after 1s reading the hook input"),
        "{reason}"
    );
    assert!(queue_json(&project).is_empty());
}

#[test]
fn an_empty_rejection_reason_says_none_was_given_on_every_path() {
    let project = Project::new("");
    // From the command line, through the gate.
    let gate = spawn_gate(&project, &["gate"], "make deploy");
    let id = pending_id(&project, "make deploy");
    let reject = project.run(&["reject", &id, "--reason", ""]);
    assert_eq!(reject.status.code(), Some(0), "{}", stderr_of(&reject));
    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(deny_reason(&output), "rejected (no reason given)");

    // Through the library, as the control room and the loop's session gates decide;
    // once while the request is pending, once when it vanished after the decision.
    let queue = Queue::open(&project.path(QUEUE))
        .expect("queue")
        .with_event_log(None);
    for vanish in [false, true] {
        let submitted = queue.submit(request("Drop the table?")).expect("submit");
        let id = submitted.request.id.clone();
        queue
            .decide(&id, Decision::Reject("  ".into()))
            .expect("decide");
        if vanish {
            std::fs::remove_file(project.path(&format!("{QUEUE}/pending/{id}.json")))
                .expect("remove the request");
        }
        let outcome = queue
            .wait(&submitted, Some(Duration::from_secs(30)), &|| None)
            .expect("wait");
        assert_eq!(
            outcome,
            Outcome::Rejected {
                reason: "rejected (no reason given)".into()
            },
            "request removed after the decision: {vanish}"
        );
    }
}

#[test]
fn a_killed_gate_leaves_an_abandoned_request_that_is_refused_then_pruned() {
    let project = Project::new("");
    let mut killed = spawn_gate(&project, &["gate"], "rm -rf build");
    let dead = pending_id(&project, "rm -rf build");
    let live_gate = spawn_gate(&project, &["gate"], "cargo test");
    let live = pending_id(&project, "cargo test");
    killed.kill().expect("SIGKILL the gate");
    killed.wait().expect("reap");

    let listed = queue_json(&project);
    let abandoned = |id: &str| {
        listed
            .iter()
            .find(|r| r["id"] == id)
            .map(|r| r["abandoned"].clone())
    };
    assert_eq!(abandoned(&dead), Some(serde_json::json!(true)));
    assert_eq!(abandoned(&live), Some(serde_json::json!(false)));
    let text = stdout_of(&project.run(&["queue"]));
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line(&dead).contains("abandoned"), "{text}");
    assert!(line(&live).contains("waiting"), "{text}");

    for args in [
        vec!["approve", &dead],
        vec!["reject", &dead, "--reason", "no"],
    ] {
        let output = project.run(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(
            stderr_of(&output).contains(&format!("request `{dead}` is abandoned")),
            "{}",
            stderr_of(&output)
        );
    }
    assert!(
        !project
            .path(&format!("{QUEUE}/decided/{dead}.json"))
            .exists()
    );
    // The library refuses too (the control room decides through it).
    let queue = Queue::open(&project.path(QUEUE))
        .expect("queue")
        .with_event_log(None);
    assert!(matches!(
        queue.decide(&dead, Decision::Approve),
        Err(clowder::approvals::DecideError::Abandoned(_))
    ));

    let pruned = project.run(&["queue", "--prune", "--json"]);
    assert_eq!(pruned.status.code(), Some(0), "{}", stderr_of(&pruned));
    assert!(stderr_of(&pruned).contains(&dead), "{}", stderr_of(&pruned));
    let listed: Vec<serde_json::Value> = serde_json::from_str(&stdout_of(&pruned)).expect("json");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], live.as_str());
    let done: serde_json::Value =
        serde_json::from_str(&project.read(&format!("{QUEUE}/done/{dead}.json"))).expect("json");
    assert_eq!(done["outcome"], "abandoned");
    assert!(
        !project
            .path(&format!("{QUEUE}/waiting/{dead}.sock"))
            .exists()
    );

    // The live one is untouched and still answers.
    assert_eq!(project.run(&["approve", &live]).status.code(), Some(0));
    let output = wait_with_deadline(live_gate, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("\"allow\""));
    assert!(
        !project
            .path(&format!("{QUEUE}/waiting/{live}.sock"))
            .exists()
    );
}

#[test]
fn a_decision_whose_request_is_gone_is_swept_after_a_day() {
    let project = Project::new("");
    assert_eq!(project.run(&["queue"]).status.code(), Some(0));
    let decision = |id: &str| {
        serde_json::json!({
            "id": id,
            "decision": "approve",
            "reason": null,
            "decided_at": chrono::Utc::now().to_rfc3339(),
            "request_hash": "0".repeat(64),
        })
        .to_string()
    };
    for id in ["old-one", "new-one"] {
        project.write(&format!("{QUEUE}/decided/{id}.json"), &decision(id));
    }
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 86_400);
    std::fs::File::options()
        .write(true)
        .open(project.path(&format!("{QUEUE}/decided/old-one.json")))
        .and_then(|f| f.set_modified(two_days_ago))
        .expect("set the time back");

    let output = project.run(&["queue"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(
        !project
            .path(&format!("{QUEUE}/decided/old-one.json"))
            .exists()
    );
    assert!(
        project
            .path(&format!("{QUEUE}/decided/new-one.json"))
            .exists()
    );
    let moved: Vec<String> = std::fs::read_dir(project.path(&format!("{QUEUE}/done")))
        .expect("done")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        moved
            .iter()
            .any(|name| name.starts_with("rejected-decided-old-one.json")),
        "{moved:?}"
    );
    let swept = project.events_named("approval_rejected_file");
    assert!(
        swept.iter().any(|e| e["id"] == "old-one"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("no longer exists"))),
        "{swept:?}"
    );
}

/// Context switches of every thread of `pid` so far.
fn wakes(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let status =
            std::fs::read_to_string(task.expect("task").path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

#[test]
fn a_waiter_sleeps_through_other_requests_decisions() {
    let project = Project::new("");
    let ask = project.spawn(&["ask", "--title", "Mine?", "--timeout", "60s"]);
    assert!(wait_until(DEADLINE, || queue_json(&project).len() == 1));
    let mine = queue_json(&project)[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let queue = Queue::open(&project.path(QUEUE))
        .expect("queue")
        .with_event_log(None);
    let before = wakes(ask.id());
    let started = std::time::Instant::now();
    // Others come and are decided: each a file in pending/, one in decided/ and a
    // move to done/, all in the folders the ask waits on.
    for i in 0..40 {
        let submitted = queue
            .submit(request(&format!("other {i}")))
            .expect("submit");
        queue
            .decide(&submitted.request.id, Decision::Approve)
            .expect("decide");
        let outcome = queue
            .wait(&submitted, Some(Duration::from_secs(30)), &|| None)
            .expect("wait");
        assert!(matches!(outcome, Outcome::Approved { .. }));
    }
    let woke = wakes(ask.id()) - before;
    // It looks once a second by itself; a waiter woken by every change would have
    // woken at least once per request.
    let allowed = 2 * started.elapsed().as_secs() + 6;
    assert!(
        woke <= allowed,
        "the ask woke {woke} times in {:?} while 40 other requests were decided",
        started.elapsed()
    );
    assert_eq!(project.run(&["approve", &mine]).status.code(), Some(0));
    let output = wait_with_deadline(ask, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
}

//! The approval queue end to end with the real binary: `clowder gate` as a Claude
//! Code PreToolUse hook, decided by `clowder approve` / `clowder reject` from other
//! processes; `clowder ask`; `clowder init --claude-hook`.

use crate::common;

use std::io::Write;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use common::*;

const ALLOW: &str = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"approved in clowder"}}"#;

fn hook_input(tool: &str, input: serde_json::Value) -> String {
    serde_json::json!({
        "session_id": "abc123",
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": "/work/project",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_01ABC"
    })
    .to_string()
}

/// `clowder ARGS` with `stdin` piped in and closed.
fn spawn_with_stdin(project: &Project, args: &[&str], stdin: &str) -> Child {
    spawn_feeding(project.command(args), stdin)
}

/// `command` with `stdin` piped in and closed.
fn spawn_feeding(mut command: std::process::Command, stdin: &str) -> Child {
    let mut child = command
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.as_bytes()).expect("write stdin");
    drop(pipe);
    child
}

/// `clowder queue --json`, parsed.
fn queue_json(project: &Project) -> Vec<serde_json::Value> {
    let output = project.run(&["queue", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    serde_json::from_str::<Vec<serde_json::Value>>(&stdout_of(&output))
        .unwrap_or_else(|e| panic!("queue --json: {e}\n{}", stdout_of(&output)))
}

/// Waits until exactly one request is pending and returns its id.
fn the_pending_id(project: &Project) -> String {
    let mut id = None;
    let found = wait_until(DEADLINE, || {
        let listed = queue_json(project);
        if listed.len() == 1 {
            id = listed[0]["id"].as_str().map(str::to_string);
        }
        id.is_some()
    });
    assert!(found, "no pending request appeared");
    id.expect("id")
}

fn hook_answer(output: &Output) -> serde_json::Value {
    serde_json::from_str(stdout_of(output).trim())
        .unwrap_or_else(|e| panic!("gate stdout is not JSON ({e}): {}", stdout_of(output)))
}

fn done_record(project: &Project, id: &str) -> serde_json::Value {
    serde_json::from_str(&project.read(&format!(".clowder/approvals/done/{id}.json")))
        .expect("done record is JSON")
}

#[test]
fn an_approved_tool_call_is_allowed() {
    let project = Project::new("");
    let gate = spawn_with_stdin(
        &project,
        &["gate"],
        &hook_input("Bash", serde_json::json!({"command": "cargo test"})),
    );
    let id = the_pending_id(&project);
    let listed = queue_json(&project);
    assert_eq!(listed[0]["tool_name"], "Bash");
    assert_eq!(listed[0]["subject"], "cargo test");
    assert_eq!(listed[0]["session_id"], "abc123");

    let approve = project.run(&["approve", &id]);
    assert_eq!(approve.status.code(), Some(0), "{}", stderr_of(&approve));

    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), format!("{ALLOW}\n"));
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!("waiting for approval of Bash (id {id})"))
            && stderr.contains(&format!("`clowder approve {id}`")),
        "{stderr}"
    );
    assert!(stderr.contains("no clowder loop holds"), "{stderr}");

    // History: request, decision and the wait in one file; nothing left behind.
    let done = done_record(&project, &id);
    assert_eq!(done["outcome"], "approved");
    assert_eq!(done["request"]["id"], id.as_str());
    assert_eq!(done["decision"]["decision"], "approve");
    assert!(done["waited_secs"].as_f64().is_some());
    assert!(
        !project
            .path(&format!(".clowder/approvals/pending/{id}.json"))
            .exists()
    );
    assert!(
        !project
            .path(&format!(".clowder/approvals/decided/{id}.json"))
            .exists()
    );
    assert!(queue_json(&project).is_empty());

    let requested = project.events_named("approval_requested");
    assert_eq!(requested.len(), 1);
    assert_eq!(requested[0]["id"], id.as_str());
    let decided = project.events_named("approval_decided");
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["id"], id.as_str());
    assert!(decided[0]["waited_secs"].as_f64().is_some());

    // Deciding again: the request is gone, and its record says how it ended.
    let again = project.run(&["approve", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr_of(&again).contains(&format!(
            "request `{id}` was already approved by clowder approve (user "
        )),
        "{}",
        stderr_of(&again)
    );
}

#[test]
fn a_rejected_tool_call_is_denied_with_the_reason() {
    let project = Project::new("");
    let gate = spawn_with_stdin(
        &project,
        &["gate"],
        &hook_input(
            "Write",
            serde_json::json!({"file_path": "/etc/passwd", "content": "x"}),
        ),
    );
    let id = the_pending_id(&project);
    assert_eq!(queue_json(&project)[0]["subject"], "/etc/passwd");
    let reject = project.run(&["reject", &id, "--reason", "not outside the project"]);
    assert_eq!(reject.status.code(), Some(0), "{}", stderr_of(&reject));

    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let answer = hook_answer(&output);
    assert_eq!(
        answer,
        serde_json::json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "not outside the project"
        }})
    );
    assert_eq!(done_record(&project, &id)["outcome"], "rejected");
}

#[test]
fn a_gate_that_times_out_denies() {
    let project = Project::new("");
    let gate = spawn_with_stdin(
        &project,
        &["gate", "--timeout", "1s"],
        &hook_input("Bash", serde_json::json!({"command": "ls"})),
    );
    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let answer = hook_answer(&output);
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .expect("reason");
    assert!(reason.starts_with("timed out after 1s"), "{reason}");
    assert!(
        queue_json(&project).is_empty(),
        "the request left the queue"
    );
    let timeouts = project.events_named("approval_timeout");
    assert_eq!(timeouts.len(), 1);
    let id = timeouts[0]["id"].as_str().expect("id");
    assert_eq!(done_record(&project, id)["outcome"], "timed_out");
}

#[test]
fn a_gate_stopped_by_sigterm_blocks_the_call() {
    let project = Project::new("");
    let gate = spawn_with_stdin(
        &project,
        &["gate"],
        &hook_input("Bash", serde_json::json!({"command": "ls"})),
    );
    let id = the_pending_id(&project);
    send_signal(gate.id(), libc::SIGTERM);
    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stdout_of(&output).is_empty(), "{}", stdout_of(&output));
    assert!(
        stderr_of(&output).contains("SIGTERM"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(done_record(&project, &id)["outcome"], "cancelled");
    assert!(queue_json(&project).is_empty());
}

#[test]
fn bad_hook_input_is_denied_with_exit_2() {
    let project = Project::new("");
    for input in [
        "not json".to_string(),
        "{\"tool_input\":{}}".to_string(),
        format!(
            "{{\"tool_name\":\"Bash\",\"pad\":\"{}\"}}",
            "x".repeat(1_100_000)
        ),
        hook_input("Bash", serde_json::json!({})).replace("PreToolUse", "PostToolUse"),
    ] {
        let gate = spawn_with_stdin(&project, &["gate"], &input);
        let output = wait_with_deadline(gate, DEADLINE);
        assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
        assert!(stdout_of(&output).is_empty());
        assert!(
            stderr_of(&output).contains("denied"),
            "{}",
            stderr_of(&output)
        );
    }
    assert!(queue_json(&project).is_empty());
}

#[test]
fn a_decision_for_another_request_is_ignored() {
    let project = Project::new("");
    let gate = spawn_with_stdin(
        &project,
        &["gate", "--timeout", "4s"],
        &hook_input("Bash", serde_json::json!({"command": "make deploy"})),
    );
    let id = the_pending_id(&project);
    // A forged approval: the right id, but not the hash of this request's file.
    let forged = serde_json::json!({
        "id": id,
        "decision": "approve",
        "reason": null,
        "decided_at": chrono::Utc::now().to_rfc3339(),
        "request_hash": "0".repeat(64),
    });
    let decided = project.path(&format!(".clowder/approvals/decided/{id}.json"));
    let temp = project.path(".clowder/approvals/.tmp-forged");
    std::fs::write(&temp, forged.to_string()).expect("write");
    std::fs::rename(&temp, &decided).expect("rename");

    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let answer = hook_answer(&output);
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    let rejected = project.events_named("approval_rejected_file");
    assert!(
        rejected.iter().any(|e| e["reason"]
            .as_str()
            .is_some_and(|r| r.contains("request_hash"))),
        "{rejected:?}"
    );
}

#[test]
fn ask_exits_0_when_approved_1_when_rejected_3_on_timeout() {
    let project = Project::new("");
    project.write("body.md", "Deploy \u{1b}[31mnow\u{1b}[0m?\n");

    let ask = project.spawn(&[
        "ask",
        "--title",
        "Deploy to prod?",
        "--body-file",
        "body.md",
    ]);
    let id = the_pending_id(&project);
    let listed = queue_json(&project);
    assert_eq!(listed[0]["kind"], "ask");
    assert_eq!(listed[0]["title"], "Deploy to prod?");
    assert_eq!(listed[0]["body"], "Deploy \u{1b}[31mnow\u{1b}[0m?\n");
    assert_eq!(project.run(&["approve", &id]).status.code(), Some(0));
    let output = wait_with_deadline(ask, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));

    let ask = project.spawn(&["ask", "--title", "Drop the table?"]);
    let id = the_pending_id(&project);
    let reject = project.run(&["reject", &id, "--reason", "keep the data"]);
    assert_eq!(reject.status.code(), Some(0));
    let output = wait_with_deadline(ask, DEADLINE);
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("keep the data"),
        "{}",
        stderr_of(&output)
    );

    let ask = project.spawn(&["ask", "--title", "Anyone there?", "--timeout", "1s"]);
    let output = wait_with_deadline(ask, DEADLINE);
    assert_eq!(output.status.code(), Some(3), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("timed out"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn bad_timeouts_and_unknown_ids_are_usage_errors() {
    let project = Project::new("");
    let output = project.run(&["ask", "--title", "x", "--timeout", "soon"]);
    assert_eq!(output.status.code(), Some(2));
    let output = project.run(&["reject", "nope", "--reason", "no"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains("no pending request with id `nope`"));
    let output = project.run(&["approve", "../../etc/passwd"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains("not a request id"));
}

#[test]
fn init_prints_and_merges_the_claude_hook() {
    let project = Project::new("");
    let output = project.run(&["init", "--claude-hook"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout_of(&output),
        "{\"hooks\":{\"PreToolUse\":[{\"matcher\":\"Bash|Edit|Write\",\"hooks\":[{\"type\":\"command\",\"command\":\"clowder gate\",\"timeout\":600}]}]}}\n"
    );

    std::fs::create_dir_all(project.path(".claude")).expect("mkdir");
    project.write(
        ".claude/settings.json",
        r#"{"model":"opus","hooks":{"PostToolUse":[{"matcher":"*","hooks":[]}]}}"#,
    );
    let output = project.run(&["init", "--claude-hook", "--write"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let settings: serde_json::Value =
        serde_json::from_str(&project.read(".claude/settings.json")).expect("json");
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["hooks"]["PostToolUse"][0]["matcher"], "*");
    assert_eq!(
        settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "clowder gate"
    );
    // Twice: still one entry.
    let output = project.run(&["init", "--claude-hook", "--write"]);
    assert_eq!(output.status.code(), Some(0));
    let settings: serde_json::Value =
        serde_json::from_str(&project.read(".claude/settings.json")).expect("json");
    assert_eq!(
        settings["hooks"]["PreToolUse"].as_array().map(Vec::len),
        Some(1)
    );

    project.write(".claude/settings.json", "{ not json");
    let output = project.run(&["init", "--claude-hook", "--write"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("not valid JSON"));
    assert_eq!(project.read(".claude/settings.json"), "{ not json");
}

#[test]
fn the_loop_form_still_parses() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = project.run(&["--dry-run", "4"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    // A loop option before a subcommand is a usage error, not a silent mix.
    let output = project.run(&["--headless", "queue"]);
    assert_eq!(output.status.code(), Some(2));
}

/// CPU time (user + system) of `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the comm.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

#[test]
fn a_waiting_ask_sleeps_instead_of_spinning() {
    // Reading the request raises inotify access events; taken as hints, each
    // rescan woke the next one and a waiting `ask` used a whole core.
    let project = Project::new(&fast_config(&["normal"], ""));
    let ask = project.spawn(&["ask", "--title", "Deploy?", "--timeout", "60s"]);
    assert!(wait_until(DEADLINE, || queue_json(&project).len() == 1));
    let before = cpu_ticks(ask.id());
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_ticks(ask.id()) - before;
    // A spinning wait uses ~300 ticks here; a sleeping one a few (it looks at its
    // own files once a second). The bound leaves room for a loaded machine.
    assert!(used < 100, "a waiting ask used {used} ticks in 3 s");
    let id = the_pending_id(&project);
    assert_eq!(project.run(&["approve", &id]).status.code(), Some(0));
    let output = wait_with_deadline(ask, DEADLINE);
    assert_eq!(output.status.code(), Some(0));
}

/// In an agent its loop handed the gate (`CLOWDER_GATE_HANDED`), a `clowder
/// gate` registered anywhere else answers nothing and queues nothing, so a
/// person is asked once; the handed one (`--handed`) asks as always.
#[test]
fn a_gate_beside_the_handed_one_steps_aside() {
    let project = Project::new("");
    let input = hook_input("Bash", serde_json::json!({"command": "rm -rf build"}));
    let mut command = project.command(&["gate", "--timeout", "30s"]);
    command.env("CLOWDER_GATE_HANDED", "1");
    let output = wait_with_deadline(spawn_feeding(command, &input), DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), "", "no answer: no decision");
    assert!(queue_json(&project).is_empty(), "nothing was asked");

    let mut command = project.command(&["gate", "--handed", "--timeout", "30s"]);
    command.env("CLOWDER_GATE_HANDED", "1");
    let child = spawn_feeding(command, &input);
    let id = the_pending_id(&project);
    let approve = project.run(&["approve", &id]);
    assert_eq!(approve.status.code(), Some(0), "{}", stderr_of(&approve));
    let output = wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output).trim(), ALLOW);
}

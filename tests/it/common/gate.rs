//! `clowder gate` run as an agent's hook would run it: a Bash call's PreToolUse
//! JSON on its stdin.

use std::io::Write;
use std::process::{Child, Stdio};

use super::Project;

/// The PreToolUse input of a Bash call.
pub fn bash_hook(command: &str) -> String {
    serde_json::json!({
        "session_id": "s-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/work/project",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command, "description": "run it" },
        "tool_use_id": "toolu_1",
    })
    .to_string()
}

/// `clowder gate ARGS…` with the Bash call `command` written to its stdin.
pub fn spawn_gate(project: &Project, command: &str, args: &[&str]) -> Child {
    let mut gate_args = vec!["gate"];
    gate_args.extend_from_slice(args);
    let mut child = project
        .command(&gate_args)
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(bash_hook(command).as_bytes())
        .expect("write hook");
    drop(stdin);
    child
}

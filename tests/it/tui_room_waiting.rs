//! The single loop's room while a tool call waits in its inbox, at 80x24 in
//! tmux: the header says waiting, the Approvals pane shows the whole command,
//! and `r` opens a dialog that names who asks and what before the reason.

use crate::common;

use std::io::Write;
use std::process::Stdio;

use common::tmux::{Tmux, room_command};
use common::*;

const COMMAND: &str = "rm -rf /tmp/clowder-test/build-output/cache";

#[test]
fn a_waiting_tool_call_makes_the_loop_wait_and_is_shown_and_rejected_whole() {
    let project = Project::new(&fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let pidfile = project.path("pids.txt");
    let tmux = Tmux::start(project.root(), &room_command(&pidfile, 3, ""), 80, 24);
    tmux.wait_for("● running");

    // What Claude Code's hook does: the call on stdin, the answer on stdout.
    let mut gate = project
        .command(&["gate"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    let call = serde_json::json!({
        "session_id": "s-1",
        "cwd": project.root(),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": COMMAND},
        "tool_use_id": "toolu_1"
    });
    let mut stdin = gate.stdin.take().expect("stdin");
    stdin
        .write_all(call.to_string().as_bytes())
        .expect("write the call");
    drop(stdin);

    // Cut to `rm -rf…` before: the path now shows on the rows below.
    tmux.wait_for_all(&[
        "? waiting: a request waits in the inbox",
        "/tmp/clowder-test/build-",
    ]);
    tmux.keys(&["r"]);
    tmux.wait_for_all(&["the loop asks (request", &format!("▶ Bash  {COMMAND}")]);
    tmux.type_text("not the cache");
    tmux.keys(&["Enter"]);
    let answered = wait_with_deadline(gate, DEADLINE);
    assert!(
        stdout_of(&answered).contains("\"permissionDecisionReason\":\"not the cache\""),
        "{}",
        stdout_of(&answered)
    );
    tmux.wait_for("● running");
    tmux.keys(&["q"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    assert!(wait_until(DEADLINE, || !tmux
        .screen()
        .contains("Quit clowder?")));
}

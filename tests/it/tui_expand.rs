//! Expanding a tool call in the control room: the real binary in tmux shows
//! the call's input and its whole result, built only when asked for.

use crate::common;

use common::tmux::{Tmux, room_command};
use common::*;

const SESSION: &str = concat!(
    r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-sonnet-4-5","cwd":"/tmp"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cat notes.txt","timeout":5}}]}}"#,
    "\n",
    r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"alpha\nbeta\ngamma-hidden\n"}]}}"#,
    "\n",
);

#[test]
fn enter_on_a_tool_call_shows_its_input_and_whole_result() {
    let project = Project::new(&fast_config(
        &["burst", "session.jsonl", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    project.write("session.jsonl", SESSION);
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 1, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    let screen = tmux.wait_for_all(&["▶ Bash  cat notes.txt", "↳ alpha (+2 lines)"]);
    assert!(!screen.contains("gamma-hidden"), "{screen}");

    // Search selects the call; Enter expands it.
    tmux.keys(&["/"]);
    // Typed only once the prompt is open: keys that came with `/` in one read
    // would be a paste, which no text prompt took.
    tmux.wait_for("Enter search");
    tmux.type_text("notes.txt");
    tmux.keys(&["Enter"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["command: cat notes.txt", "── result ──", "gamma-hidden"]);

    tmux.keys(&["Escape"]);
    tmux.wait_gone("── result ──");
    tmux.keys(&["C-c"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=");
    assert!(screen.contains("CLOWDER_EXIT=0"), "{screen}");
    let pgid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pid file")
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("agent pgid");
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
}

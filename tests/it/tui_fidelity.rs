//! What the control room shows of real agents' shapes: Codex's commands as the
//! shell runs them, its warnings as notices, Claude's one-line tool inputs as
//! text, and a format clowder does not read said so, with nothing counted.

use crate::common;

use std::path::Path;

use common::tmux::{Tmux, room_command};
use common::*;

fn transcript_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

/// The room over one session that writes `transcript` at once and then waits.
fn room(transcript: &str) -> (Project, Tmux) {
    room_over(&transcript_fixture(transcript))
}

/// The room over one session that writes the file at `path` at once and then waits.
fn room_over(path: &str) -> (Project, Tmux) {
    let project = Project::new(&fast_config(
        &["burst", path, "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 1, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(project.root(), &command, 140, 40);
    (project, tmux)
}

/// Stops the loop and its session from the room.
fn quit(tmux: &Tmux) {
    tmux.keys(&["C-c"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    tmux.wait_for("CLOWDER_EXIT=");
}

#[test]
fn codex_commands_read_as_the_shell_runs_them_and_warnings_are_notices() {
    let (_project, tmux) = room("codex_0169_run.jsonl");
    let screen = tmux.wait_for_all(&[
        r#"▶ exec  grep -rn "TODO" src | wc -l && echo `date +%F` $HOME"#,
        "▶ exec  cargo test --quiet",
        "⚠ Model metadata for `gpt-5.3-codex` not found",
        "⚠ Skill descriptions were shortened",
    ]);
    assert!(!screen.contains("✗ Model metadata"), "{screen}");
    assert!(!screen.contains(r#"\""#), "{screen}");
    quit(&tmux);
}

#[test]
fn a_one_line_bash_input_expands_as_text() {
    let (_project, tmux) = room("claude_1m_context.jsonl");
    tmux.wait_for("▶ Bash  cargo test");
    tmux.keys(&["/"]);
    tmux.wait_for("Enter search");
    tmux.type_text("cargo test");
    tmux.keys(&["Enter"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("command: cargo test");
    assert!(!screen.contains("\"command\":"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_gone("command: cargo test");
    quit(&tmux);
}

#[test]
fn an_unrecognised_format_is_said_on_screen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stream = dir.path().join("unknown.jsonl");
    let lines: String = (0..6)
        .map(|n| format!("{{\"event\":\"progress\",\"step\":{n}}}\n"))
        .collect();
    std::fs::write(&stream, lines).expect("write the stream");
    let (_project, tmux) = room_over(&stream.display().to_string());
    let screen = tmux.wait_for("does not recognise this agent's output format");
    assert!(!screen.contains("0 in · 0 out"), "{screen}");
    quit(&tmux);
}

/// Codex before 0.44 is not supported: the room's loop ends at its first
/// lines, with exit code 1 and the reason.
#[test]
fn a_codex_older_than_0_44_ends_the_loop_with_the_reason() {
    let (_project, tmux) = room("codex_legacy_0_40.jsonl");
    tmux.wait_for_all(&["✗ failed", "#1 agent error: the agent writes"]);
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=");
    assert!(screen.contains("CLOWDER_EXIT=1"), "{screen}");
    assert!(screen.contains("run Codex 0.44 or later"), "{screen}");
}

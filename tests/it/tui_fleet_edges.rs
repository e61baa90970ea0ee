//! The control room over lanes at its edges, through the real binary in tmux: a
//! lane whose agent fails every session, the room once its last lane is removed,
//! and the confirmation boxes at the sizes people use.

use crate::common;

use std::path::Path;

use common::git::{clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{clowder_bin, fake_agent};
use tempfile::TempDir;

/// A repository whose lanes run the fake agent as `mode_args` say, `iterations` sessions each.
fn fleet(lanes: &[&str], mode_args: &[&str], iterations: u32) -> TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let args: Vec<String> = mode_args.iter().map(|a| format!("{a:?}")).collect();
    let config = format!(
        "[agent]\ncommand = {:?}\nargs = [{}]\n\n[session]\nmax_iterations = {iterations}\n\n\
         [retry]\nretry_delay_secs = 0.05\n\n[watchdog]\nmin_output_bytes = 1\n",
        fake_agent().display().to_string(),
        args.join(", ")
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    for lane in lanes {
        clowder_in(root, &["lane", "add", lane]);
    }
    repo
}

/// The control room in `root`, in a `width`×`height` terminal.
fn room(root: &Path, width: u16, height: u16) -> Tmux {
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {}; sleep 600",
        clowder_bin().display()
    );
    Tmux::start(root, &command, width, height)
}

#[test]
fn a_lane_whose_agent_fails_every_session_shows_as_failed_with_its_exit_code() {
    let repo = fleet(&["flaky"], &["exit", "1"], 2);
    let tmux = room(repo.path(), 120, 40);
    let screen = tmux.wait_for_all(&[
        "✗ failed (exit 1)",
        "✗ failed: exit 1, non-zero in each of 2 sessions",
    ]);
    assert!(!screen.contains("✓ done"), "{screen}");
    assert!(screen.contains("last exit   1"), "{screen}");
}

#[test]
fn the_header_says_no_lanes_once_the_last_lane_is_removed() {
    let repo = fleet(&["only"], &["normal"], 1);
    let tmux = room(repo.path(), 120, 40);
    tmux.wait_for("✓ done");
    tmux.keys(&["X"]);
    tmux.wait_for("Remove the lane?");
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("no lanes (n adds one)");
    let header: Vec<&str> = screen.lines().take(2).collect();
    let header = header.join("\n");
    assert!(!header.contains("PID 0"), "{screen}");
    assert!(!header.contains(" up "), "{screen}");
}

/// The rows of the box whose title is `title`, from its top border to its bottom one.
fn dialog_rows<'a>(screen: &'a str, title: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = screen.lines().collect();
    let top = lines
        .iter()
        .position(|l| l.contains(title))
        .unwrap_or_else(|| panic!("no {title:?} box:\n{screen}"));
    let left = lines[top].find('╔').expect("a double-lined box");
    let bottom = (top + 1..lines.len())
        .find(|&i| lines[i].get(left..).is_some_and(|l| l.starts_with('╚')))
        .unwrap_or_else(|| panic!("the {title:?} box has no bottom:\n{screen}"));
    lines[top..=bottom].to_vec()
}

#[test]
fn the_kill_question_shows_the_keys_that_answer_it_at_every_size() {
    for (width, height) in [(80, 24), (120, 40)] {
        let repo = fleet(&["busy"], &["hang"], 1);
        let tmux = room(repo.path(), width, height);
        // Its session, not only its loop: K acts on a session's processes.
        tmux.wait_for_all(&["● running", "PGID"]);
        tmux.keys(&["K"]);
        let screen = tmux.wait_for("Kill the session?");
        let rows = dialog_rows(&screen, "Kill the session?");
        assert!(
            rows.iter()
                .any(|r| r.contains("y  kill") && r.contains("n / Esc  cancel")),
            "{width}x{height}: the keys are not inside the box:\n{screen}"
        );
        // Esc alone: with the next key in the same read it would be Alt+key.
        tmux.keys(&["Escape"]);
        assert!(
            common::wait_until(common::DEADLINE, || !tmux
                .screen()
                .contains("Kill the session?")),
            "Esc did not close the question"
        );
        tmux.keys(&["X"]);
        let screen = tmux.wait_for("Remove the lane?");
        let rows = dialog_rows(&screen, "Remove the lane?");
        assert!(
            rows.iter().any(|r| r.contains("y  remove")),
            "{width}x{height}: the keys are not inside the box:\n{screen}"
        );
    }
}

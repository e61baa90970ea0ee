//! The control room at the sizes people use, through the real binary in tmux:
//! at 80x24 the Lanes pane counts the lanes it cannot show, and the new-lane
//! dialog keeps what was typed when the lane is refused; at 200x60 the side
//! column takes the width the output does not need; keys that do nothing say why.

use crate::common;

use std::path::Path;

use common::git::{clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, fake_agent, wait_until};
use tempfile::TempDir;

/// A repository whose lanes `lanes` run the fake agent as `mode_args` say, once.
fn fleet(lanes: &[&str], mode_args: &[&str]) -> TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let args: Vec<String> = mode_args.iter().map(|a| format!("{a:?}")).collect();
    let config = format!(
        "[agent]\ncommand = {:?}\nargs = [{}]\n\n[session]\nmax_iterations = 1\n\n\
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

/// `clowder` (and `args`) in `root`, in a `width`×`height` terminal.
fn room(root: &Path, args: &str, width: u16, height: u16) -> Tmux {
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {} {args}; sleep 600",
        clowder_bin().display()
    );
    Tmux::start(root, &command, width, height)
}

const NINE: [&str; 9] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
];

#[test]
fn nine_lanes_at_80x24_count_the_ones_out_of_view() {
    let repo = fleet(&NINE, &["normal"]);
    let tmux = room(repo.path(), "", 80, 24);
    let screen = tmux.wait_for("↓ 5 more");
    assert!(!screen.contains("↑"), "{screen}");
    // Down to the last lane: the selection stays in view, the rest is above.
    for _ in 0..8 {
        tmux.keys(&["j"]);
    }
    let screen = tmux.wait_for("↑ 5 more");
    assert!(!screen.contains("↓ "), "{screen}");
    let selected = screen
        .lines()
        .find(|line| line.contains('▶'))
        .unwrap_or_else(|| panic!("no selected row:\n{screen}"));
    assert!(
        NINE.iter().any(|name| selected.contains(name)),
        "{selected}\n{screen}"
    );
}

#[test]
fn the_new_lane_dialog_keeps_a_refused_lane_with_the_reason_under_its_field() {
    let repo = fleet(&["alpha"], &["normal"]);
    let tmux = room(repo.path(), "", 80, 24);
    tmux.wait_for("Lanes 1");
    tmux.keys(&["n"]);
    tmux.wait_for("or a prompt");
    tmux.type_text("alpha");
    tmux.wait_for("lane alpha already exists");
    for _ in 0.."alpha".len() {
        tmux.keys(&["BSpace"]);
    }
    tmux.type_text("delta");
    tmux.keys(&["Tab", "Tab", "Tab"]);
    tmux.type_text("no-such-ref");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("--base no-such-ref");
    // Still open, with what was typed, the reason under the Base field.
    let lines: Vec<&str> = screen.lines().collect();
    let name = lines
        .iter()
        .position(|l| l.contains("║Name"))
        .expect("Name");
    assert!(lines[name].contains("delta"), "{screen}");
    let base = lines
        .iter()
        .position(|l| l.contains("║Base"))
        .expect("Base");
    assert!(lines[base].contains("no-such-ref"), "{screen}");
    assert!(lines[base + 1].contains("--base no-such-ref"), "{screen}");

    // Fixed in place, it is added and the dialog closes.
    for _ in 0.."no-such-ref".len() {
        tmux.keys(&["BSpace"]);
    }
    tmux.keys(&["Enter"]);
    tmux.wait_for("Lanes 2");
    assert!(
        wait_until(DEADLINE, || !tmux.screen().contains("or a prompt")),
        "{}",
        tmux.screen()
    );
}

#[test]
fn at_200x60_the_side_column_takes_the_width_its_events_need() {
    let repo = fleet(&["alpha"], &["normal"]);
    let tmux = room(repo.path(), "", 200, 60);
    let screen = tmux.wait_for("╭ Watchdog");
    let watchdog = screen
        .lines()
        .find(|line| line.contains("╭ Watchdog"))
        .expect("the watchdog pane");
    let corner = watchdog.find("╭ Watchdog").expect("its corner");
    let column = watchdog[..corner].chars().count();
    assert_eq!(column, 120, "the output keeps 120 columns:\n{screen}");

    // A lane added from the room: its whole message, branch and all.
    tmux.keys(&["n"]);
    tmux.wait_for("or a prompt");
    tmux.type_text("newlane");
    tmux.keys(&["C-s"]);
    tmux.wait_for("lane newlane added: branch clowder/newlane in …/");
}

#[test]
fn n_in_the_single_loop_room_says_why_it_does_nothing() {
    let repo = fleet(&[], &["hang"]);
    let tmux = room(repo.path(), "", 80, 24);
    tmux.wait_for("Session output");
    tmux.keys(&["n"]);
    // How to make one: the whole command, in 80 columns.
    tmux.wait_for("n adds a lane to a fleet: quit, `clowder lane add NAME`, then `clowder`");
}

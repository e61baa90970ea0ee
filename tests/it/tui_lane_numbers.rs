//! The control room's lane numbers, end to end in tmux: `1`–`9` pick the lane
//! whose number its row shows, while rows move as lanes start and stop
//! needing you; and a decision's note lands in the events of the lane that asked.

use crate::common;

use std::path::Path;

use common::git::{clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, wait_until};

/// The header's first line.
fn header(tmux: &Tmux) -> String {
    tmux.screen().lines().next().unwrap_or_default().to_string()
}

fn wait_for_header(tmux: &Tmux, lane: &str) {
    let wanted = format!("lane {lane} ");
    assert!(
        wait_until(DEADLINE, || header(tmux).contains(&wanted)),
        "the header never showed {wanted:?}:\n{}",
        tmux.screen()
    );
}

/// The Lanes pane's row of `lane`.
fn row_of(screen: &str, lane: &str) -> String {
    let cell = format!(" {lane} ");
    screen
        .lines()
        .find(|line| line.contains(&cell) && line.contains('┃'))
        .unwrap_or_else(|| panic!("no row for {lane}:\n{screen}"))
        .to_string()
}

#[test]
fn numbers_stay_with_their_lanes_and_a_decision_is_told_to_the_lane_that_asked() {
    let repo = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
    let config = format!(
        "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n",
        agent.display().to_string()
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    for lane in ["alpha", "beta", "gamma"] {
        clowder_in(root, &["lane", "add", lane]);
    }
    let command = format!(
        "env FLEET_AGENT_GATE_LANE=gamma FLEET_AGENT_OUT={out} FLEET_AGENT_CLOWDER={clowder} FLEET_AGENT_SECS=30 \
         GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {clowder}; sleep 600",
        out = out.path().display(),
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 200, 50);

    // gamma asks: its row moves to the top, and keeps its number, 3.
    let screen = tmux.wait_for("[gamma] Bash  git push origin");
    let lines: Vec<&str> = screen.lines().collect();
    let first_row = lines
        .iter()
        .position(|l| l.contains(" gamma ") && l.contains('┃'))
        .expect("a gamma row");
    assert!(
        lines[first_row].contains(" 3 gamma "),
        "{}",
        lines[first_row]
    );
    assert!(row_of(&screen, "alpha").contains(" 1 alpha "), "{screen}");

    // `2` is beta and `1` alpha, though gamma's row is the first.
    tmux.keys(&["2"]);
    wait_for_header(&tmux, "beta");
    tmux.keys(&["1"]);
    wait_for_header(&tmux, "alpha");
    tmux.keys(&["a"]);
    assert!(
        wait_until(DEADLINE, || {
            std::fs::metadata(out.path().join("answer-gamma.json")).is_ok_and(|m| m.len() > 0)
        }),
        "the gate was never answered:\n{}",
        tmux.screen()
    );

    // The note of the approval is in gamma's events, not in alpha's.
    tmux.keys(&["3"]);
    wait_for_header(&tmux, "gamma");
    tmux.wait_for("approved");
    tmux.keys(&["1"]);
    wait_for_header(&tmux, "alpha");
    let screen = tmux.screen();
    assert!(!screen.contains("approved"), "{screen}");

    // gamma no longer needs you: the rows move back, the numbers do not.
    tmux.keys(&["2"]);
    wait_for_header(&tmux, "beta");
    let screen = tmux.screen();
    assert!(row_of(&screen, "gamma").contains(" 3 gamma "), "{screen}");
}

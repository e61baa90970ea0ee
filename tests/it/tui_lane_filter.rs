//! The Lanes pane's filter and order, end to end in tmux: `/` there lists the
//! lanes whose name holds what is typed (and still searches the output in the
//! output pane), `w` lists only the lanes that need you, `O` sorts them.

use crate::common;

use std::path::Path;

use common::git::{clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, wait_until};

const LANES: [&str; 4] = ["api", "auth", "docs", "gate"];

/// The Lanes pane's row of the lane numbered `n`, if listed: `1 api`.
fn row_cell(n: usize) -> String {
    format!(" {} {} ", n + 1, LANES[n])
}

/// The lanes the Lanes pane lists now, by their rows.
fn listed(screen: &str) -> Vec<&'static str> {
    (0..LANES.len())
        .filter(|&n| screen.contains(&row_cell(n)))
        .map(|n| LANES[n])
        .collect()
}

fn wait_listed(tmux: &Tmux, want: &[&str]) -> String {
    let ok = wait_until(DEADLINE, || listed(&tmux.screen()) == want);
    let screen = tmux.screen();
    assert!(ok, "the Lanes pane never listed {want:?}:\n{screen}");
    screen
}

fn wait_header(tmux: &Tmux, lane: &str) {
    let wanted = format!("lane {lane} ");
    let header = || tmux.screen().lines().next().unwrap_or_default().to_string();
    assert!(
        wait_until(DEADLINE, || header().contains(&wanted)),
        "the header never showed {wanted:?}:\n{}",
        tmux.screen()
    );
}

#[test]
fn slash_filters_the_lanes_w_keeps_those_that_need_you_and_o_sorts_them() {
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
    for lane in LANES {
        clowder_in(root, &["lane", "add", lane]);
    }
    let command = format!(
        "env FLEET_AGENT_GATE_LANE=docs FLEET_AGENT_OUT={out} FLEET_AGENT_CLOWDER={clowder} FLEET_AGENT_SECS=60 \
         GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {clowder}; sleep 600",
        out = out.path().display(),
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 200, 50);
    tmux.wait_for("[docs] Bash  git push origin");
    wait_listed(&tmux, &LANES);

    // `/` in the Lanes pane (focused at start): the lanes whose name holds
    // what is typed, as it is typed; the panes show a listed lane.
    tmux.keys(&["/"]);
    tmux.wait_for("lanes /█");
    tmux.type_text("au");
    let screen = wait_listed(&tmux, &["auth"]);
    assert!(screen.contains("lanes /au█"), "{screen}");
    assert!(screen.contains("1 shown · /au"), "{screen}");
    wait_header(&tmux, "auth");
    // Enter keeps the filter; keys act again, on the lanes listed.
    tmux.keys(&["Enter"]);
    tmux.wait_gone("lanes /au█");
    tmux.keys(&["j"]);
    let screen = wait_listed(&tmux, &["auth"]);
    assert!(screen.contains("1 shown · /au"), "{screen}");
    // `/` again, then Esc: every lane.
    tmux.keys(&["/"]);
    tmux.wait_for("lanes /au█");
    tmux.keys(&["Escape"]);
    let screen = wait_listed(&tmux, &LANES);
    assert!(!screen.contains("shown"), "{screen}");

    // `w`: only the lane that needs you (docs waits for its request); again: all.
    tmux.keys(&["w"]);
    let screen = wait_listed(&tmux, &["docs"]);
    assert!(screen.contains("only those that need you"), "{screen}");
    wait_header(&tmux, "docs");
    tmux.keys(&["w"]);
    wait_listed(&tmux, &LANES);

    // `O` cycles the order, and the pane's title says which.
    for words in ["by state", "by cost", "by idle time"] {
        tmux.keys(&["O"]);
        tmux.wait_for(&format!("· {words}"));
    }
    tmux.keys(&["O"]);
    tmux.wait_gone("· by idle time");

    // In the output pane `/` still searches the output.
    tmux.keys(&["Tab"]);
    tmux.keys(&["/"]);
    let screen = tmux.wait_for("Enter search · Esc cancel");
    assert!(!screen.contains("lanes /"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_gone("Enter search · Esc cancel");
}

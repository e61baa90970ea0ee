//! The control room over a fleet, end to end: the real binary in a real
//! terminal (tmux), in a real git repository with three lanes whose agent
//! commits in its worktree and, in one lane, asks through `clowder gate`. Keys
//! are sent with `send-keys`, the screen read with `capture-pane`, processes
//! checked in `/proc`.

use crate::common;

use std::path::{Path, PathBuf};

use common::fleet::{lane_session_group, lane_status};
use common::git::{clowder_in, git_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, group_states, live_group_members, pid_alive, wait_until};
use serde_json::Value;
use tempfile::TempDir;

struct Fleet {
    repo: TempDir,
    /// Where the agent leaves the gate's answer (outside the repository).
    out: TempDir,
}

impl Fleet {
    fn new(lanes: &[&str]) -> Fleet {
        let fleet = Fleet {
            repo: tempfile::tempdir().expect("tempdir"),
            out: tempfile::tempdir().expect("tempdir"),
        };
        let root = fleet.root();
        init_with_one_commit(root);
        std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
        let config = format!(
            "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 5\n\n[backoff]\ninitial_delay_secs = 0.2\n\n[watchdog]\nmin_output_bytes = 1\n",
            agent.display().to_string()
        );
        std::fs::write(root.join("harness.toml"), config).expect("write");
        for lane in lanes {
            clowder_in(root, &["lane", "add", lane]);
        }
        fleet
    }

    fn root(&self) -> &Path {
        self.repo.path()
    }

    fn status(&self, lane: &str) -> Option<Value> {
        lane_status(self.root(), lane)
    }

    fn session_group(&self, lane: &str) -> i32 {
        lane_session_group(self.root(), lane)
    }

    /// The size of the lane's current output file.
    fn output_size(&self, lane: &str) -> u64 {
        self.status(lane)
            .and_then(|s| s["output_file"].as_str().map(PathBuf::from))
            .and_then(|file| std::fs::metadata(file).ok())
            .map_or(0, |m| m.len())
    }

    fn commits_ahead(&self, lane: &str) -> u64 {
        git_in(
            self.root(),
            &["rev-list", "--count", &format!("main..clowder/{lane}")],
        )
        .parse()
        .expect("a count")
    }
}

/// Live processes whose working folder is inside `dir`.
fn processes_in(dir: &Path) -> Vec<i32> {
    let dir = dir.canonicalize().expect("canonical path");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&dir))
                && pid_alive(*pid)
        })
        .collect()
}

/// Whether the lane's output grows within the deadline.
fn keeps_writing(fleet: &Fleet, lane: &str) -> bool {
    let before = fleet.output_size(lane);
    wait_until(DEADLINE, || fleet.output_size(lane) > before + 20)
}

#[test]
fn the_control_room_runs_pauses_kills_diffs_and_guards_every_lane() {
    let fleet = Fleet::new(&["alpha", "beta", "gamma"]);
    let command = format!(
        "env FLEET_AGENT_GATE_LANE=gamma FLEET_AGENT_OUT={out} FLEET_AGENT_CLOWDER={clowder} FLEET_AGENT_SECS=120 \
         GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {clowder}; echo CLOWDER_EXIT=$?; sleep 600",
        out = fleet.out.path().display(),
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(fleet.root(), &command, 120, 40);
    tmux.wait_for("Lanes 3");

    // The three lanes run at once, each in its own worktree.
    let groups: Vec<i32> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|lane| fleet.session_group(lane))
        .collect();
    for (lane, pgid) in ["alpha", "beta", "gamma"].iter().zip(&groups) {
        assert!(
            !live_group_members(*pgid).is_empty(),
            "{lane} is not running"
        );
        let cwd = std::fs::read_link(format!("/proc/{pgid}/cwd")).expect("the agent's folder");
        let worktree = fleet.root().join(".clowder/worktrees").join(lane);
        assert_eq!(cwd, worktree.canonicalize().expect("worktree"), "{lane}");
    }

    // The gate's request shows with its lane; `a` lets it go on.
    tmux.wait_for("[gamma] Bash  git push origin");
    tmux.wait_for("? waiting");
    tmux.keys(&["a"]);
    let answer = fleet.out.path().join("answer-gamma.json");
    assert!(
        wait_until(DEADLINE, || std::fs::read_to_string(&answer)
            .is_ok_and(|t| t.contains("allow"))),
        "the gate was never answered; screen:\n{}",
        tmux.screen()
    );
    // Answered, gamma no longer needs you: the lanes are in registry order again.
    assert!(
        wait_until(DEADLINE, || !tmux.screen().contains("? waiting")),
        "{}",
        tmux.screen()
    );

    // `p` on alpha stops only alpha's processes; the others keep writing.
    tmux.keys(&["1"]);
    tmux.wait_for("lane alpha");
    tmux.keys(&["p"]);
    assert!(
        wait_until(DEADLINE, || {
            let states = group_states(groups[0]);
            !states.is_empty() && states.iter().all(|s| *s == 'T')
        }),
        "alpha's group never stopped: {:?}",
        group_states(groups[0])
    );
    for (lane, pgid) in [("beta", groups[1]), ("gamma", groups[2])] {
        assert!(keeps_writing(&fleet, lane), "{lane} stopped writing");
        assert!(!group_states(pgid).contains(&'T'), "{lane} was paused too");
    }
    assert!(group_states(groups[0]).iter().all(|s| *s == 'T'));
    tmux.keys(&["p"]);
    assert!(wait_until(DEADLINE, || !group_states(groups[0]).contains(&'T')));

    // `K` on beta kills its session; its loop goes on with the next one.
    tmux.keys(&["2"]);
    tmux.wait_for("lane beta");
    tmux.keys(&["K"]);
    tmux.wait_for("Kill the session?");
    tmux.keys(&["y"]);
    assert!(
        wait_until(DEADLINE, || live_group_members(groups[1]).is_empty()),
        "beta's session survived K"
    );
    let mut next = groups[1];
    assert!(
        wait_until(DEADLINE, || {
            next = fleet.session_group("beta");
            next != groups[1]
        }),
        "beta's loop started no next session"
    );
    assert!(
        !live_group_members(groups[0]).is_empty(),
        "alpha was killed too"
    );
    assert!(
        !live_group_members(groups[2]).is_empty(),
        "gamma was killed too"
    );

    // `D` shows alpha's commit.
    tmux.keys(&["1"]);
    tmux.wait_for("lane alpha");
    tmux.keys(&["D"]);
    tmux.wait_for("Diff of lane alpha");
    tmux.wait_for("work-alpha.txt | 1 +");
    tmux.wait_for("+alpha 1");
    tmux.keys(&["Escape"]);
    // (A key right after Escape would read as Alt and that key.)
    assert!(wait_until(DEADLINE, || !tmux
        .screen()
        .contains("Diff of lane")));

    // `X` on alpha (stopped first: a running lane is refused as well) is
    // refused: its branch has a commit main lacks.
    tmux.keys(&["S"]);
    tmux.wait_for("Stop now?");
    tmux.keys(&["y"]);
    tmux.wait_for("stopped: user_stop");
    tmux.keys(&["X"]);
    tmux.wait_for("Remove the lane?");
    tmux.keys(&["y"]);
    tmux.wait_for("refused: lane rm alpha");
    // The events pane's record says why.
    tmux.keys(&["Tab", "Tab", "Tab", "Tab", "Tab"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("1 commit that neither main");
    tmux.keys(&["Escape"]);
    assert!(wait_until(DEADLINE, || !tmux
        .screen()
        .contains("1 commit that neither main")));
    assert!(fleet.commits_ahead("alpha") >= 1);
    assert!(fleet.root().join(".clowder/worktrees/alpha").is_dir());
    let lanes =
        std::fs::read_to_string(fleet.root().join(".clowder/fleet.json")).expect("registry");
    assert!(lanes.contains("\"alpha\""), "{lanes}");

    // `q`, then stop now: nothing is left in /proc.
    let clowder_pid = fleet
        .status("beta")
        .and_then(|s| s["pid"].as_i64())
        .expect("pid") as i32;
    tmux.keys(&["q"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    tmux.wait_for("CLOWDER_EXIT=");
    assert!(wait_until(DEADLINE, || !pid_alive(clowder_pid)));
    for pgid in groups.iter().chain([&next]) {
        assert!(
            live_group_members(*pgid).is_empty(),
            "group {pgid} left: {:?}",
            live_group_members(*pgid)
        );
    }
    // (The shell tmux runs in the repository waits for the test's end.)
    let worktrees = fleet.root().join(".clowder/worktrees");
    assert!(
        wait_until(DEADLINE, || processes_in(&worktrees).is_empty()),
        "left in the worktrees: {:?}",
        processes_in(&worktrees)
    );
}

/// `X` in a control room whose program has another name (a package's
/// `clowder-0.1`): the lane runs, so it is refused, though its worktree is
/// clean and its branch has nothing main lacks.
#[test]
fn x_on_a_running_lane_is_refused_whatever_the_program_is_called() {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/commit-agent.sh");
    let config = format!(
        "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n",
        agent.display().to_string()
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    clowder_in(root, &["lane", "add", "alpha"]);
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let renamed = elsewhere.path().join("clowder-0.1");
    std::fs::copy(clowder_bin(), &renamed).expect("copy the binary");
    let command = format!(
        "env COMMIT_AGENT_TICKS=1200 GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {}; echo CLOWDER_EXIT=$?; sleep 600",
        renamed.display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    tmux.wait_for("Lanes 1");
    let group = lane_session_group(root, "alpha");

    tmux.keys(&["1"]);
    tmux.wait_for("lane alpha");
    tmux.keys(&["X"]);
    tmux.wait_for("Remove the lane?");
    tmux.keys(&["y"]);
    tmux.wait_for("refused: lane rm alpha");
    assert!(root.join(".clowder/worktrees/alpha").is_dir());
    let lanes = std::fs::read_to_string(root.join(".clowder/fleet.json")).expect("registry");
    assert!(lanes.contains("\"alpha\""), "{lanes}");
    assert!(!live_group_members(group).is_empty(), "the agent runs on");

    tmux.keys(&["q"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    tmux.wait_for("CLOWDER_EXIT=");
    assert!(wait_until(DEADLINE, || live_group_members(group).is_empty()));
}

//! The room's lane actions in a real terminal (tmux): `M` merges the selected
//! lane, `o` runs a shell in its worktree with the screen given back, and the
//! room comes back after it.

use crate::common;

use std::path::Path;

use common::git::{clowder_in, git_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, wait_until};
use tempfile::TempDir;

/// A repository with lane `alpha`, whose agent commits once and ends.
fn repo_with_a_lane() -> TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    std::fs::write(
        root.join(".git/info/exclude"),
        "harness.toml\nPROMPT.md\n.clowder/\n",
    )
    .expect("write");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/commit-agent.sh");
    let config = format!(
        "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n[fleet]\nverify = \"true\"\n",
        agent.display().to_string()
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    clowder_in(root, &["lane", "add", "alpha"]);
    repo
}

fn room(root: &Path, env: &str) -> Tmux {
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {env} {}; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    Tmux::start(root, &command, 160, 40)
}

fn lane_has_committed(root: &Path) -> bool {
    wait_until(DEADLINE, || {
        git_in(root, &["rev-list", "--count", "main..clowder/alpha"]) != "0"
    })
}

fn session_starts(root: &Path) -> Vec<serde_json::Value> {
    let path = root.join(".clowder/lanes/alpha/harness-events.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| e["event"] == "session_start")
        .collect()
}

/// `q`: the room leaves at once when every lane has ended, else asks first.
fn quit(tmux: &Tmux) {
    tmux.keys(&["q"]);
    let mut screen = String::new();
    let answered = wait_until(DEADLINE, || {
        screen = tmux.screen();
        screen.contains("Quit clowder?") || screen.contains("CLOWDER_EXIT=")
    });
    assert!(answered, "q did nothing; screen:\n{screen}");
    if screen.contains("Quit clowder?") {
        tmux.keys(&["S"]);
    }
    tmux.wait_for("CLOWDER_EXIT=0");
}

#[test]
fn m_merges_the_selected_lane_into_its_base() {
    let repo = repo_with_a_lane();
    let root = repo.path();
    let tmux = room(root, "COMMIT_AGENT_TICKS=1");
    tmux.wait_for("Lanes 1");
    assert!(lane_has_committed(root), "the agent never committed");

    tmux.keys(&["1"]);
    tmux.wait_for("lane alpha");
    // Its commits are counted before the merge.
    tmux.wait_for(" +1 ");
    tmux.keys(&["M"]);
    // It asks first, naming the lane, the base and the commits; nothing moves meanwhile.
    tmux.wait_for_all(&[
        "Merge the lane?",
        "Merge lane alpha into main: its 1 commit ahead",
    ]);
    assert_eq!(
        git_in(root, &["rev-list", "--count", "main..clowder/alpha"]),
        "1"
    );
    tmux.keys(&["y"]);
    let merged = wait_until(DEADLINE, || {
        git_in(root, &["rev-list", "--count", "main..clowder/alpha"]) == "0"
    });
    assert!(merged, "M did not merge; screen:\n{}", tmux.screen());
    tmux.wait_for("lane alpha merged into main");
    assert_eq!(
        git_in(root, &["log", "-1", "--format=%s", "main"]),
        "Merge lane alpha"
    );
    // The base moved: the row counts the lane's commits ahead of it again.
    let counted = wait_until(DEADLINE, || {
        tmux.screen()
            .lines()
            .any(|row| row.contains(" alpha ") && row.contains(" +0 "))
    });
    assert!(counted, "ahead not counted again:\n{}", tmux.screen());

    // R: the finished lane runs again, from iteration 1.
    tmux.keys(&["R"]);
    let again = wait_until(DEADLINE, || session_starts(root).len() == 2);
    assert!(
        again,
        "R did not run the lane again; screen:\n{}",
        tmux.screen()
    );
    assert_eq!(session_starts(root)[1]["iteration"], 1);
    quit(&tmux);
}

#[test]
fn o_runs_a_shell_in_the_lanes_worktree_and_the_room_comes_back() {
    let repo = repo_with_a_lane();
    let root = repo.path();
    let out = tempfile::tempdir().expect("tempdir");
    let shell = out.path().join("shell.sh");
    let cwd_file = out.path().join("cwd");
    std::fs::write(
        &shell,
        format!(
            "#!/bin/sh\npwd -P > {}.tmp\nmv {}.tmp {}\n",
            cwd_file.display(),
            cwd_file.display(),
            cwd_file.display()
        ),
    )
    .expect("write the shell");
    let mut perms = std::fs::metadata(&shell).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&shell, perms).expect("chmod");

    let tmux = room(
        root,
        &format!("COMMIT_AGENT_TICKS=1 SHELL={}", shell.display()),
    );
    tmux.wait_for("Lanes 1");
    tmux.keys(&["1"]);
    tmux.wait_for("lane alpha");
    tmux.keys(&["o"]);
    assert!(
        wait_until(DEADLINE, || cwd_file.exists()),
        "the shell never ran; screen:\n{}",
        tmux.screen()
    );
    let cwd = std::fs::read_to_string(&cwd_file).expect("read cwd");
    let worktree = root
        .join(".clowder/worktrees/alpha")
        .canonicalize()
        .expect("the worktree");
    assert_eq!(cwd.trim(), worktree.display().to_string());

    // The room is back on its screen and takes keys again.
    tmux.wait_for("shell ended: exit 0");
    assert!(wait_until(DEADLINE, || tmux.pane_format("#{alternate_on}") == "1"));
    tmux.keys(&["?"]);
    tmux.wait_for("a shell ($SHELL) in the selected lane's worktree");
    tmux.keys(&["Escape"]);
    assert!(wait_until(DEADLINE, || !tmux
        .screen()
        .contains("a shell ($SHELL)")));
    quit(&tmux);
}

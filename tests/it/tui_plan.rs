//! `clowder plan run` in a terminal: the control room with the plan driving,
//! end to end in tmux, in a real git repository with the plan agent. The Plan
//! view (`P`) shows the steps progress to merged; `M` merges by hand a step
//! whose merge conflicted, once its branch is fixed; `q` leaves nothing running.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::git::{git_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, pid_alive, plan_agent_config, wait_until};

/// x and y write the same file (y's merge conflicts); z waits for x. Its
/// lanes are shown once it is completed: no clean-up.
const PLAN: &str = r#"
[plan]
name = "tp"
max_parallel = 3
cleanup = false

[[step]]
id = "x"
prompt = "write shared.txt from x"

[[step]]
id = "y"
prompt = "ticks 20\nwrite shared.txt from y"

[[step]]
id = "z"
depends_on = ["x"]
prompt = "write z.txt"
"#;

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    init_with_one_commit(root);
    std::fs::write(root.join("harness.toml"), plan_agent_config()).expect("write");
    std::fs::write(root.join("plan.toml"), PLAN).expect("write");
    dir
}

/// Live processes of this repository: clowder itself (its folder is the
/// repository) and the lanes' agents (theirs is a worktree inside it).
fn processes_of(root: &Path) -> Vec<(i32, PathBuf)> {
    let root = root.canonicalize().expect("canonical path");
    let clowder = clowder_bin().canonicalize().expect("the binary");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let ours = cwd.starts_with(root.join(".clowder")) || exe.as_ref() == Some(&clowder);
            (ours && cwd.starts_with(&root) && pid_alive(pid)).then_some((pid, cwd))
        })
        .collect()
}

#[test]
fn plan_run_shows_the_plan_view_and_m_merges_a_step_under_review() {
    let dir = repo();
    let root = dir.path();
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {} plan run plan.toml; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    // The Plan view opens by itself: the steps as a tree in dependency
    // order, z under x, which it waits for. `P` closes it and opens it again.
    tmux.wait_for_all(&["Lanes", "plan tp", "└─ z", "← x"]);
    tmux.keys(&["P"]);
    tmux.wait_for("Session output");
    tmux.keys(&["P"]);
    // x and z merge; y's merge conflicts with x's: it needs review.
    let screen = tmux.wait_for_all(&["◆ x", "! y", "needs review", "◆ └─ z"]);
    assert!(screen.contains("step y not merged"), "{screen}");
    assert!(!screen.contains("event="), "{screen}");
    assert_eq!(git_in(root, &["show", "main:shared.txt"]), "from x");

    // `M` asks first; `n` leaves base as it is.
    tmux.keys(&["j", "j"]);
    tmux.keys(&["M"]);
    tmux.wait_for("merge step y of plan tp into its base now? y / n");
    tmux.keys(&["n"]);
    tmux.wait_for("Esc close");
    assert_eq!(git_in(root, &["show", "main:shared.txt"]), "from x");

    // A human fixes y's branch; `M`, then `y`, merges it through the running plan.
    let y = root.join(".clowder/worktrees/tp-y");
    let _ = Command::new("git")
        .arg("-C")
        .arg(&y)
        .args(["merge", "--quiet", "main"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output();
    std::fs::write(y.join("shared.txt"), "from x and y\n").expect("write");
    git_in(&y, &["add", "shared.txt"]);
    git_in(&y, &["commit", "--quiet", "-m", "resolve"]);
    tmux.keys(&["M"]);
    tmux.wait_for("merge step y of plan tp into its base now? y / n");
    tmux.keys(&["y"]);
    tmux.wait_for_all(&["◆ y", "plan tp · completed"]);
    // Merged, its review request left the inbox.
    assert!(
        wait_until(DEADLINE, || !tmux.screen().contains("waiting)")),
        "{}",
        tmux.screen()
    );
    assert_eq!(git_in(root, &["show", "main:shared.txt"]), "from x and y");

    // Enter shows a step's lane; then `q` leaves, the plan done.
    tmux.keys(&["Enter"]);
    tmux.wait_for("Session output");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=0");
    assert!(screen.contains("clowder: plan tp completed"), "{screen}");
    assert!(
        wait_until(DEADLINE, || processes_of(root).is_empty()),
        "left running: {:?}",
        processes_of(root)
    );
}

/// `R` on a failed plan's step: its failed and blocked steps start again, on
/// fresh branches, in the same control room; on a running plan it says why not.
#[test]
fn r_in_the_plan_view_retries_a_failed_plan_in_the_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    init_with_one_commit(root);
    let flag = root.join(".git/ok");
    let plan = format!(
        "[plan]\nname = \"rp\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\\nfail-unless {}\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"a\"]\nprompt = \"write b.txt\"\n",
        flag.display()
    );
    std::fs::write(root.join("harness.toml"), plan_agent_config()).expect("write");
    std::fs::write(root.join("plan.toml"), plan).expect("write");
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {} plan run plan.toml; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    tmux.wait_for_all(&["plan rp · failed", "✗ a", "⊘ └─ b"]);
    std::fs::write(&flag, "").expect("write");
    tmux.keys(&["R"]);
    tmux.wait_for_all(&["◆ a", "◆ └─ b", "plan rp · completed"]);
    assert_eq!(git_in(root, &["show", "main:b.txt"]), "rp-b");
    assert!(!git_in(root, &["rev-parse", "clowder/rp-a.failed-1"]).is_empty());
    // Completed, the plan removed its merged steps' lanes; once the room has seen
    // that (its header says so), Enter on a step says where its lane went.
    tmux.wait_for("no lanes (n adds one)");
    tmux.keys(&["Enter"]);
    tmux.wait_for("step a is merged: its lane was removed");
    tmux.keys(&["R"]);
    tmux.wait_for("plan rp is completed: R retries a failed plan");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
    assert!(
        wait_until(DEADLINE, || processes_of(root).is_empty()),
        "left running: {:?}",
        processes_of(root)
    );
}

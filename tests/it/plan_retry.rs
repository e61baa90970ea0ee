//! A plan's failures said and undone: why a step failed (`step_failed`, `plan
//! status`), `clowder plan retry`, and the clean-up of a completed plan; in real
//! temporary git repositories, with `tests/agents/plan-agent.sh` as the agent.

use crate::common;

use std::path::Path;

use common::plan::PlanRepo as Repo;
use common::{stderr_of, stdout_of};

const FAILING: &str = r#"
[plan]
name = "fx"

[[step]]
id = "a"
prompt = "write a.txt\nexit 1\nfail"
max_iterations = 2

[[step]]
id = "b"
depends_on = ["a"]
prompt = "write b.txt"
"#;

/// `step_failed` said only that the lane ended at max_iterations, and `plan
/// status` exited 0 for a failed plan without a reason per step.
#[test]
fn a_failed_step_says_why_in_its_event_and_in_plan_status() {
    let repo = Repo::new(FAILING);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let failed = repo.events_named("fx", "step_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        failed[0]["detail"],
        "exit 1 in each of 2 sessions; the lane ended: max_iterations"
    );
    let (code, rows) = repo.status_json("fx");
    assert_eq!(code, Some(1));
    assert_eq!(rows[0]["steps"][0]["reason"], failed[0]["detail"]);
    assert_eq!(rows[0]["steps"][1]["state"], "blocked");
    assert_eq!(rows[0]["steps"][1]["reason"], "depends on failed step a");
}

/// A plan whose step `a` fails until the file `ok` exists in `dir`.
fn failing_until(dir: &Path) -> String {
    format!(
        "[plan]\nname = \"rt\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\\nfail-unless {}\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"a\"]\nprompt = \"write b.txt\"\n\n[[step]]\nid = \"c\"\nprompt = \"write c.txt\"\n",
        dir.join("ok").display()
    )
}

/// A failed plan could only be retried by deleting its state by hand, and the
/// retry then went on on the failed branch.
#[test]
fn plan_retry_starts_failed_and_blocked_steps_again_from_fresh_branches() {
    let flag = tempfile::tempdir().expect("tempdir");
    let repo = Repo::new(&failing_until(flag.path()));
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let old_tip = repo.git(&["rev-parse", "clowder/rt-a"]);

    // Nothing else is touched by a refused retry.
    let merged = repo.clowder(&["plan", "retry", "rt", "c"]);
    assert_eq!(merged.status.code(), Some(1));
    assert!(
        stderr_of(&merged).contains("cannot retry step c of plan rt: it is merged"),
        "{}",
        stderr_of(&merged)
    );
    let alone = repo.clowder(&["plan", "retry", "rt", "b"]);
    assert_eq!(alone.status.code(), Some(1));
    assert!(
        stderr_of(&alone).contains("without its dependency a, which stays failed"),
        "{}",
        stderr_of(&alone)
    );
    assert_eq!(repo.git(&["rev-parse", "clowder/rt-a"]), old_tip);

    std::fs::write(flag.path().join("ok"), "").expect("write");
    let out = repo.clowder(&["plan", "retry", "rt", "--headless"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(
        stdout.contains(
            "clowder: step a: its last attempt's branch is kept as clowder/rt-a.failed-1"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("clowder: plan rt completed"), "{stdout}");
    // The failed attempt's commit is kept; the new branch started from base.
    assert_eq!(repo.git(&["rev-parse", "clowder/rt-a.failed-1"]), old_tip);
    let files = repo.git(&["ls-tree", "--name-only", "main"]);
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(files.lines().any(|f| f == file), "{file} in {files}");
    }
    // The new attempt was told what ended the last one.
    // The fresh lane counts its sessions from 1 again: its first session's prompt
    // replaced the failed lane's first, which told of no earlier attempt.
    let last = std::fs::read_to_string(repo.prompts.path().join("rt-a-1.txt")).expect("read");
    assert!(
        last.contains(
            "The previous attempt at this step failed: no completion promise in its only session; the lane ended: max_iterations."
        ) && last.contains("I could not do it: the tests are red"),
        "{last}"
    );
    let (code, rows) = repo.status_json("rt");
    assert_eq!(code, Some(0));
    assert_eq!(rows[0]["status"], "completed");

    let done = repo.clowder(&["plan", "retry", "rt"]);
    assert_eq!(done.status.code(), Some(1));
    assert!(
        stderr_of(&done).contains("cannot retry plan rt: it is completed, nothing to retry"),
        "{}",
        stderr_of(&done)
    );
}

#[test]
fn plan_retry_refuses_a_plan_that_is_running_here() {
    let repo = Repo::new(FAILING);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(repo.path(".clowder/plans/fx/driver.lock"))
        .expect("open the driver lock");
    let held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .expect("lock it as a running plan does");
    let refused = repo.clowder(&["plan", "retry", "fx"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr_of(&refused).contains("cannot retry plan fx: it is running here"),
        "{}",
        stderr_of(&refused)
    );
    drop(held);
    let (_, rows) = repo.status_json("fx");
    assert_eq!(rows[0]["status"], "failed");
}

const TO_CLEAN: &str = r#"
[plan]
name = "cl"

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "b"
depends_on = ["a"]
collaboration = "sequential"
prompt = "write b.txt"

[[step]]
id = "c"
depends_on = ["a"]
prompt = "write c.txt"
"#;

/// After a completed plan its worktrees and branches stayed behind.
#[test]
fn a_completed_plan_removes_its_merged_steps_worktrees_and_branches() {
    let repo = Repo::new(TO_CLEAN);
    let out = repo.run_plan();
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    let cleanup = repo.events_named("cl", "plan_cleanup");
    assert_eq!(cleanup.len(), 1, "{stdout}");
    assert_eq!(
        cleanup[0]["detail"],
        "removed cl-b (lane; it worked in its dependency's worktree), cl-c (worktree and branch clowder/cl-c), cl-a (worktree and branch clowder/cl-a)"
    );
    assert!(
        stdout.contains("plan=cl event=plan_cleanup removed cl-b"),
        "{stdout}"
    );
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/clowder"
        ]),
        ""
    );
    assert!(!repo.path(".clowder/worktrees/cl-a").exists());
    assert!(!repo.path(".clowder/worktrees/cl-c").exists());
    let lanes = repo.clowder(&["lanes", "--json"]);
    assert!(!stdout_of(&lanes).contains("cl-"), "{}", stdout_of(&lanes));
    let files = repo.git(&["ls-tree", "--name-only", "main"]);
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(files.lines().any(|f| f == file), "{file} in {files}");
    }
}

/// Only what git shows in base goes: a branch with a commit base lacks stays,
/// named; `cleanup = false` keeps everything.
#[test]
fn the_clean_up_keeps_what_base_lacks_and_cleanup_false_keeps_all() {
    // Each merge's check commits to x's branch after x was done and merged.
    let plan = "[plan]\nname = \"kp\"\nverify = \"git -C ../../../worktrees/kp-x commit --quiet --allow-empty -m late; true\"\n\n[[step]]\nid = \"x\"\nprompt = \"write x.txt\"\n\n[[step]]\nid = \"y\"\ndepends_on = [\"x\"]\nprompt = \"write y.txt\"\n";
    let repo = Repo::new(plan);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    let cleanup = repo.events_named("kp", "plan_cleanup");
    assert_eq!(
        cleanup[0]["detail"],
        "removed kp-y (worktree and branch clowder/kp-y); kept x: its branch clowder/kp-x has commits main lacks"
    );
    assert!(repo.path(".clowder/worktrees/kp-x").exists());
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/clowder"
        ]),
        "clowder/kp-x"
    );

    let repo = Repo::new(&TO_CLEAN.replace("name = \"cl\"", "name = \"cl\"\ncleanup = false"));
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(repo.events_named("cl", "plan_cleanup").is_empty());
    assert!(repo.path(".clowder/worktrees/cl-a").exists());
    assert!(repo.path(".clowder/worktrees/cl-c").exists());
}

/// A sub-plan step is retried through its sub-plan: the sub-plan's failed step
/// starts again, the step keeps its branch, and the completed plan cleans up
/// both plans' lanes and branches.
#[test]
fn plan_retry_of_a_subplan_step_retries_its_failed_steps_and_cleans_up_both() {
    let flag = tempfile::tempdir().expect("tempdir");
    let plan = "[plan]\nname = \"ps\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\n\n[[step]]\nid = \"sub\"\ndepends_on = [\"a\"]\nplan = \"sub.toml\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"sub\"]\nprompt = \"write b.txt\"\n";
    let repo = Repo::new(plan);
    let sub = format!(
        "[plan]\nname = \"inner\"\n\n[[step]]\nid = \"x\"\nprompt = \"write x.txt\"\n\n[[step]]\nid = \"y\"\ndepends_on = [\"x\"]\nprompt = \"write y.txt\\nfail-unless {}\"\n",
        flag.path().join("ok").display()
    );
    std::fs::write(repo.path("sub.toml"), sub).expect("write");
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let (_, rows) = repo.status_json("ps-sub");
    assert_eq!(rows[0]["steps"][1]["state"], "failed");

    std::fs::write(flag.path().join("ok"), "").expect("write");
    let out = repo.clowder(&["plan", "retry", "ps", "--headless"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(
        stdout.contains("clowder: step sub: its sub-plan ps-sub runs again"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "clowder: step y: its last attempt's branch is kept as clowder/ps-sub-y.failed-1"
        ),
        "{stdout}"
    );
    let files = repo.git(&["ls-tree", "--name-only", "main"]);
    for file in ["a.txt", "x.txt", "y.txt", "b.txt"] {
        assert!(files.lines().any(|f| f == file), "{file} in {files}");
    }
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/clowder"
        ]),
        "clowder/ps-sub-y.failed-1"
    );
    assert!(
        repo.events_named("ps", "plan_cleanup")[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("sub (branch clowder/ps-sub)") && !d.contains("kept")),
        "{:?}",
        repo.events_named("ps", "plan_cleanup")
    );
}

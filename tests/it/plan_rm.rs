//! `clowder plan rm NAME` through the binary: a failed plan leaves `plan status`
//! with its state, events and folder, and keeps every lane, worktree and branch
//! of its steps (saying which); a running plan is refused.

use crate::common;

use common::plan::PlanRepo as Repo;
use common::{DEADLINE, stderr_of, stdout_of, wait_until, wait_with_deadline};

const FAILING: &str = r#"
[plan]
name = "sad"

[[step]]
id = "bad"
prompt = "write bad.txt\nfail"
"#;

#[test]
fn rm_forgets_a_failed_plan_and_keeps_its_lanes_and_branches() {
    let repo = Repo::new(FAILING);
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    let listed = repo.clowder(&["plan", "status"]);
    assert!(
        stdout_of(&listed).contains("plan sad: failed"),
        "{listed:?}"
    );
    let tip = repo.git(&["rev-parse", "clowder/sad-bad"]);

    let removed = repo.clowder(&["plan", "rm", "sad"]);
    let said = stdout_of(&removed);
    assert_eq!(
        removed.status.code(),
        Some(0),
        "{said}{}",
        stderr_of(&removed)
    );
    assert!(
        said.contains(
            "removed plan sad: .clowder/plans/sad/, .clowder/plans/sad-events.jsonl, .clowder/plans/sad.json"
        ),
        "{said}"
    );
    assert!(
        said.contains("left its steps' lanes, with their worktrees and branches: sad-bad (clowder/sad-bad); `clowder lane rm LANE` removes one"),
        "{said}"
    );

    let listed = repo.clowder(&["plan", "status"]);
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    assert!(stdout_of(&listed).starts_with("no plans"), "{listed:?}");
    // Nothing of git's is touched: the lane, its worktree and its commit stay.
    assert_eq!(repo.git(&["rev-parse", "clowder/sad-bad"]), tip);
    assert!(repo.path(".clowder/worktrees/sad-bad/bad.txt").is_file());
    let lanes = repo.clowder(&["lanes"]);
    assert!(stdout_of(&lanes).contains("sad-bad"), "{lanes:?}");

    let again = repo.clowder(&["plan", "rm", "sad"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr_of(&again).contains("no plan \"sad\""), "{again:?}");
}

#[test]
fn rm_refuses_a_running_plan() {
    let repo =
        Repo::new("[plan]\nname = \"busy\"\n\n[[step]]\nid = \"x\"\nprompt = \"ticks 6000\"\n");
    let mut plan = repo.spawn_plan();
    let running = wait_until(DEADLINE, || repo.state_of("busy", "x") == "running");
    if !running {
        let _ = plan.kill();
    }
    assert!(running, "{:?}", repo.step_states("busy"));
    let refused = repo.clowder(&["plan", "rm", "busy"]);
    let _ = repo.clowder(&["plan", "stop", "busy"]);
    let stopped = wait_until(DEADLINE, || plan.try_wait().ok().flatten().is_some());
    if !stopped {
        let _ = plan.kill();
        let _ = plan.wait();
    }
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        stderr_of(&refused).contains("plan busy is running (its driver holds"),
        "{refused:?}"
    );
    assert!(repo.path(".clowder/plans/busy.json").is_file());
}

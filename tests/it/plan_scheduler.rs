//! The plan scheduler's concrete scenarios, driven through its pure `step`.

use chrono::{DateTime, Utc};
use clowder::plan::file::{Collaboration, Plan, Step, Work};
use clowder::plan::scheduler::{Effect, EventKind, Input, MergeOutcome, Outcome, step};
use clowder::plan::state::{PlanState, PlanStatus, SCHEMA_VERSION, StepStatus};

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("a valid timestamp")
}

fn plan(autonomy: u8, max_parallel: usize, steps: &[(&str, &[&str])]) -> PlanState {
    let steps = steps
        .iter()
        .map(|(id, deps)| Step {
            id: id.to_string(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            collaboration: Collaboration::Parallel,
            critical: false,
            work: Work::Prompt(format!("do {id}")),
            done_when: "promise".into(),
            max_iterations: None,
            verify_timeout: None,
            done_when_timeout: None,
        })
        .collect();
    let plan = Plan {
        file: "plan.toml".into(),
        name: "auth".into(),
        base: None,
        autonomy,
        verify: "true".into(),
        verify_timeout: clowder::plan::file::DEFAULT_CHECK_TIMEOUT,
        done_when_timeout: clowder::plan::file::DEFAULT_CHECK_TIMEOUT,
        max_parallel,
        steps,
        subplans: Vec::new(),
        cleanup: true,
    };
    PlanState::new(&plan, "main")
}

fn go(state: &mut PlanState, input: Input) -> Vec<Effect> {
    step(now(), state, input).expect("the input is allowed")
}

fn started(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::StartStep { id, .. } | Effect::RetryStep { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn merges(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Merge { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn events(effects: &[Effect]) -> Vec<(EventKind, Option<String>)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event { kind, step, .. } => Some((*kind, step.clone())),
            _ => None,
        })
        .collect()
}

fn status(state: &PlanState, id: &str) -> StepStatus {
    state.step(id).expect("the step exists").status
}

fn done(id: &str) -> Input {
    Input::StepEnded {
        id: id.into(),
        outcome: Outcome::Done,
    }
}

fn failed(id: &str, reason: &str) -> Input {
    Input::StepEnded {
        id: id.into(),
        outcome: Outcome::Failed {
            reason: reason.into(),
            last_result: "tests still fail: 3 errors".into(),
        },
    }
}

fn passed(id: &str) -> Input {
    Input::MergeResult {
        id: id.into(),
        result: MergeOutcome::Passed,
    }
}

const DIAMOND: &[(&str, &[&str])] = &[
    ("a", &[]),
    ("b", &["a"]),
    ("c", &["a"]),
    ("d", &["b", "c"]),
    ("e", &[]),
];

#[test]
fn a_diamond_with_an_independent_step_runs_in_order_and_completes() {
    let mut state = plan(4, 2, DIAMOND);
    let effects = go(&mut state, Input::Start);
    assert_eq!(started(&effects), ["a", "e"]);
    assert_eq!(events(&effects)[0], (EventKind::PlanStarted, None));

    let effects = go(&mut state, done("a"));
    assert_eq!(started(&effects), ["b"], "one slot is free: e still runs");
    assert_eq!(merges(&effects), ["a"]);
    let effects = go(&mut state, passed("a"));
    assert!(started(&effects).is_empty());
    assert_eq!(status(&state, "a"), StepStatus::Merged);

    let effects = go(&mut state, done("e"));
    assert_eq!(started(&effects), ["c"]);
    assert_eq!(merges(&effects), ["e"]);
    let effects = go(&mut state, done("b"));
    assert!(started(&effects).is_empty(), "d waits for c");
    assert!(merges(&effects).is_empty(), "e is still being merged");
    let effects = go(&mut state, passed("e"));
    assert_eq!(merges(&effects), ["b"], "merged in the order they finished");
    let effects = go(&mut state, done("c"));
    assert_eq!(started(&effects), ["d"]);
    // d starts from b's tip with c's branch merged in.
    let Some(Effect::StartStep { workspace, .. }) = effects
        .iter()
        .find(|e| matches!(e, Effect::StartStep { .. }))
    else {
        panic!("no start in {effects:?}");
    };
    assert_eq!(
        *workspace,
        clowder::plan::scheduler::Workspace::New {
            branch: "clowder/auth-d".into(),
            worktree: ".clowder/worktrees/auth-d".into(),
            from: "clowder/auth-b".into(),
            merge_in: vec!["clowder/auth-c".into()],
        }
    );
    go(&mut state, passed("b"));
    go(&mut state, passed("c"));
    go(&mut state, done("d"));
    let effects = go(&mut state, passed("d"));
    assert_eq!(events(&effects).last(), Some(&(EventKind::PlanDone, None)));
    assert_eq!(state.status, PlanStatus::Completed);
}

#[test]
fn a_step_failing_twice_is_retried_once_then_blocks_its_dependents_only() {
    let mut state = plan(4, 3, DIAMOND);
    go(&mut state, Input::Start);
    let effects = go(&mut state, failed("a", "max_iterations reached"));
    let retry = effects.iter().find_map(|e| match e {
        Effect::RetryStep { id, failure, .. } => Some((id.clone(), failure.clone())),
        _ => None,
    });
    let (id, failure) = retry.expect("a retry");
    assert_eq!(id, "a");
    assert!(failure.contains("max_iterations reached"), "{failure}");
    assert!(failure.contains("tests still fail: 3 errors"), "{failure}");
    assert!(events(&effects).contains(&(EventKind::StepRetried, Some("a".into()))));
    assert_eq!(status(&state, "a"), StepStatus::Running);

    let effects = go(&mut state, failed("a", "agent error"));
    let kinds = events(&effects);
    assert!(kinds.contains(&(EventKind::StepFailed, Some("a".into()))));
    for blocked in ["b", "c", "d"] {
        assert_eq!(status(&state, blocked), StepStatus::Blocked, "{blocked}");
        assert!(kinds.contains(&(EventKind::StepBlocked, Some(blocked.into()))));
    }
    assert_eq!(status(&state, "e"), StepStatus::Running);
    go(&mut state, done("e"));
    let effects = go(&mut state, passed("e"));
    assert_eq!(events(&effects).last(), Some(&(EventKind::PlanDone, None)));
    assert_eq!(state.status, PlanStatus::Failed);
}

#[test]
fn a_merge_conflict_needs_review_and_a_hand_merge_lets_dependents_start() {
    let mut state = plan(4, 3, &[("a", &[]), ("b", &["a"]), ("c", &["a", "b"])]);
    go(&mut state, Input::Start);
    let effects = go(&mut state, done("a"));
    assert_eq!(
        started(&effects),
        ["b"],
        "a done lets b start before its merge"
    );
    let effects = go(
        &mut state,
        Input::MergeResult {
            id: "a".into(),
            result: MergeOutcome::Conflict {
                files: vec!["src/lib.rs".into()],
            },
        },
    );
    assert_eq!(status(&state, "a"), StepStatus::NeedsReview);
    assert!(events(&effects).contains(&(EventKind::MergeConflict, Some("a".into()))));
    let body = effects.iter().find_map(|e| match e {
        Effect::AskReview { body, .. } => Some(body.clone()),
        _ => None,
    });
    assert!(body.expect("a review request").contains("src/lib.rs"));
    assert_eq!(state.status, PlanStatus::Running);
    let effects = go(&mut state, done("b"));
    assert!(
        started(&effects).is_empty(),
        "c waits for a human to merge a"
    );

    let effects = go(&mut state, Input::MergeByHand { id: "a".into() });
    assert_eq!(status(&state, "a"), StepStatus::Merged);
    assert_eq!(started(&effects), ["c"]);
}

#[test]
fn a_failed_verify_needs_review_with_the_check_output() {
    let mut state = plan(5, 1, &[("a", &[])]);
    go(&mut state, Input::Start);
    let effects = go(&mut state, done("a"));
    assert_eq!(
        effects.iter().find(|e| matches!(e, Effect::Merge { .. })),
        Some(&Effect::Merge {
            id: "a".into(),
            branch: "clowder/auth-a".into(),
            verify: "true".into()
        })
    );
    let effects = go(
        &mut state,
        Input::MergeResult {
            id: "a".into(),
            result: MergeOutcome::CheckFailed {
                tail: "test foo ... FAILED".into(),
            },
        },
    );
    assert_eq!(status(&state, "a"), StepStatus::NeedsReview);
    assert!(events(&effects).contains(&(EventKind::MergeCheckFailed, Some("a".into()))));
    assert!(effects.iter().any(
        |e| matches!(e, Effect::AskReview { body, .. } if body.contains("test foo ... FAILED"))
    ));
    assert_eq!(state.status, PlanStatus::Running);
}

#[test]
fn a_critical_step_waits_for_approval_and_a_rejection_holds_the_plan() {
    let mut state = plan(3, 3, &[("a", &[]), ("b", &["a"])]);
    state.steps[1].critical = true;
    let effects = go(&mut state, Input::Start);
    assert_eq!(
        started(&effects),
        ["a"],
        "a is not critical: no approval at 3"
    );
    let effects = go(&mut state, done("a"));
    let body = effects.iter().find_map(|e| match e {
        Effect::AskApproval { id, body } if id == "b" => Some(body.clone()),
        _ => None,
    });
    let body = body.expect("an approval request for b");
    assert!(
        body.contains("do b") && body.contains("Depends on: a"),
        "{body}"
    );
    assert_eq!(status(&state, "b"), StepStatus::WaitingForApproval);

    go(
        &mut state,
        Input::Reject {
            id: "b".into(),
            reason: "not now".into(),
        },
    );
    assert_eq!(state.status, PlanStatus::Paused);
    let effects = go(&mut state, Input::Resume);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::AskApproval { .. }))
    );
    let effects = go(&mut state, Input::Approve { id: "b".into() });
    assert_eq!(started(&effects), ["b"]);
}

#[test]
fn a_sequential_step_continues_on_its_dependencys_branch_and_worktree() {
    let mut state = plan(4, 3, &[("a", &[]), ("b", &["a"])]);
    state.steps[1].collaboration = Collaboration::Sequential;
    go(&mut state, Input::Start);
    let effects = go(&mut state, done("a"));
    assert!(effects.iter().any(|e| matches!(e,
        Effect::StartStep { id, workspace: clowder::plan::scheduler::Workspace::Shared { branch, worktree }, .. }
        if id == "b" && branch == "clowder/auth-a" && worktree.ends_with("auth-a"))));
}

#[test]
fn invalid_transitions_are_refused_naming_the_current_state() {
    let mut state = plan(4, 1, &[("a", &[])]);
    let err = step(now(), &mut state, Input::Pause).expect_err("refused");
    assert_eq!(err.to_string(), "cannot pause plan auth: it is created");
    go(&mut state, Input::Start);
    go(&mut state, done("a"));
    go(&mut state, passed("a"));
    assert_eq!(state.status, PlanStatus::Completed);
    let err = step(now(), &mut state, Input::Pause).expect_err("refused");
    assert_eq!(err.to_string(), "cannot pause plan auth: it is completed");
    let err = step(now(), &mut state, Input::Start).expect_err("refused");
    assert_eq!(err.to_string(), "cannot start plan auth: it is completed");
}

#[test]
fn a_restart_keeps_running_steps_and_asks_an_unfinished_merge_again() {
    let mut state = plan(4, 2, DIAMOND);
    go(&mut state, Input::Start);
    go(&mut state, done("a"));
    let saved = state.to_json();
    let mut again = PlanState::from_json(&saved).expect("reads back");
    assert_eq!(again, state);
    let effects = go(&mut again, Input::Restarted);
    assert!(
        started(&effects).is_empty(),
        "b and e still run: {effects:?}"
    );
    assert_eq!(merges(&effects), ["a"]);
    assert_eq!(status(&again, "b"), StepStatus::Running);
}

#[test]
fn a_state_of_another_schema_version_is_refused_whole() {
    let state = plan(4, 2, DIAMOND);
    let text = state.to_json().replace(
        &format!("\"schema_version\": {SCHEMA_VERSION}"),
        "\"schema_version\": 99",
    );
    let err = PlanState::from_json(&text).expect_err("refused");
    assert!(err.contains("schema 99"), "{err}");

    let dir = tempfile::tempdir().expect("tempdir");
    state.save(dir.path()).expect("saved");
    let path = PlanState::path(dir.path(), "auth");
    assert_eq!(PlanState::load(&path).expect("loads"), state);
}

#[test]
fn stop_fails_the_plan_and_its_running_steps_and_is_refused_once_finished() {
    let mut state = plan(4, 2, &[("a", &[]), ("b", &["a"])]);
    let err = step(now(), &mut state, Input::Stop).expect_err("created");
    assert_eq!(err.to_string(), "cannot stop plan auth: it is created");
    go(&mut state, Input::Start);
    let effects = go(&mut state, Input::Stop);
    assert_eq!(state.status, PlanStatus::Failed);
    assert_eq!(state.step("a").map(|s| s.status), Some(StepStatus::Failed));
    assert_eq!(state.step("b").map(|s| s.status), Some(StepStatus::Pending));
    assert!(started(&effects).is_empty());
    let err = step(now(), &mut state, Input::Stop).expect_err("failed");
    assert_eq!(err.to_string(), "cannot stop plan auth: it is failed");
}

#[test]
fn a_merge_that_could_not_move_base_needs_review() {
    let mut state = plan(4, 2, &[("a", &[])]);
    go(&mut state, Input::Start);
    let effects = go(
        &mut state,
        Input::StepEnded {
            id: "a".into(),
            outcome: Outcome::Done,
        },
    );
    assert_eq!(merges(&effects), ["a"]);
    let reason = "main moved meanwhile".to_string();
    let effects = go(
        &mut state,
        Input::MergeResult {
            id: "a".into(),
            result: MergeOutcome::Refused { reason },
        },
    );
    assert_eq!(
        state.step("a").map(|s| s.status),
        Some(StepStatus::NeedsReview)
    );
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::AskReview { body, .. } if body.contains("base was not moved: main moved meanwhile")
    )));
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Event {
            kind: EventKind::MergeCheckFailed,
            ..
        }
    )));
}

#[test]
fn a_step_that_cannot_take_a_dependency_waits_for_it_and_never_merges_before_it() {
    let mut state = plan(
        4,
        3,
        &[("a", &[]), ("b", &["a"]), ("c", &["a"]), ("d", &["b", "c"])],
    );
    go(&mut state, Input::Start);
    go(&mut state, done("a"));
    let merged = |id: &str| Input::MergeResult {
        id: id.into(),
        result: MergeOutcome::Passed,
    };
    go(&mut state, merged("a"));
    go(&mut state, done("b"));
    let effects = go(&mut state, done("c"));
    assert_eq!(started(&effects), ["d"]);
    // d's branch cannot take c's: d waits, its start undone.
    let effects = go(
        &mut state,
        Input::DependencyConflict {
            id: "d".into(),
            dependency: "c".into(),
            detail: "cannot merge clowder/auth-c, conflicts in: x.txt".into(),
        },
    );
    assert!(events(&effects).contains(&(EventKind::StepWaiting, Some("d".into()))));
    assert_eq!(status(&state, "d"), StepStatus::Pending);
    assert_eq!(state.step("d").map(|s| s.attempts), Some(0));
    go(&mut state, merged("b"));
    let effects = go(
        &mut state,
        Input::MergeResult {
            id: "c".into(),
            result: MergeOutcome::Conflict {
                files: vec!["x.txt".into()],
            },
        },
    );
    assert_eq!(status(&state, "c"), StepStatus::NeedsReview);
    assert!(started(&effects).is_empty(), "d starts without c");
    // c merged by hand: d starts again, from a branch that can take c's now.
    let effects = go(&mut state, Input::MergeByHand { id: "c".into() });
    assert_eq!(started(&effects), ["d"]);
    let effects = go(&mut state, done("d"));
    assert_eq!(merges(&effects), ["d"]);
}

#[test]
fn a_done_step_is_merged_only_once_its_dependencies_are_in_base() {
    let mut state = plan(4, 3, &[("a", &[]), ("b", &["a"]), ("c", &[])]);
    go(&mut state, Input::Start);
    go(&mut state, done("a"));
    let effects = go(
        &mut state,
        Input::MergeResult {
            id: "a".into(),
            result: MergeOutcome::CheckFailed { tail: "red".into() },
        },
    );
    assert!(merges(&effects).is_empty());
    // b is done while a needs review: it waits in the queue, c goes ahead of it.
    let effects = go(&mut state, done("b"));
    assert!(merges(&effects).is_empty(), "b merged before a");
    let effects = go(&mut state, done("c"));
    assert_eq!(merges(&effects), ["c"]);
    let effects = go(
        &mut state,
        Input::MergeResult {
            id: "c".into(),
            result: MergeOutcome::Passed,
        },
    );
    assert!(merges(&effects).is_empty(), "b merged before a");
    let effects = go(&mut state, Input::MergeByHand { id: "a".into() });
    assert_eq!(merges(&effects), ["b"]);
}

#[test]
fn a_state_saved_before_check_limits_existed_reads_with_the_default_limits() {
    let state = plan(4, 2, &[("a", &[])]);
    let mut value: serde_json::Value = serde_json::from_str(&state.to_json()).expect("JSON");
    let step = value["steps"][0].as_object_mut().expect("a step");
    for key in ["verify_timeout_secs", "done_when_timeout_secs", "waits_for"] {
        assert!(step.remove(key).is_some(), "{key} is saved");
    }
    let old = PlanState::from_json(&value.to_string()).expect("an older state reads");
    let step = old.step("a").expect("a");
    assert_eq!(step.verify_timeout(), std::time::Duration::from_secs(1800));
    assert_eq!(
        step.done_when_timeout(),
        std::time::Duration::from_secs(1800)
    );
    assert_eq!(step.waits_for, None);
}

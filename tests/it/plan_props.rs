//! Property tests of the plan scheduler on random DAGs and random outcomes.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use clowder::plan::file::{Collaboration, Plan, Step, Work};
use clowder::plan::scheduler::{Effect, Input, MergeOutcome, Outcome, step};
use clowder::plan::state::{PlanState, PlanStatus, StepStatus};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    autonomy: u8,
    max_parallel: usize,
    /// For each step: a bit mask of the earlier steps it depends on, and criticality.
    steps: Vec<(u8, bool)>,
    choices: Vec<u8>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u8..=5,
        1usize..=3,
        prop::collection::vec((any::<u8>(), any::<bool>()), 1..8),
        prop::collection::vec(any::<u8>(), 0..120),
    )
        .prop_map(|(autonomy, max_parallel, steps, choices)| Case {
            autonomy,
            max_parallel,
            steps,
            choices,
        })
}

fn state_of(case: &Case) -> PlanState {
    let steps = case
        .steps
        .iter()
        .enumerate()
        .map(|(i, &(mask, critical))| Step {
            id: format!("s{i}"),
            depends_on: (0..i)
                .filter(|j| *j < 8 && mask & (1 << j) != 0)
                .map(|j| format!("s{j}"))
                .collect(),
            // A step with one dependency and an odd mask continues on its branch.
            collaboration: if (0..i).filter(|j| *j < 8 && mask & (1 << j) != 0).count() == 1
                && mask & 0x80 != 0
            {
                Collaboration::Sequential
            } else {
                Collaboration::Parallel
            },
            critical,
            work: Work::Prompt(format!("step {i}")),
            done_when: "promise".into(),
            max_iterations: None,
            verify_timeout: None,
            done_when_timeout: None,
        })
        .collect();
    let plan = Plan {
        file: "plan.toml".into(),
        name: "p".into(),
        base: Some("main".into()),
        autonomy: case.autonomy,
        verify: String::new(),
        max_parallel: case.max_parallel,
        verify_timeout: clowder::plan::file::DEFAULT_CHECK_TIMEOUT,
        done_when_timeout: clowder::plan::file::DEFAULT_CHECK_TIMEOUT,
        steps,
        subplans: Vec::new(),
        cleanup: true,
    };
    PlanState::new(&plan, "main")
}

/// Every input the state allows now.
fn possible(state: &PlanState) -> Vec<Input> {
    let mut inputs = Vec::new();
    if state.status == PlanStatus::Paused {
        inputs.push(Input::Resume);
    }
    if state.status == PlanStatus::Running {
        inputs.push(Input::Pause);
    }
    for s in &state.steps {
        let id = s.id.clone();
        match s.status {
            StepStatus::Running => {
                // Its lane could not take a dependency's branch when it started.
                if let Some(dependency) = s.depends_on.first() {
                    inputs.push(Input::DependencyConflict {
                        id: id.clone(),
                        dependency: dependency.clone(),
                        detail: "conflicts in: a".into(),
                    });
                }
                inputs.push(Input::StepEnded {
                    id: id.clone(),
                    outcome: Outcome::Done,
                });
                inputs.push(Input::StepEnded {
                    id,
                    outcome: Outcome::Failed {
                        reason: "max_iterations reached".into(),
                        last_result: "no".into(),
                    },
                });
            }
            StepStatus::WaitingForApproval => {
                inputs.push(Input::Approve { id: id.clone() });
                inputs.push(Input::Reject {
                    id,
                    reason: "no".into(),
                });
            }
            StepStatus::NeedsReview => inputs.push(Input::MergeByHand { id }),
            _ => {}
        }
    }
    if let Some(id) = &state.merging {
        for result in [
            MergeOutcome::Passed,
            MergeOutcome::Passed,
            MergeOutcome::Conflict {
                files: vec!["a".into()],
            },
            MergeOutcome::CheckFailed { tail: "x".into() },
        ] {
            inputs.push(Input::MergeResult {
                id: id.clone(),
                result,
            });
        }
    }
    inputs
}

/// The autonomy rule as the README states it: 1–2 every step, 3 critical ones, 4–5 none.
fn gated(autonomy: u8, critical: bool) -> bool {
    match autonomy {
        1 | 2 => true,
        3 => critical,
        _ => false,
    }
}

fn has_failed_ancestor(state: &PlanState, id: &str) -> bool {
    let mut seen = HashSet::new();
    let mut todo: Vec<String> = state.step(id).map_or(vec![], |s| s.depends_on.clone());
    while let Some(dep) = todo.pop() {
        if !seen.insert(dep.clone()) {
            continue;
        }
        let dep = state.step(&dep).expect("dependencies exist");
        if dep.status == StepStatus::Failed {
            return true;
        }
        todo.extend(dep.depends_on.iter().cloned());
    }
    false
}

fn check(state: &PlanState, effects: &[Effect], approved: &HashSet<String>) {
    assert!(state.running() <= state.max_parallel, "{state:?}");
    let mut worktrees = HashSet::new();
    for s in state
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Running)
    {
        let worktree = s.worktree.clone().expect("a running step has a worktree");
        assert!(
            worktrees.insert(worktree),
            "two running steps share a worktree: {state:?}"
        );
    }
    for effect in effects {
        match effect {
            Effect::StartStep { id, .. } => {
                let step = state.step(id).expect("started step exists");
                for dep in &step.depends_on {
                    let dep = state.step(dep).expect("dependency exists").status;
                    assert!(
                        dep.is_done() || dep == StepStatus::NeedsReview,
                        "{id} started while a dependency is {dep}"
                    );
                }
                if gated(state.autonomy, step.critical) {
                    assert!(approved.contains(id), "{id} started unapproved");
                }
            }
            Effect::Merge { id, .. } => {
                let step = state.step(id).expect("merged step exists");
                for dep in &step.depends_on {
                    let dep = state.step(dep).expect("dependency exists").status;
                    assert_eq!(
                        dep,
                        StepStatus::Merged,
                        "{id} is merged into base before its dependency, which is {dep}"
                    );
                }
            }
            Effect::AskApproval { id, .. } => {
                let step = state.step(id).expect("asked step exists");
                assert!(gated(state.autonomy, step.critical));
            }
            _ => {}
        }
    }
    for s in &state.steps {
        assert_eq!(
            s.status == StepStatus::Blocked,
            has_failed_ancestor(state, &s.id),
            "step {} is {} ({state:?})",
            s.id,
            s.status
        );
    }
    let back = PlanState::from_json(&state.to_json()).expect("the state reads back");
    assert_eq!(&back, state);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_scheduler_keeps_its_rules_on_random_plans(case in case()) {
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("valid");
        let mut state = state_of(&case);
        let mut approved = HashSet::new();
        let effects = step(now, &mut state, Input::Start).expect("a new plan starts");
        check(&state, &effects, &approved);
        for choice in &case.choices {
            let inputs = possible(&state);
            if inputs.is_empty() {
                break;
            }
            let input = inputs[usize::from(*choice) % inputs.len()].clone();
            if let Input::Approve { id } = &input {
                approved.insert(id.clone());
            }
            let effects = step(now, &mut state, input.clone())
                .unwrap_or_else(|err| panic!("{input:?} refused: {err}"));
            check(&state, &effects, &approved);
        }
        if possible(&state).iter().all(|i| matches!(i, Input::Pause | Input::Resume)) {
            // Nothing left to answer: the plan is over, or held by a rejection.
            prop_assert!(
                matches!(state.status, PlanStatus::Completed | PlanStatus::Failed | PlanStatus::Paused),
                "{state:?}"
            );
        }
    }
}

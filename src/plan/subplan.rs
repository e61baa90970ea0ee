//! A step that is itself a plan (`plan = "sub.toml"`). The step gets its own
//! branch, made as a parallel step's is (from its dependency's tip, or base), and
//! that branch is the sub-plan's base: the sub-plan runs under the step's lane
//! name (`PARENT-STEP`, its state in `.clowder/plans/PARENT-STEP.json`), with its
//! own lanes, merge queue and `verify`. The step is done when the sub-plan
//! completes (its branch then goes through the parent's merge queue) and failed,
//! without a retry, when the sub-plan fails: its own steps had theirs.

use std::path::Path;

use super::checks::{self, Checks};
use super::file::{self, Work};
use super::merge::{self, MergeJob, MergeOf};
use super::scheduler::{MergeOutcome, Outcome, Workspace};
use super::state::{PlanState, PlanStatus, StepState, StepStatus};
use crate::fleet::worktree;

pub fn is_subplan(step: &StepState) -> bool {
    matches!(step.work, Work::Plan(_))
}

/// The sub-plan's state: the saved one when an earlier run made it (a restart
/// resumes it), else a new one, from the plan file, on a branch made now.
pub fn prepare(root: &Path, step: &StepState, workspace: &Workspace) -> Result<PlanState, String> {
    let Work::Plan(file) = &step.work else {
        return Err(format!("step {} is not a sub-plan", step.id));
    };
    let path = PlanState::path(root, &step.lane);
    if path.exists() {
        return PlanState::load(&path);
    }
    let Workspace::New {
        branch,
        from,
        merge_in,
        ..
    } = workspace
    else {
        return Err(format!(
            "step {}: a sub-plan gets a branch of its own; it cannot be sequential",
            step.id
        ));
    };
    let mut plan = file::load(file).map_err(|errors| {
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("the sub-plan is refused: {}", said.join("; "))
    })?;
    make_branch(root, &step.lane, branch, from, merge_in)?;
    // Its own `base` gives way: the step's branch is what it builds on.
    plan.name = step.lane.clone();
    plan.base = Some(branch.clone());
    let state = PlanState::new(&plan, branch);
    state.save(root)?;
    Ok(state)
}

/// The step's branch from `from`, with the other dependencies' branches merged
/// in (in a scratch worktree, as the merge queue does). Made again after a kill,
/// it finds the branch and the merges already there.
fn make_branch(
    root: &Path,
    run: &str,
    branch: &str,
    from: &str,
    merge_in: &[String],
) -> Result<(), String> {
    if worktree::commit_of(root, &format!("refs/heads/{branch}"))?.is_none() {
        worktree::git(root, &["branch", "--end-of-options", branch, from])
            .map_err(|err| format!("cannot make branch {branch} from {from}: {err}"))?;
    }
    // No `verify` runs here: the checks are never used.
    let checks = Checks::new(root, run, checks::DEFAULT_GRACE);
    for dependency in merge_in {
        let job = MergeJob {
            root,
            of: MergeOf::Step {
                plan: run,
                step: dependency,
            },
            base: branch,
            rev: dependency,
            verify: "",
            verify_timeout: file::DEFAULT_CHECK_TIMEOUT,
            checks: &checks,
        };
        let outcome = merge::merge(&job);
        if outcome != MergeOutcome::Passed {
            let why = merge::describe(&outcome, branch);
            return Err(format!("cannot merge dependency {dependency}: {why}"));
        }
    }
    Ok(())
}

/// How the step went, once its sub-plan is over; `None` while it goes on.
pub fn outcome(root: &Path, step: &StepState) -> Option<Outcome> {
    let state = match PlanState::load(&PlanState::path(root, &step.lane)) {
        Ok(state) => state,
        Err(reason) => return Some(failed(reason)),
    };
    match state.status {
        PlanStatus::Completed => Some(Outcome::Done),
        PlanStatus::Failed => {
            let failed_steps: Vec<&str> = state
                .steps
                .iter()
                .filter(|s| matches!(s.status, StepStatus::Failed | StepStatus::Blocked))
                .map(|s| s.id.as_str())
                .collect();
            Some(failed(format!(
                "the sub-plan {} failed (steps not done: {}; see `clowder plan status {}`)",
                state.name,
                failed_steps.join(", "),
                state.name
            )))
        }
        PlanStatus::Created | PlanStatus::Running | PlanStatus::Paused => None,
    }
}

/// Whether the saved sub-plan has nothing more to run.
pub fn settled(state: &PlanState) -> bool {
    matches!(state.status, PlanStatus::Completed | PlanStatus::Failed)
}

fn failed(reason: String) -> Outcome {
    Outcome::Failed {
        reason,
        last_result: String::new(),
    }
}

//! `clowder plan retry NAME [STEP…]` and `R` in the Plan view: a failed plan's
//! failed or blocked steps start again, each from a fresh branch (the old one
//! kept under another name, its worktree's uncommitted changes stashed), with
//! what ended the last attempt in its prompt; the plan runs again.

use std::collections::HashSet;
use std::path::Path;

use super::state::{PlanState, PlanStatus, StepState, StepStatus};
use super::subplan;
use crate::fleet::{LaneName, lanes, registry, worktree};

fn retryable(status: StepStatus) -> bool {
    matches!(status, StepStatus::Failed | StepStatus::Blocked)
}

/// A saved plan reset for a retry, with the driver lock it was reset under.
pub struct Reset {
    pub state: PlanState,
    pub lock: nix::fcntl::Flock<std::fs::File>,
    /// What was done, a line each.
    pub said: Vec<String>,
}

/// Takes the driver lock of the saved plan `name` and resets `ids` (see
/// [`reset`]); refused while the plan's driver runs.
pub fn reset_saved(root: &Path, name: &str, ids: &[String]) -> Result<Reset, String> {
    let path = super::status::plan_file(root, name)?;
    let home = super::home::Home::of_file(root, &path, name);
    let Some(lock) = super::control::lock(&home)? else {
        return Err(format!(
            "cannot retry plan {name}: it is running here (`R` in its Plan view retries it there once it has failed)"
        ));
    };
    let mut state = PlanState::load(&path)?;
    let said = reset(root, &mut state, ids)?;
    Ok(Reset { state, lock, said })
}

/// Resets `ids` (every failed or blocked step when empty) of the saved plan
/// `state` and marks it running; returns what was done, a line each. Checked
/// whole before anything changes: a refusal leaves the plan, its lanes and
/// branches as they were. The caller holds the plan's driver lock.
pub fn reset(root: &Path, state: &mut PlanState, ids: &[String]) -> Result<Vec<String>, String> {
    let name = state.name.clone();
    match state.status {
        PlanStatus::Failed => {}
        PlanStatus::Completed => {
            return Err(format!(
                "cannot retry plan {name}: it is completed, nothing to retry"
            ));
        }
        other => {
            return Err(format!(
                "cannot retry plan {name}: it is {other}; a failed plan is retried (`clowder plan stop {name}` gives it up first)"
            ));
        }
    }
    let chosen = choose(state, ids)?;
    let mut after = state.clone();
    for step in after.steps.iter_mut().filter(|s| chosen.contains(&s.id)) {
        clear(step);
    }
    unblock(&mut after);
    still_blocked(&after, &chosen)?;
    let mut said = Vec::new();
    for step in state.steps.iter().filter(|s| chosen.contains(&s.id)) {
        said.extend(fresh_start(root, &state.sub_file(&step.id), step)?);
    }
    *state = after;
    state.status = PlanStatus::Running;
    state.save(root)?;
    Ok(said)
}

/// The steps to retry: those named, each failed or blocked, or all such.
fn choose(state: &PlanState, ids: &[String]) -> Result<HashSet<String>, String> {
    let name = &state.name;
    if ids.is_empty() {
        let all: HashSet<String> = state
            .steps
            .iter()
            .filter(|s| retryable(s.status))
            .map(|s| s.id.clone())
            .collect();
        if all.is_empty() {
            return Err(format!(
                "plan {name} has nothing to retry: no step is failed or blocked"
            ));
        }
        return Ok(all);
    }
    for id in ids {
        match state.step(id) {
            None => {
                return Err(format!(
                    "cannot retry step {id}: plan {name} has no such step"
                ));
            }
            Some(step) if !retryable(step.status) => {
                return Err(format!(
                    "cannot retry step {id} of plan {name}: it is {}; failed or blocked steps are retried",
                    step.status
                ));
            }
            Some(_) => {}
        }
    }
    Ok(ids.iter().cloned().collect())
}

/// The step as if it had never started; what ended its last attempt stays, for its prompt.
fn clear(step: &mut StepState) {
    step.status = StepStatus::Pending;
    step.attempts = 0;
    step.branch = None;
    step.worktree = None;
    step.started_at = None;
    step.ended_at = None;
    step.tip = None;
    step.waits_for = None;
    step.reason = None;
}

/// A blocked step none of whose dependencies is failed or blocked any more can
/// run again: the retried steps' dependents are unblocked with them.
fn unblock(state: &mut PlanState) {
    loop {
        let free: Vec<usize> = (0..state.steps.len())
            .filter(|&i| state.steps[i].status == StepStatus::Blocked)
            .filter(|&i| {
                state.steps[i]
                    .depends_on
                    .iter()
                    .all(|d| state.step(d).is_none_or(|d| !retryable(d.status)))
            })
            .collect();
        if free.is_empty() {
            return;
        }
        for i in free {
            clear(&mut state.steps[i]);
        }
    }
}

/// A retried step whose dependency stays failed would wait forever: refused,
/// naming the dependency to retry with it.
fn still_blocked(after: &PlanState, chosen: &HashSet<String>) -> Result<(), String> {
    for step in after.steps.iter().filter(|s| chosen.contains(&s.id)) {
        if let Some(dep) = step
            .depends_on
            .iter()
            .find(|d| after.step(d).is_some_and(|d| retryable(d.status)))
        {
            return Err(format!(
                "cannot retry step {} of plan {} without its dependency {dep}, which stays {}: retry both (`clowder plan retry {} {dep} {}`)",
                step.id,
                after.name,
                after.step(dep).map_or(StepStatus::Failed, |d| d.status),
                after.name,
                step.id
            ));
        }
    }
    Ok(())
}

/// Takes away the step's old lane so that it starts on a fresh branch: its
/// worktree is removed (uncommitted changes stashed, ignored files kept, as `lane
/// rm --force` does) and its branch renamed, never deleted. A sequential step
/// has no branch of its own and goes on in its dependency's worktree; a
/// sub-plan step keeps its branch, and its sub-plan's failed steps start again.
/// `sub_file`: where a sub-plan step's sub-plan is kept.
pub(super) fn fresh_start(
    root: &Path,
    sub_file: &str,
    step: &StepState,
) -> Result<Vec<String>, String> {
    if subplan::is_subplan(step) {
        return retry_subplan(root, sub_file, step);
    }
    let mut said = Vec::new();
    let Ok(lane) = LaneName::parse(&step.lane) else {
        return Ok(said);
    };
    let registered = registry::load(root)
        .map_err(String::from)?
        .lane(&lane)
        .is_some();
    if registered {
        let done = lanes::remove(root, &lane, true)
            .map_err(|err| format!("step {}: {}", step.id, err.message()))?;
        said.extend(
            done.into_iter()
                .map(|line| format!("step {}: {line}", step.id)),
        );
    }
    let branch = lane.branch();
    if step.branch.as_deref() == Some(branch.as_str()) && worktree::branch_exists(root, &branch)? {
        let kept = free_name(root, &branch)?;
        worktree::git(root, &["branch", "-m", &branch, &kept])?;
        said.push(format!(
            "step {}: its last attempt's branch is kept as {kept}",
            step.id
        ));
    }
    Ok(said)
}

/// `BRANCH.failed-N`, the first N that names no branch yet.
fn free_name(root: &Path, branch: &str) -> Result<String, String> {
    for n in 1..=1000 {
        let name = format!("{branch}.failed-{n}");
        if !worktree::branch_exists(root, &name)? {
            return Ok(name);
        }
    }
    Err(format!(
        "{branch}.failed-1 to {branch}.failed-1000 all exist: delete some of them first"
    ))
}

fn retry_subplan(root: &Path, sub_file: &str, step: &StepState) -> Result<Vec<String>, String> {
    let path = subplan::locate(root, sub_file, step)?;
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let mut sub = PlanState::load(&path)?;
    if sub.status != PlanStatus::Failed {
        return Ok(Vec::new());
    }
    let mut said = reset(root, &mut sub, &[])?;
    said.push(format!(
        "step {}: its sub-plan {} runs again",
        step.id, sub.name
    ));
    Ok(said)
}

//! The pure plan scheduler: `step(now, &mut PlanState, Input)` decides what starts,
//! retries, waits for a human or merges, and returns it as effects for a runtime to
//! carry out. No I/O here; time is passed in.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::file::{Collaboration, Work};
use super::state::{PlanState, PlanStatus, StepState, StepStatus};
use crate::fleet::LaneName;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Input {
    /// created → running.
    Start,
    Pause,
    Resume,
    /// running or paused → failed: the user gave up on the plan.
    Stop,
    /// The saved state was loaded again: running steps stay running (their lanes
    /// resume), an unfinished merge is asked again, ready steps start.
    Restarted,
    Approve {
        id: String,
    },
    Reject {
        id: String,
        reason: String,
    },
    StepEnded {
        id: String,
        outcome: Outcome,
    },
    MergeResult {
        id: String,
        result: MergeOutcome,
    },
    /// A step under review was merged by a human.
    MergeByHand {
        id: String,
    },
    /// The starting step's branch could not take `dependency`'s: `detail` says
    /// which files conflict, in git's words.
    DependencyConflict {
        id: String,
        dependency: String,
        detail: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// `done_when` held after a productive session.
    Done,
    /// Anything else: max_iterations, budget, agent error, kill.
    Failed { reason: String, last_result: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MergeOutcome {
    Passed,
    Conflict {
        files: Vec<String>,
    },
    /// The plan's `verify` failed on the merged result; `tail` is its last output.
    CheckFailed {
        tail: String,
    },
    /// The merge passed but base could not be moved safely (it moved meanwhile, or
    /// it is checked out in a worktree with changes).
    Refused {
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    PlanStarted,
    StepReady,
    StepStarted,
    StepDone,
    StepFailed,
    StepRetried,
    StepBlocked,
    /// A step could not take a dependency's branch: it waits until that one is in base.
    StepWaiting,
    MergePassed,
    MergeConflict,
    MergeCheckFailed,
    PlanDone,
    /// A completed plan removed its merged steps' worktrees and branches (`[plan] cleanup`).
    PlanCleanup,
}

/// Where a starting step works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Workspace {
    /// Sequential: the dependency's own branch and worktree.
    Shared { branch: String, worktree: PathBuf },
    /// Parallel: a new branch from `from` (a dependency's tip, or base), with the
    /// other dependencies' branches merged in.
    New {
        branch: String,
        worktree: PathBuf,
        from: String,
        merge_in: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Effect {
    /// A line for the event log.
    Event {
        kind: EventKind,
        step: Option<String>,
        detail: String,
    },
    StartStep {
        id: String,
        lane: String,
        work: Work,
        workspace: Workspace,
        done_when: String,
        max_iterations: Option<u64>,
    },
    /// A new session of a failed step, with `failure` added to its prompt.
    RetryStep {
        id: String,
        lane: String,
        failure: String,
    },
    /// An inbox request: may this step start?
    AskApproval { id: String, body: String },
    /// Merge `branch` into base in a scratch worktree, run `verify` there (when not
    /// empty), and move base only when both pass.
    Merge {
        id: String,
        branch: String,
        verify: String,
    },
    /// An inbox request: this step's merge needs a human.
    AskReview { id: String, body: String },
}

/// An input the plan's current state does not allow; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Applies `input` and returns what the runtime must do, in order.
pub fn step(
    now: DateTime<Utc>,
    state: &mut PlanState,
    input: Input,
) -> Result<Vec<Effect>, Refused> {
    let mut out = Vec::new();
    match input {
        Input::Start => {
            transition(state, "start", PlanStatus::Created, PlanStatus::Running)?;
            out.push(event(EventKind::PlanStarted, None, ""));
        }
        Input::Pause => transition(state, "pause", PlanStatus::Running, PlanStatus::Paused)?,
        Input::Resume => transition(state, "resume", PlanStatus::Paused, PlanStatus::Running)?,
        Input::Stop => stop(now, state, &mut out)?,
        Input::Restarted => {
            if let Some(id) = state.merging.clone() {
                out.push(merge_effect(state, &id));
            }
        }
        Input::Approve { id } => approve(state, &id, &mut out)?,
        Input::Reject { id, .. } => reject(state, &id)?,
        Input::StepEnded { id, outcome } => step_ended(now, state, &id, outcome, &mut out)?,
        Input::MergeResult { id, result } => merge_result(state, &id, result, &mut out)?,
        Input::MergeByHand { id } => merge_by_hand(state, &id, &mut out)?,
        Input::DependencyConflict {
            id,
            dependency,
            detail,
        } => dependency_conflict(now, state, &id, &dependency, &detail, &mut out)?,
    }
    schedule(now, state, &mut out);
    Ok(out)
}

fn event(kind: EventKind, step: Option<&str>, detail: &str) -> Effect {
    Effect::Event {
        kind,
        step: step.map(str::to_string),
        detail: detail.to_string(),
    }
}

fn step_event(kind: EventKind, id: &str, detail: &str) -> Effect {
    event(kind, Some(id), detail)
}

fn transition(
    state: &mut PlanState,
    verb: &str,
    from: PlanStatus,
    to: PlanStatus,
) -> Result<(), Refused> {
    if state.status != from {
        return Err(Refused(format!(
            "cannot {verb} plan {}: it is {}",
            state.name, state.status
        )));
    }
    state.status = to;
    Ok(())
}

/// The user gave up: the plan fails, and so do the steps it was running.
fn stop(now: DateTime<Utc>, state: &mut PlanState, out: &mut Vec<Effect>) -> Result<(), Refused> {
    if !matches!(state.status, PlanStatus::Running | PlanStatus::Paused) {
        return Err(Refused(format!(
            "cannot stop plan {}: it is {}",
            state.name, state.status
        )));
    }
    state.status = PlanStatus::Failed;
    for step in &mut state.steps {
        if step.status == StepStatus::Running {
            step.status = StepStatus::Failed;
            step.ended_at = Some(now);
            step.last_failure = Some(failure_text("stopped with the plan", ""));
            step.reason = Some("stopped with the plan".into());
        }
    }
    out.push(event(
        EventKind::PlanDone,
        None,
        "failed: stopped by the user",
    ));
    Ok(())
}

fn refuse_when_finished(state: &PlanState, verb: &str) -> Result<(), Refused> {
    match state.status {
        PlanStatus::Completed | PlanStatus::Failed | PlanStatus::Created => Err(Refused(format!(
            "cannot {verb} in plan {}: it is {}",
            state.name, state.status
        ))),
        PlanStatus::Running | PlanStatus::Paused => Ok(()),
    }
}

/// The step `id`, which must be in `expected`.
fn step_in<'a>(
    state: &'a mut PlanState,
    id: &str,
    verb: &str,
    expected: StepStatus,
) -> Result<&'a mut StepState, Refused> {
    refuse_when_finished(state, &format!("{verb} step {id}"))?;
    let name = state.name.clone();
    let step = state.step_mut(id).ok_or_else(|| {
        Refused(format!(
            "cannot {verb} step {id}: plan {name} has no such step"
        ))
    })?;
    if step.status != expected {
        return Err(Refused(format!(
            "cannot {verb} step {id} of plan {name}: it is {}",
            step.status
        )));
    }
    Ok(step)
}

fn approve(state: &mut PlanState, id: &str, out: &mut Vec<Effect>) -> Result<(), Refused> {
    step_in(state, id, "approve", StepStatus::WaitingForApproval)?.status = StepStatus::Ready;
    out.push(step_event(EventKind::StepReady, id, "approved"));
    Ok(())
}

/// A rejection holds the plan; on resume the step is asked about again.
fn reject(state: &mut PlanState, id: &str) -> Result<(), Refused> {
    step_in(state, id, "reject", StepStatus::WaitingForApproval)?.status = StepStatus::Pending;
    if state.status == PlanStatus::Running {
        state.status = PlanStatus::Paused;
    }
    Ok(())
}

fn step_ended(
    now: DateTime<Utc>,
    state: &mut PlanState,
    id: &str,
    outcome: Outcome,
    out: &mut Vec<Effect>,
) -> Result<(), Refused> {
    let step = step_in(state, id, "end", StepStatus::Running)?;
    step.ended_at = Some(now);
    match outcome {
        Outcome::Done => {
            step.status = StepStatus::Done;
            out.push(step_event(EventKind::StepDone, id, ""));
            state.merge_queue.push_back(id.to_string());
        }
        Outcome::Failed {
            reason,
            last_result,
        } if step.attempts < 2 && !matches!(step.work, Work::Plan(_)) => {
            // A sub-plan is not run again: its own steps had their retry.
            step.last_failure = Some(failure_text(&reason, &last_result));
            // A retry waits for a slot like any start, ahead of new steps.
            step.status = StepStatus::Ready;
        }
        Outcome::Failed {
            reason,
            last_result,
        } => {
            step.status = StepStatus::Failed;
            step.last_failure = Some(failure_text(&reason, &last_result));
            out.push(step_event(EventKind::StepFailed, id, &reason));
            step.reason = Some(reason);
            block_dependents(state, id, out);
        }
    }
    Ok(())
}

/// A step that cannot take a dependency's work does not start without it: it
/// waits (pending, its start undone) until the conflict can have been fixed in
/// base: until that dependency is merged, or, when it is already, the dependency
/// whose tip the step's branch starts from. With both in base there is nothing
/// to wait for: the step fails.
fn dependency_conflict(
    now: DateTime<Utc>,
    state: &mut PlanState,
    id: &str,
    dependency: &str,
    detail: &str,
    out: &mut Vec<Effect>,
) -> Result<(), Refused> {
    let from = state.step(id).and_then(|s| s.depends_on.first().cloned());
    let awaited = [Some(dependency.to_string()), from]
        .into_iter()
        .flatten()
        .find(|d| {
            state
                .step(d)
                .is_some_and(|d| d.status != StepStatus::Merged)
        });
    let base = state.base.clone();
    let step = step_in(state, id, "hold", StepStatus::Running)?;
    let Some(awaited) = awaited else {
        step.status = StepStatus::Failed;
        step.ended_at = Some(now);
        step.last_failure = Some(failure_text(detail, ""));
        step.reason = Some(detail.to_string());
        out.push(step_event(EventKind::StepFailed, id, detail));
        block_dependents(state, id, out);
        return Ok(());
    };
    step.status = StepStatus::Pending;
    step.attempts = step.attempts.saturating_sub(1);
    step.started_at = None;
    let detail = format!("waits until {awaited} is merged into {base}: {detail}");
    step.waits_for = Some(awaited);
    out.push(step_event(EventKind::StepWaiting, id, &detail));
    Ok(())
}

fn failure_text(reason: &str, last_result: &str) -> String {
    let mut text = format!("The previous attempt at this step failed: {reason}.");
    if !last_result.is_empty() {
        text.push_str(&format!("\nIts last result was:\n{last_result}"));
    }
    text
}

/// Every step depending on `failed`, directly or not, is blocked for good.
fn block_dependents(state: &mut PlanState, failed: &str, out: &mut Vec<Effect>) {
    let mut blocked: HashSet<String> = HashSet::from([failed.to_string()]);
    let mut grew = true;
    while grew {
        grew = false;
        for step in &mut state.steps {
            if blocked.contains(&step.id) || !step.depends_on.iter().any(|d| blocked.contains(d)) {
                continue;
            }
            blocked.insert(step.id.clone());
            grew = true;
            if matches!(
                step.status,
                StepStatus::Pending | StepStatus::WaitingForApproval | StepStatus::Ready
            ) {
                step.status = StepStatus::Blocked;
                let detail = format!("depends on failed step {failed}");
                out.push(step_event(EventKind::StepBlocked, &step.id, &detail));
                step.reason = Some(detail);
            }
        }
    }
}

fn merge_result(
    state: &mut PlanState,
    id: &str,
    result: MergeOutcome,
    out: &mut Vec<Effect>,
) -> Result<(), Refused> {
    if state.merging.as_deref() != Some(id) {
        return Err(Refused(format!(
            "cannot take a merge result for step {id} of plan {}: it is not being merged",
            state.name
        )));
    }
    state.merging = None;
    let name = state.name.clone();
    let step = state
        .step_mut(id)
        .expect("the step being merged exists because merging is only set from its id");
    let (kind, detail) = match result {
        MergeOutcome::Passed => {
            step.status = StepStatus::Merged;
            out.push(step_event(EventKind::MergePassed, id, ""));
            return Ok(());
        }
        MergeOutcome::Conflict { files } => (
            EventKind::MergeConflict,
            format!("conflicts in: {}", files.join(", ")),
        ),
        MergeOutcome::CheckFailed { tail } => (
            EventKind::MergeCheckFailed,
            format!("the verify check failed on the merged result:\n{tail}"),
        ),
        MergeOutcome::Refused { reason } => (
            EventKind::MergeCheckFailed,
            format!("base was not moved: {reason}"),
        ),
    };
    step.status = StepStatus::NeedsReview;
    out.push(step_event(kind, id, &detail));
    let body = format!(
        "Step {id} of plan {name} ({}) was not merged: {detail}\nBase was left untouched. Fix the branch in its worktree, then approve this request or run `clowder plan merge {name} {id}`: the merge is made and checked again.",
        step.branch.as_deref().unwrap_or("no branch")
    );
    out.push(Effect::AskReview {
        id: id.to_string(),
        body,
    });
    Ok(())
}

fn merge_by_hand(state: &mut PlanState, id: &str, out: &mut Vec<Effect>) -> Result<(), Refused> {
    step_in(state, id, "merge by hand", StepStatus::NeedsReview)?.status = StepStatus::Merged;
    out.push(step_event(EventKind::MergePassed, id, "merged by hand"));
    Ok(())
}

/// Moves whatever can move: readiness, approvals, starts, the merge queue, the end.
fn schedule(now: DateTime<Utc>, state: &mut PlanState, out: &mut Vec<Effect>) {
    if state.status == PlanStatus::Running {
        mark_ready(state, out);
        start_ready(now, state, out);
    }
    if matches!(state.status, PlanStatus::Running | PlanStatus::Paused)
        && state.merging.is_none()
        && let Some(next) = state
            .merge_queue
            .iter()
            .position(|id| dependencies_in_base(state, id))
        && let Some(id) = state.merge_queue.remove(next)
    {
        state.merging = Some(id.clone());
        out.push(merge_effect(state, &id));
    }
    finish_when_settled(state, out);
}

/// A step merges into base only after every one of its dependencies did: base
/// never holds a step without the work it was built on.
fn dependencies_in_base(state: &PlanState, id: &str) -> bool {
    state.step(id).is_some_and(|step| {
        step.depends_on.iter().all(|d| {
            state
                .step(d)
                .is_some_and(|d| d.status == StepStatus::Merged)
        })
    })
}

/// At autonomy 1–2 every step waits for approval; at 3 only critical ones.
pub fn needs_approval(autonomy: u8, critical: bool) -> bool {
    autonomy <= 2 || (autonomy == 3 && critical)
}

fn mark_ready(state: &mut PlanState, out: &mut Vec<Effect>) {
    for index in 0..state.steps.len() {
        let step = &state.steps[index];
        let deps_done = step
            .depends_on
            .iter()
            .all(|d| state.step(d).is_some_and(|s| s.status.is_done()));
        let waits = step.waits_for.as_ref().is_some_and(|dep| {
            state
                .step(dep)
                .is_none_or(|d| d.status != StepStatus::Merged)
        });
        if step.status != StepStatus::Pending || !deps_done || waits {
            continue;
        }
        state.steps[index].waits_for = None;
        let step = &state.steps[index];
        if needs_approval(state.autonomy, step.critical) {
            let body = approval_body(state, step);
            let id = step.id.clone();
            state.steps[index].status = StepStatus::WaitingForApproval;
            out.push(Effect::AskApproval { id, body });
        } else {
            state.steps[index].status = StepStatus::Ready;
            out.push(step_event(EventKind::StepReady, &state.steps[index].id, ""));
        }
    }
}

fn approval_body(state: &PlanState, step: &StepState) -> String {
    let deps = if step.depends_on.is_empty() {
        "nothing".to_string()
    } else {
        step.depends_on.join(", ")
    };
    let work = match &step.work {
        Work::Prompt(text) => text.clone(),
        Work::PromptFile(path) => format!("the prompt in {}", path.display()),
        Work::Plan(path) => format!("the plan in {}", path.display()),
    };
    format!(
        "Start step {} of plan {}{}?\nDepends on: {deps}\nPrompt:\n{work}",
        step.id,
        state.name,
        if step.critical { " (critical)" } else { "" }
    )
}

fn start_ready(now: DateTime<Utc>, state: &mut PlanState, out: &mut Vec<Effect>) {
    // Retries first, then new steps in the file's order.
    let mut order: Vec<usize> = (0..state.steps.len())
        .filter(|&i| state.steps[i].status == StepStatus::Ready)
        .collect();
    order.sort_by_key(|&i| state.steps[i].attempts == 0);
    for index in order {
        if state.running() >= state.max_parallel {
            break;
        }
        if !worktree_in_use(state, index) {
            start(now, state, index, out);
        }
    }
}

/// Two sequential steps on one dependency share its worktree: one at a time.
fn worktree_in_use(state: &PlanState, index: usize) -> bool {
    let step = &state.steps[index];
    let worktree = if step.attempts > 0 {
        step.worktree.clone()
    } else {
        match workspace(state, step) {
            Workspace::Shared { worktree, .. } => Some(worktree),
            Workspace::New { .. } => None,
        }
    };
    worktree.is_some_and(|w| {
        state
            .steps
            .iter()
            .any(|s| s.status == StepStatus::Running && s.worktree.as_ref() == Some(&w))
    })
}

fn start(now: DateTime<Utc>, state: &mut PlanState, index: usize, out: &mut Vec<Effect>) {
    let step = &state.steps[index];
    let id = step.id.clone();
    let lane = step.lane.clone();
    if let Some(failure) = step.last_failure.clone().filter(|_| step.attempts > 0) {
        let step = &mut state.steps[index];
        step.status = StepStatus::Running;
        step.attempts += 1;
        step.started_at = Some(now);
        let reason = failure.lines().next().unwrap_or_default().to_string();
        out.push(step_event(EventKind::StepRetried, &id, &reason));
        out.push(Effect::RetryStep { id, lane, failure });
        return;
    }
    let workspace = workspace(state, step);
    let (branch, worktree) = match &workspace {
        Workspace::Shared { branch, worktree }
        | Workspace::New {
            branch, worktree, ..
        } => (branch.clone(), worktree.clone()),
    };
    let effect = Effect::StartStep {
        id: id.clone(),
        lane,
        work: step.work.clone(),
        workspace,
        done_when: step.done_when.clone(),
        max_iterations: step.max_iterations,
    };
    let step = &mut state.steps[index];
    step.status = StepStatus::Running;
    step.attempts += 1;
    step.started_at = Some(now);
    step.branch = Some(branch);
    step.worktree = Some(worktree);
    out.push(step_event(EventKind::StepStarted, &id, ""));
    out.push(effect);
}

pub(crate) fn workspace(state: &PlanState, step: &StepState) -> Workspace {
    let deps: Vec<&StepState> = step
        .depends_on
        .iter()
        .filter_map(|d| state.step(d))
        .collect();
    if step.collaboration == Collaboration::Sequential
        && let Some(dep) = deps.first()
        && let (Some(branch), Some(worktree)) = (&dep.branch, &dep.worktree)
    {
        return Workspace::Shared {
            branch: branch.clone(),
            worktree: worktree.clone(),
        };
    }
    let mut tips = deps.iter().filter_map(|d| d.branch.clone());
    let from = tips.next().unwrap_or_else(|| state.base.clone());
    let (branch, worktree) = match LaneName::parse(&step.lane) {
        Ok(lane) => (
            lane.branch(),
            crate::store::paths::worktrees_dir(Path::new("")).join(lane.as_str()),
        ),
        // `plan check` refuses such names; a hand-edited state still gets a place.
        Err(_) => (
            format!("clowder/{}", step.lane),
            crate::store::paths::worktrees_dir(Path::new("")).join(&step.lane),
        ),
    };
    Workspace::New {
        branch,
        worktree,
        from,
        merge_in: tips.collect(),
    }
}

fn merge_effect(state: &PlanState, id: &str) -> Effect {
    let branch = state
        .step(id)
        .and_then(|s| s.branch.clone())
        .unwrap_or_default();
    Effect::Merge {
        id: id.to_string(),
        branch,
        verify: state.verify.clone(),
    }
}

/// Completed when every step is merged; failed when nothing can move any more and
/// a step failed. Steps under review keep the plan running: a human decides.
fn finish_when_settled(state: &mut PlanState, out: &mut Vec<Effect>) {
    if !matches!(state.status, PlanStatus::Running | PlanStatus::Paused) {
        return;
    }
    let moving = state.merging.is_some()
        || state.steps.iter().any(|s| {
            matches!(
                s.status,
                StepStatus::Pending
                    | StepStatus::WaitingForApproval
                    | StepStatus::Ready
                    | StepStatus::Running
                    | StepStatus::Done
                    | StepStatus::NeedsReview
            )
        });
    if moving {
        return;
    }
    let failed = state
        .steps
        .iter()
        .any(|s| matches!(s.status, StepStatus::Failed | StepStatus::Blocked));
    state.status = if failed {
        PlanStatus::Failed
    } else {
        PlanStatus::Completed
    };
    let detail = state.status.to_string();
    out.push(event(EventKind::PlanDone, None, &detail));
}

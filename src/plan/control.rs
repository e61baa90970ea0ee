//! `plan pause|resume|stop|merge NAME`: done on the saved state when no plan
//! driver runs, else left as a request file that the running driver takes within
//! a second. Which is the case is told by the driver's lock.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::checks::{self, Checks};
use super::events::EventLog;
use super::file::Work;
use super::home::Home;
use super::merge::{self, MergeJob, MergeOf};
use super::scheduler::{self, Effect, Input, MergeOutcome};
use super::state::{PLANS_DIR, PlanState, PlanStatus, StepStatus};

/// What a command asks of a running driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Pause,
    Resume,
    Stop,
    /// Merge this reviewed step by hand.
    Merge(String),
}

impl Request {
    fn file_name(&self) -> String {
        match self {
            Request::Pause => "pause".into(),
            Request::Resume => "resume".into(),
            Request::Stop => "stop".into(),
            Request::Merge(step) => format!("merge-{step}"),
        }
    }

    fn from_file_name(name: &str) -> Option<Request> {
        match name {
            "pause" => Some(Request::Pause),
            "resume" => Some(Request::Resume),
            "stop" => Some(Request::Stop),
            _ => name
                .strip_prefix("merge-")
                .map(|step| Request::Merge(step.to_string())),
        }
    }
}

/// The driver's lock, in the plan's folder.
pub const LOCK_FILE: &str = "driver.lock";

fn requests_dir(home: &Home) -> PathBuf {
    home.dir().join("requests")
}

/// Held by the process that drives the plan at `home`; `None` when another holds it.
pub fn lock(home: &Home) -> Result<Option<Flock<File>>, String> {
    let dir = home.dir();
    std::fs::create_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|err| format!("cannot open {}: {err}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(format!("cannot lock {}: {errno}", path.display())),
    }
}

/// The requests left for the driver, taken (removed) in a stable order.
pub fn take_requests(home: &Home) -> Vec<Request> {
    let Ok(entries) = std::fs::read_dir(requests_dir(home)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            std::fs::remove_file(requests_dir(home).join(&name)).ok()?;
            Request::from_file_name(&name)
        })
        .collect()
}

/// Carries out `request` on plan `name` in `root`; returns what to print, or why
/// it was refused (naming the plan's or step's current state).
pub fn command(root: &Path, name: &str, request: Request) -> Result<String, String> {
    let path = super::status::plan_file(root, name)?;
    command_at(root, &path, name, request)
}

/// [`command`] on the plan whose state is kept at `path`.
fn command_at(root: &Path, path: &Path, name: &str, request: Request) -> Result<String, String> {
    let home = Home::of_file(root, path, name);
    let guard = lock(&home)?;
    let mut state = PlanState::load(path)?;
    refuse_early(&state, &request)?;
    if guard.is_none() {
        let dir = requests_dir(&home);
        std::fs::create_dir_all(&dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let file = dir.join(request.file_name());
        std::fs::write(&file, b"")
            .map_err(|err| format!("cannot write {}: {err}", file.display()))?;
        return Ok(format!(
            "asked the running plan {name} to {} ({})",
            request.file_name().replace('-', " "),
            file.display()
        ));
    }
    forward(root, &state, &request);
    match request {
        Request::Pause | Request::Resume => {
            // Recorded only: the next `plan run` starts what may start.
            state.status = match request {
                Request::Pause => PlanStatus::Paused,
                _ => PlanStatus::Running,
            };
            state.save(root)?;
            Ok(format!(
                "plan {name}: {} (recorded; no plan runs now: `clowder plan run` goes on with it)",
                state.status
            ))
        }
        Request::Stop => {
            super::steps::stop_lanes(root, &state);
            apply(root, &mut state, Input::Stop)?;
            Ok(format!("plan {name}: stopped; it is {}", state.status))
        }
        Request::Merge(step) => merge_by_hand(root, &mut state, &step),
    }
}

/// Pause, resume and stop go to the plan's running sub-plans too (to their
/// drivers when they run, else to their saved states).
pub fn forward(root: &Path, state: &PlanState, request: &Request) {
    if matches!(request, Request::Merge(_)) {
        return;
    }
    for step in &state.steps {
        if step.status == StepStatus::Running && matches!(step.work, Work::Plan(_)) {
            // A sub-plan already where the request would take it is left so.
            let path = root.join(PLANS_DIR).join(state.sub_file(&step.id));
            let _ = command_at(root, &path, &step.lane, request.clone());
        }
    }
}

/// The transitions a request makes, checked against the saved state first.
fn refuse_early(state: &PlanState, request: &Request) -> Result<(), String> {
    let name = &state.name;
    let (verb, allowed): (&str, &[PlanStatus]) = match request {
        Request::Pause => ("pause", &[PlanStatus::Running]),
        Request::Resume => ("resume", &[PlanStatus::Paused]),
        Request::Stop => ("stop", &[PlanStatus::Running, PlanStatus::Paused]),
        Request::Merge(step) => {
            let Some(found) = state.step(step) else {
                return Err(format!("plan {name} has no step {step}"));
            };
            if found.status != StepStatus::NeedsReview {
                return Err(format!(
                    "cannot merge step {step} of plan {name} by hand: it is {}, not needs review",
                    found.status
                ));
            }
            return Ok(());
        }
    };
    if allowed.contains(&state.status) {
        Ok(())
    } else {
        Err(format!("cannot {verb} plan {name}: it is {}", state.status))
    }
}

fn apply(root: &Path, state: &mut PlanState, input: Input) -> Result<(), String> {
    let effects =
        scheduler::step(chrono::Utc::now(), state, input).map_err(|err| err.to_string())?;
    state.save(root)?;
    let log = EventLog::new(&Home::of(root, state));
    for effect in effects {
        if let Effect::Event { kind, step, detail } = effect {
            println!("{}", log.append(kind, step.as_deref(), &detail));
        }
    }
    Ok(())
}

/// Merges a reviewed step (its branch as it is now) the way the queue does:
/// in the scratch worktree, checked, base moved only when both pass; through the
/// plan's driver when one runs. Runs git and `verify`: call it off a screen's thread.
pub fn merge_step(root: &Path, plan: &str, step: &str) -> Result<String, String> {
    command(root, plan, Request::Merge(step.to_string()))
}

fn merge_by_hand(root: &Path, state: &mut PlanState, step: &str) -> Result<String, String> {
    let branch = state
        .step(step)
        .and_then(|s| s.branch.clone())
        .ok_or_else(|| format!("step {step} has no branch"))?;
    let home = Home::of(root, state);
    let checks = Checks::new(&home, checks::DEFAULT_GRACE);
    // No run of the plan holds its lock: what a killed one left in the scratch
    // worktree is ended before the merge is made there.
    for line in checks.end_left_now() {
        eprintln!("clowder: warning: plan {}: {line}", state.name);
    }
    let verify_timeout = state
        .step(step)
        .map_or(super::file::DEFAULT_CHECK_TIMEOUT, |s| s.verify_timeout());
    let job = MergeJob {
        root,
        of: MergeOf::Step { home: &home, step },
        base: &state.base,
        rev: &branch,
        verify: &state.verify,
        verify_timeout,
        checks: &checks,
    };
    match merge::merge(&job) {
        MergeOutcome::Passed => {
            apply(root, state, Input::MergeByHand { id: step.into() })?;
            Ok(format!("step {step}: {branch} merged into {}", state.base))
        }
        MergeOutcome::Conflict { files } => Err(format!(
            "step {step} still conflicts with {} in: {}; base is untouched",
            state.base,
            files.join(", ")
        )),
        MergeOutcome::CheckFailed { tail } => Err(format!(
            "step {step}: the verify check failed on the merged result; base is untouched:\n{tail}"
        )),
        MergeOutcome::Refused { reason } => {
            Err(format!("step {step}: base was not moved: {reason}"))
        }
    }
}

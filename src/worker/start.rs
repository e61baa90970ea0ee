//! How a worker takes up a task: one worker per task (a lock on `task.json`), the
//! state to go on from (or the reason not to run), the allowed paths fixed at the
//! first start, and what killed workers left behind cleared away.

use std::path::Path;
use std::time::{Duration, SystemTime};

use chrono::Utc;

use super::task::{self, State, Status, Task};
use super::{EXIT_FAILED, EXIT_TIMEOUT, EXIT_USAGE};

/// A temporary file of a task file this old is no write in flight any more: one
/// that a killed worker (or stopper) left.
const STALE_TEMP: Duration = Duration::from_secs(10);

pub(crate) fn lock(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    let path = dir.join(task::TASK_FILE);
    let file = std::fs::File::open(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        format!(
            "another worker is running this task (it holds a lock on {})",
            path.display()
        )
    })
}

/// Removes the temporary files of `state.json` and `heartbeat.json` that killed
/// writers left (`.state.json.XXXXXX.tmp`). Only the worker holding the lock
/// writes the heartbeat; a stopper may write state.json at any time, so only its
/// temporary files old enough to be no write in flight go.
pub(crate) fn clear_interrupted_writes(dir: &Path) {
    let stale = SystemTime::now() - STALE_TEMP;
    let heartbeat = crate::store::remove_interrupted_writes(&dir.join(task::HEARTBEAT_FILE));
    let state = crate::store::remove_interrupted_writes_before(&dir.join(task::STATE_FILE), stale);
    if let Err(err) = heartbeat.and(state) {
        eprintln!(
            "clowder: warning: cannot clear the temporary files in {}: {err}",
            dir.display()
        );
    }
}

/// The state to go on from, or the exit code when the task is not to run. A task
/// never started gets a new state.json, made only if none appeared meanwhile: a
/// stop written just before is honoured, not overwritten.
pub(crate) fn state_to_run(dir: &Path, task: &Task) -> Result<State, i32> {
    if let Some(state) = state_on_disk(dir)? {
        return fixed_paths(dir, task, state);
    }
    let now = Utc::now();
    let fresh = State {
        status: Status::Running,
        iteration: 0,
        started_at: Some(now),
        updated_at: Some(now),
        termination_reason: None,
        counters: Default::default(),
        pid: Some(std::process::id()),
        allowed_paths: Some(task.constraints.allowed_paths.clone()),
    };
    match task::create_state(dir, &fresh) {
        Ok(true) => Ok(fresh),
        // Someone (a stop) wrote one in between: go by it.
        Ok(false) => match state_on_disk(dir)? {
            Some(state) => fixed_paths(dir, task, state),
            None => Ok(fresh),
        },
        Err(err) => {
            eprintln!("clowder: error: {err}; nothing was run");
            Err(EXIT_FAILED)
        }
    }
}

fn fixed_paths(dir: &Path, task: &Task, mut state: State) -> Result<State, i32> {
    match fix_allowed_paths(dir, task, &mut state) {
        Ok(()) => Ok(state),
        Err(message) => {
            eprintln!("clowder: error: {message}");
            Err(EXIT_USAGE)
        }
    }
}

/// The state in state.json made ready to run, `None` when there is none, or
/// the exit code when the task is not to run.
fn state_on_disk(dir: &Path) -> Result<Option<State>, i32> {
    let state = match task::read_state(dir) {
        Ok(Some(state)) => state,
        Ok(None) => return Ok(None),
        Err(err) => {
            eprintln!("clowder: error: {err}; left as it is, nothing was run");
            return Err(EXIT_USAGE);
        }
    };
    let reason = state.termination_reason.clone().unwrap_or_default();
    let resume = format!("`clowder task resume {}`", dir.display());
    match state.status {
        Status::Running => Ok(Some(state)),
        Status::Stopped if reason == "timeout" => {
            println!(
                "clowder: the task timed out (timeout_seconds after started_at): not run again"
            );
            Err(EXIT_TIMEOUT)
        }
        Status::Stopped if state.started_at.is_none() => {
            println!(
                "clowder: the task was stopped before it started ({reason}): not run; {resume} lets it start"
            );
            Err(0)
        }
        Status::Stopped => {
            println!(
                "clowder: resuming the stopped task after iteration {}",
                state.iteration
            );
            Ok(Some(State {
                status: Status::Running,
                termination_reason: None,
                ..state
            }))
        }
        Status::Completed => {
            println!(
                "clowder: the task is already completed ({reason}, iteration {}): not run again",
                state.iteration
            );
            Err(0)
        }
        Status::Failed => {
            println!("clowder: the task failed ({reason}): not restarted; {resume} lets it go on");
            Err(EXIT_FAILED)
        }
    }
}

/// The allowed paths are fixed when the task first starts, in `state.json` (which
/// the tools never write): a `task.json` changed since then is refused.
fn fix_allowed_paths(dir: &Path, task: &Task, state: &mut State) -> Result<(), String> {
    let now = &task.constraints.allowed_paths;
    match &state.allowed_paths {
        None => {
            state.allowed_paths = Some(now.clone());
            Ok(())
        }
        Some(fixed) if fixed == now => Ok(()),
        Some(fixed) => Err(format!(
            "{}: key `constraints.allowed_paths` is {now:?}, but the task started with {fixed:?} (kept in {}): allowed paths are fixed when a task starts; nothing was run (make a new task with `clowder task new` to change them)",
            dir.join(task::TASK_FILE).display(),
            task::STATE_FILE
        )),
    }
}

//! A step as a lane: registering it (its own worktree, or its dependency's), its
//! prompt file, a retry's new prompt, how its lane ended (judged by `done_when`),
//! and stopping the lanes of a stopped plan.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chrono::Utc;

use super::checks::{Check, Checks, End};
use super::file::Work;
use super::home::Home;
use super::scheduler::{Outcome, Workspace};
use super::state::{PlanState, StepState, StepStatus};
use crate::fleet::lanes::{self, AddOptions, FINISHED_MARK};
use crate::fleet::registry::{self, Lane, LaneKind, LaneState};
use crate::fleet::{LaneName, lane_files_dir, worktree};
use crate::protocol::ExitReason;

/// How much of the last output file is read for the last result text.
const LAST_OUTPUT_BYTES: u64 = 64 * 1024;

/// `prompts/STEP.md` in the plan's folder, relative to the project folder `root`.
pub fn prompt_path(root: &Path, home: &Home, step: &str) -> PathBuf {
    let path = home.dir().join("prompts").join(format!("{step}.md"));
    path.strip_prefix(root)
        .map_or_else(|_| path.clone(), Path::to_path_buf)
}

fn lane_name(step: &StepState) -> Result<LaneName, String> {
    LaneName::parse(&step.lane).map_err(|err| format!("step {}: lane {err}", step.id))
}

/// The step's prompt text, `failure` (a retry's) added at its end.
fn prompt_text(work: &Work, failure: Option<&str>) -> Result<String, String> {
    let mut text = match work {
        Work::Prompt(text) => text.clone(),
        Work::PromptFile(path) => crate::store::small_file::read_to_string(path)
            .map_err(|err| format!("cannot read the prompt file {}: {err}", path.display()))?,
        // The driver runs a sub-plan step's plan itself (the subplan module).
        Work::Plan(path) => {
            return Err(format!(
                "the sub-plan {} is run by its own driver, not as a lane",
                path.display()
            ));
        }
    };
    if let Some(failure) = failure {
        text = format!("{}\n\n{failure}\n", text.trim_end());
    }
    Ok(text)
}

fn write_prompt(
    root: &Path,
    home: &Home,
    step: &StepState,
    failure: Option<&str>,
) -> Result<PathBuf, String> {
    let text = prompt_text(&step.work, failure)?;
    let relative = prompt_path(root, home, &step.id);
    let path = root.join(&relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    }
    crate::store::write_atomically(&path, text.as_bytes())
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(relative)
}

/// Why a step's lane was not started.
#[derive(Debug)]
pub enum NotStarted {
    /// A dependency's branch could not be merged into the step's: `detail`
    /// names the files and quotes git. The lane is kept, stopped, for later.
    Conflict {
        branch: String,
        detail: String,
    },
    Failed(String),
}

impl From<String> for NotStarted {
    fn from(reason: String) -> NotStarted {
        NotStarted::Failed(reason)
    }
}

impl NotStarted {
    pub fn reason(self) -> String {
        match self {
            NotStarted::Conflict { detail, .. } => detail,
            NotStarted::Failed(reason) => reason,
        }
    }
}

/// Registers the step's lane, which the running fleet then starts. Done again
/// (a retry, or a start that waited for a dependency), it finds the lane
/// registered, merges in what its dependencies have that it lacks, and lets it run.
pub fn start(
    root: &Path,
    home: &Home,
    step: &StepState,
    workspace: &Workspace,
) -> Result<(), NotStarted> {
    let name = lane_name(step)?;
    // A step started again by `plan retry` is told what ended its last attempt.
    let prompt = write_prompt(root, home, step, step.last_failure.as_deref())?;
    let known = registry::load(root)
        .map_err(String::from)?
        .lane(&name)
        .is_some();
    match workspace {
        Workspace::New { from, merge_in, .. } => {
            if !known {
                let options = AddOptions {
                    prompt_file: Some(prompt),
                    base: Some(from.clone()),
                    max_iterations: step.max_iterations,
                    ..AddOptions::default()
                };
                lanes::add(root, &name, options).map_err(|err| err.message().to_string())?;
            }
            let dir = crate::fleet::worktree_path(root, &name);
            // A first attempt whose lane exists waited for a dependency: it takes
            // what its first dependency's branch has gained too (the conflict may
            // have been fixed there). A retry builds on its branch as it is.
            let waited = known && step.attempts <= 1;
            let merges: Vec<&String> = match (known, waited) {
                (false, _) => merge_in.iter().collect(),
                (true, true) if !step.depends_on.is_empty() => {
                    std::iter::once(from).chain(merge_in).collect()
                }
                (true, _) => Vec::new(),
            };
            for branch in merges {
                if let Err(refused) = merge_dependency(&dir, branch) {
                    // Without the dependency's work the lane must not run.
                    set_lane_state(root, &name, LaneState::Stopped)?;
                    return Err(refused);
                }
            }
            if waited {
                set_lane_state(root, &name, LaneState::Active)?;
            }
            Ok(())
        }
        Workspace::Shared { .. } if known => Ok(()),
        Workspace::Shared { worktree, .. } => {
            add_shared(root, &name, step, worktree, prompt).map_err(NotStarted::Failed)
        }
    }
}

fn set_lane_state(root: &Path, name: &LaneName, state: LaneState) -> Result<(), String> {
    registry::update(root, |registry| {
        if let Some(lane) = registry.lane_mut(name) {
            lane.state = state;
        }
        Ok::<_, String>(())
    })
}

/// A parallel step with several dependencies starts with all their work; a
/// branch merged already merges as nothing.
fn merge_dependency(dir: &Path, branch: &str) -> Result<(), NotStarted> {
    let message = format!("Merge {branch}");
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "merge",
            "--no-edit",
            "-m",
            &message,
            "--end-of-options",
            branch,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot run git: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    let files = worktree::git(dir, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
    let _ = worktree::git(dir, &["merge", "--abort"]);
    // git tells of a conflict on stdout, of other failures on stderr.
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let said: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let said = format!("`git merge {branch}` said: {}", said.join(" / "));
    let files: Vec<&str> = files.lines().collect();
    if files.is_empty() {
        return Err(NotStarted::Failed(format!(
            "cannot merge dependency {branch} into the step's branch: {said}"
        )));
    }
    Err(NotStarted::Conflict {
        branch: branch.to_string(),
        detail: format!(
            "cannot merge {branch} into the step's branch, conflicts in: {}; {said}",
            files.join(", ")
        ),
    })
}

/// A sequential step's lane works in its dependency's worktree, on its branch,
/// as a folder lane (it owns neither, so `lane rm` never removes them).
fn add_shared(
    root: &Path,
    name: &LaneName,
    step: &StepState,
    dir: &Path,
    prompt: PathBuf,
) -> Result<(), String> {
    std::fs::create_dir_all(lane_files_dir(root, name))
        .map_err(|err| format!("cannot create the lane's folder: {err}"))?;
    registry::update(root, |registry| {
        if registry.lane(name).is_none() {
            registry.lanes.push(Lane {
                name: name.clone(),
                kind: LaneKind::Dir,
                dir: dir.to_path_buf(),
                branch: None,
                base: None,
                base_commit: None,
                prompt_file: Some(prompt),
                max_iterations: step.max_iterations,
                max_cost_usd: None,
                state: LaneState::Active,
                created: Utc::now(),
                resumes: 0,
            });
        }
        Ok::<_, String>(())
    })
}

/// A failed step's new session: the prompt says what went wrong, and the lane,
/// which ended, runs again (the fleet starts a lane whose finished mark is gone).
pub fn retry(root: &Path, home: &Home, step: &StepState, failure: &str) -> Result<(), String> {
    let name = lane_name(step)?;
    write_prompt(root, home, step, Some(failure))?;
    // A lane the user stopped by hand runs again too: the plan asked for a retry.
    registry::update(root, |registry| {
        if let Some(lane) = registry.lane_mut(&name) {
            lane.state = LaneState::Active;
        }
        Ok::<_, String>(())
    })?;
    let mark = lane_files_dir(root, &name).join(FINISHED_MARK);
    match std::fs::remove_file(&mark) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("cannot remove {}: {err}", mark.display())),
    }
}

/// Whether the step's lane has ended on its own (the fleet marks it finished).
pub fn lane_ended(root: &Path, step: &StepState) -> bool {
    lane_name(step).is_ok_and(|name| lane_files_dir(root, &name).join(FINISHED_MARK).exists())
}

/// How the step's ended lane went: done when `done_when` holds (the promise kept,
/// or the command exits 0 in the step's worktree), failed otherwise.
pub fn judge(root: &Path, checks: &Checks, step: &StepState) -> Outcome {
    let name = match lane_name(step) {
        Ok(name) => name,
        Err(err) => return failed(err, String::new()),
    };
    let files = crate::fleet::lane_files(root, &name);
    let snapshot = crate::store::status::read(&files.status)
        .ok()
        .map(|(snapshot, _)| snapshot);
    let reason = snapshot
        .as_ref()
        .and_then(|s| s.exit_reason.clone())
        .map_or_else(
            || "the lane ended without saying why".to_string(),
            |r| r.label(),
        );
    let last = snapshot
        .as_ref()
        .and_then(|s| s.output_file.clone())
        .map(|file| last_result(&files.base.join(file)))
        .unwrap_or_default();
    let completed = snapshot
        .as_ref()
        .is_some_and(|s| s.exit_reason == Some(ExitReason::Completed));
    if step.done_when.trim() == super::file::PROMISE {
        if completed {
            return Outcome::Done;
        }
        let exits = session_exits(files.event_log.as_deref(), step.started_at);
        let reason = match sessions_text(&exits) {
            Some(sessions) => format!("{sessions}; the lane ended: {reason}"),
            None => format!("the lane ended: {reason}"),
        };
        return failed(reason, last);
    }
    let dir = root.join(step.worktree.clone().unwrap_or_default());
    match done_command(checks, &dir, step) {
        Ok(()) => Outcome::Done,
        Err((why, tail)) => {
            let mut last = last;
            if !tail.is_empty() {
                last = format!(
                    "{last}\n\nThe last lines of done_when `{}`:\n{tail}",
                    step.done_when
                );
            }
            failed(
                format!("{why} (the lane ended: {reason})"),
                last.trim_start().to_string(),
            )
        }
    }
}

/// How much of the end of a lane's event log is read for its sessions' exit codes.
const EVENT_LOG_BYTES: u64 = 256 * 1024;

/// The exit codes of the lane's sessions that ended since `since` (this attempt's),
/// from its event log.
fn session_exits(event_log: Option<&Path>, since: Option<chrono::DateTime<Utc>>) -> Vec<i64> {
    let Some(path) = event_log else {
        return Vec::new();
    };
    let text = crate::store::small_file::tail(path, EVENT_LOG_BYTES).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["event"] == "session_complete")
        .filter(|event| {
            let at = event["ts"]
                .as_str()
                .and_then(|ts| ts.parse::<chrono::DateTime<Utc>>().ok());
            since.is_none_or(|since| at.is_some_and(|at| at >= since))
        })
        .filter_map(|event| event["exit_code"].as_i64())
        .collect()
}

/// How a lane's sessions ended, in a few words: `exit 1 in each of 2 sessions`.
pub(crate) fn sessions_text(exits: &[i64]) -> Option<String> {
    let first = *exits.first()?;
    let n = exits.len();
    let text = if exits.iter().any(|&code| code != first) {
        let codes: Vec<String> = exits.iter().map(ToString::to_string).collect();
        format!("exit codes {} in {n} sessions", codes.join(", "))
    } else if first == 0 && n == 1 {
        "no completion promise in its only session".to_string()
    } else if first == 0 {
        format!("no completion promise in {n} sessions")
    } else if n == 1 {
        format!("exit {first} in its only session")
    } else {
        format!("exit {first} in each of {n} sessions")
    };
    Some(text)
}

/// The global number of the lane's last finished session, from its status file.
pub fn last_session(root: &Path, step: &StepState) -> Option<u64> {
    let name = lane_name(step).ok()?;
    let (snapshot, _) = crate::store::status::read(&lanes::status_path(root, &name)).ok()?;
    snapshot.last_completed_global
}

/// After a session of a running step: when its command `done_when` holds already,
/// its lane is asked to stop (its STOP file), then judged done when it ends.
pub fn stop_when_done(root: &Path, checks: &Checks, step: &StepState) {
    let Ok(name) = lane_name(step) else {
        return;
    };
    let dir = root.join(step.worktree.clone().unwrap_or_default());
    if done_command(checks, &dir, step).is_ok() {
        let _ = std::fs::write(crate::fleet::lane_files(root, &name).stop, b"");
    }
}

fn failed(reason: String, last_result: String) -> Outcome {
    Outcome::Failed {
        reason,
        last_result,
    }
}

/// Runs the step's command `done_when` in `dir`, as a plan's check; not passed,
/// why, and the last lines it printed.
fn done_command(checks: &Checks, dir: &Path, step: &StepState) -> Result<(), (String, String)> {
    let label = format!("done_when-{}", step.id);
    let check = Check {
        key: "done_when",
        command: &step.done_when,
        dir,
        timeout: step.done_when_timeout(),
        label: &label,
    };
    let ran = checks.run(&check).map_err(|err| (err, String::new()))?;
    match ran.end {
        End::Passed => Ok(()),
        // A command that ended by itself is named with its exit code only.
        End::Exited(code) => Err((
            format!("done_when `{}` exited {code}", step.done_when),
            ran.tail,
        )),
        _ => Err((ran.why_not(&check).unwrap_or_default(), String::new())),
    }
}

/// The last session's final result (a stream-json `result` line's text), else
/// its last lines.
fn last_result(path: &Path) -> String {
    let Ok(text) = crate::store::small_file::tail(path, LAST_OUTPUT_BYTES) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let result = lines.iter().rev().find_map(|line| {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        (value.get("type")?.as_str()? == "result")
            .then(|| value.get("result")?.as_str().map(str::to_string))
            .flatten()
    });
    result.unwrap_or_else(|| lines[lines.len().saturating_sub(5)..].join("\n"))
}

/// Ends the lanes of the plan's running steps now (a stopped plan runs nothing).
pub fn stop_lanes(root: &Path, state: &PlanState) {
    for step in state
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Running && !matches!(s.work, Work::Plan(_)))
    {
        let Ok(name) = LaneName::parse(&step.lane) else {
            continue;
        };
        if let Err(err) = lanes::set_state(root, &name, LaneState::Stopped, true) {
            eprintln!("clowder: warning: {}", err.message());
        }
    }
}

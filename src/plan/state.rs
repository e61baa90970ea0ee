//! A plan's state as saved at `.clowder/plans/NAME.json` (a sub-plan's in its
//! parent's folder, `PARENT/sub/STEP.json`): what the scheduler knows, versioned
//! (see [`crate::store::versioned`]) and written atomically.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::file::{self, Collaboration, Plan, Work};
use crate::store::versioned::Format;

/// Raised whenever the meaning of a saved field changes. 2: each step keeps the
/// fingerprint of its definition, a sub-plan the place of its file.
pub const SCHEMA_VERSION: u32 = 2;

const FORMAT: Format = Format {
    current: SCHEMA_VERSION as u64,
    first: 1,
    unversioned: None,
    migrate,
    in_struct: true,
};

/// Version 1 had no fingerprints: each step's is made from the definition it kept.
fn migrate(from: u64, value: &mut serde_json::Value) -> Result<(), String> {
    if from != 1 {
        return Ok(());
    }
    let steps = value
        .get_mut("steps")
        .and_then(serde_json::Value::as_array_mut)
        .ok_or("steps: expected a list")?;
    for (i, step) in steps.iter_mut().enumerate() {
        let state: StepState = serde_path_to_error::deserialize(step.clone())
            .map_err(|err| format!("at steps[{i}].{}: {}", err.path(), err.inner()))?;
        if let Some(object) = step.as_object_mut() {
            object.insert(
                "fingerprint".into(),
                state.definition().fingerprint().into(),
            );
        }
    }
    Ok(())
}

pub use crate::store::paths::PLANS_DIR;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Created,
    Running,
    Paused,
    Completed,
    Failed,
}

impl fmt::Display for PlanStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PlanStatus::Created => "created",
            PlanStatus::Running => "running",
            PlanStatus::Paused => "paused",
            PlanStatus::Completed => "completed",
            PlanStatus::Failed => "failed",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    WaitingForApproval,
    Ready,
    Running,
    Done,
    Failed,
    Blocked,
    Merged,
    NeedsReview,
}

impl StepStatus {
    /// A dependency in this state lets its dependents start.
    pub fn is_done(self) -> bool {
        matches!(self, StepStatus::Done | StepStatus::Merged)
    }
}

impl fmt::Display for StepStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StepStatus::Pending => "pending",
            StepStatus::WaitingForApproval => "waiting for approval",
            StepStatus::Ready => "ready",
            StepStatus::Running => "running",
            StepStatus::Done => "done",
            StepStatus::Failed => "failed",
            StepStatus::Blocked => "blocked",
            StepStatus::Merged => "merged",
            StepStatus::NeedsReview => "needs review",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    pub id: String,
    pub depends_on: Vec<String>,
    pub collaboration: Collaboration,
    pub critical: bool,
    pub work: Work,
    pub done_when: String,
    pub max_iterations: Option<u64>,
    pub status: StepStatus,
    /// The lane the step runs as (`PLAN-ID`).
    pub lane: String,
    /// Set when the step starts: its own, or its dependency's when sequential.
    pub branch: Option<String>,
    pub worktree: Option<PathBuf>,
    /// Sessions started for it: 1, then 2 after a retry.
    pub attempts: u32,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// What ended its last failed attempt.
    pub last_failure: Option<String>,
    /// The commit its branch was at when it was done: what the merge queue merges.
    #[serde(default)]
    pub tip: Option<String>,
    /// How long `verify` may run on its merge, in seconds: its own limit, else the plan's.
    #[serde(default = "default_timeout_secs")]
    pub verify_timeout_secs: f64,
    /// The same for its command `done_when`.
    #[serde(default = "default_timeout_secs")]
    pub done_when_timeout_secs: f64,
    /// A dependency whose branch could not be merged into the step's when it
    /// started: the step waits until that dependency is merged into base.
    #[serde(default)]
    pub waits_for: Option<String>,
    /// Why it is failed (what ended its last attempt) or blocked (which failed
    /// dependency), while it is.
    #[serde(default)]
    pub reason: Option<String>,
    /// Of its definition when the plan's state was made (see [`Definition`]):
    /// a plan file changed since is refused.
    #[serde(default)]
    pub fingerprint: String,
}

fn default_timeout_secs() -> f64 {
    file::DEFAULT_CHECK_TIMEOUT.as_secs_f64()
}

/// A saved limit in seconds; one edited into nonsense reads as the default.
fn limit(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|limit| !limit.is_zero())
        .unwrap_or(file::DEFAULT_CHECK_TIMEOUT)
}

impl StepState {
    pub fn verify_timeout(&self) -> Duration {
        limit(self.verify_timeout_secs)
    }

    pub fn done_when_timeout(&self) -> Duration {
        limit(self.done_when_timeout_secs)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanState {
    pub schema_version: u32,
    pub name: String,
    pub base: String,
    pub autonomy: u8,
    pub verify: String,
    pub max_parallel: usize,
    pub status: PlanStatus,
    /// In the plan file's order.
    pub steps: Vec<StepState>,
    /// Finished steps waiting to be merged, in the order they finished.
    pub merge_queue: VecDeque<String>,
    /// The step whose merge is under way (one at a time).
    pub merging: Option<String>,
    /// `[plan] cleanup`: completed, it removes its merged steps' worktrees and branches.
    #[serde(default = "yes")]
    pub cleanup: bool,
    /// A sub-plan's file, relative to [`PLANS_DIR`] (see [`PlanState::sub_file`]);
    /// a plan run by itself is at `NAME.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

fn yes() -> bool {
    true
}

impl PlanState {
    /// A new plan, nothing started; `base` is the branch in force when `plan.base` is unset.
    pub fn new(plan: &Plan, base: &str) -> PlanState {
        let steps = plan
            .steps
            .iter()
            .map(|step| StepState {
                id: step.id.clone(),
                depends_on: step.depends_on.clone(),
                collaboration: step.collaboration,
                critical: step.critical,
                work: step.work.clone(),
                done_when: step.done_when.clone(),
                max_iterations: step.max_iterations,
                status: StepStatus::Pending,
                lane: file::lane_name(&plan.name, &step.id),
                branch: None,
                worktree: None,
                attempts: 0,
                started_at: None,
                ended_at: None,
                last_failure: None,
                tip: None,
                verify_timeout_secs: step
                    .verify_timeout
                    .unwrap_or(plan.verify_timeout)
                    .as_secs_f64(),
                done_when_timeout_secs: step
                    .done_when_timeout
                    .unwrap_or(plan.done_when_timeout)
                    .as_secs_f64(),
                waits_for: None,
                reason: None,
                fingerprint: String::new(),
            })
            .map(|mut step: StepState| {
                step.fingerprint = step.definition().fingerprint();
                step
            })
            .collect();
        PlanState {
            schema_version: SCHEMA_VERSION,
            name: plan.name.clone(),
            base: plan.base.clone().unwrap_or_else(|| base.to_string()),
            autonomy: plan.autonomy,
            verify: plan.verify.clone(),
            max_parallel: plan.max_parallel,
            status: PlanStatus::Created,
            steps,
            merge_queue: VecDeque::new(),
            merging: None,
            cleanup: plan.cleanup,
            file: None,
        }
    }

    pub fn step(&self, id: &str) -> Option<&StepState> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub(crate) fn step_mut(&mut self, id: &str) -> Option<&mut StepState> {
        self.steps.iter_mut().find(|s| s.id == id)
    }

    pub fn running(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.status == StepStatus::Running)
            .count()
    }

    /// Parses saved JSON: a newer version is refused before any field is read,
    /// an older one migrated.
    pub fn from_json(text: &str) -> Result<PlanState, String> {
        let state: PlanState = FORMAT.parse(text)?;
        if let Some(file) = &state.file {
            check_file(file).map_err(|err| format!("at file: {err}"))?;
        }
        Ok(state)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a plan state serialises because every field is plain data")
    }

    /// `.clowder/plans/NAME.json` under `root`.
    pub fn path(root: &Path, name: &str) -> PathBuf {
        root.join(PLANS_DIR).join(format!("{name}.json"))
    }

    pub fn load(path: &Path) -> Result<PlanState, String> {
        let text = crate::store::small_file::read_to_string(path)
            .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
        PlanState::from_json(&text).map_err(|err| format!("{}: {err}", path.display()))
    }

    /// Where this state is kept, relative to [`PLANS_DIR`].
    pub fn rel_file(&self) -> String {
        self.file
            .clone()
            .unwrap_or_else(|| format!("{}.json", self.name))
    }

    /// Where this state is kept under `root`.
    pub fn file_in(&self, root: &Path) -> PathBuf {
        root.join(PLANS_DIR).join(self.rel_file())
    }

    /// Where the sub-plan of its step `id` is kept, relative to [`PLANS_DIR`]:
    /// in a folder of this plan's own, so that no plan's name can lead there.
    pub fn sub_file(&self, id: &str) -> String {
        let rel = self.rel_file();
        let stem = rel.strip_suffix(".json").unwrap_or(&rel);
        format!("{stem}/sub/{id}.json")
    }

    pub fn save(&self, root: &Path) -> Result<(), String> {
        let path = self.file_in(root);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        crate::store::write_atomically(&path, format!("{}\n", self.to_json()).as_bytes())
            .map_err(|err| format!("cannot write {}: {err}", path.display()))
    }
}

/// A sub-plan's `file` leads nowhere but under [`PLANS_DIR`].
fn check_file(file: &str) -> Result<(), String> {
    let path = Path::new(file);
    let plain = path
        .components()
        .all(|part| matches!(part, std::path::Component::Normal(_)));
    if plain && file.ends_with(".json") {
        Ok(())
    } else {
        Err(format!("{file:?} is not a path inside {PLANS_DIR}"))
    }
}

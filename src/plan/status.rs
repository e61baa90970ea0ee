//! `clowder plan status`: each saved plan's steps with their state, lane, branch,
//! and the lane's iteration and cost from its status file.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::state::{PLANS_DIR, PlanState, StepState, StepStatus};
use crate::fleet::LaneName;

#[derive(Debug, Serialize)]
pub struct PlanRow {
    pub name: String,
    pub status: String,
    pub base: String,
    pub steps: Vec<StepRow>,
}

#[derive(Debug, Serialize)]
pub struct StepRow {
    pub id: String,
    pub state: String,
    pub lane: String,
    pub branch: Option<String>,
    pub iteration: Option<u64>,
    pub max_iterations: Option<u64>,
    pub cost_usd: Option<f64>,
    /// Why a failed step failed, or which failed dependency blocks a blocked one.
    pub reason: Option<String>,
}

/// The plans to show: `name`'s, or every plan's and sub-plan's, by file.
pub fn plan_files(root: &Path, name: Option<&str>) -> Result<Vec<PathBuf>, String> {
    if let Some(name) = name {
        return Ok(vec![plan_file(root, name)?]);
    }
    let dir = root.join(PLANS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(format!("cannot read {}: {err}", dir.display())),
    };
    let mut files = Vec::new();
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        // Whatever is named `.json` is a state, to be read (and refused if a folder).
        if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        } else if path.is_dir() {
            sub_files(&path, &mut files);
        }
    }
    files.sort();
    Ok(files)
}

/// The state file of plan `name`: `NAME.json`, else the sub-plan so named. A
/// sub-plan is also named by its place, `PARENT/STEP` (`A/B/C` for a sub-plan's
/// sub-plan), which no plan run by itself can be named.
pub fn plan_file(root: &Path, name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let rel = format!("{}.json", name.replace('/', "/sub/"));
        let path = root.join(PLANS_DIR).join(&rel);
        if name.split('/').all(|part| LaneName::parse(part).is_ok()) && path.is_file() {
            return Ok(path);
        }
        return Err(format!(
            "no sub-plan {name:?}: {} does not exist",
            path.display()
        ));
    }
    let path = PlanState::path(root, name);
    if path.is_file() {
        return Ok(path);
    }
    let plans = root.join(PLANS_DIR);
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&plans) {
        for entry in entries.filter_map(Result::ok) {
            sub_files(&entry.path(), &mut files);
        }
    }
    files
        .into_iter()
        .find(|file| sub_name(&plans, file).as_deref() == Some(name))
        .ok_or_else(|| format!("no plan {name:?}: {} does not exist", path.display()))
}

/// The sub-plans' files under a plan's folder `dir` (in `dir/sub/`), nested ones too.
fn sub_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir.join("sub")) else {
        return;
    };
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        } else if path.is_dir() {
            sub_files(&path, files);
        }
    }
}

/// A sub-plan's name from its file: `A/sub/B.json` is `A-B`, as its lanes are named.
fn sub_name(plans: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(plans).ok()?.to_str()?;
    let stem = rel.strip_suffix(".json")?;
    Some(stem.replace("/sub/", "-"))
}

/// A new plan whose lane names are another plan's (plan `a-b`'s step `x` and
/// plan `a`'s sub-plan step `b`'s step `x` are both `a-b-x`) would share those
/// lanes and their branches: it is refused, naming the plan that has them.
pub fn refuse_taken_lanes(root: &Path, state: &PlanState) -> Result<(), String> {
    let own = state.file_in(root);
    for path in plan_files(root, None)?.into_iter().filter(|p| *p != own) {
        let Ok(other) = PlanState::load(&path) else {
            continue;
        };
        for step in &state.steps {
            if let Some(theirs) = other.steps.iter().find(|s| s.lane == step.lane) {
                return Err(format!(
                    "plan {}: step {}'s lane {} is already the lane of step {} of plan {} ({}): rename the plan or the step",
                    state.name,
                    step.id,
                    step.lane,
                    theirs.id,
                    other.name,
                    path.display()
                ));
            }
        }
    }
    Ok(())
}

pub fn row(root: &Path, state: &PlanState) -> PlanRow {
    // One reading of the folder's config places every step's lane files.
    let config = crate::config::Config::of_folder(root);
    let steps = state
        .steps
        .iter()
        .map(|step| {
            let snapshot = LaneName::parse(&step.lane).ok().and_then(|lane| {
                let path = config.lane_files(root, lane.as_str()).status;
                crate::store::status::read(&path).ok().map(|(s, _)| s)
            });
            StepRow {
                id: step.id.clone(),
                state: step.status.to_string(),
                lane: step.lane.clone(),
                branch: step.branch.clone(),
                iteration: snapshot.as_ref().map(|s| s.iteration),
                max_iterations: snapshot.as_ref().map(|s| s.max_iterations),
                cost_usd: snapshot.as_ref().and_then(|s| s.totals.cost_usd),
                reason: reason(state, step),
            }
        })
        .collect();
    PlanRow {
        name: state.name.clone(),
        status: state.status.to_string(),
        base: state.base.clone(),
        steps,
    }
}

/// Why the step is failed or blocked; `None` in any other state. A state saved
/// before reasons were kept still names a blocked step's failed dependency.
fn reason(state: &PlanState, step: &StepState) -> Option<String> {
    match step.status {
        StepStatus::Failed => Some(
            step.reason
                .clone()
                .unwrap_or_else(|| "the reason was not recorded".into()),
        ),
        StepStatus::Blocked => step.reason.clone().or_else(|| {
            let failed = step.depends_on.iter().find(|d| {
                state
                    .step(d)
                    .is_some_and(|d| matches!(d.status, StepStatus::Failed | StepStatus::Blocked))
            })?;
            Some(format!("depends on failed step {failed}"))
        }),
        _ => None,
    }
}

/// One plan as a heading and aligned columns.
pub fn table(plan: &PlanRow) -> String {
    let dash = || "-".to_string();
    let mut lines: Vec<[String; 6]> = vec![[
        "STEP".into(),
        "STATE".into(),
        "LANE".into(),
        "BRANCH".into(),
        "ITER".into(),
        "COST".into(),
    ]];
    for step in &plan.steps {
        let iteration = match (step.iteration, step.max_iterations) {
            (Some(i), Some(max)) => format!("{i}/{max}"),
            _ => dash(),
        };
        lines.push([
            step.id.clone(),
            step.state.clone(),
            step.lane.clone(),
            step.branch.clone().unwrap_or_else(dash),
            iteration,
            step.cost_usd.map_or_else(dash, |c| format!("${c:.4}")),
        ]);
    }
    let mut text = format!("plan {}: {} (base {})\n", plan.name, plan.status, plan.base);
    text.push_str(&crate::fmt::columns(&lines));
    for step in &plan.steps {
        if let Some(reason) = &step.reason {
            let first = reason.lines().next().unwrap_or_default();
            text.push_str(&format!("{} {}: {first}\n", step.id, step.state));
        }
    }
    text
}

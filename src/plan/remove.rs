//! `clowder plan rm NAME`: forgets a plan that no driver runs (its state, its
//! event log, its folder with its sub-plans) and leaves every lane, worktree and
//! branch of its steps where it is: commits are `lane rm`'s to judge.

use std::path::Path;

use super::control;
use super::home::{self, Home};
use super::state::{PLANS_DIR, PlanState};
use super::status;
use crate::fleet::{LaneName, registry, worktree};

/// Removes plan `name`'s files under `root`; what was removed and what was
/// left, to print; or why nothing was (it runs, it is a sub-plan, a file
/// cannot be removed).
pub fn remove(root: &Path, name: &str) -> Result<String, String> {
    let path = status::plan_file(root, name)?;
    let rel = path
        .strip_prefix(root.join(PLANS_DIR))
        .ok()
        .and_then(Path::to_str)
        .unwrap_or_default()
        .to_string();
    if home::is_sub(&rel) {
        let parent = rel.split('/').next().unwrap_or_default();
        return Err(format!(
            "{name} is a sub-plan of plan {parent}: `clowder plan rm {parent}` removes it with its plan"
        ));
    }
    let home = Home::of_file(root, &path, name);
    // Held until the files are gone: no driver starts meanwhile.
    let Some(_driver) = control::lock(&home)? else {
        return Err(format!(
            "plan {name} is running (its driver holds {}): `clowder plan stop {name}` first, then remove it",
            home.dir().join(control::LOCK_FILE).display()
        ));
    };
    // An unreadable state is removed too; only what it left cannot be named.
    let states = every_state(root, &path);
    for state in &states {
        super::merge::remove_scratch(root, &Home::of(root, state).dir().join("merge"));
    }
    let mut removed = Vec::new();
    // The state last: a removal cut short leaves the plan listed, to remove again.
    for (file, folder) in [(home.dir(), true), (home.events(), false), (&path, false)] {
        if remove_path(file)? {
            let rel = file.strip_prefix(root).unwrap_or(file).display();
            removed.push(if folder {
                format!("{rel}/")
            } else {
                rel.to_string()
            });
        }
    }
    let mut said = format!("removed plan {name}: {}", removed.join(", "));
    said.push_str(&format!("\nclowder: {}", left_behind(root, &states)));
    Ok(said)
}

/// The plan's state and its sub-plans', those that can be read.
fn every_state(root: &Path, path: &Path) -> Vec<PlanState> {
    let mut states: Vec<PlanState> = PlanState::load(path).into_iter().collect();
    let mut at = 0;
    while at < states.len() {
        let subs: Vec<PlanState> = states[at]
            .steps
            .iter()
            .filter(|step| super::subplan::is_subplan(step))
            .filter_map(|step| {
                let file = root.join(PLANS_DIR).join(states[at].sub_file(&step.id));
                PlanState::load(&file).ok()
            })
            .collect();
        states.extend(subs);
        at += 1;
    }
    states
}

/// Removes a file or a folder; `false` when there was none.
fn remove_path(path: &Path) -> Result<bool, String> {
    let result = match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(err) => Err(err),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    result
        .map(|()| true)
        .map_err(|err| format!("cannot remove {}: {err}", path.display()))
}

/// What of the plan's steps is still there: their lanes (with worktrees) and
/// their branches, never removed here.
fn left_behind(root: &Path, states: &[PlanState]) -> String {
    let registry = registry::load(root).ok();
    let mut lanes = Vec::new();
    let mut branches = Vec::new();
    for step in states.iter().flat_map(|state| &state.steps) {
        let Ok(lane) = LaneName::parse(&step.lane) else {
            continue;
        };
        let branch = step.branch.clone().unwrap_or_else(|| lane.branch());
        if registry.as_ref().is_some_and(|r| r.lane(&lane).is_some()) {
            lanes.push(format!("{lane} ({branch})"));
        } else if worktree::commit_of(root, &format!("refs/heads/{branch}"))
            .ok()
            .flatten()
            .is_some()
        {
            branches.push(branch);
        }
    }
    lanes.dedup();
    branches.dedup();
    let mut parts = Vec::new();
    if !lanes.is_empty() {
        parts.push(format!(
            "left its steps' lanes, with their worktrees and branches: {}; `clowder lane rm LANE` removes one (it refuses to lose commits)",
            lanes.join(", ")
        ));
    }
    if !branches.is_empty() {
        parts.push(format!(
            "left the branches {} (`git branch -d` deletes a merged one)",
            branches.join(", ")
        ));
    }
    if parts.is_empty() {
        "no lane or branch of its steps is left".to_string()
    } else {
        parts.join("\nclowder: ")
    }
}

//! A completed plan's clean-up (`[plan] cleanup = true`, the default): its
//! merged steps' lanes, worktrees and branches go, but only what git shows is
//! fully merged into the plan's base; anything else stays and is named.

use std::path::Path;

use super::state::{PlanState, StepState, StepStatus};
use super::subplan;
use crate::fleet::registry::{self, LaneKind};
use crate::fleet::{LaneName, lanes, worktree};

/// What the clean-up did: a line per step removed, and per step kept with why.
#[derive(Debug, Default)]
pub struct Cleaned {
    pub removed: Vec<String>,
    pub kept: Vec<String>,
}

impl Cleaned {
    /// One line for the event and the log.
    pub fn summary(&self) -> String {
        let removed = if self.removed.is_empty() {
            "removed nothing".to_string()
        } else {
            format!("removed {}", self.removed.join(", "))
        };
        if self.kept.is_empty() {
            removed
        } else {
            format!("{removed}; kept {}", self.kept.join("; "))
        }
    }
}

/// Removes the merged steps' lanes (worktrees and branches), dependents before
/// the steps they were built on, each only when its branch is in base.
pub fn clean(root: &Path, state: &PlanState) -> Cleaned {
    let mut done = Cleaned::default();
    let registry = match registry::load(root) {
        Ok(registry) => registry,
        Err(err) => {
            done.kept.push(format!("every step: {}", String::from(err)));
            return done;
        }
    };
    for step in dependents_first(state) {
        let Ok(name) = LaneName::parse(&step.lane) else {
            continue;
        };
        let lane = registry.lane(&name);
        let result = if subplan::is_subplan(step) {
            remove_branch(root, &state.base, &name.branch())
                .map(|gone| gone.then(|| format!("{} (branch {})", step.id, name.branch())))
        } else if let Some(lane) = lane {
            remove_lane(root, &state.base, &name, lane.kind).map(Some)
        } else {
            Ok(None)
        };
        match result {
            Ok(Some(line)) => done.removed.push(line),
            Ok(None) => {}
            Err(why) => done.kept.push(format!("{}: {why}", step.id)),
        }
    }
    done
}

/// The merged steps, each after every step that depends on it: a lane's base
/// (its dependency's branch) is still there when the lane is removed.
fn dependents_first(state: &PlanState) -> Vec<&StepState> {
    let mut left: Vec<&StepState> = state
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Merged)
        .collect();
    let mut order = Vec::new();
    while !left.is_empty() {
        let (free, rest): (Vec<&StepState>, Vec<&StepState>) = left
            .iter()
            .partition(|s| !left.iter().any(|other| other.depends_on.contains(&s.id)));
        if free.is_empty() {
            // Only a hand-edited state has a cycle: the rest in file order.
            order.extend(rest);
            break;
        }
        order.extend(free);
        left = rest;
    }
    order
}

/// Whether `rev` is in `base`'s history, as `git merge-base --is-ancestor` says.
fn in_base(root: &Path, rev: &str, base: &str) -> Result<bool, String> {
    let base_ref = format!("refs/heads/{base}");
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["merge-base", "--is-ancestor", rev, &base_ref])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|err| format!("cannot run git: {err}"))?;
    match output.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "`git merge-base --is-ancestor {rev} {base}` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// A lane whose branch is in base goes as `lane rm` removes it (which refuses
/// uncommitted changes, ignored files and commits base lacks); a lane in its
/// dependency's worktree is only unregistered.
fn remove_lane(root: &Path, base: &str, name: &LaneName, kind: LaneKind) -> Result<String, String> {
    if kind == LaneKind::Worktree {
        let branch = name.branch();
        let Some(tip) = worktree::commit_of(root, &format!("refs/heads/{branch}"))? else {
            return Err(format!(
                "its branch {branch} is gone; the lane is left for `clowder lane rm {name}`"
            ));
        };
        if !in_base(root, &tip, base)? {
            return Err(format!("its branch {branch} has commits {base} lacks"));
        }
    }
    lanes::remove(root, name, false).map_err(|err| err.message().to_string())?;
    Ok(match kind {
        LaneKind::Worktree => format!("{name} (worktree and branch {})", name.branch()),
        _ => format!("{name} (lane; it worked in its dependency's worktree)"),
    })
}

/// A sub-plan step's branch, which no worktree has checked out, when it is in
/// base; `false` when there is none.
fn remove_branch(root: &Path, base: &str, branch: &str) -> Result<bool, String> {
    let Some(tip) = worktree::commit_of(root, &format!("refs/heads/{branch}"))? else {
        return Ok(false);
    };
    if !in_base(root, &tip, base)? {
        return Err(format!("its branch {branch} has commits {base} lacks"));
    }
    worktree::delete_branch(root, branch, &tip)?;
    Ok(true)
}

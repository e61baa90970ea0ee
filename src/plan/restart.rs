//! `clowder plan run FILE --restart`: the plan starts over from its file, changed
//! or not. What was merged into base stays merged (its branch kept); every other
//! step that had started gives up its lane, its branch kept under another name
//! (as `plan retry` does), and starts again.

use std::path::Path;

use super::state::{PlanState, StepStatus};
use super::subplan;

/// `fresh`, a state made from the plan file now, with `saved`'s merged steps
/// carried over; saved under the plan's driver lock.
pub fn start_over(root: &Path, saved: &PlanState, fresh: PlanState) -> Result<PlanState, String> {
    let name = saved.name.clone();
    let Some(_lock) = super::control::lock(&super::home::Home::of(root, saved))? else {
        return Err(format!(
            "cannot restart plan {name}: it is running here (`clowder plan stop {name}` first)"
        ));
    };
    let mut state = fresh;
    for old in &saved.steps {
        let merged = old.status == StepStatus::Merged;
        match state.step_mut(&old.id) {
            Some(step) if merged => {
                step.status = StepStatus::Merged;
                step.branch = old.branch.clone();
                step.worktree = old.worktree.clone();
                step.attempts = old.attempts;
                step.started_at = old.started_at;
                step.ended_at = old.ended_at;
                step.tip = old.tip.clone();
                println!("clowder: step {}: merged, stays merged", old.id);
                continue;
            }
            _ if merged => continue,
            _ => {}
        }
        if old.status == StepStatus::Pending {
            continue;
        }
        for line in super::retry::fresh_start(root, &saved.sub_file(&old.id), old)? {
            println!("clowder: {line}");
        }
        if subplan::is_subplan(old) {
            set_aside(root, &saved.sub_file(&old.id), old)?;
        }
    }
    state.save(root)?;
    println!("clowder: plan {name} starts over");
    Ok(state)
}

/// A sub-plan step's old sub-plan: its state is kept as `STEP.json.before-restart`
/// and a new one is made from its file when the step starts again.
fn set_aside(root: &Path, rel: &str, step: &super::state::StepState) -> Result<(), String> {
    let path = subplan::locate(root, rel, step)?;
    if !path.is_file() {
        return Ok(());
    }
    let mut kept = path.clone().into_os_string();
    kept.push(".before-restart");
    std::fs::rename(&path, &kept)
        .map_err(|err| format!("cannot move {} aside: {err}", path.display()))?;
    println!(
        "clowder: step {}: its sub-plan starts over (its last state is kept as {})",
        step.id,
        Path::new(&kept).display()
    );
    Ok(())
}

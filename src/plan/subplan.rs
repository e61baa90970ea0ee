//! A step that is itself a plan (`plan = "sub.toml"`). The step gets its own
//! branch, made as a parallel step's is (from its dependency's tip, or base), and
//! that branch is the sub-plan's base: the sub-plan runs under the step's lane
//! name (`PARENT-STEP`, its state in `.clowder/plans/PARENT/sub/STEP.json`), with its
//! own lanes, merge queue and `verify`. The step is done when the sub-plan
//! completes (its branch then goes through the parent's merge queue) and failed,
//! without a retry, when the sub-plan fails: its own steps had theirs.

use std::path::{Path, PathBuf};

use super::checks::{self, Checks};
use super::control;
use super::file::{self, Work};
use super::home::Home;
use super::merge::{self, MergeJob, MergeOf};
use super::scheduler::{MergeOutcome, Outcome, Workspace};
use super::state::{PLANS_DIR, PlanState, PlanStatus, StepState, StepStatus};
use crate::fleet::worktree;

pub fn is_subplan(step: &StepState) -> bool {
    matches!(step.work, Work::Plan(_))
}

/// The sub-plan's state: the saved one when an earlier run made it (a restart
/// resumes it), else a new one, from the plan file, on a branch made now.
/// `rel` is where its state is kept (see [`PlanState::sub_file`]).
pub fn prepare(
    root: &Path,
    rel: &str,
    step: &StepState,
    workspace: &Workspace,
) -> Result<PlanState, String> {
    let Work::Plan(file) = &step.work else {
        return Err(format!("step {} is not a sub-plan", step.id));
    };
    let path = locate(root, rel, step)?;
    if path.exists() {
        let state = PlanState::load(&path)?;
        unchanged(file, &state)?;
        return Ok(state);
    }
    let Workspace::New {
        branch,
        from,
        merge_in,
        ..
    } = workspace
    else {
        return Err(format!(
            "step {}: a sub-plan gets a branch of its own; it cannot be sequential",
            step.id
        ));
    };
    let mut plan = load(file)?;
    let home = Home::at(root, rel, &step.lane);
    make_branch(root, &home, branch, from, merge_in)?;
    // Its own `base` gives way: the step's branch is what it builds on.
    plan.name = step.lane.clone();
    plan.base = Some(branch.clone());
    let mut state = PlanState::new(&plan, branch);
    state.file = Some(rel.to_string());
    super::status::refuse_taken_lanes(root, &state)?;
    state.save(root)?;
    Ok(state)
}

fn load(file: &Path) -> Result<file::Plan, String> {
    file::load(file).map_err(|errors| {
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("the sub-plan is refused: {}", said.join("; "))
    })
}

/// A sub-plan file changed since its saved state was made is refused, as
/// `plan run` refuses a changed plan file: the step fails, naming the changes.
fn unchanged(file: &Path, saved: &PlanState) -> Result<(), String> {
    if settled(saved) {
        return Ok(());
    }
    let plan = load(file)?;
    let fresh = PlanState::new(&plan, &saved.base);
    let changes = super::fingerprint::differences(saved, &fresh);
    if changes.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the sub-plan file {} changed since its state was made ({}); `clowder plan run --restart` on its plan starts it over",
        file.display(),
        changes.join("; ")
    ))
}

/// The step's branch from `from`, with the other dependencies' branches merged
/// in (in a scratch worktree, as the merge queue does). Made again after a kill,
/// it finds the branch and the merges already there.
fn make_branch(
    root: &Path,
    home: &Home,
    branch: &str,
    from: &str,
    merge_in: &[String],
) -> Result<(), String> {
    if worktree::commit_of(root, &format!("refs/heads/{branch}"))?.is_none() {
        worktree::git(root, &["branch", "--end-of-options", branch, from])
            .map_err(|err| format!("cannot make branch {branch} from {from}: {err}"))?;
    }
    // No `verify` runs here: the checks are never used.
    let checks = Checks::new(home, checks::DEFAULT_GRACE);
    for dependency in merge_in {
        let job = MergeJob {
            root,
            of: MergeOf::Step {
                home,
                step: dependency,
            },
            base: branch,
            rev: dependency,
            verify: "",
            verify_timeout: file::DEFAULT_CHECK_TIMEOUT,
            checks: &checks,
        };
        let outcome = merge::merge(&job);
        if outcome != MergeOutcome::Passed {
            let why = merge::describe(&outcome, branch);
            return Err(format!("cannot merge dependency {dependency}: {why}"));
        }
    }
    Ok(())
}

/// How the step went, once its sub-plan is over; `None` while it goes on.
pub fn outcome(root: &Path, rel: &str, step: &StepState) -> Option<Outcome> {
    let state = match locate(root, rel, step).and_then(|path| PlanState::load(&path)) {
        Ok(state) => state,
        Err(reason) => return Some(failed(reason)),
    };
    match state.status {
        PlanStatus::Completed => Some(Outcome::Done),
        PlanStatus::Failed => {
            let failed_steps: Vec<&str> = state
                .steps
                .iter()
                .filter(|s| matches!(s.status, StepStatus::Failed | StepStatus::Blocked))
                .map(|s| s.id.as_str())
                .collect();
            Some(failed(format!(
                "the sub-plan {} failed (steps not done: {}; see `clowder plan status {}`)",
                state.name,
                failed_steps.join(", "),
                state.name
            )))
        }
        PlanStatus::Created | PlanStatus::Running | PlanStatus::Paused => None,
    }
}

/// The sub-plan's state file, `rel` under the plans' folder. One that an older
/// clowder kept at `.clowder/plans/PARENT-STEP.json`, where a plan of that name
/// would keep its own, is moved here first; a plan run by itself (on another
/// base than the step's branch) is left where it is. So are its folder and
/// event log (see [`move_old_home`]).
pub fn locate(root: &Path, rel: &str, step: &StepState) -> Result<PathBuf, String> {
    let path = root.join(PLANS_DIR).join(rel);
    let old = PlanState::path(root, &step.lane);
    if path.exists() || !old.is_file() {
        if path.exists() && !old.exists() {
            move_old_home(root, rel, &step.lane)?;
        }
        return Ok(path);
    }
    let mut state = PlanState::load(&old)?;
    if state.name != step.lane || Some(&state.base) != step.branch.as_ref() {
        return Ok(path);
    }
    state.file = Some(rel.to_string());
    state.save(root)?;
    std::fs::remove_file(&old).map_err(|err| format!("cannot remove {}: {err}", old.display()))?;
    move_old_home(root, rel, &step.lane)?;
    Ok(path)
}

/// An older clowder kept a sub-plan's folder and event log where a plan named
/// `PARENT-STEP` keeps its own: `.clowder/plans/PARENT-STEP/` and
/// `PARENT-STEP-events.jsonl`. While no plan of that name has a state there and
/// the sub-plan was never run from its own folder (no driver lock there yet),
/// they are the sub-plan's, and move into its folder; nothing already at the
/// new place is overwritten, nothing is deleted.
fn move_old_home(root: &Path, rel: &str, name: &str) -> Result<(), String> {
    let old = Home::at(root, &format!("{name}.json"), name);
    let new = Home::at(root, rel, name);
    if new.dir().join(control::LOCK_FILE).exists() {
        return Ok(());
    }
    let mut moved = move_if_free(old.events(), new.events())?;
    if let Ok(entries) = std::fs::read_dir(old.dir()) {
        for entry in entries.filter_map(Result::ok) {
            moved |= move_if_free(&entry.path(), &new.dir().join(entry.file_name()))?;
        }
    }
    if moved {
        // A merge scratch worktree moved with the folder is known to git no more.
        let _ = worktree::prune(root);
    }
    Ok(())
}

fn move_if_free(from: &Path, to: &Path) -> Result<bool, String> {
    if !from.exists() || to.exists() {
        return Ok(false);
    }
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    }
    std::fs::rename(from, to)
        .map_err(|err| format!("cannot move {} to {}: {err}", from.display(), to.display()))?;
    Ok(true)
}

/// Whether the saved sub-plan has nothing more to run.
pub fn settled(state: &PlanState) -> bool {
    matches!(state.status, PlanStatus::Completed | PlanStatus::Failed)
}

fn failed(reason: String) -> Outcome {
    Outcome::Failed {
        reason,
        last_result: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::file;

    fn plan(name: &str, base: Option<&str>) -> file::Plan {
        let text = format!(
            "[plan]\nname = \"{name}\"\n\n[[step]]\nid = \"x\"\nprompt = \"do x\"\n\n[[step]]\nid = \"sub\"\nplan = \"sub.toml\"\n"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.toml");
        std::fs::write(&path, text).expect("write");
        std::fs::write(
            dir.path().join("sub.toml"),
            "[plan]\nname = \"in\"\n\n[[step]]\nid = \"y\"\nprompt = \"do y\"\n",
        )
        .expect("write");
        let mut plan = file::load(&path).expect("plan loads");
        plan.base = base.map(str::to_string);
        plan
    }

    #[test]
    fn a_subplan_state_at_the_old_path_moves_into_its_parents_folder() {
        let root = tempfile::tempdir().expect("tempdir");
        let parent = PlanState::new(&plan("par", Some("main")), "main");
        let mut step = parent.step("sub").expect("sub").clone();
        step.branch = Some("clowder/par-sub".into());
        let rel = parent.sub_file("sub");
        assert_eq!(rel, "par/sub/sub.json");

        // A plan of that name run by itself stays where it is.
        let alone = PlanState::new(&plan("par-sub", Some("main")), "main");
        alone.save(root.path()).expect("save");
        let path = locate(root.path(), &rel, &step).expect("locate");
        assert_eq!(path, root.path().join(PLANS_DIR).join(&rel));
        assert!(!path.exists());
        assert!(PlanState::path(root.path(), "par-sub").is_file());

        // The step's own sub-plan, as an older clowder kept it, moves.
        let old = PlanState::new(&plan("par-sub", None), "clowder/par-sub");
        old.save(root.path()).expect("save");
        let path = locate(root.path(), &rel, &step).expect("locate");
        assert!(!PlanState::path(root.path(), "par-sub").exists());
        let moved = PlanState::load(&path).expect("moved");
        assert_eq!(moved.file.as_deref(), Some(rel.as_str()));
        assert_eq!(moved.file_in(root.path()), path);
        assert_eq!(moved.sub_file("y"), "par/sub/sub/sub/y.json");
    }

    #[test]
    fn a_subplans_old_folder_and_events_move_into_its_own_folder() {
        let root = tempfile::tempdir().expect("tempdir");
        let plans = root.path().join(PLANS_DIR);
        let parent = PlanState::new(&plan("par", Some("main")), "main");
        let mut step = parent.step("sub").expect("sub").clone();
        step.branch = Some("clowder/par-sub".into());
        let rel = parent.sub_file("sub");
        let old = |plans: &Path| {
            std::fs::create_dir_all(plans.join("par-sub/prompts")).expect("mkdir");
            std::fs::write(plans.join("par-sub/prompts/y.md"), "do y").expect("write");
            std::fs::write(plans.join("par-sub-events.jsonl"), "{}\n").expect("write");
        };
        let sub = PlanState::new(&plan("par-sub", None), "clowder/par-sub");
        old(&plans);

        // A plan of that name has them: they stay.
        let alone = PlanState::new(&plan("par-sub", Some("main")), "main");
        alone.save(root.path()).expect("save");
        let mut moved = sub.clone();
        moved.file = Some(rel.clone());
        moved.save(root.path()).expect("save");
        locate(root.path(), &rel, &step).expect("locate");
        assert!(plans.join("par-sub/prompts/y.md").is_file());
        assert!(!plans.join("par/sub/sub/prompts").exists());

        // Nobody else's: they move, the state file too.
        std::fs::remove_file(plans.join("par/sub/sub.json")).expect("rm");
        std::fs::remove_file(plans.join("par-sub.json")).expect("rm");
        sub.save(root.path()).expect("save");
        let path = locate(root.path(), &rel, &step).expect("locate");
        assert!(path.is_file());
        let home = Home::at(root.path(), &rel, "par-sub");
        assert_eq!(
            std::fs::read_to_string(home.dir().join("prompts/y.md")).ok(),
            Some("do y".into())
        );
        assert!(home.events().is_file());
        assert!(!plans.join("par-sub-events.jsonl").exists());
        assert!(!plans.join("par-sub/prompts").exists());
    }
}

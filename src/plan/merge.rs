//! The merge queue's git side: a finished step's commit is merged into base in a
//! scratch worktree, `verify` runs there (as a plan's check, see `checks`), and
//! base moves by fast-forward to the tested merge commit only when both pass and
//! `verify` left that commit and its tree as they were. The user's own files are
//! never changed, except by a fast-forward of a clean worktree that has base checked out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::checks::{Check, Checks};
use super::home::Home;
use super::scheduler::MergeOutcome;
use crate::fleet::worktree::{self, git};

/// What a merge is about: the plan, its base branch and the step's commit.
pub struct MergeJob<'a> {
    pub root: &'a Path,
    pub of: MergeOf<'a>,
    pub base: &'a str,
    /// A commit or branch: the step's tip when it was done.
    pub rev: &'a str,
    pub verify: &'a str,
    pub verify_timeout: Duration,
    pub checks: &'a Checks,
}

/// Whose branch is merged: a plan's step, or a lane's (`clowder lane merge`).
#[derive(Debug, Clone, Copy)]
pub enum MergeOf<'a> {
    Step { home: &'a Home, step: &'a str },
    Lane(&'a str),
}

impl MergeOf<'_> {
    /// The scratch worktree merges are made in: `merge` in the plan's folder, or
    /// `.clowder/lane-merge/NAME/merge` for a lane.
    pub fn scratch_dir(&self, root: &Path) -> PathBuf {
        self.files_dir(root).join("merge")
    }

    /// Where the merge's checks keep their logs.
    pub fn files_dir(&self, root: &Path) -> PathBuf {
        match self {
            MergeOf::Step { home, .. } => home.dir().to_path_buf(),
            MergeOf::Lane(lane) => root.join(LANE_MERGE_DIR).join(lane),
        }
    }

    fn message(&self) -> String {
        match self {
            MergeOf::Step { home, step } => format!("Merge step {step} of plan {}", home.name()),
            MergeOf::Lane(lane) => format!("Merge lane {lane}"),
        }
    }

    fn check_label(&self) -> String {
        match self {
            MergeOf::Step { step, .. } => format!("verify-{step}"),
            MergeOf::Lane(lane) => format!("verify-lane-{lane}"),
        }
    }

    /// The command that merges again.
    pub fn again(&self) -> String {
        match self {
            MergeOf::Step { home, step } => {
                format!("clowder plan merge {} {step}", home.name())
            }
            MergeOf::Lane(lane) => format!("clowder lane merge {lane}"),
        }
    }
}

pub use crate::store::paths::LANE_MERGE_DIR;

/// One merge at a time in this process: the queue's and those asked by hand
/// share the scratch worktree.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Merges, checks and moves base; every failure is an outcome, base untouched.
pub fn merge(job: &MergeJob) -> MergeOutcome {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let base_ref = format!("refs/heads/{}", job.base);
    let old = match worktree::commit_of(job.root, &base_ref) {
        Ok(Some(old)) => old,
        Ok(None) => return refused(format!("base branch {} does not exist", job.base)),
        Err(err) => return refused(err),
    };
    let scratch = job.of.scratch_dir(job.root);
    if let Err(err) = fresh_scratch(job.root, &scratch, &old) {
        return refused(err);
    }
    let outcome = merge_in_scratch(job, &scratch, &base_ref, &old);
    remove_scratch(job.root, &scratch);
    outcome
}

fn merge_in_scratch(job: &MergeJob, scratch: &Path, base_ref: &str, old: &str) -> MergeOutcome {
    let message = job.of.message();
    let mut args = identity(job.root);
    let merge = [
        "merge",
        "--no-ff",
        "--no-edit",
        "-m",
        &message,
        "--end-of-options",
        job.rev,
    ];
    args.extend(merge.map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if let Err(err) = git(scratch, &args) {
        let files = git(scratch, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
        let _ = git(scratch, &["merge", "--abort"]);
        let files: Vec<String> = files.lines().map(str::to_string).collect();
        return MergeOutcome::Conflict {
            files: if files.is_empty() { vec![err] } else { files },
        };
    }
    // What is checked is what base moves to: the merge commit made here.
    let merged = match git(scratch, &["rev-parse", "HEAD"]) {
        Ok(merged) => merged,
        Err(err) => return refused(err),
    };
    if !job.verify.trim().is_empty() {
        let label = job.of.check_label();
        let check = Check {
            key: "verify",
            command: job.verify,
            dir: scratch,
            timeout: job.verify_timeout,
            label: &label,
        };
        let ran = match job.checks.run(&check) {
            Ok(ran) => ran,
            Err(err) => return refused(err),
        };
        if let Some(why) = ran.why_not(&check) {
            return MergeOutcome::CheckFailed { tail: why };
        }
        match changed_by(scratch, &merged) {
            Ok(None) => {}
            Ok(Some(changed)) => {
                let tail = format!(
                    "verify `{}` passed but changed the merge it checked, so base does not move to it: {changed}",
                    job.verify
                );
                return MergeOutcome::CheckFailed { tail };
            }
            Err(err) => return refused(err),
        }
    }
    match move_base(job, base_ref, old, &merged) {
        Ok(()) => MergeOutcome::Passed,
        Err(reason) => refused(reason),
    }
}

/// What a check did to the scratch worktree at `merged`: commits made, files
/// changed or added; `None` when it left both as they were.
fn changed_by(scratch: &Path, merged: &str) -> Result<Option<String>, String> {
    let head = git(scratch, &["rev-parse", "HEAD"])?;
    let status = git(scratch, &["status", "--porcelain"])?;
    let mut changed = Vec::new();
    if head != merged {
        let range = format!("{merged}..{head}");
        let commits = git(scratch, &["log", "--format=%h %s", &range]).unwrap_or_default();
        let commits: Vec<&str> = commits.lines().collect();
        changed.push(format!(
            "HEAD moved from the merge commit {} to {} (its commits: {})",
            short(merged),
            short(&head),
            if commits.is_empty() {
                "none, it was moved back".to_string()
            } else {
                commits.join("; ")
            }
        ));
    }
    if !status.is_empty() {
        changed.push(format!("it left changes in the tree:\n{status}"));
    }
    Ok((!changed.is_empty()).then(|| changed.join("; ")))
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// A merge that did not pass, said for a person.
pub fn describe(outcome: &MergeOutcome, base: &str) -> String {
    match outcome {
        MergeOutcome::Passed => format!("merged into {base}"),
        MergeOutcome::Conflict { files } => format!(
            "conflicts with {base} in: {}; {base} is untouched",
            files.join(", ")
        ),
        MergeOutcome::CheckFailed { tail } => {
            format!("the verify check failed on the merged result; {base} is untouched:\n{tail}")
        }
        MergeOutcome::Refused { reason } => format!("{base} was not moved: {reason}"),
    }
}

fn refused(reason: String) -> MergeOutcome {
    MergeOutcome::Refused { reason }
}

/// A name and address for the merge commit when the repository has none set,
/// so that a merge never fails on a missing identity.
fn identity(root: &Path) -> Vec<String> {
    let has = |key: &str| git(root, &["config", "--get", key]).is_ok_and(|v| !v.is_empty());
    let mut args = Vec::new();
    if !has("user.name") {
        args.extend(["-c".to_string(), "user.name=clowder".to_string()]);
    }
    if !has("user.email") {
        args.extend(["-c".to_string(), "user.email=clowder@localhost".to_string()]);
    }
    args
}

/// A detached worktree at `commit`; one left by an earlier, killed run is removed
/// first (it is clowder's own scratch, never the user's).
fn fresh_scratch(root: &Path, scratch: &Path, commit: &str) -> Result<(), String> {
    remove_scratch(root, scratch);
    if let Some(parent) = scratch.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    }
    let path = scratch.to_string_lossy();
    git(
        root,
        &[
            "worktree",
            "add",
            "--quiet",
            "--detach",
            "--end-of-options",
            &path,
            commit,
        ],
    )
    .map(drop)
}

pub(super) fn remove_scratch(root: &Path, scratch: &Path) {
    if scratch.exists() {
        let _ = git(
            root,
            &["worktree", "remove", "--force", &scratch.to_string_lossy()],
        );
        let _ = std::fs::remove_dir_all(scratch);
    }
    let _ = worktree::prune(root);
}

/// Moves base from `old` to `new` only if it is still at `old`. Where base is
/// checked out, that worktree is fast-forwarded as `git merge --ff-only` does, and
/// only when it has no uncommitted change to a tracked file.
fn move_base(job: &MergeJob, base_ref: &str, old: &str, new: &str) -> Result<(), String> {
    let Some(checkout) = checked_out_in(job.root, base_ref)? else {
        let message = format!("clowder: {}", job.of.message());
        return git(
            job.root,
            &["update-ref", "-m", &message, base_ref, new, old],
        )
        .map(drop)
        .map_err(|err| format!("{} moved meanwhile: {err}", job.base));
    };
    let changes = git(
        &checkout,
        &["status", "--porcelain", "--untracked-files=no"],
    )?;
    if !changes.is_empty() {
        return Err(format!(
            "{} is checked out in {} with uncommitted changes, which clowder does not touch; commit or stash them, then run `{}`",
            job.base,
            checkout.display(),
            job.of.again()
        ));
    }
    if worktree::commit_of(job.root, base_ref)?.as_deref() != Some(old) {
        return Err(format!("{} moved meanwhile", job.base));
    }
    let args = ["merge", "--ff-only", "--quiet", "--end-of-options", new];
    git(&checkout, &args).map(drop)
}

/// `git worktree list --porcelain`. A lane being added at the same moment has
/// its `.git/worktrees/NAME/` written file by file, and git fails to list it
/// half-made ("failed to read …/commondir"): such a failure is tried again.
fn worktree_list(root: &Path) -> Result<String, String> {
    let mut tries = 0;
    loop {
        match git(root, &["worktree", "list", "--porcelain"]) {
            Err(err) if tries < 10 && err.contains("failed to read") => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

/// The worktree that has `branch_ref` checked out, if one does.
fn checked_out_in(root: &Path, branch_ref: &str) -> Result<Option<PathBuf>, String> {
    let list = worktree_list(root)?;
    let mut current: Option<&str> = None;
    for line in list.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            current = Some(path);
        } else if line.strip_prefix("branch ") == Some(branch_ref)
            && let Some(path) = current
        {
            return Ok(Some(PathBuf::from(path)));
        }
    }
    Ok(None)
}

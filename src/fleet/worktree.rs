//! The git side of lanes: worktrees, branches and what a branch holds that its
//! base lacks. Runs the `git` program, so the user's git and its settings decide;
//! every error says which git command failed and what git said.

use std::cell::Cell;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

thread_local! {
    /// The lock the git commands run on this thread inherit (see [`LockForGit`]).
    static LOCK_FOR_GIT: Cell<Option<RawFd>> = const { Cell::new(None) };
}

/// While it lives, the git commands this thread runs inherit the flock `fd`
/// (the registry's): a git that outlives a killed `lane add` or `lane rm` holds
/// the lock until it is done, so the next command never works beside it.
pub struct LockForGit(());

impl LockForGit {
    pub fn lend(fd: RawFd) -> LockForGit {
        LOCK_FOR_GIT.with(|lock| lock.set(Some(fd)));
        LockForGit(())
    }
}

impl Drop for LockForGit {
    fn drop(&mut self) {
        LOCK_FOR_GIT.with(|lock| lock.set(None));
    }
}

/// Runs `git -C dir ARGS` and returns its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    answer(dir, args)?.ok_or_else(|| failed(dir, args, "it answered no"))
}

/// Runs `git -C dir ARGS`: Some(stdout) when it succeeds, None when it answers
/// "no" (exit 1: no such ref, not a symbolic ref), an error when git fails.
fn answer(dir: &Path, args: &[&str]) -> Result<Option<String>, String> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).args(args).stdin(Stdio::null());
    if let Some(fd) = LOCK_FOR_GIT.with(Cell::get) {
        // SAFETY: between fork and exec the child only calls fcntl(2), which is
        // async-signal-safe, on a descriptor number; no memory is shared.
        unsafe {
            command.pre_exec(move || {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                }
                Ok(())
            });
        }
    }
    let output = command
        .output()
        .map_err(|err| format!("cannot run git: {err}"))?;
    if output.status.success() {
        let stdout = String::from_utf8_lossy(&output.stdout);
        return Ok(Some(stdout.trim_end().to_string()));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(1) && stderr.trim().is_empty() {
        return Ok(None);
    }
    Err(failed(dir, args, stderr.trim()))
}

fn failed(dir: &Path, args: &[&str], said: &str) -> String {
    format!(
        "`git {}` in {} failed: {said}",
        args.join(" "),
        dir.display()
    )
}

/// The top folder of the repository `dir` is in, or why there is none.
pub fn toplevel(dir: &Path) -> Result<PathBuf, String> {
    git(dir, &["rev-parse", "--show-toplevel"]).map(PathBuf::from)
}

/// `value` (a revision, a branch, a range taken from the user or a file) as git
/// may be given it: never one that git would read as an option.
pub fn revision(value: &str) -> Result<&str, String> {
    if value.starts_with('-') || value.is_empty() {
        return Err(format!(
            "{value:?} is not a revision: expected a branch, tag or commit, not something that starts with '-'"
        ));
    }
    Ok(value)
}

/// The commit `rev` names, if it names one.
pub fn commit_of(dir: &Path, rev: &str) -> Result<Option<String>, String> {
    let spec = format!("{}^{{commit}}", revision(rev)?);
    answer(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )
}

/// The full ref name `rev` stands for (`refs/heads/main` for `main` or for HEAD on
/// main), or None when it is a commit, a detached HEAD or an expression.
pub fn full_ref_name(dir: &Path, rev: &str) -> Result<Option<String>, String> {
    let args = [
        "rev-parse",
        "--verify",
        "--quiet",
        "--symbolic-full-name",
        "--end-of-options",
        revision(rev)?,
    ];
    let name = answer(dir, &args)?;
    Ok(name.filter(|name| name.starts_with("refs/")))
}

pub fn branch_exists(dir: &Path, branch: &str) -> Result<bool, String> {
    let name = format!("refs/heads/{branch}");
    let args = ["show-ref", "--verify", "--quiet", "--end-of-options", &name];
    Ok(answer(dir, &args)?.is_some())
}

/// `git worktree add -b BRANCH PATH COMMIT`.
pub fn add(repo: &Path, path: &Path, branch: &str, commit: &str) -> Result<(), String> {
    let path = path.to_string_lossy();
    let args = [
        "worktree",
        "add",
        "--quiet",
        "-b",
        branch,
        "--end-of-options",
        &path,
        revision(commit)?,
    ];
    git(repo, &args).map(drop)
}

/// What `git status` lists in a worktree: changes and untracked files that are
/// not ignored, one per line; empty when clean.
pub fn uncommitted(worktree: &Path) -> Result<Vec<String>, String> {
    let text = git(
        worktree,
        &["status", "--porcelain", "--untracked-files=all"],
    )?;
    Ok(text.lines().map(str::to_string).collect())
}

/// The branch checked out in `worktree` (`refs/heads/…`), None when detached.
pub fn checked_out(worktree: &Path) -> Result<Option<String>, String> {
    answer(worktree, &["symbolic-ref", "--quiet", "HEAD"])
}

/// How many commits `branch` has that `base` lacks.
pub fn commits_ahead(repo: &Path, base: &str, branch: &str) -> Result<u64, String> {
    let range = format!("{}..{}", revision(base)?, revision(branch)?);
    let count = git(
        repo,
        &["rev-list", "--count", "--end-of-options", &range, "--"],
    )?;
    count
        .parse()
        .map_err(|_| format!("`git rev-list --count {range}` printed {count:?}, not a number"))
}

/// `git worktree remove PATH`: git itself refuses a worktree with changes.
pub fn remove(repo: &Path, path: &Path) -> Result<(), String> {
    let path = path.to_string_lossy();
    git(repo, &["worktree", "remove", "--end-of-options", &path]).map(drop)
}

/// Forgets worktrees whose folder is already gone (git's own bookkeeping only).
pub fn prune(repo: &Path) -> Result<(), String> {
    git(repo, &["worktree", "prune"]).map(drop)
}

/// Deletes `refs/heads/BRANCH`, but only while it still points at `tip`.
pub fn delete_branch(repo: &Path, branch: &str, tip: &str) -> Result<(), String> {
    let name = format!("refs/heads/{branch}");
    let args = [
        "update-ref",
        "-d",
        "--end-of-options",
        &name,
        revision(tip)?,
    ];
    git(repo, &args).map(drop)
}

/// Saves a worktree's uncommitted changes, untracked files included, as a stash
/// entry and returns its commit.
pub fn stash(worktree: &Path, message: &str) -> Result<String, String> {
    git(
        worktree,
        &["stash", "push", "--include-untracked", "--message", message],
    )?;
    git(worktree, &["rev-parse", "--verify", "refs/stash"])
}

/// The untracked files git ignores in `worktree` (a folder once, as `dir/`),
/// relative to it: `git worktree remove` deletes them, no stash keeps them.
pub fn ignored(worktree: &Path) -> Result<Vec<String>, String> {
    let text = git(
        worktree,
        &[
            "ls-files",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
            "-z",
        ],
    )?;
    Ok(text
        .split('\0')
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect())
}

/// How many commits of `tip` are in no branch but `branch`, in no
/// remote-tracking branch, and not in `base`: what deleting `branch` would
/// lose (a pushed commit is kept by the remote).
pub fn commits_only_in(repo: &Path, tip: &str, branch: &str, base: &str) -> Result<u64, String> {
    let exclude = format!("--exclude={branch}");
    let args = [
        "rev-list",
        "--count",
        tip,
        "--not",
        base,
        &exclude,
        "--branches",
        "--remotes",
        "--",
    ];
    let count = git(repo, &args)?;
    count
        .parse()
        .map_err(|_| format!("`git {}` printed {count:?}, not a number", args.join(" ")))
}

/// `git worktree remove -f -f PATH`: for the worktree of a `lane add` that was
/// interrupted (locked while git made it, perhaps half checked out), where
/// nothing ever ran.
pub fn remove_unfinished(repo: &Path, path: &Path) -> Result<(), String> {
    git(
        repo,
        &["worktree", "remove", "-f", "-f", &path.to_string_lossy()],
    )
    .map(drop)
}

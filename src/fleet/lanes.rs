//! What the lane commands do, on files and git alone (no running fleet needed):
//! add a lane, list the lanes, record stop / pause / resume, remove a lane
//! without losing work, and find orphaned worktrees.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::registry::{self, Lane, LaneKind, LaneState, Registry};
use super::{LaneName, lane_files_dir, worktree, worktree_path, worktrees_dir};
use crate::store::lock::STATE_DIR;
use crate::supervisor::runtime::QUEUED_MARK;

/// Why a lane command did nothing (or stopped short).
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Bad input: a name, a lane or branch that exists, a missing file (exit 2).
    Usage(String),
    /// Refused to protect work (exit 1).
    Refused(String),
    /// Something failed: git, the file system (exit 1).
    Failed(String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Failure::Usage(text) | Failure::Refused(text) | Failure::Failed(text) => text,
        }
    }
}

impl From<String> for Failure {
    fn from(text: String) -> Self {
        Failure::Failed(text)
    }
}

/// What `clowder lane add` was given.
#[derive(Debug, Clone, Default)]
pub struct AddOptions {
    pub prompt_file: Option<PathBuf>,
    pub base: Option<String>,
    pub max_iterations: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub dir: Option<PathBuf>,
}

/// Registers lane `name` in the fleet of `root`, with its worktree and branch
/// (or its existing folder with `--dir`), and creates its files folder.
pub fn add(root: &Path, name: &LaneName, options: AddOptions) -> Result<Lane, Failure> {
    if let Some(prompt) = &options.prompt_file
        && !root.join(prompt).is_file()
    {
        return Err(Failure::Usage(format!(
            "--prompt {}: no such file (relative to {})",
            prompt.display(),
            root.display()
        )));
    }
    registry::update(root, |registry| {
        if registry.lane(name).is_some() {
            return Err(Failure::Usage(format!(
                "lane {name} already exists (see `clowder lanes`)"
            )));
        }
        ignore_state_dir(root)?;
        if let Some(dir) = &options.dir {
            check_dir_lane(root, registry, dir)?;
        }
        // Before the worktree, so that nothing fails between it and the registry.
        let files = lane_files_dir(root, name);
        std::fs::create_dir_all(&files)
            .map_err(|err| format!("cannot create {}: {err}", files.display()))?;
        let (kind, dir, branch, base, base_commit) = match &options.dir {
            Some(dir) => (LaneKind::Dir, dir.clone(), None, None, None),
            None => {
                let (base, commit) = add_worktree(root, name, options.base.as_deref())
                    .inspect_err(|_| {
                        // Only if empty: an earlier lane's files are never removed.
                        let _ = std::fs::remove_dir(&files);
                    })?;
                let dir = worktree_path(Path::new(""), name);
                let branch = Some(name.branch());
                (LaneKind::Worktree, dir, branch, Some(base), Some(commit))
            }
        };
        let lane = Lane {
            name: name.clone(),
            kind,
            dir,
            branch,
            base,
            base_commit,
            prompt_file: options.prompt_file,
            max_iterations: options.max_iterations,
            max_cost_usd: options.max_cost_usd,
            state: LaneState::Active,
            created: Utc::now(),
            resumes: 0,
        };
        registry.lanes.push(lane.clone());
        Ok(lane)
    })
}

/// `.clowder/.gitignore` holding `*`, so that nothing of clowder's (worktrees
/// included) shows up in git. One the user wrote is left as it is.
pub(super) fn ignore_state_dir(root: &Path) -> Result<(), Failure> {
    let path = registry::ensure_state_dir(root)?.join(".gitignore");
    if path.exists() {
        return Ok(());
    }
    crate::store::write_atomically(&path, b"*\n")
        .map_err(|err| Failure::Failed(format!("cannot write {}: {err}", path.display())))
}

fn check_dir_lane(root: &Path, registry: &Registry, dir: &Path) -> Result<(), Failure> {
    let full = root.join(dir);
    if !full.is_dir() {
        return Err(Failure::Usage(format!(
            "--dir {}: no such folder",
            dir.display()
        )));
    }
    let canonical = full.canonicalize().ok();
    if let Some(other) = registry
        .lanes
        .iter()
        .find(|lane| root.join(&lane.dir).canonicalize().ok() == canonical)
    {
        return Err(Failure::Usage(format!(
            "--dir {}: lane {} already works in that folder",
            dir.display(),
            other.name
        )));
    }
    Ok(())
}

/// Creates the worktree on a new branch `clowder/NAME`; returns the base (a full
/// ref name, or the commit) and the commit the branch starts at.
fn add_worktree(
    root: &Path,
    name: &LaneName,
    base: Option<&str>,
) -> Result<(String, String), Failure> {
    let top = worktree::toplevel(root).map_err(|err| {
        Failure::Usage(format!(
            "a lane with its own worktree needs a git repository ({err}); use --dir PATH for work outside git"
        ))
    })?;
    if top.canonicalize().ok() != root.canonicalize().ok() {
        return Err(Failure::Usage(format!(
            "run clowder in the repository's top folder ({}), where its harness.toml is",
            top.display()
        )));
    }
    let rev = base.unwrap_or("HEAD");
    let Some(commit) = worktree::commit_of(root, rev)? else {
        return Err(Failure::Usage(match base {
            Some(rev) => format!("--base {rev}: no such commit"),
            None => "the repository has no commit yet: commit something first".to_string(),
        }));
    };
    let base = worktree::full_ref_name(root, rev)?.unwrap_or_else(|| commit.clone());
    let branch = name.branch();
    if worktree::branch_exists(root, &branch)? {
        return Err(Failure::Usage(format!(
            "branch {branch} already exists: pick another lane name, or delete the branch"
        )));
    }
    let path = worktree_path(root, name);
    if path.exists() {
        return Err(Failure::Usage(format!(
            "{} already exists but is no registered lane (see the orphans in `clowder lanes`)",
            path.display()
        )));
    }
    let parent = worktrees_dir(root);
    std::fs::create_dir_all(&parent)
        .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    worktree::add(root, &path, &branch, &commit)?;
    Ok((base, commit))
}

/// `refs/heads/main` reads `main`.
pub fn short_ref(name: &str) -> &str {
    ["refs/heads/", "refs/remotes/", "refs/tags/"]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))
        .unwrap_or(name)
}

/// Whether a clowder holds the lock of the folder `root` (a fleet, or a single
/// loop), and its PID if known.
pub fn fleet_running(root: &Path) -> Option<Option<u32>> {
    match crate::store::lock::InstanceLock::acquire(root) {
        Ok(_) => None,
        Err(crate::store::lock::LockError::Held { pid, .. }) => Some(pid),
        // Cannot tell: leave the request too; a file nobody takes does no harm.
        Err(crate::store::lock::LockError::Io { .. }) => Some(None),
    }
}

/// The request files a running fleet takes from a lane's files folder, as the
/// single loop takes `.clowder/pause` and `.clowder/resume`.
pub const STOP_FILE: &str = "STOP";
pub const STOP_NOW_REQUEST: &str = "stop-now";
/// Left by the fleet when a lane's loop ended on its own (not by a signal or a
/// kill): such a lane is not started again until it is resumed.
pub const FINISHED_MARK: &str = "finished";

/// Records `state` for lane `name` (a stopped lane is not started again, a paused
/// one runs no session, until resumed) and, when a clowder runs in `root`, leaves
/// the matching request in the lane's folder. Returns what was done.
pub fn set_state(
    root: &Path,
    name: &LaneName,
    state: LaneState,
    now: bool,
) -> Result<Vec<String>, Failure> {
    let previous = registry::update(root, |registry| {
        let lane = registry.lane_mut(name).ok_or_else(|| no_lane(name))?;
        if state == LaneState::Active {
            lane.resumes += 1;
        }
        Ok::<_, Failure>(std::mem::replace(&mut lane.state, state))
    })?;
    let mut done = vec![format!(
        "lane {name}: {} (was {}) in {}",
        state.as_str(),
        previous.as_str(),
        registry::path(Path::new("")).display()
    )];
    let files = lane_files_dir(root, name);
    let running = fleet_running(root);
    let mut leave = |file: &str| -> Result<(), Failure> {
        let path = files.join(file);
        std::fs::create_dir_all(&files)
            .and_then(|()| std::fs::write(&path, b""))
            .map_err(|err| Failure::Failed(format!("cannot write {}: {err}", path.display())))?;
        done.push(format!("left {} for the running clowder", path.display()));
        Ok(())
    };
    use crate::store::control::{PAUSE_REQUEST, RESUME_REQUEST};
    match (state, running.is_some()) {
        (LaneState::Stopped, true) => {
            leave(STOP_FILE)?;
            if now {
                leave(STOP_NOW_REQUEST)?;
            }
        }
        (LaneState::Paused, true) => leave(PAUSE_REQUEST)?,
        (LaneState::Active, true) => leave(RESUME_REQUEST)?,
        (_, false) => done.push("no clowder runs in this folder: recorded only".to_string()),
    }
    if state == LaneState::Active {
        // A STOP left for the lane would end its next run at once.
        // Resumed: a lane that had finished runs again.
        let _ = std::fs::remove_file(files.join(FINISHED_MARK));
        if std::fs::remove_file(files.join(STOP_FILE)).is_ok() {
            done.push(format!("removed {}", files.join(STOP_FILE).display()));
        }
    }
    Ok(done)
}

fn no_lane(name: &LaneName) -> Failure {
    Failure::Usage(format!("no lane named {name} (see `clowder lanes`)"))
}

/// Where a lane's status file is.
pub fn status_path(root: &Path, name: &LaneName) -> PathBuf {
    lane_files_dir(root, name).join("harness.status")
}

/// The lane's loop, when its status file says one is running now.
fn running_pid(root: &Path, name: &LaneName) -> Option<u32> {
    let (snapshot, _) = crate::store::status::read(&status_path(root, name)).ok()?;
    (snapshot.state != crate::protocol::LoopState::Stopped
        && crate::store::status::writer_alive(snapshot.pid))
    .then_some(snapshot.pid)
}

/// Removes lane `name` without losing work; returns what was done.
pub fn remove(root: &Path, name: &LaneName, force: bool) -> Result<Vec<String>, Failure> {
    registry::update(root, |registry| {
        let lane = registry.lane(name).cloned().ok_or_else(|| no_lane(name))?;
        if let Some(pid) = running_pid(root, name) {
            return Err(Failure::Refused(format!(
                "lane {name} is running (PID {pid}): stop it first (`clowder lane stop {name}`)"
            )));
        }
        let mut done = match lane.kind {
            LaneKind::Worktree => remove_worktree_lane(root, &lane, force)?,
            LaneKind::Dir | LaneKind::Task | LaneKind::WatchTask => vec![format!(
                "lane {name} unregistered; its folder {} is left as it is",
                lane.dir.display()
            )],
        };
        done.extend(archive_lane_files(root, name)?);
        registry.lanes.retain(|other| &other.name != name);
        Ok(done)
    })
}

fn remove_worktree_lane(root: &Path, lane: &Lane, force: bool) -> Result<Vec<String>, Failure> {
    let name = &lane.name;
    let branch = lane.branch.clone().unwrap_or_else(|| name.branch());
    let full_branch = format!("refs/heads/{branch}");
    let path = root.join(&lane.dir);
    let tip = worktree::commit_of(root, &full_branch)?;
    let mut done = Vec::new();
    let dirty = if path.exists() {
        check_checked_out(&path, &full_branch)?;
        worktree::uncommitted(&path)?
    } else {
        done.push(format!(
            "its worktree {} was already gone",
            lane.dir.display()
        ));
        Vec::new()
    };
    if !dirty.is_empty() && !force {
        return Err(Failure::Refused(format!(
            "the worktree {} has uncommitted changes; commit or discard them, or use --force (keeps the branch and saves the changes as a git stash):\n{}",
            lane.dir.display(),
            listing(&dirty)
        )));
    }
    if !force && let Some(tip) = &tip {
        check_nothing_ahead(root, lane, &branch, tip)?;
    }
    if !dirty.is_empty() {
        let message = format!("clowder lane rm {name}: uncommitted work in {branch}");
        let stash = worktree::stash(&path, &message)?;
        done.push(format!(
            "saved its uncommitted changes as stash {stash} (`git stash list`)"
        ));
    }
    if path.exists() {
        worktree::remove(root, &path)?;
        done.push(format!("removed worktree {}", lane.dir.display()));
    } else {
        worktree::prune(root)?;
    }
    match (tip, force) {
        (Some(tip), true) => done.push(format!("kept branch {branch} at {tip}")),
        (Some(tip), false) => {
            worktree::delete_branch(root, &branch, &tip)?;
            done.push(format!(
                "deleted branch {branch} (at {tip}; nothing its base lacks)"
            ));
        }
        (None, _) => done.push(format!("branch {branch} was already gone")),
    }
    Ok(done)
}

/// A worktree on another branch, or detached, may hold commits no branch has.
fn check_checked_out(path: &Path, full_branch: &str) -> Result<(), Failure> {
    let head = worktree::checked_out(path)?;
    if head.as_deref() == Some(full_branch) {
        return Ok(());
    }
    let what = head.map_or_else(
        || "a detached HEAD".to_string(),
        |h| short_ref(&h).to_string(),
    );
    Err(Failure::Refused(format!(
        "the worktree {} has {what} checked out, not {}: clowder cannot tell what removing it would lose; check out {} again, or remove it yourself",
        path.display(),
        short_ref(full_branch),
        short_ref(full_branch)
    )))
}

fn check_nothing_ahead(root: &Path, lane: &Lane, branch: &str, tip: &str) -> Result<(), Failure> {
    let base = lane.base.as_deref().unwrap_or_default();
    if worktree::commit_of(root, base)?.is_none() {
        return Err(Failure::Refused(format!(
            "its base {} no longer exists, so clowder cannot tell whether {branch} holds work: use --force to keep the branch",
            short_ref(base)
        )));
    }
    let ahead = worktree::commits_ahead(root, base, tip)?;
    if ahead > 0 {
        return Err(Failure::Refused(format!(
            "{branch} has {ahead} commit{} not in {}: merge {}, or use --force (removes the worktree, keeps the branch)",
            if ahead == 1 { "" } else { "s" },
            short_ref(base),
            if ahead == 1 { "it" } else { "them" }
        )));
    }
    Ok(())
}

fn listing(lines: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text: Vec<String> = lines.iter().take(SHOWN).map(|l| format!("  {l}")).collect();
    if lines.len() > SHOWN {
        text.push(format!("  … and {} more", lines.len() - SHOWN));
    }
    text.join("\n")
}

/// Moves a removed lane's status, events and output files out of the way (never
/// deleted), so that a new lane of the same name starts afresh.
fn archive_lane_files(root: &Path, name: &LaneName) -> Result<Vec<String>, Failure> {
    let files = lane_files_dir(root, name);
    let empty = std::fs::read_dir(&files).map_or(true, |mut entries| entries.next().is_none());
    if empty {
        let _ = std::fs::remove_dir(&files);
        return Ok(Vec::new());
    }
    let removed = root.join(STATE_DIR).join("lanes-removed");
    let target = removed.join(format!(
        "{name}-{}",
        Utc::now().format("%Y%m%dT%H%M%S%.3fZ")
    ));
    std::fs::create_dir_all(&removed)
        .and_then(|()| std::fs::rename(&files, &target))
        .map_err(|err| {
            Failure::Failed(format!(
                "cannot move {} to {}: {err}",
                files.display(),
                target.display()
            ))
        })?;
    Ok(vec![format!("its files are kept in {}", target.display())])
}

/// A worktree clowder knows of only on one side: the registry or the folder.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Orphan {
    pub path: PathBuf,
    pub lane: Option<String>,
    pub problem: String,
}

/// Lanes whose folder is gone, and folders under `.clowder/worktrees` that no
/// lane owns. Only reports: deleting is the user's call.
pub fn orphans(root: &Path, registry: &Registry) -> Vec<Orphan> {
    let mut found: Vec<Orphan> = registry
        .lanes
        .iter()
        .filter(|lane| !root.join(&lane.dir).is_dir())
        .map(|lane| Orphan {
            path: lane.dir.clone(),
            lane: Some(lane.name.to_string()),
            problem: format!("lane {} is registered but its folder is gone", lane.name),
        })
        .collect();
    let registered: Vec<PathBuf> = registry
        .lanes
        .iter()
        .map(|lane| root.join(&lane.dir))
        .collect();
    let Ok(entries) = std::fs::read_dir(worktrees_dir(root)) else {
        return found;
    };
    let mut extra: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| !registered.contains(path))
        .collect();
    extra.sort();
    found.extend(extra.into_iter().map(|path| {
        Orphan {
            path: path
                .strip_prefix(root)
                .map_or(path.clone(), Path::to_path_buf),
            lane: None,
            problem: "present but no registered lane owns it".to_string(),
        }
    }));
    found
}

/// One row of `clowder lanes`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LaneRow {
    pub name: String,
    pub kind: LaneKind,
    pub dir: PathBuf,
    pub branch: Option<String>,
    pub base: Option<String>,
    /// What the registry records: active, paused or stopped.
    pub requested: LaneState,
    /// The loop's state from its status file, or `not started`.
    pub state: String,
    pub running: bool,
    pub iteration: Option<u64>,
    pub max_iterations: Option<u64>,
    pub global_iteration: Option<u64>,
    pub idle_secs: Option<i64>,
    pub cost_usd: Option<f64>,
    pub commits_ahead: Option<u64>,
    pub pending_approvals: u64,
    /// What could not be read (the status file, git), if anything.
    pub problems: Vec<String>,
}

/// The rows of `clowder lanes`, read from the lanes' files, git and the
/// approval queue in `approvals_dir`; the second value counts pending requests
/// that no lane's folder claims.
pub fn rows(
    root: &Path,
    registry: &Registry,
    approvals_dir: &Path,
    now: DateTime<Utc>,
) -> (Vec<LaneRow>, usize) {
    let (pending, unclaimed) = approvals_by_lane(root, registry, approvals_dir);
    let rows = registry
        .lanes
        .iter()
        .zip(pending)
        .map(|(lane, pending)| row(root, lane, pending, now))
        .collect();
    (rows, unclaimed)
}

fn row(root: &Path, lane: &Lane, pending_approvals: u64, now: DateTime<Utc>) -> LaneRow {
    let mut row = LaneRow {
        name: lane.name.to_string(),
        kind: lane.kind,
        dir: lane.dir.clone(),
        branch: lane.branch.clone(),
        base: lane.base.as_deref().map(|b| short_ref(b).to_string()),
        requested: lane.state,
        state: "not started".to_string(),
        running: false,
        iteration: None,
        max_iterations: lane.max_iterations,
        global_iteration: None,
        idle_secs: None,
        cost_usd: None,
        commits_ahead: None,
        pending_approvals,
        problems: Vec::new(),
    };
    let status = status_path(root, &lane.name);
    if status.exists() {
        match crate::store::status::read(&status) {
            Ok((snapshot, _)) => {
                fill_from_status(&mut row, &snapshot, now);
                let queued = lane_files_dir(root, &lane.name).join(QUEUED_MARK);
                if row.running && queued.exists() {
                    row.state = "queued".to_string();
                }
            }
            Err(err) => {
                row.state = "unreadable".to_string();
                row.problems.push(err);
            }
        }
    }
    if let (Some(base), Some(branch)) = (&lane.base, &lane.branch) {
        match worktree::commits_ahead(root, base, &format!("refs/heads/{branch}")) {
            Ok(ahead) => row.commits_ahead = Some(ahead),
            Err(err) => row.problems.push(err),
        }
    }
    row
}

fn fill_from_status(row: &mut LaneRow, snapshot: &crate::protocol::Snapshot, now: DateTime<Utc>) {
    use crate::protocol::LoopState;
    let alive = crate::store::status::writer_alive(snapshot.pid);
    row.running = alive && snapshot.state != LoopState::Stopped;
    row.state = if row.running || snapshot.state == LoopState::Stopped {
        snapshot.state.as_str().to_string()
    } else {
        format!("gone ({})", snapshot.state.as_str())
    };
    if row.running && snapshot.paused {
        row.state.push_str(", paused");
    }
    row.iteration = Some(snapshot.iteration);
    row.max_iterations = Some(snapshot.max_iterations);
    row.global_iteration = snapshot.global_iteration;
    row.cost_usd = Some(snapshot.totals.cost_usd);
    if row.running && snapshot.state == LoopState::SessionRunning {
        // The watchdog's clock stands still while the session is paused.
        let end = snapshot.paused_at.unwrap_or(now);
        let since = snapshot.last_output_growth.or(snapshot.session_start);
        row.idle_secs = since.map(|at| (end - at).num_seconds().max(0));
    }
}

/// Pending approval requests per lane (in registry order), each claimed by the
/// lane the fleet's records say it comes from (see [`super::request_lane`]).
/// Also returns how many no lane claims.
fn approvals_by_lane(root: &Path, registry: &Registry, approvals_dir: &Path) -> (Vec<u64>, usize) {
    let mut counts = vec![0; registry.lanes.len()];
    let (_, requests) = crate::approvals::list_pending_requests(&root.join(approvals_dir));
    let folders = super::request_lane::LaneFolders::new(root, registry);
    let mut unclaimed = 0;
    for request in requests {
        let lane = folders.lane_of(request.lane.as_deref(), request.cwd.as_deref());
        match lane.and_then(|lane| registry.lanes.iter().position(|l| &l.name == lane)) {
            Some(i) => counts[i] += 1,
            None => unclaimed += 1,
        }
    }
    (counts, unclaimed)
}

//! What the lane commands do, on files and git alone (no running fleet needed):
//! add a lane, list the lanes, record stop / pause / resume, remove a lane
//! without losing work, and find orphaned worktrees.

use std::path::{Path, PathBuf};

use chrono::Utc;

use super::registry::{self, Change, Lane, LaneKind, LaneState, Pending, Registry};
use super::{LaneName, lane_files_dir, worktree, worktree_path, worktrees_dir};
use crate::store::lock::{InstanceLock, LockError};
use crate::store::paths;

mod rows;

pub use rows::{LaneRow, Reported, rows, rows_of};

/// Bad input: a name, an existing lane or branch, a missing file (as clap's own).
pub const EXIT_USAGE: i32 = 2;
/// Refused to protect work, or something failed.
pub const EXIT_FAILED: i32 = 1;

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

/// An unreadable `fleet.json` is a configuration error (exit 2).
impl From<registry::Unreadable> for Failure {
    fn from(err: registry::Unreadable) -> Self {
        Failure::Usage(err.0)
    }
}

/// The exit code of a command's result, its error said.
pub fn report(result: Result<(), Failure>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("clowder: error: {}", failure.message());
            match failure {
                Failure::Usage(_) => EXIT_USAGE,
                Failure::Refused(_) | Failure::Failed(_) => EXIT_FAILED,
            }
        }
    }
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
///
/// Everything that can refuse is checked before anything is created, so a
/// refused add leaves no `.clowder` behind. A worktree lane is recorded as
/// pending before git runs: a kill midway leaves an intent that the next lane
/// command or fleet start finishes or undoes (see [`settle`]).
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
    if registry::load(root)?.lane(name).is_some() {
        return Err(lane_exists(name));
    }
    match &options.dir {
        Some(dir) if !root.join(dir).is_dir() => {
            return Err(Failure::Usage(format!(
                "--dir {}: no such folder",
                dir.display()
            )));
        }
        Some(_) => {}
        None => drop(check_worktree(root, name, options.base.as_deref())?),
    }
    let mut held = registry::Held::take(root)?;
    settle_held(root, &mut held)?;
    if held.registry.lane(name).is_some() {
        return Err(lane_exists(name));
    }
    ignore_state_dir(root)?;
    match &options.dir {
        Some(dir) => {
            check_dir_lane(root, &held.registry, dir)?;
            let lane = new_lane(name, LaneKind::Dir, dir.clone(), None, &options);
            create_files_dir(root, name)?;
            held.registry.lanes.push(lane.clone());
            held.save()?;
            Ok(lane)
        }
        None => add_worktree_lane(root, &mut held, name, &options),
    }
}

/// Records the lane as pending, makes its worktree, then registers it; a
/// failure takes back what was made.
fn add_worktree_lane(
    root: &Path,
    held: &mut registry::Held,
    name: &LaneName,
    options: &AddOptions,
) -> Result<Lane, Failure> {
    // Again under the lock: another add may have taken the name meanwhile.
    let base = check_worktree(root, name, options.base.as_deref())?;
    let dir = worktree_path(Path::new(""), name);
    let lane = new_lane(name, LaneKind::Worktree, dir, Some(base), options);
    let pending = Pending {
        change: Change::Adding,
        lane: lane.clone(),
        force: false,
    };
    held.registry.pending.push(pending.clone());
    held.save()?;
    let git = held.lend_to_git();
    let made = make_worktree(root, &lane);
    held.registry.pending.retain(|p| &p.lane.name != name);
    match made {
        Ok(()) => held.registry.lanes.push(lane.clone()),
        // Left pending when even that fails: the next command tries again.
        Err(_) if undo_add(root, &lane).is_err() => held.registry.pending.push(pending),
        Err(_) => {}
    }
    drop(git);
    held.save()?;
    made.map(|()| lane)
}

fn lane_exists(name: &LaneName) -> Failure {
    Failure::Usage(format!("lane {name} already exists (see `clowder lanes`)"))
}

fn new_lane(
    name: &LaneName,
    kind: LaneKind,
    dir: PathBuf,
    base: Option<(String, String)>,
    options: &AddOptions,
) -> Lane {
    let (base, base_commit) = base.unzip();
    Lane {
        name: name.clone(),
        kind,
        dir,
        branch: (kind == LaneKind::Worktree).then(|| name.branch()),
        base,
        base_commit,
        prompt_file: options.prompt_file.clone(),
        max_iterations: options.max_iterations,
        max_cost_usd: options.max_cost_usd,
        state: LaneState::Active,
        created: Utc::now(),
        resumes: 0,
    }
}

fn create_files_dir(root: &Path, name: &LaneName) -> Result<(), Failure> {
    let files = lane_files_dir(root, name);
    std::fs::create_dir_all(&files)
        .map_err(|err| Failure::Failed(format!("cannot create {}: {err}", files.display())))
}

/// The lane's files folder, then its worktree on a new branch `clowder/NAME`.
fn make_worktree(root: &Path, lane: &Lane) -> Result<(), Failure> {
    create_files_dir(root, &lane.name)?;
    let parent = worktrees_dir(root);
    std::fs::create_dir_all(&parent)
        .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    let branch = lane.branch.clone().unwrap_or_else(|| lane.name.branch());
    let commit = lane.base_commit.as_deref().unwrap_or("HEAD");
    worktree::add(root, &root.join(&lane.dir), &branch, commit)?;
    Ok(())
}

/// Takes back what an unfinished `lane add` made: its worktree (nothing ever
/// ran in it: the lane was never registered), its branch while it is still at
/// the commit it started from, and its files folder if empty.
fn undo_add(root: &Path, lane: &Lane) -> Result<Vec<String>, Failure> {
    let mut done = Vec::new();
    let path = root.join(&lane.dir);
    if path.exists() {
        if worktree::remove_unfinished(root, &path).is_err() {
            std::fs::remove_dir_all(&path)
                .map_err(|err| format!("cannot remove {}: {err}", path.display()))?;
        }
        done.push(format!("removed its worktree {}", lane.dir.display()));
    }
    worktree::prune(root)?;
    if let (Some(branch), Some(commit)) = (&lane.branch, &lane.base_commit) {
        let full = format!("refs/heads/{branch}");
        match worktree::commit_of(root, &full)? {
            Some(tip) if &tip == commit => {
                worktree::delete_branch(root, branch, commit)?;
                done.push(format!("deleted its branch {branch}"));
            }
            Some(tip) => done.push(format!(
                "kept its branch {branch} (at {tip}, not where it started)"
            )),
            None => {}
        }
    }
    let _ = std::fs::remove_dir(lane_files_dir(root, &lane.name));
    Ok(done)
}

/// Finishes or undoes every lane change a killed command left in the registry
/// of `root` (see [`registry::Registry::pending`]), but lane `except`'s (which
/// the `lane rm` about to run takes on); returns what was done.
pub fn settle(root: &Path, except: Option<&LaneName>) -> Result<Vec<String>, Failure> {
    let others = |p: &Pending| Some(&p.lane.name) != except;
    if !registry::load(root)?.pending.iter().any(others) {
        return Ok(Vec::new());
    }
    let mut held = registry::Held::take(root)?;
    let (mut done, mut kept) = (Vec::new(), Vec::new());
    for pending in std::mem::take(&mut held.registry.pending) {
        if others(&pending) {
            held.registry.pending.push(pending);
        } else {
            kept.push(pending);
        }
    }
    done.extend(settle_held(root, &mut held)?);
    held.registry.pending.extend(kept);
    held.save()?;
    Ok(done)
}

fn settle_held(root: &Path, held: &mut registry::Held) -> Result<Vec<String>, Failure> {
    let pending = std::mem::take(&mut held.registry.pending);
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let mut done = Vec::new();
    let git = held.lend_to_git();
    for change in pending {
        let name = change.lane.name.clone();
        let settled = match change.change {
            Change::Adding => settle_add(root, &mut held.registry, &change.lane),
            Change::Removing => take_lane_lock(root, &name).and_then(|_lock| {
                check_removal(root, &change.lane, change.force)?;
                carry_out_removal(root, &change.lane, change.force)
            }),
        };
        let verb = match change.change {
            Change::Adding => "add",
            Change::Removing => "rm",
        };
        match settled {
            Ok(lines) => done.push(format!(
                "lane {name}: the interrupted `lane {verb}` is done: {}",
                lines.join("; ")
            )),
            Err(failure) => {
                done.push(format!(
                    "lane {name}: the interrupted `lane {verb}` is still pending: {}",
                    failure.message()
                ));
                held.registry.pending.push(change);
            }
        }
    }
    drop(git);
    held.save()?;
    Ok(done)
}

/// A worktree made whole (on its branch, clean) is registered, as the add
/// asked; anything less is taken back.
fn settle_add(root: &Path, registry: &mut Registry, lane: &Lane) -> Result<Vec<String>, Failure> {
    let path = root.join(&lane.dir);
    let branch = lane.branch.clone().unwrap_or_else(|| lane.name.branch());
    let whole = path.is_dir()
        && worktree::checked_out(&path).ok().flatten() == Some(format!("refs/heads/{branch}"))
        && worktree::uncommitted(&path).is_ok_and(|changes| changes.is_empty());
    if whole && registry.lane(&lane.name).is_none() {
        create_files_dir(root, &lane.name)?;
        registry.lanes.push(lane.clone());
        return Ok(vec![format!(
            "registered, with its worktree {} on branch {branch}",
            lane.dir.display()
        )]);
    }
    let mut done = undo_add(root, lane)?;
    done.insert(0, "taken back".to_string());
    Ok(done)
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

/// Checks that a worktree lane can be made (a repository with a commit, run
/// from its top folder, a free branch and folder); returns the base (a full ref
/// name, or the commit) and the commit the branch would start at. Creates nothing.
fn check_worktree(
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

/// The request file a running fleet takes from a lane's files folder (its STOP
/// file is wherever `[shutdown] stop_file` puts it, see [`super::lane_files`]).
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
    let files = super::lane_files(root, name);
    let running = fleet_running(root);
    let mut leave = |path: PathBuf| -> Result<(), Failure> {
        std::fs::create_dir_all(path.parent().unwrap_or(&files.control_dir))
            .and_then(|()| std::fs::write(&path, b""))
            .map_err(|err| Failure::Failed(format!("cannot write {}: {err}", path.display())))?;
        done.push(format!("left {} for the running clowder", path.display()));
        Ok(())
    };
    use crate::store::control::{PAUSE_REQUEST, RESUME_REQUEST};
    match (state, running.is_some()) {
        (LaneState::Stopped, true) => {
            leave(files.stop.clone())?;
            if now {
                leave(files.mark(STOP_NOW_REQUEST))?;
            }
        }
        (LaneState::Paused, true) => leave(files.mark(PAUSE_REQUEST))?,
        (LaneState::Active, true) => leave(files.mark(RESUME_REQUEST))?,
        (_, false) => done.push("no clowder runs in this folder: recorded only".to_string()),
    }
    if state == LaneState::Active {
        // A STOP left for the lane would end its next run at once.
        // Resumed: a lane that had finished runs again.
        let _ = std::fs::remove_file(files.mark(FINISHED_MARK));
        if std::fs::remove_file(&files.stop).is_ok() {
            done.push(format!("removed {}", files.stop.display()));
        }
    }
    Ok(done)
}

fn no_lane(name: &LaneName) -> Failure {
    Failure::Usage(format!("no lane named {name} (see `clowder lanes`)"))
}

/// Where a lane's status file is.
pub fn status_path(root: &Path, name: &LaneName) -> PathBuf {
    super::lane_files(root, name).status
}

/// The lane's loop, when its status file says one is running now.
fn running_pid(root: &Path, name: &LaneName) -> Option<u32> {
    let (snapshot, _) = crate::store::status::read(&status_path(root, name)).ok()?;
    (snapshot.state != crate::protocol::LoopState::Stopped
        && crate::store::status::writer_alive(&snapshot))
    .then_some(snapshot.pid)
}

/// Takes lane `name`'s lock (`.clowder/lane-locks/NAME`), which the clowder
/// that runs the lane holds while it runs: refused while it does.
pub fn take_lane_lock(root: &Path, name: &LaneName) -> Result<InstanceLock, Failure> {
    match InstanceLock::acquire_file(&super::lane_lock_path(root, name)) {
        Ok(lock) => Ok(lock),
        Err(LockError::Held { pid, path }) => Err(Failure::Refused(format!(
            "lane {name} is running ({} holds {}): stop it first (`clowder lane stop {name}`)",
            pid.map_or_else(
                || "a clowder".to_string(),
                |pid| format!("clowder PID {pid}")
            ),
            path.display()
        ))),
        Err(err @ LockError::Io { .. }) => Err(Failure::Failed(err.to_string())),
    }
}

/// Removes lane `name` without losing work; returns what was done. Refused
/// while the lane runs (its lock is held, or its status names a live loop).
/// Checked first, then recorded as pending, then done: a kill midway leaves an
/// intent that the next command finishes, and `lane rm NAME` removes whatever
/// part of a lane an interrupted add or rm left.
pub fn remove(root: &Path, name: &LaneName, force: bool) -> Result<Vec<String>, Failure> {
    let known = registry::load(root)?;
    if known.lane(name).is_none() && !known.pending.iter().any(|p| &p.lane.name == name) {
        return Err(no_lane(name));
    }
    let _lane_lock = take_lane_lock(root, name)?;
    let mut held = registry::Held::take(root)?;
    let interrupted = held
        .registry
        .pending
        .iter()
        .position(|p| &p.lane.name == name)
        .map(|i| held.registry.pending.remove(i));
    if let Some(pending) = interrupted.as_ref().filter(|p| p.change == Change::Adding) {
        let git = held.lend_to_git();
        let mut done = undo_add(root, &pending.lane)?;
        drop(git);
        done.insert(0, "the interrupted `lane add` is taken back".to_string());
        held.save()?;
        return Ok(done);
    }
    let lane = match interrupted {
        Some(pending) => pending.lane,
        None => held
            .registry
            .lane(name)
            .cloned()
            .ok_or_else(|| no_lane(name))?,
    };
    if let Some(pid) = running_pid(root, name) {
        return Err(Failure::Refused(format!(
            "lane {name} is running (PID {pid}): stop it first (`clowder lane stop {name}`)"
        )));
    }
    check_removal(root, &lane, force)?;
    held.registry.lanes.retain(|other| &other.name != name);
    held.registry.pending.push(Pending {
        change: Change::Removing,
        lane: lane.clone(),
        force,
    });
    held.save()?;
    let git = held.lend_to_git();
    let done = carry_out_removal(root, &lane, force);
    drop(git);
    let done = done.map_err(|failure| {
        Failure::Failed(format!(
            "{}; the removal is recorded: `clowder lane rm {name}` again finishes it",
            failure.message()
        ))
    })?;
    held.registry.pending.retain(|p| &p.lane.name != name);
    held.save()?;
    Ok(done)
}

/// Every refusal of `lane rm`, before anything is changed.
fn check_removal(root: &Path, lane: &Lane, force: bool) -> Result<(), Failure> {
    if lane.kind != LaneKind::Worktree {
        return Ok(());
    }
    let branch = lane.branch.clone().unwrap_or_else(|| lane.name.branch());
    let full_branch = format!("refs/heads/{branch}");
    let path = root.join(&lane.dir);
    if path.exists() {
        check_checked_out(&path, &full_branch)?;
    }
    if force {
        return Ok(());
    }
    if path.exists() {
        let dirty = worktree::uncommitted(&path)?;
        if !dirty.is_empty() {
            return Err(Failure::Refused(format!(
                "the worktree {} has uncommitted changes; commit or discard them, or use --force (keeps the branch and saves the changes as a git stash):\n{}",
                lane.dir.display(),
                listing(&dirty)
            )));
        }
        let ignored = worktree::ignored(&path)?;
        if !ignored.is_empty() {
            return Err(Failure::Refused(format!(
                "the worktree {} holds files git ignores, which removing it would delete; move them out, or use --force (moves them into .clowder/lanes-removed):\n{}",
                lane.dir.display(),
                listing(&ignored)
            )));
        }
    }
    if let Some(tip) = worktree::commit_of(root, &full_branch)? {
        check_nothing_ahead(root, lane, &branch, &tip)?;
    }
    Ok(())
}

/// Does the removal [`check_removal`] allowed; each step finds done what an
/// interrupted run of it did.
fn carry_out_removal(root: &Path, lane: &Lane, force: bool) -> Result<Vec<String>, Failure> {
    let mut done = match lane.kind {
        LaneKind::Worktree => remove_worktree_lane(root, lane, force)?,
        LaneKind::Dir | LaneKind::Task | LaneKind::WatchTask => vec![format!(
            "lane {} unregistered; its folder {} is left as it is",
            lane.name,
            lane.dir.display()
        )],
    };
    done.extend(archive_lane_files(root, &lane.name)?);
    Ok(done)
}

fn remove_worktree_lane(root: &Path, lane: &Lane, force: bool) -> Result<Vec<String>, Failure> {
    let name = &lane.name;
    let branch = lane.branch.clone().unwrap_or_else(|| name.branch());
    let full_branch = format!("refs/heads/{branch}");
    let path = root.join(&lane.dir);
    let tip = worktree::commit_of(root, &full_branch)?;
    let mut done = Vec::new();
    if path.exists() {
        done.extend(keep_ignored_files(root, lane, &path)?);
        let dirty = worktree::uncommitted(&path)?;
        if !dirty.is_empty() {
            let message = format!("clowder lane rm {name}: uncommitted work in {branch}");
            let stash = worktree::stash(&path, &message)?;
            done.push(format!(
                "saved its uncommitted changes as stash {stash} (`git stash list`)"
            ));
        }
        worktree::remove(root, &path)?;
        done.push(format!("removed worktree {}", lane.dir.display()));
    } else {
        done.push(format!(
            "its worktree {} was already gone",
            lane.dir.display()
        ));
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

/// Moves the files git ignores in the worktree (a `.env`, a build folder),
/// which neither a stash nor git keeps, into `.clowder/lanes-removed`.
fn keep_ignored_files(root: &Path, lane: &Lane, path: &Path) -> Result<Vec<String>, Failure> {
    let ignored = worktree::ignored(path)?;
    if ignored.is_empty() {
        return Ok(Vec::new());
    }
    let kept = paths::lanes_removed_dir(Path::new("")).join(format!(
        "{}-{}-ignored",
        lane.name,
        Utc::now().format("%Y%m%dT%H%M%S%.3fZ")
    ));
    for file in &ignored {
        let relative = file.trim_end_matches('/');
        let from = path.join(relative);
        let to = root.join(&kept).join(relative);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
        }
        std::fs::rename(&from, &to)
            .map_err(|err| format!("cannot move {} to {}: {err}", from.display(), to.display()))?;
    }
    Ok(vec![format!(
        "moved {} file(s) git ignores to {}:\n{}",
        ignored.len(),
        kept.display(),
        listing(&ignored)
    )])
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
    // Work merged elsewhere (a plan step's branch into the plan's base, past
    // the dependency it started from) is not lost with this branch.
    let ahead = worktree::commits_only_in(root, tip, branch, base)?;
    if ahead > 0 {
        return Err(Failure::Refused(format!(
            "{branch} has {ahead} commit{} that neither {} nor any other branch, local or remote-tracking, has: merge or push {}, or use --force (removes the worktree, keeps the branch)",
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
    let removed = paths::lanes_removed_dir(root);
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
    // A lane half added or removed is not an orphan: it is reported as pending.
    let pending = registry.pending.iter().map(|p| &p.lane);
    let registered: Vec<PathBuf> = registry
        .lanes
        .iter()
        .chain(pending)
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

//! `.clowder/fleet.json`: the lanes of a fleet, their folders, branches and
//! options. Written atomically; versioned (see [`crate::store::versioned`]), so a
//! newer file is refused rather than half-read.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::LaneName;
use crate::store::lock::STATE_DIR;
use crate::store::versioned::{self, Format};

/// The registry's format version; a file with a higher one is refused.
pub const SCHEMA_VERSION: u64 = 1;
/// Version 1 is the first: fleet.json always carried its number.
const FORMAT: Format = Format {
    current: SCHEMA_VERSION,
    first: 1,
    unversioned: None,
    migrate: versioned::no_changes,
    in_struct: true,
};
/// The registry, in [`STATE_DIR`].
pub const FLEET_FILE: &str = "fleet.json";
/// Held (flock) while the registry is read, changed and written back.
const REGISTRY_LOCK: &str = "fleet.lock";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Registry {
    pub schema_version: u64,
    pub lanes: Vec<Lane>,
    /// A `lane add` or `lane rm` recorded before it touched git or the files,
    /// and not yet done: one that was killed midway leaves it, for the next lane
    /// command or fleet start to finish or undo. A lane in here is in no `lanes`
    /// entry, so nothing runs it meanwhile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
}

/// A lane change under way (see [`Registry::pending`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pending {
    pub change: Change,
    pub lane: Lane,
    /// `lane rm --force`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Adding,
    Removing,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lane {
    pub name: LaneName,
    pub kind: LaneKind,
    /// The agent's working folder: relative to the fleet's folder, or absolute;
    /// a task lane's task directory (absolute).
    pub dir: PathBuf,
    /// `clowder/NAME` for a worktree lane.
    pub branch: Option<String>,
    /// What the branch is measured against: a full ref name (`refs/heads/main`)
    /// when the lane started from one, else a commit.
    pub base: Option<String>,
    /// The commit the branch started at.
    pub base_commit: Option<String>,
    /// Laid over the root harness.toml when the lane runs; relative to the fleet's folder.
    pub prompt_file: Option<PathBuf>,
    pub max_iterations: Option<u64>,
    pub max_cost_usd: Option<f64>,
    /// What the user asked for; the lane's live state is in its status file.
    pub state: LaneState,
    pub created: DateTime<Utc>,
    /// How many times the lane was resumed: a run that ends after a resume it
    /// began before is not the lane finishing (see the fleet host).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resumes: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaneKind {
    /// Its own git worktree under `.clowder/worktrees/NAME` on `clowder/NAME`.
    Worktree,
    /// An existing folder (`--dir`), no branch of its own.
    Dir,
    /// `--task DIR`: the agent is `clowder worker DIR`; `dir` is the task
    /// directory, where the worker runs, and its heartbeat is the watchdog.
    Task,
    /// `--watch-task DIR`: a task directory someone else's worker drives; no
    /// process of ours, only its files are followed.
    WatchTask,
}

impl LaneKind {
    /// A lane over a task directory (`dir`), rather than an agent's folder.
    pub fn is_task(self) -> bool {
        matches!(self, LaneKind::Task | LaneKind::WatchTask)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaneState {
    /// Runs when the fleet runs.
    Active,
    /// Held: no session runs until it is resumed.
    Paused,
    /// Not started again until it is resumed.
    Stopped,
}

impl LaneState {
    pub fn as_str(self) -> &'static str {
        match self {
            LaneState::Active => "active",
            LaneState::Paused => "paused",
            LaneState::Stopped => "stopped",
        }
    }
}

impl Lane {
    /// The lane's options as they are laid over the root harness.toml (its
    /// `max_cost_usd` goes to `[guard] max_cost_usd`).
    pub fn overrides(&self) -> crate::config::Overrides {
        crate::config::Overrides {
            max_iterations: self.max_iterations,
            prompt_file: self.prompt_file.clone(),
            ..Default::default()
        }
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            schema_version: SCHEMA_VERSION,
            lanes: Vec::new(),
            pending: Vec::new(),
        }
    }
}

impl Registry {
    pub fn lane(&self, name: &LaneName) -> Option<&Lane> {
        self.lanes.iter().find(|lane| &lane.name == name)
    }

    pub fn lane_mut(&mut self, name: &LaneName) -> Option<&mut Lane> {
        self.lanes.iter_mut().find(|lane| &lane.name == name)
    }
}

pub fn path(root: &Path) -> PathBuf {
    root.join(STATE_DIR).join(FLEET_FILE)
}

/// `fleet.json` cannot be used (truncated, a folder, a newer schema): a
/// configuration error, exit 2. The text names the file.
#[derive(Debug)]
pub struct Unreadable(pub String);

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Unreadable {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<Unreadable> for String {
    fn from(err: Unreadable) -> String {
        err.0
    }
}

/// Reads the registry of the fleet in `root`; no file is an empty fleet.
pub fn load(root: &Path) -> Result<Registry, Unreadable> {
    let path = path(root);
    match crate::store::small_file::read_to_string(&path) {
        Ok(text) => parse(&path, &text).map_err(Unreadable),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
        Err(err) => Err(Unreadable(format!(
            "{}: cannot read: {err}",
            path.display()
        ))),
    }
}

/// Checks the version first, then the whole file; errors name the file and
/// where in it the problem is.
fn parse(path: &Path, text: &str) -> Result<Registry, String> {
    let bad = |what: String| format!("{}: {what}", path.display());
    let registry: Registry = FORMAT.parse(text).map_err(bad)?;
    let mut names: Vec<&LaneName> = registry.lanes.iter().map(|lane| &lane.name).collect();
    names.sort();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(bad(format!("lane {} is listed twice", pair[0])));
    }
    let lanes = registry
        .lanes
        .iter()
        .enumerate()
        .map(|(i, lane)| (format!("lanes[{i}]"), lane));
    let pending = registry.pending.iter().enumerate();
    let pending = pending.map(|(i, p)| (format!("pending[{i}].lane"), &p.lane));
    for (key, lane) in lanes.chain(pending) {
        check_worktree_lane(lane).map_err(|what| bad(format!("at {key}.{what}")))?;
    }
    // Both reach git's command line.
    for lane in &registry.lanes {
        let revisions = [("base", &lane.base), ("branch", &lane.branch)];
        for (key, value) in revisions {
            if let Some(value) = value {
                super::worktree::revision(value)
                    .map_err(|err| bad(format!("lane {}: {key}: {err}", lane.name)))?;
            }
        }
    }
    Ok(registry)
}

/// A worktree lane works in the worktree clowder made for it, on its branch:
/// a file edited to send it elsewhere (outside the repository, onto `main`) is
/// refused, naming the key. (A `--dir` or task lane's folder is the one the user gave.)
fn check_worktree_lane(lane: &Lane) -> Result<(), String> {
    if lane.kind != LaneKind::Worktree {
        return Ok(());
    }
    let folder = super::worktree_path(Path::new(""), &lane.name);
    if lane.dir != folder {
        return Err(format!(
            "dir: lane {} has its own worktree, which is {}, not {}",
            lane.name,
            folder.display(),
            lane.dir.display()
        ));
    }
    let branch = lane.name.branch();
    match &lane.branch {
        Some(other) if other != &branch => Err(format!(
            "branch: lane {} works on {branch}, not {other}",
            lane.name
        )),
        _ => Ok(()),
    }
}

fn save(root: &Path, registry: &Registry) -> Result<(), String> {
    let path = path(root);
    let mut json = serde_json::to_vec_pretty(registry)
        .map_err(|err| format!("cannot encode {}: {err}", path.display()))?;
    json.push(b'\n');
    crate::store::write_atomically(&path, &json)
        .map_err(|err| format!("cannot write {}: {err}", path.display()))
}

/// Creates `root/.clowder` (mode 0700, like the instance lock does) if needed.
pub fn ensure_state_dir(root: &Path) -> Result<PathBuf, String> {
    let dir = root.join(STATE_DIR);
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    Ok(dir)
}

/// Reads the registry, lets `change` edit it, and writes it back if `change`
/// succeeds, all under an exclusive lock so that two commands never lose each
/// other's edits. `change` may do slow work (git) while the lock is held.
pub fn update<T, E: From<String> + From<Unreadable>>(
    root: &Path,
    change: impl FnOnce(&mut Registry) -> Result<T, E>,
) -> Result<T, E> {
    let mut held = Held::take(root)?;
    let result = change(&mut held.registry)?;
    held.save()?;
    Ok(result)
}

/// The registry read under its lock, for a change saved in steps (an intent
/// first, then the result): nobody else changes it until this is dropped.
pub struct Held {
    root: PathBuf,
    pub registry: Registry,
    lock: Flock<File>,
}

impl Held {
    /// Waits for the registry's lock, then reads it.
    pub fn take(root: &Path) -> Result<Held, String> {
        let lock = lock(root)?;
        Ok(Held {
            root: root.to_path_buf(),
            registry: load(root)?,
            lock,
        })
    }

    pub fn save(&self) -> Result<(), String> {
        save(&self.root, &self.registry)
    }

    /// Lends the lock to the git commands run while the result lives (see
    /// [`super::worktree::LockForGit`]).
    pub fn lend_to_git(&self) -> super::worktree::LockForGit {
        use std::os::fd::AsRawFd;
        super::worktree::LockForGit::lend(self.lock.as_raw_fd())
    }
}

fn lock(root: &Path) -> Result<Flock<File>, String> {
    let path = ensure_state_dir(root)?.join(REGISTRY_LOCK);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|err| format!("cannot open {}: {err}", path.display()))?;
    Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| format!("cannot lock {}: {errno}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lanes_options_become_overrides_of_the_root_config() {
        let lane: Lane = serde_json::from_value(serde_json::json!({
            "name": "auth", "kind": "worktree", "dir": ".clowder/worktrees/auth",
            "branch": "clowder/auth", "base": "refs/heads/main", "base_commit": "abc",
            "prompt_file": "lanes/auth.md", "max_iterations": 4, "max_cost_usd": 2.0,
            "state": "paused", "created": "2026-01-01T00:00:00Z"
        }))
        .expect("a lane");
        let overrides = lane.overrides();
        assert_eq!(overrides.max_iterations, Some(4));
        assert_eq!(overrides.prompt_file, Some(PathBuf::from("lanes/auth.md")));
        assert_eq!(overrides.output_dir, None);
    }

    #[test]
    fn task_lanes_keep_their_kind() {
        for (kind, text) in [
            (LaneKind::Task, "task"),
            (LaneKind::WatchTask, "watch_task"),
        ] {
            assert_eq!(serde_json::to_value(kind).expect("encodes"), text);
            assert!(kind.is_task());
        }
        assert!(!LaneKind::Dir.is_task() && !LaneKind::Worktree.is_task());
    }

    #[test]
    fn a_newer_version_is_refused_before_the_rest_is_read() {
        let path = Path::new("fleet.json");
        let err = parse(path, r#"{"schema_version": 2, "lanes": 7}"#).expect_err("newer");
        assert_eq!(
            err,
            "fleet.json: made by a newer clowder (schema 2, this one reads up to 1)"
        );
        let err = parse(path, r#"{"schema_version": 1, "lanes": 7}"#).expect_err("bad lanes");
        assert!(err.starts_with("fleet.json: at lanes:"), "{err}");
        let err = parse(path, "{\"schema_version\": 1,\n").expect_err("cut");
        assert!(err.contains("line 2"), "{err}");
        assert_eq!(
            parse(path, r#"{"schema_version": 1, "lanes": []}"#),
            Ok(Registry::default())
        );
    }

    /// A later clowder may add a field older ones can do without, under the
    /// same version; an older clowder reads on rather than stop.
    #[test]
    fn a_field_this_clowder_does_not_know_is_ignored_within_its_version() {
        let path = Path::new("fleet.json");
        let text = r#"{"schema_version": 1, "later": {"x": 1}, "lanes": [{"name": "a", "kind": "dir", "dir": "a", "branch": null, "base": null, "base_commit": null, "prompt_file": null, "max_iterations": null, "max_cost_usd": null, "state": "active", "created": "2026-11-25T00:00:00Z", "colour": "red"}]}"#;
        let registry = parse(path, text).expect("reads");
        assert_eq!(registry.lanes.len(), 1);
    }
}

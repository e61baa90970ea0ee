//! The fleet: many lanes (loops), each in its own folder, registered in
//! `.clowder/fleet.json`. This part holds the registry, the git worktrees and the
//! lane commands that work on files, and the host that runs the lanes together.

pub mod actions;
pub mod attention;
pub mod cli;
pub mod client;
pub mod event_text;
mod forge;
pub mod host;
pub mod lane_work;
pub mod lanes;
pub mod link;
mod name;
pub mod new_lane;
pub mod note_answer;
pub mod plans;
pub mod registry;
pub mod remote;
pub mod request_lane;
mod room;
pub mod serve;
pub mod status;
pub mod task_lane;
pub mod tell;
pub mod waiting_notice;
pub mod wire;
pub mod worktree;

use std::path::{Path, PathBuf};

pub use name::LaneName;

use crate::store::paths::{self, LoopFiles};

/// `.clowder/worktrees`: one git worktree per lane.
pub fn worktrees_dir(root: &Path) -> PathBuf {
    paths::worktrees_dir(root)
}

/// `.clowder/worktrees/NAME`: the lane's worktree, the agent's working folder.
pub fn worktree_path(root: &Path, name: &LaneName) -> PathBuf {
    worktrees_dir(root).join(name.as_str())
}

/// `.clowder/lanes/NAME`: the lane's status, events, counter, output files and
/// requests. clowder writes nothing into a lane's worktree.
pub fn lane_files_dir(root: &Path, name: &LaneName) -> PathBuf {
    paths::lane_dir(root, name.as_str())
}

/// Where each file of lane `name` is, as the fleet in `root` places it
/// (by its `harness.toml`; see [`crate::config::Config::of_folder`]).
pub fn lane_files(root: &Path, name: &LaneName) -> LoopFiles {
    crate::config::Config::of_folder(root).lane_files(root, name.as_str())
}

/// `.clowder/lane-locks/NAME`: held (flock) by the clowder that runs the lane,
/// and by `lane rm` while it removes it. Never deleted, so that two processes
/// never hold two different files of one name.
pub fn lane_lock_path(root: &Path, name: &LaneName) -> PathBuf {
    paths::lane_lock(root, name.as_str())
}

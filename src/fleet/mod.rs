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
pub mod lanes;
pub mod link;
mod name;
pub mod new_lane;
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

use crate::store::lock::STATE_DIR;

/// `.clowder/worktrees`: one git worktree per lane.
pub fn worktrees_dir(root: &Path) -> PathBuf {
    root.join(STATE_DIR).join("worktrees")
}

/// `.clowder/worktrees/NAME`: the lane's worktree, the agent's working folder.
pub fn worktree_path(root: &Path, name: &LaneName) -> PathBuf {
    worktrees_dir(root).join(name.as_str())
}

/// `.clowder/lanes/NAME`: the lane's status, events, counter, output files and
/// requests. clowder writes nothing into a lane's worktree.
pub fn lane_files_dir(root: &Path, name: &LaneName) -> PathBuf {
    root.join(STATE_DIR).join("lanes").join(name.as_str())
}

/// `.clowder/lane-locks/NAME`: held (flock) by the clowder that runs the lane,
/// and by `lane rm` while it removes it. Never deleted, so that two processes
/// never hold two different files of one name.
pub fn lane_lock_path(root: &Path, name: &LaneName) -> PathBuf {
    root.join(STATE_DIR).join("lane-locks").join(name.as_str())
}

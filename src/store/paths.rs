//! Where every file of a loop, a lane, a plan and the queue lives: the one
//! place that joins such a path. Writers and readers (plans, `clowder lanes`,
//! `--status`, the gate, the web page) ask here, so that a file moved by
//! `[output]` or `[session]` is looked for where it was written.
//!
//! The configured names come in as [`FileNames`] (the config fills them in);
//! the layout of `.clowder/` itself is fixed and spelled out here.

use std::path::{Component, Path, PathBuf};

/// The folder of clowder's own files in a project (the approval queue lives in it too).
pub const STATE_DIR: &str = ".clowder";

/// The configured names of a loop's files (`[session]`, `[output]`,
/// `[shutdown]`), as written in the config: relative to the loop's folder, or absolute.
#[derive(Debug, Clone, PartialEq)]
pub struct FileNames {
    pub output_dir: PathBuf,
    /// Output files are `{output_dir}/{output_prefix}-{global}.jsonl`.
    pub output_prefix: String,
    pub counter_file: PathBuf,
    pub status_file: PathBuf,
    /// `None`: the event log is off.
    pub event_log: Option<PathBuf>,
    pub stop_file: PathBuf,
}

/// Where one loop's files are: a single loop's in its working folder, a lane's
/// in its files folder (`.clowder/lanes/NAME/`).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopFiles {
    /// The folder the configured names are taken from.
    pub base: PathBuf,
    pub output_dir: PathBuf,
    pub output_prefix: String,
    pub counter: PathBuf,
    pub status: PathBuf,
    pub event_log: Option<PathBuf>,
    pub stop: PathBuf,
    /// Where requests to the loop are left (`pause`, `resume`, `stop-now`) and
    /// where its notes, running records and marks are kept.
    pub control_dir: PathBuf,
}

impl LoopFiles {
    /// The files of the single loop that runs in `working_dir`.
    pub fn single(working_dir: &Path, names: &FileNames) -> LoopFiles {
        let control_dir = working_dir.join(STATE_DIR);
        LoopFiles::placed(working_dir, control_dir, names, |path| {
            tidy(&working_dir.join(path))
        })
    }

    /// The files of lane `lane` of the fleet in `root`: each configured name
    /// under the lane's own folder. An absolute name keeps only its last part
    /// there, so that two lanes never share a file.
    pub fn lane(root: &Path, lane: &str, names: &FileNames) -> LoopFiles {
        LoopFiles::in_lane_dir(&lane_dir(root, lane), names)
    }

    /// [`LoopFiles::lane`] for the lane whose files folder is `dir`.
    pub fn in_lane_dir(dir: &Path, names: &FileNames) -> LoopFiles {
        LoopFiles::placed(dir, dir.to_path_buf(), names, |path| {
            if path.is_absolute() {
                dir.join(path.file_name().unwrap_or(path.as_os_str()))
            } else {
                tidy(&dir.join(path))
            }
        })
    }

    /// Each configured name placed by `at`, from the folder `base`.
    fn placed(
        base: &Path,
        control_dir: PathBuf,
        names: &FileNames,
        at: impl Fn(&Path) -> PathBuf,
    ) -> LoopFiles {
        LoopFiles {
            base: base.to_path_buf(),
            output_dir: at(&names.output_dir),
            output_prefix: names.output_prefix.clone(),
            counter: at(&names.counter_file),
            status: at(&names.status_file),
            event_log: names.event_log.as_deref().map(&at),
            stop: at(&names.stop_file),
            control_dir,
        }
    }

    /// The folder of the records of the loop's running sessions and hooks.
    pub fn running_dir(&self) -> PathBuf {
        self.control_dir.join(RUNNING_DIR)
    }

    /// A mark or request file of the loop (`finished`, `queued`, `stop-now`…).
    pub fn mark(&self, name: &str) -> PathBuf {
        self.control_dir.join(name)
    }
}

/// `FILE.WHY` beside `path`: where a file is moved aside and kept
/// (`harness.status.before-restart`).
pub fn aside(path: &Path, why: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{why}"));
    path.with_file_name(name)
}

/// `./x` and `x` name the same file; keep `.` out of the paths users read.
fn tidy(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}

/// The records of running sessions, in a loop's control folder.
pub const RUNNING_DIR: &str = "running";

/// `.clowder` of the folder `root`.
pub fn state_dir(root: &Path) -> PathBuf {
    root.join(STATE_DIR)
}

/// `.clowder/lanes`: one files folder per lane.
pub fn lanes_dir(root: &Path) -> PathBuf {
    state_dir(root).join("lanes")
}

/// `.clowder/lanes/NAME`: the lane's status, events, counter, output files and
/// requests. clowder writes nothing into a lane's worktree.
pub fn lane_dir(root: &Path, lane: &str) -> PathBuf {
    lanes_dir(root).join(lane)
}

/// The fleet folder and lane name of a lane's files folder (`ROOT/.clowder/lanes/NAME`).
pub fn lane_of_dir(dir: &Path) -> Option<(PathBuf, String)> {
    let name = dir.file_name()?.to_str()?.to_string();
    let lanes = dir.parent()?;
    let state = lanes.parent()?;
    (lanes.file_name()? == "lanes" && state.file_name()? == STATE_DIR)
        .then(|| (state.parent().unwrap_or(Path::new("")).to_path_buf(), name))
}

/// `.clowder/worktrees`: one git worktree per lane.
pub fn worktrees_dir(root: &Path) -> PathBuf {
    state_dir(root).join("worktrees")
}

/// `.clowder/lane-locks/NAME`: held (flock) by the clowder that runs the lane.
pub fn lane_lock(root: &Path, lane: &str) -> PathBuf {
    state_dir(root).join("lane-locks").join(lane)
}

/// Where plans are saved, under the project folder: `NAME.json`, its events and its folder.
pub const PLANS_DIR: &str = ".clowder/plans";

/// `.clowder/lane-merge`: the scratch worktrees and check logs of lane merges.
pub const LANE_MERGE_DIR: &str = ".clowder/lane-merge";

/// `.clowder/prompts/NAME.md`: a prompt typed in the new-lane dialog.
pub fn typed_prompt(root: &Path, lane: &str) -> PathBuf {
    state_dir(root).join("prompts").join(format!("{lane}.md"))
}

/// `.clowder/lanes-removed`: the files of removed lanes.
pub fn lanes_removed_dir(root: &Path) -> PathBuf {
    state_dir(root).join("lanes-removed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(status: &str) -> FileNames {
        FileNames {
            output_dir: PathBuf::from("."),
            output_prefix: "claude-iteration".into(),
            counter_file: PathBuf::from(".iteration_counter"),
            status_file: PathBuf::from(status),
            event_log: Some(PathBuf::from("harness-events.jsonl")),
            stop_file: PathBuf::from("STOP"),
        }
    }

    #[test]
    fn a_lane_keeps_every_file_under_its_own_folder() {
        let root = Path::new("/p");
        let lane = LoopFiles::lane(root, "a", &names(".clowder/harness.status"));
        assert_eq!(
            lane.status,
            Path::new("/p/.clowder/lanes/a/.clowder/harness.status")
        );
        assert_eq!(lane.output_dir, Path::new("/p/.clowder/lanes/a"));
        let absolute = LoopFiles::lane(root, "a", &names("/var/run/s.json"));
        assert_eq!(absolute.status, Path::new("/p/.clowder/lanes/a/s.json"));
        let single = LoopFiles::single(root, &names("./s.json"));
        assert_eq!(single.status, Path::new("/p/s.json"));
        assert_eq!(single.running_dir(), Path::new("/p/.clowder/running"));
        assert_eq!(
            lane_of_dir(&lane.control_dir),
            Some((PathBuf::from("/p"), "a".to_string()))
        );
        assert_eq!(lane_of_dir(Path::new("/p/x/a")), None);
        for fixed in [PLANS_DIR, LANE_MERGE_DIR] {
            assert_eq!(Path::new(fixed).parent(), Some(Path::new(STATE_DIR)));
        }
    }
}

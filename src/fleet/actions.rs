//! What a user does with a lane's work: `clowder lane merge`, `lane push` and
//! `lane restart`, and the same from the room's `M`, `U` and `R`. The merge
//! itself is the plan's merge queue's, handed in at start (see [`LaneMerge`]).

use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;

use super::LaneName;
use super::lanes::{self, Failure};
use super::registry::{self, Lane, LaneKind, LaneState};
use super::worktree::git;
use crate::config::Config;

/// The hidden flag of `lane merge` that posts a review request and waits for it.
pub const AWAIT_REVIEW_FLAG: &str = "await-review";

/// The merge queue's lane side, which lives with the plans' queue: `merge` merges
/// a lane as `clowder lane merge` does, `await_review` is the waiter of
/// `lane merge NAME --await-review`.
#[derive(Clone, Copy)]
pub struct LaneMerge {
    pub merge: fn(&Path, &LaneName, &Config) -> Result<Vec<String>, Failure>,
    pub await_review: fn(&Path, &LaneName, &Config) -> i32,
}

static LANE_MERGE: OnceLock<LaneMerge> = OnceLock::new();

/// Set once, by the binary's start.
pub fn set_lane_merge(merge: LaneMerge) {
    let _ = LANE_MERGE.set(merge);
}

pub fn lane_merge() -> Result<LaneMerge, Failure> {
    LANE_MERGE
        .get()
        .copied()
        .ok_or_else(|| Failure::Failed("the merge queue is not set up in this process".into()))
}

/// A worktree lane's branch and the base branch it merges into.
pub struct Branches {
    pub lane: Lane,
    /// `clowder/NAME`.
    pub branch: String,
    /// The base's short name (`main`).
    pub base: String,
}

pub fn branches(root: &Path, name: &LaneName) -> Result<Branches, Failure> {
    let registry = registry::load(root)?;
    let lane = registry
        .lane(name)
        .cloned()
        .ok_or_else(|| Failure::Usage(format!("no lane named {name} (see `clowder lanes`)")))?;
    if lane.kind != LaneKind::Worktree {
        return Err(Failure::Refused(format!(
            "lane {name} works in {} without a branch of its own: nothing to merge or push",
            lane.dir.display()
        )));
    }
    let branch = lane.branch.clone().unwrap_or_else(|| name.branch());
    let base = match lane
        .base
        .as_deref()
        .and_then(|b| b.strip_prefix("refs/heads/"))
    {
        Some(base) => base.to_string(),
        None => {
            return Err(Failure::Refused(format!(
                "lane {name} started from {}, not from a branch: no base branch to merge into",
                lane.base.as_deref().unwrap_or("an unknown commit")
            )));
        }
    };
    Ok(Branches { lane, branch, base })
}

/// `clowder lane push NAME [--remote R]`: pushes the lane's branch (its
/// committed tip) to `remote`, else `[fleet] push`, else `origin`, and gives the
/// forge's pull-request page when the remote is on a known forge. `detached`:
/// git runs with no terminal to ask on (from the room, whose screen a password
/// prompt would break); it fails instead of asking.
pub fn push(
    root: &Path,
    name: &LaneName,
    remote: Option<&str>,
    config: &Config,
    detached: bool,
) -> Result<Vec<String>, Failure> {
    let Branches { branch, base, .. } = branches(root, name)?;
    let remote = remote
        .map(str::to_string)
        .or_else(|| Some(config.fleet.push.trim().to_string()).filter(|r| !r.is_empty()))
        .unwrap_or_else(|| "origin".to_string());
    if remote.starts_with('-') {
        return Err(Failure::Usage(format!("`{remote}` is not a remote's name")));
    }
    let remote_url = git(root, &["remote", "get-url", "--end-of-options", &remote])
        .map_err(|err| Failure::Usage(format!("no remote named {remote}: {err}")))?;
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    run_push(root, &remote, &refspec, detached)
        .map_err(|err| Failure::Failed(format!("git push {remote} {branch} failed: {err}")))?;
    let mut done = vec![format!(
        "lane {name}: pushed {branch} to {remote} ({remote_url})"
    )];
    if let Some(url) = super::forge::pull_request_url(&remote_url, &branch, &base) {
        done.push(format!("open a pull request: {url}"));
    }
    Ok(done)
}

fn run_push(root: &Path, remote: &str, refspec: &str, detached: bool) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new("git");
    command
        .args(["push", "--porcelain", "--end-of-options", remote, refspec])
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if detached {
        command.env("GIT_TERMINAL_PROMPT", "0");
        // SAFETY: setsid is async-signal-safe; without a controlling terminal,
        // ssh cannot ask for a passphrase on the room's screen.
        unsafe {
            command.pre_exec(|| {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
    }
    // Registered: in a group of its own, an unregistered child is the fleet
    // reaper's to take, and its exit status would be lost.
    let (child, _owned) =
        crate::supervisor::reaper::spawn_owned("git", || command.spawn(), |c| Some(c.id()))
            .map_err(|err| format!("cannot run git: {err}"))?;
    let output = child
        .wait_with_output()
        .map_err(|err| format!("cannot run git: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr).trim().to_string();
    Err(if text.is_empty() {
        output.status.to_string()
    } else {
        text
    })
}

/// `clowder lane restart NAME`: a lane that has finished (done, failed or
/// stopped) runs again in its worktree on its branch, its iterations counted
/// afresh; refused while it runs.
pub fn restart(root: &Path, name: &LaneName) -> Result<Vec<String>, Failure> {
    let registry = registry::load(root)?;
    let lane = registry
        .lane(name)
        .cloned()
        .ok_or_else(|| Failure::Usage(format!("no lane named {name} (see `clowder lanes`)")))?;
    if lane.kind == LaneKind::WatchTask {
        return Err(Failure::Refused(format!(
            "lane {name} follows a task that another worker drives: nothing of clowder's to restart"
        )));
    }
    let status = lanes::status_path(root, name);
    if let Ok((snapshot, _)) = crate::store::status::read(&status)
        && snapshot.state != crate::protocol::LoopState::Stopped
        && crate::store::status::writer_alive(&snapshot)
    {
        return Err(Failure::Refused(format!(
            "lane {name} is running (PID {}): restart it once it has finished, or stop it first (`clowder lane stop {name} --now`)",
            snapshot.pid
        )));
    }
    // A run goes on from an unfinished last run's counters: moved aside, the
    // status no longer says where to go on from.
    let mut done = Vec::new();
    if status.exists() {
        let kept = crate::store::paths::aside(&status, "before-restart");
        std::fs::rename(&status, &kept).map_err(|err| {
            Failure::Failed(format!("cannot move {} aside: {err}", status.display()))
        })?;
        done.push(format!(
            "its last run's status is kept in {}",
            kept.display()
        ));
    }
    done.extend(lanes::set_state(root, name, LaneState::Active, false)?);
    let place = match &lane.branch {
        Some(branch) => format!("in {} on {branch}", lane.dir.display()),
        None => format!("in {}", lane.dir.display()),
    };
    let when = if lanes::fleet_running(root).is_some() {
        "now"
    } else {
        "when `clowder` runs the fleet here"
    };
    done.insert(
        0,
        format!("lane {name} restarted: it runs again {place}, from iteration 1, {when}"),
    );
    Ok(done)
}

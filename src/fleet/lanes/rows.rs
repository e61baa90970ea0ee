//! The rows of `clowder lanes`: each registered lane with what its registry
//! entry, its status (a serving host's report, or its status file), git and
//! the pending requests say of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::super::registry::{Lane, LaneKind, LaneState, Registry};
use super::super::{LaneName, worktree};
use super::short_ref;
use crate::config::Config;
use crate::lane_status::LaneStatus;
use crate::protocol::Snapshot;
use crate::store::paths::LoopFiles;
use crate::supervisor::runtime::QUEUED_MARK;

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
    /// The lane's state in the one vocabulary ([`crate::lane_status`]):
    /// `running`, `waiting`, `done`, `failed`, `not started`…
    pub state: String,
    /// The loop's own state as its status file records it (`session_running`,
    /// `idle`…); `null` before a status file.
    pub loop_state: Option<String>,
    /// A task lane's worker's own status (`running`, `completed`…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_status: Option<String>,
    pub running: bool,
    pub iteration: Option<u64>,
    pub max_iterations: Option<u64>,
    pub global_iteration: Option<u64>,
    pub idle_secs: Option<i64>,
    #[serde(serialize_with = "crate::fmt::usd_json")]
    pub cost_usd: Option<f64>,
    /// How the agent's last session exited, once one has.
    pub last_exit_code: Option<i32>,
    pub commits_ahead: Option<u64>,
    pub pending_approvals: u64,
    /// Why the lane's agent runs without the approval gate, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ungated: Option<String>,
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
    let (_, requests) = crate::approvals::list_pending_requests(&root.join(approvals_dir));
    rows_of(root, registry, &requests, &|_| None, now)
}

/// The latest state a host reported for a lane (and whether it waits for a
/// session slot), if it reported one.
pub type Reported<'a> = dyn Fn(&LaneName) -> Option<(Arc<Snapshot>, bool)> + 'a;

/// The rows of `clowder lanes` from `requests` (the pending approval requests)
/// and the lanes' states as `reported` (a host serving the folder) says them,
/// else as their status files do. The rest comes from the registry and git.
pub fn rows_of(
    root: &Path,
    registry: &Registry,
    requests: &[crate::approvals::Request],
    reported: &Reported,
    now: DateTime<Utc>,
) -> (Vec<LaneRow>, usize) {
    let (pending, unclaimed) = approvals_by_lane(root, registry, requests);
    let config = Config::of_folder(root);
    let rows = registry
        .lanes
        .iter()
        .zip(pending)
        .map(|(lane, pending)| {
            let mut row = row(lane, pending);
            let files = config.lane_files(root, lane.name.as_str());
            match reported(&lane.name) {
                // The host sends a lane's states at most every 100 ms; its
                // status file, written at each change, may be newer.
                Some((snapshot, queued)) if !file_is_newer(&files, &snapshot) => {
                    fill_from_status(&mut row, &snapshot, queued, now)
                }
                _ => fill_from_file(&files, &mut row, now),
            }
            count_ahead(root, lane, &mut row);
            row
        })
        .collect();
    (rows, unclaimed)
}

/// Whether the lane's status file says something newer than `reported`.
fn file_is_newer(files: &LoopFiles, reported: &Snapshot) -> bool {
    crate::store::status::read(&files.status)
        .is_ok_and(|(file, _)| file.last_update > reported.last_update)
}

fn row(lane: &Lane, pending_approvals: u64) -> LaneRow {
    LaneRow {
        name: lane.name.to_string(),
        kind: lane.kind,
        dir: lane.dir.clone(),
        branch: lane.branch.clone(),
        base: lane.base.as_deref().map(|b| short_ref(b).to_string()),
        requested: lane.state,
        state: LaneStatus::NotStarted.word().to_string(),
        loop_state: None,
        task_status: None,
        running: false,
        iteration: None,
        max_iterations: lane.max_iterations,
        global_iteration: None,
        idle_secs: None,
        cost_usd: None,
        last_exit_code: None,
        commits_ahead: None,
        pending_approvals,
        ungated: None,
        problems: Vec::new(),
    }
}

fn fill_from_file(files: &LoopFiles, row: &mut LaneRow, now: DateTime<Utc>) {
    if std::fs::symlink_metadata(&files.status).is_ok() {
        match crate::store::status::read(&files.status) {
            Ok((snapshot, _)) => {
                let queued = files.mark(QUEUED_MARK).exists();
                fill_from_status(row, &snapshot, queued, now);
            }
            Err(err) => {
                row.state = LaneStatus::Unknown.word().to_string();
                row.problems.push(err);
            }
        }
    }
}

fn count_ahead(root: &Path, lane: &Lane, row: &mut LaneRow) {
    if let (Some(base), Some(branch)) = (&lane.base, &lane.branch) {
        match worktree::commits_ahead(root, base, &format!("refs/heads/{branch}")) {
            Ok(ahead) => row.commits_ahead = Some(ahead),
            Err(err) => row.problems.push(err),
        }
    }
}

fn fill_from_status(
    row: &mut LaneRow,
    snapshot: &crate::protocol::Snapshot,
    queued: bool,
    now: DateTime<Utc>,
) {
    use crate::protocol::LoopState;
    let alive = crate::store::status::writer_alive(snapshot);
    row.running = alive && snapshot.state != LoopState::Stopped;
    let facts = crate::lane_status::Facts {
        queued,
        pending: usize::try_from(row.pending_approvals).unwrap_or(usize::MAX),
        ..Default::default()
    };
    let status = LaneStatus::of_status_file(snapshot, alive, facts);
    row.state = status.word().to_string();
    row.loop_state = Some(snapshot.state.as_str().to_string());
    if !alive && snapshot.state != LoopState::Stopped {
        row.problems.push(format!(
            "its clowder (PID {}) is gone; it last said {}",
            snapshot.pid,
            snapshot.state.as_str()
        ));
    }
    row.iteration = Some(snapshot.iteration);
    row.max_iterations = Some(snapshot.max_iterations);
    row.global_iteration = snapshot.global_iteration;
    row.cost_usd = snapshot.totals.cost_usd;
    row.last_exit_code = snapshot.last_exit_code;
    row.ungated = snapshot.ungated.clone();
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
fn approvals_by_lane(
    root: &Path,
    registry: &Registry,
    requests: &[crate::approvals::Request],
) -> (Vec<u64>, usize) {
    let mut counts = vec![0; registry.lanes.len()];
    let folders = super::super::request_lane::LaneFolders::new(root, registry);
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

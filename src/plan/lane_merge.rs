//! `clowder lane merge NAME` and the room's `M`: a lane's committed tip goes
//! through the plans' merge queue into its base, checked by `[fleet] verify`; a
//! conflict or a failed check becomes a review request in the approval queue.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde::Serialize;

use super::checks::{self, Checks};
use super::merge::{self, MergeJob, MergeOf};
use super::scheduler::MergeOutcome;
use crate::config::Config;
use crate::fleet::LaneName;
use crate::fleet::actions::{AWAIT_REVIEW_FLAG, Branches, LaneMerge, branches};
use crate::fleet::lanes::{self, Failure};
use crate::fleet::registry::Lane;
use crate::fleet::worktree;
use crate::store::lock::{InstanceLock, LockError};

/// `verify_timeout` when `[fleet]` sets none, as for plans.
const DEFAULT_VERIFY_TIMEOUT: Duration = super::file::DEFAULT_CHECK_TIMEOUT;
/// How often a review waiter looks whether the lane was merged meanwhile.
const MERGED_LOOK_EVERY: Duration = Duration::from_secs(5);
/// The review's text, handed to the waiter that posts it.
const REVIEW_BODY_ENV: &str = "CLOWDER_REVIEW_BODY";

/// What the fleet is handed at start.
pub const LANE_MERGE: LaneMerge = LaneMerge {
    merge,
    await_review,
};

/// `clowder lane merge NAME`: the lane's committed tip through the merge queue
/// into its base. A conflict or a failed `verify` posts a review request (see
/// [`await_review`]) and is refused.
pub fn merge(root: &Path, name: &LaneName, config: &Config) -> Result<Vec<String>, Failure> {
    let Branches { lane, branch, base } = branches(root, name)?;
    let full_branch = format!("refs/heads/{branch}");
    let tip = worktree::commit_of(root, &full_branch)?
        .ok_or_else(|| Failure::Refused(format!("branch {branch} does not exist")))?;
    let mut done = Vec::new();
    if worktree::commits_ahead(root, &format!("refs/heads/{base}"), &full_branch)? == 0 {
        return Ok(vec![format!(
            "lane {name}: {base} already has every commit of {branch}: nothing to merge"
        )]);
    }
    done.extend(what_is_left_out(root, &lane, &tip));
    let _turn = merge_lock(root, name)?;
    let of = MergeOf::Lane(name.as_str());
    let checks = Checks::in_dir(
        of.files_dir(root),
        &format!("lane-merge-{name}"),
        checks::DEFAULT_GRACE,
    );
    for line in checks.end_left_now() {
        done.push(format!("lane {name}: {line}"));
    }
    let job = MergeJob {
        root,
        of,
        base: &base,
        rev: &tip,
        verify: &config.fleet.verify,
        verify_timeout: config
            .fleet
            .verify_timeout
            .duration
            .unwrap_or(DEFAULT_VERIFY_TIMEOUT),
        checks: &checks,
    };
    let outcome = merge::merge(&job);
    let why = merge::describe(&outcome, &base);
    match outcome {
        MergeOutcome::Passed => {
            let merged = worktree::commit_of(root, &format!("refs/heads/{base}"))?;
            let merged = merged.unwrap_or_default();
            log_merged(root, config, name, &branch, &base, &tip, &merged);
            done.push(format!(
                "lane {name} merged into {base}: {branch} at {} (merge commit {})",
                short(&tip),
                short(&merged)
            ));
            Ok(done)
        }
        MergeOutcome::Conflict { .. } | MergeOutcome::CheckFailed { .. } => {
            let body = format!(
                "Lane {name}: merging {branch} (at {}) into {base} did not pass: {why}\n\nFix the branch in {}, then approve this request to merge again, or run `clowder lane merge {name}`. Rejecting it dismisses it.",
                short(&tip),
                lane.dir.display()
            );
            let posted = spawn_review_waiter(root, name, &body);
            let mut message = format!("lane {name} not merged: {why}");
            match posted {
                Ok(id) => message.push_str(&format!(
                    "\nreview request {id} is in the approval queue: approving it merges again"
                )),
                Err(err) => message.push_str(&format!("\nno review request posted: {err}")),
            }
            done.push(message);
            Err(Failure::Refused(done.join("\n")))
        }
        MergeOutcome::Refused { .. } => Err(Failure::Failed(format!("lane {name}: {why}"))),
    }
}

/// What the merge does not take: a running session's uncommitted work.
fn what_is_left_out(root: &Path, lane: &Lane, tip: &str) -> Vec<String> {
    let name = &lane.name;
    let mut notes = Vec::new();
    let status = lanes::status_path(root, name);
    let running = crate::store::status::read(&status).is_ok_and(|(snapshot, _)| {
        snapshot.state != crate::protocol::LoopState::Stopped
            && crate::store::status::writer_alive(&snapshot)
    });
    if running {
        notes.push(format!(
            "lane {name} is running: merging its committed tip {}; what its session commits later is not in this merge",
            short(tip)
        ));
    }
    let path = root.join(&lane.dir);
    if let Ok(dirty) = worktree::uncommitted(&path)
        && !dirty.is_empty()
    {
        notes.push(format!(
            "lane {name}: {} uncommitted change(s) in {} are not merged",
            dirty.len(),
            lane.dir.display()
        ));
    }
    notes
}

/// One merge of a lane at a time across processes (the scratch worktree is shared).
fn merge_lock(root: &Path, name: &LaneName) -> Result<InstanceLock, Failure> {
    let path = root
        .join(merge::LANE_MERGE_DIR)
        .join(format!("{name}.lock"));
    match InstanceLock::acquire_file(&path) {
        Ok(lock) => Ok(lock),
        Err(LockError::Held { pid, .. }) => Err(Failure::Refused(format!(
            "another merge of lane {name} runs now{}",
            pid.map_or_else(String::new, |pid| format!(" (PID {pid})"))
        ))),
        Err(err @ LockError::Io { .. }) => Err(Failure::Failed(err.to_string())),
    }
}

fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

#[derive(Serialize)]
struct MergedEvent<'a> {
    ts: chrono::DateTime<Utc>,
    event: &'static str,
    lane: &'a str,
    branch: &'a str,
    base: &'a str,
    tip: &'a str,
    merge_commit: &'a str,
}

/// `lane_merged` in the lane's event log (next to its sessions' events).
fn log_merged(
    root: &Path,
    config: &Config,
    name: &LaneName,
    branch: &str,
    base: &str,
    tip: &str,
    merged: &str,
) {
    let Some(path) = config.lane_files(root, name.as_str()).event_log else {
        return;
    };
    let event = MergedEvent {
        ts: Utc::now(),
        event: "lane_merged",
        lane: name.as_str(),
        branch,
        base,
        tip,
        merge_commit: merged,
    };
    let written = std::fs::create_dir_all(path.parent().unwrap_or(root))
        .and_then(|()| append_json(&path, &event));
    if let Err(err) = written {
        eprintln!("clowder: warning: cannot write {}: {err}", path.display());
    }
}

fn append_json(path: &Path, event: &impl Serialize) -> std::io::Result<()> {
    use std::io::Write;
    drop(crate::store::events::EventLog::open(path)?);
    let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(&line)
}

/// Starts `clowder lane merge NAME --await-review` in a process group of its
/// own: it posts the review request, says its id, and waits for it after this
/// process has gone (a request nobody waits for counts as abandoned).
fn spawn_review_waiter(root: &Path, name: &LaneName, body: &str) -> Result<String, String> {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|err| format!("cannot find clowder: {err}"))?;
    let mut child = std::process::Command::new(exe)
        .args([
            "lane",
            "merge",
            name.as_str(),
            &format!("--{AWAIT_REVIEW_FLAG}"),
        ])
        .current_dir(root)
        .env(REVIEW_BODY_ENV, body)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|err| format!("cannot start the review's waiter: {err}"))?;
    let stdout = child.stdout.take().ok_or("the waiter has no output")?;
    let mut line = String::new();
    let read = std::io::BufReader::new(stdout).read_line(&mut line);
    match read {
        Ok(_) if !line.trim().is_empty() => Ok(line.trim().to_string()),
        _ => {
            let _ = child.wait();
            Err("the review's waiter ended before it posted the request".to_string())
        }
    }
}

/// The waiter's side: posts the review request, prints its id, then waits.
/// Approved, the lane is merged again (which posts a new review if it still
/// fails); rejected, or merged meanwhile by other means, it ends.
pub fn await_review(root: &Path, name: &LaneName, config: &Config) -> i32 {
    use std::io::Write;
    let body = std::env::var(REVIEW_BODY_ENV).unwrap_or_default();
    let (queue, submitted) = match post_review(root, name, config, &body) {
        Ok(posted) => posted,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return 1;
        }
    };
    // The caller reads this one line and goes: nothing more is printed.
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{}", submitted.request.id);
    let _ = stdout.flush();
    let merged_meanwhile = MergedMeanwhile::new(root, name);
    let cancelled = || merged_meanwhile.look().then_some(libc::SIGTERM);
    use crate::approvals::Outcome as Wait;
    match queue.wait(&submitted, None, &cancelled) {
        Ok(Wait::Approved { .. }) => match merge(root, name, config) {
            Ok(_) => 0,
            Err(_) => 1,
        },
        _ => 0,
    }
}

fn post_review(
    root: &Path,
    name: &LaneName,
    config: &Config,
    body: &str,
) -> Result<(crate::approvals::Queue, crate::approvals::Submitted), String> {
    let queue = crate::approvals::Queue::open(&root.join(&config.approvals.dir.0))
        .map_err(|err| err.to_string())?;
    let request = crate::approvals::Request {
        id: String::new(),
        created: Utc::now(),
        kind: crate::approvals::RequestKind::Ask,
        title: format!("lane {name}: merge needs review"),
        tool_name: None,
        tool_input: None,
        session_id: None,
        cwd: Some(root.display().to_string()),
        body: Some(body.to_string()),
        lane: Some(name.to_string()),
        abandoned: false,
    };
    let submitted = queue.submit(request).map_err(|err| err.to_string())?;
    Ok((queue, submitted))
}

/// Whether the lane's branch is in its base now (merged by hand, or by a later
/// `lane merge`): its review is then withdrawn. Looked at every few seconds.
struct MergedMeanwhile {
    root: PathBuf,
    name: LaneName,
    last: std::cell::Cell<Instant>,
}

impl MergedMeanwhile {
    fn new(root: &Path, name: &LaneName) -> MergedMeanwhile {
        MergedMeanwhile {
            root: root.to_path_buf(),
            name: name.clone(),
            last: std::cell::Cell::new(Instant::now()),
        }
    }

    fn look(&self) -> bool {
        if self.last.get().elapsed() < MERGED_LOOK_EVERY {
            return false;
        }
        self.last.set(Instant::now());
        match branches(&self.root, &self.name) {
            Ok(b) => worktree::commits_ahead(
                &self.root,
                &format!("refs/heads/{}", b.base),
                &format!("refs/heads/{}", b.branch),
            )
            .is_ok_and(|ahead| ahead == 0),
            // The lane is gone: nothing is left to review.
            Err(Failure::Usage(_)) => true,
            Err(_) => false,
        }
    }
}

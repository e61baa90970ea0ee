//! The host's side of the control room: lane reporters and snapshot forwarders
//! that send to the screen's thread, and the slow work it asks for (commits
//! ahead, diffs, `lane rm`, a lane added, a task stopped) run on blocking
//! threads, never on the screen's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, watch};

use super::LaneName;
use super::link::{HostMsg, HostRequest, LaneEntry, LaneReport};
use super::new_lane::NewLaneRequest;
use super::plans::PlanAsk;
use super::registry::{Lane, Registry};
use super::serve::{WorkDone, settle};
use super::{lanes, task_lane, worktree};
use crate::protocol::{Event, Snapshot};
use crate::supervisor::core::Level;
use crate::supervisor::runtime::{Outcome, QUEUED_MARK, Reporter};

/// At most one snapshot per lane this often: 32 busy lanes cost the screen a
/// few hundred messages a second, not one per byte.
const SNAPSHOT_GAP: Duration = Duration::from_millis(100);
/// How often the commits ahead of each base are counted again.
const FACTS_EVERY: Duration = Duration::from_secs(3);
/// A diff longer than this is cut (the rest is one `git diff` away).
const MAX_DIFF_LINES: usize = 20_000;

/// The channels to the control room, and what was last told through them.
pub(super) struct RoomSide {
    to_ui: mpsc::UnboundedSender<HostMsg>,
    requests: Option<mpsc::UnboundedReceiver<HostRequest>>,
    entries: Vec<LaneEntry>,
    idle: Option<(bool, bool)>,
    /// Where plan requests (merges) go: the plan's driver, when one runs here.
    pub(super) plan: Option<mpsc::UnboundedSender<PlanAsk>>,
    /// Up while a plan the plans' side started runs: the host stays for it.
    pub(super) plan_busy: Arc<std::sync::atomic::AtomicBool>,
}

impl RoomSide {
    pub(super) fn new(
        to_ui: mpsc::UnboundedSender<HostMsg>,
        requests: mpsc::UnboundedReceiver<HostRequest>,
    ) -> RoomSide {
        RoomSide {
            to_ui,
            requests: Some(requests),
            entries: Vec::new(),
            idle: None,
            plan: None,
            plan_busy: Arc::default(),
        }
    }

    /// The host's side with no control room on its terminal: what it says
    /// still goes to the hub, for the socket's clients.
    pub(super) fn served(to_ui: mpsc::UnboundedSender<HostMsg>) -> RoomSide {
        RoomSide {
            to_ui,
            requests: None,
            entries: Vec::new(),
            idle: None,
            plan: None,
            plan_busy: Arc::default(),
        }
    }

    /// The next request; `None` once the control room has closed its side.
    pub(super) async fn next_request(room: &mut Option<RoomSide>) -> Option<HostRequest> {
        match room.as_mut().and_then(|room| room.requests.as_mut()) {
            Some(requests) => requests.recv().await,
            None => std::future::pending().await,
        }
    }

    pub(super) fn open(&self) -> bool {
        self.requests.is_some()
    }

    pub(super) fn close(&mut self) {
        self.requests = None;
    }

    fn send(&self, lane: &LaneName, report: LaneReport) {
        let _ = self.to_ui.send(HostMsg::Lane {
            lane: lane.clone(),
            report,
        });
    }

    pub(super) fn say(&self, level: Level, text: &str) {
        let _ = self.to_ui.send(HostMsg::Log {
            level,
            text: text.to_string(),
        });
    }

    /// An event of lane `lane` that the host itself recorded.
    pub(super) fn event(&self, lane: &LaneName, at: DateTime<Utc>, event: Event) {
        let event = Box::new(event);
        self.send(lane, LaneReport::Event { at, event });
    }

    /// Makes the plans' side with `make`, its requests coming from here.
    pub(super) fn plans_side(
        &mut self,
        make: super::plans::RoomDriver,
        to_ui: mpsc::UnboundedSender<HostMsg>,
    ) -> super::plans::Driver {
        let (plan_tx, requests) = mpsc::unbounded_channel();
        self.plan = Some(plan_tx);
        let busy = Arc::clone(&self.plan_busy);
        make(super::plans::PlanLink {
            to_ui,
            requests,
            busy,
        })
    }

    /// Hands a plan request to the plan's driver.
    pub(super) fn to_plan(&self, request: HostRequest, done: Option<WorkDone>) {
        let Some(plan) = &self.plan else {
            let why = "no plan runs in this control room";
            self.say(Level::Warn, why);
            settle(done, Err(why.to_string()));
            return;
        };
        if let Err(refused) = plan.send(PlanAsk { request, done }) {
            let why = "the plans' side has ended";
            self.say(Level::Warn, why);
            settle(refused.0.done, Err(why.to_string()));
        }
    }

    pub(super) fn tell_idle(&mut self, idle: bool, signalled: bool) {
        if self.idle != Some((idle, signalled)) {
            self.idle = Some((idle, signalled));
            let _ = self.to_ui.send(HostMsg::Idle { idle, signalled });
        }
    }

    pub(super) fn reporter(&self, lane: &LaneName) -> Box<dyn Reporter> {
        Box::new(LaneChannel {
            lane: lane.clone(),
            to_ui: self.to_ui.clone(),
        })
    }

    /// Sends the lane's snapshots as they change (see [`forward_snapshots`]).
    pub(super) fn forward_snapshots(
        &self,
        lane: LaneName,
        files_dir: PathBuf,
        snapshots: watch::Receiver<Arc<Snapshot>>,
    ) {
        forward_snapshots(lane, self.to_ui.clone(), Some(files_dir), snapshots);
    }

    pub(super) fn lane_ended(&self, lane: &LaneName, outcome: &Result<Outcome, String>) {
        if let Ok(outcome) = outcome {
            let snapshot = Arc::new(outcome.snapshot.clone());
            self.send(
                lane,
                LaneReport::Snapshot {
                    snapshot,
                    queued: false,
                },
            );
        }
        let ended = outcome
            .as_ref()
            .map(|outcome| outcome.reason.clone())
            .map_err(Clone::clone);
        self.send(lane, LaneReport::Ended(ended));
    }

    /// Tells the registry's lanes when they changed, with the last state of
    /// those that do not run now (read from their status files).
    pub(super) fn lanes(&mut self, root: &Path, registry: &Registry, running: &[&LaneName]) {
        let entries: Vec<LaneEntry> = registry
            .lanes
            .iter()
            .map(|lane| LaneEntry {
                name: lane.name.clone(),
                requested: lane.state,
                max_iterations: lane.max_iterations,
                kind: lane.kind,
                base: lane.base.clone(),
            })
            .collect();
        if entries == self.entries {
            return;
        }
        self.entries = entries.clone();
        let _ = self.to_ui.send(HostMsg::Lanes(entries));
        // One reading of the folder's config places every lane's files.
        let config = crate::config::Config::of_folder(root);
        for lane in registry
            .lanes
            .iter()
            .filter(|l| !running.contains(&&l.name))
        {
            let status = config.lane_files(root, lane.name.as_str()).status;
            if let Ok((snapshot, _)) = crate::store::status::read(&status) {
                let report = LaneReport::Snapshot {
                    snapshot: Arc::new(snapshot),
                    queued: false,
                };
                self.send(&lane.name, report);
            }
        }
    }

    /// Counts, every [`FACTS_EVERY`], the commits each lane's branch has that
    /// its base lacks; only branches whose tip moved are counted again.
    pub(super) fn start_facts(&self, root: &Path, watched: Arc<std::sync::atomic::AtomicBool>) {
        let to_ui = self.to_ui.clone();
        let root = root.to_path_buf();
        tokio::task::spawn_local(async move {
            let mut known = Tips::new();
            let mut ticker = tokio::time::interval(FACTS_EVERY);
            loop {
                ticker.tick().await;
                if to_ui.is_closed() {
                    return;
                }
                // Nobody looks: no git is run; counted again once someone does.
                if !watched.load(std::sync::atomic::Ordering::Relaxed) {
                    known.clear();
                    continue;
                }
                let dir = root.clone();
                let before = std::mem::take(&mut known);
                let Ok((now, changed)) =
                    tokio::task::spawn_blocking(move || count_ahead(&dir, before)).await
                else {
                    return;
                };
                known = now;
                for (lane, ahead) in changed {
                    let report = LaneReport::Ahead(ahead);
                    if to_ui.send(HostMsg::Lane { lane, report }).is_err() {
                        return;
                    }
                }
            }
        });
    }

    /// The lane's diff: to whoever waits for it (`done`), else to every room.
    pub(super) fn diff(&self, root: &Path, lane: LaneName, done: Option<WorkDone>) {
        let to_ui = self.to_ui.clone();
        let root = root.to_path_buf();
        tokio::task::spawn_local(async move {
            let name = lane.clone();
            let text = tokio::task::spawn_blocking(move || diff(&root, &name))
                .await
                .unwrap_or_else(|err| Err(format!("the diff failed: {err}")));
            match done {
                Some(done) => settle(Some(done), text),
                None => {
                    let report = LaneReport::Diff(text);
                    let _ = to_ui.send(HostMsg::Lane { lane, report });
                }
            }
        });
    }

    /// The lane's commits, diff by file and costs ([`super::lane_work`]), as
    /// JSON, to whoever waits for them.
    pub(super) fn work(&self, root: &Path, lane: LaneName, done: Option<WorkDone>) {
        let root = root.to_path_buf();
        tokio::task::spawn_local(async move {
            let work = tokio::task::spawn_blocking(move || {
                let work = super::lane_work::work(&root, &lane)?;
                serde_json::to_string(&work).map_err(|err| format!("the work: {err}"))
            })
            .await
            .unwrap_or_else(|err| Err(format!("reading the lane's work failed: {err}")));
            settle(done, work);
        });
    }

    /// `lane rm` without --force: it refuses a running lane, a dirty worktree
    /// and a branch with commits its base lacks.
    pub(super) fn remove(&self, root: &Path, lane: LaneName, waiting: Option<WorkDone>) {
        let to_ui = self.to_ui.clone();
        let root = root.to_path_buf();
        tokio::task::spawn_local(async move {
            let name = lane.clone();
            let done = tokio::task::spawn_blocking(move || {
                lanes::remove(&root, &name, false).map_err(|f| f.message().to_string())
            })
            .await
            .unwrap_or_else(|err| Err(format!("lane rm failed: {err}")));
            settle(waiting, done.clone().map(|lines| lines.join("\n")));
            let report = LaneReport::Removed(done);
            let _ = to_ui.send(HostMsg::Lane { lane, report });
        });
    }

    /// The new-lane dialog's lane, added (git runs here, off the screen's
    /// thread); the dialog hears how it went. The registry poll then starts it.
    pub(super) fn add_lane(&self, root: &Path, request: NewLaneRequest, done: Option<WorkDone>) {
        let to_ui = self.to_ui.clone();
        let root = root.to_path_buf();
        tokio::task::spawn_local(async move {
            let lane = request.name.clone();
            let result =
                tokio::task::spawn_blocking(move || super::new_lane::submit(&root, &request))
                    .await
                    .unwrap_or_else(|err| Err(format!("adding the lane failed: {err}")));
            settle(done, result.clone());
            let _ = to_ui.send(HostMsg::LaneAdded { lane, result });
        });
    }

    /// `M`, `U`, `R`: `lane merge`, `lane push`, `lane restart`, off the
    /// screen's thread; what they did or why not goes to the lane's events.
    pub(super) fn lane_work(
        &self,
        root: &Path,
        config: &crate::config::Config,
        request: HostRequest,
        waiting: Option<WorkDone>,
    ) {
        let (lane, verb) = match &request {
            HostRequest::MergeLane(lane) => (lane.clone(), "merge"),
            HostRequest::PushLane(lane) => (lane.clone(), "push"),
            HostRequest::RestartLane(lane) => (lane.clone(), "restart"),
            _ => return,
        };
        let to_ui = self.to_ui.clone();
        let (root, config) = (root.to_path_buf(), config.clone());
        let started = LaneReport::Log {
            at: Utc::now(),
            level: Level::Info,
            text: format!("lane {verb} {lane}: started"),
        };
        self.send(&lane, started);
        tokio::task::spawn_local(async move {
            let name = lane.clone();
            let done = tokio::task::spawn_blocking(move || {
                let done = match request {
                    HostRequest::MergeLane(_) => super::actions::lane_merge()
                        .and_then(|queue| (queue.merge)(&root, &name, &config)),
                    HostRequest::PushLane(_) => {
                        super::actions::push(&root, &name, None, &config, true)
                    }
                    _ => super::actions::restart(&root, &name),
                };
                done.map_err(|failure| failure.message().to_string())
            })
            .await
            .unwrap_or_else(|err| Err(format!("lane {verb} failed: {err}")));
            let done = done.map_err(|why| format!("lane {verb} {lane}: {why}"));
            work_ended(&to_ui, lane, waiting, done, Level::Warn);
        });
    }

    /// `lane resume`: a lane paused between sessions made active again; the
    /// registry poll then starts it.
    pub(super) fn resume_lane(&self, root: &Path, lane: LaneName, waiting: Option<WorkDone>) {
        let root = root.to_path_buf();
        let to_ui = self.to_ui.clone();
        tokio::task::spawn_local(async move {
            let name = lane.clone();
            let done = tokio::task::spawn_blocking(move || {
                use super::registry::LaneState;
                // Only a pause is undone here: a lane a person stopped, or
                // one that finished, is started again by `restart` alone.
                let state = super::registry::load(&root)?
                    .lane(&name)
                    .map(|lane| lane.state)
                    .ok_or_else(|| format!("no lane named {name}"))?;
                if state != LaneState::Paused {
                    return Err(format!(
                        "lane {name} is not running and is {}, not paused: nothing to resume (run it again to start it)",
                        state.as_str()
                    ));
                }
                lanes::set_state(&root, &name, LaneState::Active, false)
                    .map_err(|failure| failure.message().to_string())
            })
            .await
            .unwrap_or_else(|err| Err(format!("lane resume failed: {err}")));
            let done = done.map_err(|why| format!("lane resume {lane}: {why}"));
            work_ended(&to_ui, lane, waiting, done, Level::Warn);
        });
    }

    /// `s` on a task lane: `"status": "stopped"` into its task's state.json;
    /// the worker ends at its next check, and the lane with it.
    pub(super) fn stop_task(&self, root: &Path, lane: LaneName, waiting: Option<WorkDone>) {
        let to_ui = self.to_ui.clone();
        let root = root.to_path_buf();
        tokio::task::spawn_local(async move {
            let name = lane.clone();
            let done = tokio::task::spawn_blocking(move || {
                let registry = super::registry::load(&root)?;
                let lane = registry
                    .lane(&name)
                    .filter(|lane| lane.kind.is_task())
                    .ok_or_else(|| format!("{name} is not a task lane"))?;
                task_lane::request_stop(&root, lane)
            })
            .await
            .unwrap_or_else(|err| Err(format!("the stop failed: {err}")));
            let done = done
                .map(|text| vec![format!("stop: {text}")])
                .map_err(|why| format!("cannot stop the task: {why}"));
            work_ended(&to_ui, lane, waiting, done, Level::Error);
        });
    }
}

/// How a piece of a lane's work ended: `waiting`, if anyone, hears it, and
/// the rooms see it as the lane's lines (a refusal at level `refused`).
fn work_ended(
    to_ui: &mpsc::UnboundedSender<HostMsg>,
    lane: LaneName,
    waiting: Option<WorkDone>,
    done: Result<Vec<String>, String>,
    refused: Level,
) {
    let (level, lines) = match &done {
        Ok(lines) => (Level::Info, lines.clone()),
        Err(why) => (refused, vec![why.clone()]),
    };
    settle(waiting, done.map(|lines| lines.join("\n")));
    for text in lines {
        let report = LaneReport::Log {
            at: Utc::now(),
            level,
            text,
        };
        let lane = lane.clone();
        let _ = to_ui.send(HostMsg::Lane { lane, report });
    }
}

/// Sends a lane's snapshots to `to_hub` as they change, at most one per
/// [`SNAPSHOT_GAP`]; a queued mark in `files_dir` says it waits for a session slot.
pub(super) fn forward_snapshots(
    lane: LaneName,
    to_hub: mpsc::UnboundedSender<HostMsg>,
    files_dir: Option<PathBuf>,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
) {
    tokio::spawn(async move {
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            let queued = files_dir
                .as_ref()
                .is_some_and(|dir| dir.join(QUEUED_MARK).exists());
            let report = LaneReport::Snapshot { snapshot, queued };
            let message = HostMsg::Lane {
                lane: lane.clone(),
                report,
            };
            if to_hub.send(message).is_err() {
                return;
            }
            tokio::time::sleep(SNAPSHOT_GAP).await;
            if snapshots.changed().await.is_err() {
                return;
            }
        }
    });
}

/// A lane's log lines and events, sent to the control room.
struct LaneChannel {
    lane: LaneName,
    to_ui: mpsc::UnboundedSender<HostMsg>,
}

impl LaneChannel {
    fn send(&self, report: LaneReport) {
        let _ = self.to_ui.send(HostMsg::Lane {
            lane: self.lane.clone(),
            report,
        });
    }
}

impl Reporter for LaneChannel {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str) {
        self.send(LaneReport::Log {
            at: wall,
            level,
            text: message.to_string(),
        });
    }

    fn event(&mut self, wall: DateTime<Utc>, event: &Event) {
        self.send(LaneReport::Event {
            at: wall,
            event: Box::new(event.clone()),
        });
    }
}

/// The lane's base and branch, when it has them.
fn base_and_branch(lane: &Lane) -> Option<(&str, String)> {
    let base = lane.base.as_deref()?;
    let branch = lane.branch.as_deref()?;
    Some((base, format!("refs/heads/{branch}")))
}

/// Each lane's branch and base tips, and how many commits its base lacks.
type Tips = HashMap<LaneName, (String, Option<u64>)>;

/// One `git for-each-ref` for every tip, then `rev-list --count` only for the
/// lanes whose branch or base moved. Returns what is known now and what changed.
fn count_ahead(root: &Path, mut known: Tips) -> (Tips, Vec<(LaneName, Option<u64>)>) {
    let Ok(registry) = super::registry::load(root) else {
        return (known, Vec::new());
    };
    let tips: HashMap<String, String> = worktree::git(
        root,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/heads/",
        ],
    )
    .unwrap_or_default()
    .lines()
    .filter_map(|line| line.split_once(' '))
    .map(|(name, tip)| (name.to_string(), tip.to_string()))
    .collect();
    let mut now = HashMap::new();
    let mut changed = Vec::new();
    for lane in &registry.lanes {
        let Some((base, branch)) = base_and_branch(lane) else {
            continue;
        };
        let Some(tip) = tips.get(&branch) else {
            continue;
        };
        // Counted again when either end moves: a merge moves the base.
        let base_tip = tips
            .get(base)
            .or_else(|| tips.get(&format!("refs/heads/{base}")))
            .map_or(base, String::as_str);
        let ends = format!("{tip} {base_tip}");
        let entry = match known.remove(&lane.name) {
            Some((old_ends, ahead)) if old_ends == ends => (old_ends, ahead),
            _ => {
                let ahead = worktree::commits_ahead(root, base, &branch).ok();
                changed.push((lane.name.clone(), ahead));
                (ends, ahead)
            }
        };
        now.insert(lane.name.clone(), entry);
    }
    (now, changed)
}

/// `git diff --stat` and then the patch, from where the branch left its base
/// to the branch's tip.
fn diff(root: &Path, name: &LaneName) -> Result<String, String> {
    let registry = super::registry::load(root)?;
    let lane = registry
        .lane(name)
        .ok_or_else(|| format!("no lane named {name}"))?;
    let (base, branch) = base_and_branch(lane)
        .ok_or_else(|| format!("lane {name} has no branch of its own: nothing to compare"))?;
    let range = format!(
        "{}...{}",
        worktree::revision(base)?,
        worktree::revision(&branch)?
    );
    let diff = |extra: &[&str]| {
        let options = ["diff", "--no-color", "--no-ext-diff"];
        let args = [&options[..], extra, &["--end-of-options", &range, "--"]].concat();
        worktree::git(root, &args)
    };
    let stat = diff(&["--stat"])?;
    let patch = diff(&[])?;
    if stat.is_empty() && patch.is_empty() {
        return Ok(format!(
            "{} has nothing that {} lacks",
            lanes::short_ref(&branch),
            lanes::short_ref(base)
        ));
    }
    let mut text = format!("{stat}\n\n");
    let total = patch.lines().count();
    for line in patch.lines().take(MAX_DIFF_LINES) {
        text.push_str(line);
        text.push('\n');
    }
    if total > MAX_DIFF_LINES {
        text.push_str(&format!(
            "… {} more lines: git diff {range}\n",
            total - MAX_DIFF_LINES
        ));
    }
    Ok(text)
}

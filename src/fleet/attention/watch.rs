//! The host's watcher: on a thread of its own it follows what the host knows —
//! each lane's snapshots and end (a copy of the host's messages) or the single
//! loop's snapshots, and the pending approval requests (polled) — and runs
//! `on_attention`, and POSTs to `notify_url`, for every call [`detect`] finds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self as std_mpsc, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::command::{COMMAND_TIMEOUT, Calls};
use super::notify::{Notifier, Say};
use super::{AttentionEvent, Observation, PendingRequest, detect, lane_state};
use crate::config::UiConfig;
use crate::fleet::link::{HostMsg, LaneReport};
use crate::protocol::{ExitReason, LoopState, Snapshot};
use crate::supervisor::core::Level;

/// How often the queue (and the single loop's snapshot) is read.
const POLL: Duration = Duration::from_millis(500);
/// How long an ending host waits for the copy of its messages to close.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What the watcher is told.
enum Seen {
    Host(HostMsg),
    LoopEnded(ExitReason),
}

/// A running watcher; [`Attention::finish`] lets its last calls run.
pub struct Attention {
    /// To the watcher; the single loop's only sender (a host's is its copier's).
    tell: Option<std_mpsc::Sender<Seen>>,
    done: Option<std_mpsc::Receiver<()>>,
}

impl Attention {
    fn idle() -> Attention {
        Attention {
            tell: None,
            done: None,
        }
    }

    /// The single loop has ended, for `reason`.
    pub fn loop_ended(&self, reason: &ExitReason) {
        if let Some(tell) = &self.tell {
            let _ = tell.send(Seen::LoopEnded(reason.clone()));
        }
    }

    /// Waits until what was seen has been called for and the commands it ran
    /// have ended (or been killed). A host's watcher ends once every sender of
    /// the host's messages is gone.
    pub fn finish(mut self) {
        drop(self.tell.take());
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(CLOSE_GRACE + COMMAND_TIMEOUT);
        }
    }
}

/// Watches a host's lanes: returns the messages of `from_host`, unchanged and
/// in order, to be read in its place (by the hub), and the watcher. With
/// neither `on_attention` nor `notify_url`, `from_host` itself and a watcher
/// that does nothing. What the watcher has to say goes to `say` (the console
/// of a headless host) and, as the host's log lines, to the hub.
pub fn watch_host(
    root: &Path,
    approvals_dir: PathBuf,
    ui: &UiConfig,
    mut from_host: mpsc::UnboundedReceiver<HostMsg>,
    say: Say,
) -> (mpsc::UnboundedReceiver<HostMsg>, Attention) {
    if !Callers::wanted(ui) {
        return (from_host, Attention::idle());
    }
    let (to_hub, hub_rx) = mpsc::unbounded_channel();
    let logs = to_hub.clone();
    let say: Say = Arc::new(move |level: Level, text: &str| {
        say(level, text);
        let text = text.to_string();
        let _ = logs.send(HostMsg::Log { level, text });
    });
    let (tell, seen) = std_mpsc::channel();
    let copier = std::thread::Builder::new()
        .name("attention-copy".into())
        .spawn(move || {
            while let Some(message) = from_host.blocking_recv() {
                if let Some(copy) = worth_a_look(&message) {
                    let _ = tell.send(Seen::Host(copy));
                }
                let _ = to_hub.send(message);
            }
        });
    if let Err(err) = copier {
        tracing::warn!("[ui] on_attention: cannot watch the lanes: {err}");
        return (hub_rx, Attention::idle());
    }
    let callers = Callers::of(root, ui, say);
    let watcher = Watcher::new(root, approvals_dir, callers, None);
    let done = watcher.start(seen);
    (hub_rx, Attention { tell: None, done })
}

/// Watches a single loop (no lanes) in `root`, named after its folder; what
/// the watcher has to say goes to `say`.
pub fn watch_loop(
    root: &Path,
    approvals_dir: PathBuf,
    ui: &UiConfig,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    say: Say,
) -> Attention {
    if !Callers::wanted(ui) {
        return Attention::idle();
    }
    let full = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let name = full
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tell, seen) = std_mpsc::channel();
    let callers = Callers::of(root, ui, say);
    let watcher = Watcher::new(root, approvals_dir, callers, Some((name, snapshots)));
    let done = watcher.start(seen);
    Attention {
        tell: Some(tell),
        done,
    }
}

/// The host's messages attention reads: the lanes, their snapshots and ends.
fn worth_a_look(message: &HostMsg) -> Option<HostMsg> {
    match message {
        HostMsg::Lanes(_)
        | HostMsg::Lane {
            report: LaneReport::Snapshot { .. } | LaneReport::Ended(_),
            ..
        } => Some(message.clone()),
        _ => None,
    }
}

/// One lane as attention knows it.
#[derive(Default)]
struct LaneSeen {
    snapshot: Option<Arc<Snapshot>>,
    ended: Option<Result<ExitReason, String>>,
}

/// Who is called for attention: the `on_attention` command and the
/// `notify_url` push, each when set.
struct Callers {
    command: Option<Calls>,
    notify: Option<Notifier>,
}

impl Callers {
    fn wanted(ui: &UiConfig) -> bool {
        ui.on_attention().is_some() || ui.notify_url.is_some()
    }

    fn of(root: &Path, ui: &UiConfig, say: Say) -> Callers {
        let dir = root.to_path_buf();
        Callers {
            command: ui.on_attention().map(|command| Calls::new(command, dir)),
            notify: (ui.notify_url.as_deref()).and_then(|url| Notifier::start(url, root, say)),
        }
    }

    fn call(&self, event: &AttentionEvent) {
        if let Some(command) = &self.command {
            command.run(event);
        }
        if let Some(notify) = &self.notify {
            notify.send(event);
        }
    }

    /// Lets the last calls end, for [`COMMAND_TIMEOUT`] at most in all.
    fn finish(&mut self) {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        if let Some(notify) = &mut self.notify {
            notify.close();
        }
        if let Some(command) = &self.command {
            command.wait(COMMAND_TIMEOUT);
        }
        if let Some(notify) = &mut self.notify {
            notify.wait(deadline);
        }
    }
}

struct Watcher {
    root: PathBuf,
    approvals_dir: PathBuf,
    calls: Callers,
    /// The single loop's name and snapshots; `None` for a host's lanes.
    single: Option<(String, watch::Receiver<Arc<Snapshot>>)>,
    /// The registry's lanes (or the single loop), by name.
    lanes: BTreeMap<String, LaneSeen>,
    pending: BTreeMap<String, PendingRequest>,
    last: Option<Observation>,
}

impl Watcher {
    fn new(
        root: &Path,
        approvals_dir: PathBuf,
        calls: Callers,
        single: Option<(String, watch::Receiver<Arc<Snapshot>>)>,
    ) -> Watcher {
        Watcher {
            root: root.to_path_buf(),
            approvals_dir,
            calls,
            single,
            lanes: BTreeMap::new(),
            pending: BTreeMap::new(),
            last: None,
        }
    }

    /// Runs on a thread until `seen` closes; the receiver returned hears when it has.
    fn start(self, seen: std_mpsc::Receiver<Seen>) -> Option<std_mpsc::Receiver<()>> {
        let (done_tx, done_rx) = std_mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("attention".into())
            .spawn(move || {
                self.run(&seen);
                let _ = done_tx.send(());
            });
        match spawned {
            Ok(_) => Some(done_rx),
            Err(err) => {
                tracing::warn!("[ui] on_attention: cannot start the watcher: {err}");
                None
            }
        }
    }

    fn run(mut self, seen: &std_mpsc::Receiver<Seen>) {
        // The loop's first state is seen before it can end.
        self.poll();
        let mut polled = Instant::now();
        self.look();
        loop {
            let closed = match seen.recv_timeout(POLL) {
                Ok(first) => {
                    // A look after each message: a lane seen running then
                    // ended in one batch still becomes done.
                    self.apply(first);
                    self.look();
                    while let Ok(next) = seen.try_recv() {
                        self.apply(next);
                        self.look();
                    }
                    false
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            if closed || polled.elapsed() >= POLL {
                self.poll();
                polled = Instant::now();
            }
            self.look();
            if closed {
                break;
            }
        }
        self.calls.finish();
    }

    fn apply(&mut self, seen: Seen) {
        match seen {
            Seen::Host(HostMsg::Lanes(entries)) => {
                let names: Vec<String> = entries.iter().map(|e| e.name.to_string()).collect();
                self.lanes.retain(|name, _| names.contains(name));
                for name in names {
                    self.lanes.entry(name).or_default();
                }
            }
            Seen::Host(HostMsg::Lane { lane, report }) => {
                // Not (or no longer) in the registry: as the room, not looked at.
                let Some(seen) = self.lanes.get_mut(lane.as_str()) else {
                    return;
                };
                match report {
                    LaneReport::Snapshot { snapshot, .. } => {
                        if snapshot.state != LoopState::Stopped {
                            seen.ended = None;
                        }
                        seen.snapshot = Some(snapshot);
                    }
                    LaneReport::Ended(ended) => seen.ended = Some(ended),
                    _ => {}
                }
            }
            Seen::Host(_) => {}
            Seen::LoopEnded(reason) => {
                if let Some((name, _)) = &self.single {
                    self.lanes.entry(name.clone()).or_default().ended = Some(Ok(reason));
                }
            }
        }
    }

    /// Reads the queue, and the single loop's snapshot.
    fn poll(&mut self) {
        let (_, mut requests) = crate::approvals::list_pending_requests(&self.approvals_dir);
        crate::fleet::request_lane::attribute(&self.root, &mut requests);
        self.pending = requests
            .into_iter()
            .map(|request| {
                let pending = PendingRequest {
                    lane: request.lane,
                    title: request.title,
                };
                (request.id, pending)
            })
            .collect();
        if let Some((name, snapshots)) = &self.single {
            let snapshot = snapshots.borrow().clone();
            self.lanes.entry(name.clone()).or_default().snapshot = Some(snapshot);
        }
    }

    /// Calls for what changed since the last look.
    fn look(&mut self) {
        let now = Observation {
            lanes: self
                .lanes
                .iter()
                .filter_map(|(name, seen)| {
                    let state = lane_state(seen.snapshot.as_deref(), seen.ended.as_ref())?;
                    Some((name.clone(), state))
                })
                .collect(),
            pending: self.pending.clone(),
        };
        if self.last.as_ref() == Some(&now) {
            return;
        }
        for event in detect(self.last.as_ref(), &now) {
            self.calls.call(&event);
        }
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::LaneName;
    use crate::fleet::link::LaneEntry;
    use crate::fleet::registry::{LaneKind, LaneState};

    fn name(lane: &str) -> LaneName {
        LaneName::parse(lane).expect("a valid name")
    }

    fn lanes(names: &[&str]) -> Seen {
        let entries = names
            .iter()
            .map(|lane| LaneEntry {
                name: name(lane),
                requested: LaneState::Active,
                max_iterations: Some(1),
                kind: LaneKind::Worktree,
                base: Some("main".into()),
            })
            .collect();
        Seen::Host(HostMsg::Lanes(entries))
    }

    fn snapshot(lane: &str, state: LoopState) -> Seen {
        let mut snapshot = Snapshot::starting(1, "agent".into(), chrono::Utc::now());
        snapshot.state = state;
        let report = LaneReport::Snapshot {
            snapshot: Arc::new(snapshot),
            queued: false,
        };
        Seen::Host(HostMsg::Lane {
            lane: name(lane),
            report,
        })
    }

    fn ended(lane: &str, reason: ExitReason) -> Seen {
        let report = LaneReport::Ended(Ok(reason));
        Seen::Host(HostMsg::Lane {
            lane: name(lane),
            report,
        })
    }

    /// A registered lane that runs then ends well calls once, even when its
    /// last snapshot and its end come together; a lane stopped by a signal, or
    /// one the registry does not list, calls nobody.
    #[test]
    fn the_host_messages_make_the_calls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("calls.txt");
        let command = format!("echo \"$CLOWDER_LANE $CLOWDER_EVENT\" >> {}", log.display());
        let callers = Callers {
            command: Some(Calls::new(&command, dir.path().to_path_buf())),
            notify: None,
        };
        let mut watcher = Watcher::new(dir.path(), dir.path().join("none"), callers, None);
        let mut feed = |seen: Seen| {
            watcher.apply(seen);
            watcher.look();
        };
        feed(lanes(&["a", "b"]));
        for lane in ["a", "b", "x"] {
            feed(snapshot(lane, LoopState::SessionRunning));
        }
        feed(snapshot("a", LoopState::Stopped));
        feed(ended("a", ExitReason::MaxIterations));
        let signal = ExitReason::Signal {
            signal: "SIGINT".into(),
            forced: false,
        };
        feed(ended("b", signal));
        feed(ended("x", ExitReason::MaxIterations));
        watcher.calls.finish();
        let calls = std::fs::read_to_string(&log).expect("a call");
        assert_eq!(calls, "a lane_done\n");
    }
}

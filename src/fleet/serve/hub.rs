//! The hub between the host and its watchers: it keeps what a new client
//! needs (the lanes, each lane's latest facts, the plans, the recent log and
//! the waiting requests), forwards every message to the control room on this
//! terminal unchanged, and offers each to every client's bounded queue. A
//! client whose queue is full misses changes until it has room again, then
//! gets an `overflowed` note and a fresh snapshot: the host never waits.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::ServeOptions;
use crate::fleet::LaneName;
use crate::fleet::link::{HostMsg, LaneReport};
use crate::fleet::wire::{HostSnapshot, LaneChange, LaneFacts, PendingRequest, ServerMsg, line};

/// With a watcher on the queue, its full listing is made every this many ticks.
const RELIST_TICKS: u64 = 8;
/// Lines a client may have waiting before it counts as fallen behind.
pub(super) const CLIENT_QUEUE: usize = 4_096;
/// Log lines and events kept for a client that arrives later.
const RECENT: usize = 200;
/// How often a fallen-behind client is looked at again, and the requests read
/// again while a client is connected.
const TICK: Duration = Duration::from_millis(250);
/// How often the queue's folder is told that someone is there, while they are.
const PRESENCE_TICK: Duration = Duration::from_secs(5);

/// A client's queue, as the hub holds it; `queued` hears when the snapshot
/// is in it, so that nothing the client asks is answered before it.
pub(super) struct Joined {
    pub(super) lines: mpsc::Sender<Arc<str>>,
    pub(super) queued: oneshot::Sender<()>,
    /// Set once the client asks for [`ServerMsg::LaneChanged`].
    pub(super) changes: Arc<AtomicBool>,
}

/// How the connections reach the hub.
#[derive(Clone)]
pub(super) struct HubHandle {
    pub(super) join: mpsc::UnboundedSender<Joined>,
    /// Ask for the requests to be read again now (after a decision).
    pub(super) rescan: mpsc::UnboundedSender<()>,
    /// A line for every watcher (who decided a request), as if the host said it.
    pub(super) news: mpsc::UnboundedSender<HostMsg>,
}

struct Client {
    lines: mpsc::Sender<Arc<str>>,
    /// Changes not sent since the queue was full; `None`: keeping up.
    dropped: Option<u64>,
    /// It reads [`ServerMsg::LaneChanged`] (see [`crate::fleet::wire::ClientMsg::Changes`]).
    changes: Arc<AtomicBool>,
}

/// One change as each kind of client reads it: the whole message, and for a
/// lane's snapshot where only its moving fields moved, the smaller one.
struct Lines<'m> {
    full: &'m ServerMsg,
    change: Option<ServerMsg>,
    full_text: Option<Arc<str>>,
    change_text: Option<Arc<str>>,
}

impl Lines<'_> {
    /// The line for a client that reads changes (`changes`) or not; each is
    /// made once, when a client first needs it.
    fn for_client(&mut self, changes: bool) -> Arc<str> {
        match (&self.change, changes) {
            (Some(change), true) => self
                .change_text
                .get_or_insert_with(|| Arc::from(line(change)))
                .clone(),
            _ => self
                .full_text
                .get_or_insert_with(|| Arc::from(line(self.full)))
                .clone(),
        }
    }
}

pub(super) struct Hub {
    state: State,
    clients: Vec<Client>,
    local: Option<mpsc::UnboundedSender<HostMsg>>,
    root: PathBuf,
    approvals_dir: PathBuf,
    watched: Arc<std::sync::atomic::AtomicBool>,
    notified: bool,
    /// When the queue's folder was last told someone is there.
    present_at: std::cell::Cell<Option<std::time::Instant>>,
}

#[derive(Default)]
struct State {
    lanes: Vec<crate::fleet::link::LaneEntry>,
    facts: BTreeMap<LaneName, LaneFacts>,
    plans: Vec<crate::fleet::link::PlanSummary>,
    idle: Option<(bool, bool)>,
    recent: VecDeque<HostMsg>,
    requests: Vec<PendingRequest>,
}

impl Hub {
    pub(super) fn spawn(
        from_host: mpsc::UnboundedReceiver<HostMsg>,
        local: Option<mpsc::UnboundedSender<HostMsg>>,
        options: &ServeOptions,
    ) -> HubHandle {
        let (join, joins) = mpsc::unbounded_channel();
        let (rescan, rescans) = mpsc::unbounded_channel();
        let (news, told) = mpsc::unbounded_channel();
        let hub = Hub {
            state: State::default(),
            clients: Vec::new(),
            local,
            root: options.root.clone(),
            approvals_dir: options.approvals_dir.clone(),
            watched: Arc::clone(&options.watched),
            notified: options.notified,
            present_at: std::cell::Cell::new(None),
        };
        hub.mark_watched();
        tokio::spawn(hub.run(from_host, joins, (rescans, told)));
        HubHandle { join, rescan, news }
    }

    async fn run(
        mut self,
        mut from_host: mpsc::UnboundedReceiver<HostMsg>,
        mut joins: mpsc::UnboundedReceiver<Joined>,
        (mut rescans, mut told): (
            mpsc::UnboundedReceiver<()>,
            mpsc::UnboundedReceiver<HostMsg>,
        ),
    ) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // Someone who looks, or is called, keeps the queue's folder marked so
        // while the host is quiet too.
        let mut presence = tokio::time::interval(PRESENCE_TICK);
        presence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let present = self.local.is_some() || self.notified;
        let (listed_tx, mut listed) = mpsc::unbounded_channel();
        let mut scanning = false;
        // A new client's snapshot waits for a listing of the requests begun
        // after it came: with nobody connected, the last listing may be old.
        let (mut waiting, mut in_scan): (Vec<Joined>, Vec<Joined>) = (Vec::new(), Vec::new());
        let (hint, mut hints) = mpsc::unbounded_channel::<()>();
        let mut watcher: Option<notify::RecommendedWatcher> = None;
        let mut ticks: u64 = 0;
        loop {
            let mut scan = false;
            tokio::select! {
                message = from_host.recv() => match message {
                    Some(message) => self.on_host(message),
                    // The host has ended: hanging up tells every client so.
                    None => return,
                },
                Some(joined) = joins.recv() => {
                    waiting.push(joined);
                    scan = true;
                }
                Some(()) = rescans.recv() => scan = true,
                Some(()) = hints.recv(), if !self.clients.is_empty() => {
                    while hints.try_recv().is_ok() {}
                    scan = true;
                }
                Some(message) = told.recv() => self.on_host(message),
                Some(requests) = listed.recv() => {
                    scanning = false;
                    self.on_requests(requests);
                    for joined in in_scan.drain(..) {
                        self.join(joined);
                    }
                    scan = !waiting.is_empty();
                }
                _ = presence.tick(), if present => {}
                // With no client there is nothing to catch up on or to list
                // for: an idle host is not woken.
                _ = tick.tick(), if !self.clients.is_empty() => {
                    self.catch_up();
                    ticks += 1;
                    // Changes in the queue are hinted by its watcher; a full
                    // listing every few seconds covers a hint that was lost.
                    // A watcher just made has missed what came before it
                    // (the first request makes the folder it watches): list now.
                    let unwatched = watcher.is_none();
                    if unwatched {
                        watcher = watch_pending(&self.approvals_dir, hint.clone());
                    }
                    scan = ticks.is_multiple_of(RELIST_TICKS) || unwatched;
                }
            }
            if scan && !scanning {
                scanning = true;
                in_scan.append(&mut waiting);
                self.scan(listed_tx.clone());
            }
            self.mark_watched();
        }
    }

    /// Lists the waiting requests off the runtime's thread.
    fn scan(&self, listed: mpsc::UnboundedSender<Vec<PendingRequest>>) {
        let (root, dir) = (self.root.clone(), self.approvals_dir.clone());
        tokio::task::spawn_blocking(move || {
            let (_, mut pending) = crate::approvals::list_pending_requests(&dir);
            crate::fleet::request_lane::attribute(&root, &mut pending);
            let requests = pending
                .into_iter()
                .map(PendingRequest::from_listing)
                .collect();
            let _ = listed.send(requests);
        });
    }

    fn on_requests(&mut self, requests: Vec<PendingRequest>) {
        if requests != self.state.requests {
            self.state.requests = requests.clone();
            self.broadcast(&ServerMsg::Requests { requests });
        }
    }

    fn on_host(&mut self, message: HostMsg) {
        let change = self.state.change_of(&message);
        self.state.remember(&message);
        if let Some(local) = &self.local
            && local.send(message.clone()).is_err()
        {
            self.local = None;
        }
        if !self.clients.is_empty() {
            let full = ServerMsg::Host { msg: message };
            let change = change.map(|change| ServerMsg::LaneChanged(Box::new(change)));
            self.send_all(Lines {
                full: &full,
                change,
                full_text: None,
                change_text: None,
            });
        }
    }

    /// Tells the host whether anyone watches now.
    /// Says whether anyone looks: for the host's own work, and in the queue's
    /// folder for the gate, which denies what only a person could decide when
    /// nobody is there to ask ([`crate::approvals::presence`]).
    fn mark_watched(&self) {
        let watched = self.local.is_some() || !self.clients.is_empty();
        self.watched
            .store(watched, std::sync::atomic::Ordering::Relaxed);
        let due = self
            .present_at
            .get()
            .is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1));
        if (watched || self.notified) && due {
            self.present_at.set(Some(std::time::Instant::now()));
            crate::approvals::presence::mark(&self.approvals_dir);
        }
    }

    fn join(&mut self, joined: Joined) {
        let snapshot = line(&ServerMsg::Snapshot(Box::new(self.state.snapshot())));
        if joined.lines.try_send(Arc::from(snapshot)).is_ok() {
            self.clients.push(Client {
                lines: joined.lines,
                dropped: None,
                changes: joined.changes,
            });
            let _ = joined.queued.send(());
        }
    }

    fn broadcast(&mut self, message: &ServerMsg) {
        self.send_all(Lines {
            full: message,
            change: None,
            full_text: None,
            change_text: None,
        });
    }

    fn send_all(&mut self, mut lines: Lines<'_>) {
        self.clients.retain_mut(|client| {
            if let Some(dropped) = client.dropped.as_mut() {
                *dropped += 1;
                return !client.lines.is_closed();
            }
            let text = lines.for_client(client.changes.load(Ordering::Relaxed));
            match client.lines.try_send(text) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    client.dropped = Some(1);
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// A client that fell behind and has room again: told so, then given the
    /// state as it is now.
    fn catch_up(&mut self) {
        let mut snapshot: Option<Arc<str>> = None;
        for client in &mut self.clients {
            let Some(dropped) = client.dropped else {
                continue;
            };
            if client.lines.capacity() < 2 {
                continue;
            }
            let note = line(&ServerMsg::Overflowed { dropped });
            let snapshot = snapshot
                .get_or_insert_with(|| {
                    Arc::from(line(&ServerMsg::Snapshot(Box::new(self.state.snapshot()))))
                })
                .clone();
            if client.lines.try_send(Arc::from(note)).is_ok()
                && client.lines.try_send(snapshot).is_ok()
            {
                client.dropped = None;
            }
        }
        self.clients.retain(|client| !client.lines.is_closed());
    }
}

impl State {
    /// `message` as a [`LaneChange`], when it is a lane's snapshot where only
    /// what a change carries moved since the last one.
    fn change_of(&self, message: &HostMsg) -> Option<LaneChange> {
        let HostMsg::Lane {
            lane,
            report: LaneReport::Snapshot { snapshot, queued },
        } = message
        else {
            return None;
        };
        let facts = self.facts.get(lane)?;
        let old = facts.snapshot.as_deref()?;
        LaneChange::between(lane, (old, facts.queued), (snapshot, *queued))
    }

    fn remember(&mut self, message: &HostMsg) {
        match message {
            HostMsg::Lanes(lanes) => {
                self.lanes = lanes.clone();
                let names: Vec<&LaneName> = lanes.iter().map(|entry| &entry.name).collect();
                self.facts.retain(|name, _| names.contains(&name));
            }
            HostMsg::Plans(plans) => self.plans = plans.clone(),
            HostMsg::Idle { idle, signalled } => self.idle = Some((*idle, *signalled)),
            HostMsg::Lane { lane, report } => self.remember_report(lane, report, message),
            HostMsg::Log { .. } => self.keep_recent(message),
            HostMsg::LaneAdded { .. } => {}
        }
    }

    fn remember_report(&mut self, lane: &LaneName, report: &LaneReport, message: &HostMsg) {
        let facts = self.facts.entry(lane.clone()).or_insert_with(|| LaneFacts {
            lane: lane.clone(),
            snapshot: None,
            queued: false,
            ahead: None,
            ended: None,
        });
        match report {
            LaneReport::Snapshot { snapshot, queued } => {
                facts.snapshot = Some(Arc::clone(snapshot));
                facts.queued = *queued;
                // A lane that runs again has not ended.
                if snapshot.exit_reason.is_none() {
                    facts.ended = None;
                }
            }
            LaneReport::Ahead(ahead) => facts.ahead = Some(*ahead),
            LaneReport::Ended(ended) => facts.ended = Some(ended.clone()),
            LaneReport::Log { .. } | LaneReport::Event { .. } => self.keep_recent(message),
            LaneReport::Diff(_) | LaneReport::Removed(_) | LaneReport::Unreachable(_) => {}
        }
    }

    fn keep_recent(&mut self, message: &HostMsg) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(message.clone());
    }

    fn snapshot(&self) -> HostSnapshot {
        HostSnapshot {
            lanes: self.lanes.clone(),
            facts: self
                .lanes
                .iter()
                .filter_map(|entry| self.facts.get(&entry.name).cloned())
                .collect(),
            plans: self.plans.clone(),
            idle: self.idle,
            recent: self.recent.iter().cloned().collect(),
            requests: self.requests.clone(),
            changes: true,
        }
    }
}

/// Watches the queue's `pending/` folder (made if need be); its events are
/// only hints to list again.
fn watch_pending(
    approvals_dir: &std::path::Path,
    hint: mpsc::UnboundedSender<()>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let pending = approvals_dir.join("pending");
    // Made now (as the first gate would make it), so that the first request
    // is hinted like the others, and the queue is not listed every tick
    // until it comes.
    if !pending.is_dir() {
        crate::approvals::Queue::open(approvals_dir).ok()?;
    }
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if crate::approvals::is_change_hint(&event) {
            let _ = hint.send(());
        }
    })
    .ok()?;
    watcher
        .watch(&pending, notify::RecursiveMode::NonRecursive)
        .ok()?;
    Some(watcher)
}

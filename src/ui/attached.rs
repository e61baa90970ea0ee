//! The control room attached to a host that runs elsewhere (another process,
//! another machine): the same screen and keys, fed by the host's protocol
//! instead of the host's thread. Quitting leaves the host running. What the
//! room would do to files itself (decide a request, follow an output file,
//! leave a note) it asks of the host.

use tokio::sync::mpsc;

use super::fleet::{Feeds, Link, Room, room_loop};
use super::{Files, TerminalGuard};
use crate::agent::follow::FollowUpdate;
use crate::approvals::Request;
use crate::fleet::LaneName;
use crate::fleet::link::{HostMsg, HostRequest, LaneEntry, PlanSummary};
use crate::fleet::remote::{RemoteEvent, Target, keep_reached_as, unreachable_text};
use crate::fleet::wire::{ClientMsg, PendingRequest};
use crate::supervisor::core::Level;

/// A host to attach to, and the name its lanes go by (`NAME/lane`) when the
/// room shows several; `None`: the name the host gives itself.
pub struct HostTarget {
    pub name: Option<String>,
    pub target: Target,
}

/// Opens the room on the hosts at `targets` until the user quits; 0, or 1 if
/// the terminal could not be used.
pub fn run_attached(targets: Vec<HostTarget>) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("clowder: error: cannot start the async runtime: {err}");
            return 1;
        }
    };
    let files = Files {
        root: std::path::PathBuf::from("."),
        approvals_dir: std::path::PathBuf::new(),
        config_path: std::path::PathBuf::new(),
        stop_file: std::path::PathBuf::new(),
    };
    let hosts = host_labels(&targets);
    let done = runtime.block_on(async {
        let (host_tx, from_host) = mpsc::unbounded_channel();
        let (requests, requests_rx) = mpsc::unbounded_channel();
        let guard =
            TerminalGuard::enter().map_err(|err| format!("cannot set up the terminal: {err}"))?;
        let attached = Attached {
            targets,
            host_tx,
            requests: requests_rx,
        };
        let link = Link::Attached(Box::new(move |asks| attached.start(asks)));
        let room = Room {
            root: files.root.clone(),
            format: crate::agent::stream::AgentFormat::Auto,
            files: &files,
            caller: super::caller::Caller::new(&crate::config::UiConfig::default(), &files.root),
            parent: None,
            link,
        };
        room_loop(guard, from_host, requests, room)
            .await
            .map_err(|err| format!("terminal error: {err}"))
    });
    match done {
        Ok(()) => {
            // `q` left at once, without a question: say that nothing stopped.
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = writeln!(
                out,
                "clowder: left the room; the lanes go on ({hosts}): `clowder attach` shows them again"
            );
            let _ = out.flush();
            0
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

/// The hosts as the message on leaving names them: a folder by its full path.
fn host_labels(targets: &[HostTarget]) -> String {
    let labels: Vec<String> = targets
        .iter()
        .map(|host| match (&host.name, &host.target) {
            (Some(name), _) => name.clone(),
            (None, Target::Folder(folder)) => std::fs::canonicalize(folder)
                .unwrap_or_else(|_| folder.clone())
                .display()
                .to_string(),
            (None, target) => target.label(),
        })
        .collect();
    crate::escape::one_line(&labels.join(", "))
}

/// An attached room's hosts and channels, before the room starts.
struct Attached {
    targets: Vec<HostTarget>,
    host_tx: mpsc::UnboundedSender<HostMsg>,
    requests: mpsc::UnboundedReceiver<HostRequest>,
}

impl Attached {
    /// Reaches every host and carries their events into the room's channels;
    /// what the room asks goes through `asks`.
    fn start(self, asks: mpsc::UnboundedReceiver<ClientMsg>) -> Feeds {
        let (feed_tx, feed_rx) = mpsc::unbounded_channel();
        let (listing_tx, listing_rx) = mpsc::unbounded_channel();
        let (hint_tx, _hints) = mpsc::unbounded_channel();
        let (tagged_tx, tagged) = mpsc::unbounded_channel();
        let multi = self.targets.len() > 1;
        let pairs: Vec<(Option<String>, Target)> = self
            .targets
            .into_iter()
            .map(|HostTarget { name, target }| (name, target))
            .collect();
        let labels = crate::fleet::remote::host_labels(&pairs);
        let hosts = pairs
            .into_iter()
            .zip(labels)
            .enumerate()
            .map(|(index, ((_, target), label))| {
                HostLink::new(keep_reached_as(index, target, tagged_tx.clone()), label)
            })
            .collect();
        let carrier = Carrier {
            host_tx: self.host_tx,
            listing_tx,
            feed_tx: feed_tx.clone(),
            hosts,
            multi,
            asked: 0,
            current: 0,
            decisions: std::collections::HashMap::new(),
            unsaid: Vec::new(),
            out: Vec::new(),
            lanes_at: None,
            lanes_due: false,
        };
        let task = tokio::spawn(carrier.run(tagged, self.requests, asks));
        Feeds {
            feed_tx,
            feed_rx,
            hint_tx,
            listing_rx,
            task,
        }
    }
}

/// One host as the carrier knows it.
struct HostLink {
    to_host: mpsc::UnboundedSender<ClientMsg>,
    /// How its lanes are named in a room of several hosts (`LABEL/lane`).
    label: String,
    /// The output file the room shows, if on this host: followed again after
    /// a reconnection.
    following: Option<ClientMsg>,
    attached_once: bool,
    /// The host's hello, said after its snapshot.
    hello: Option<String>,
    lanes: Vec<LaneEntry>,
    plans: Vec<PlanSummary>,
    requests: Vec<PendingRequest>,
    idle: Option<(bool, bool)>,
    /// Not reached since then; `None` while it answers.
    lost: Option<chrono::DateTime<chrono::Utc>>,
    /// Why, as last said in the events: said again only when it changes.
    lost_why: String,
}

impl HostLink {
    fn new(to_host: mpsc::UnboundedSender<ClientMsg>, label: String) -> HostLink {
        HostLink {
            to_host,
            label,
            following: None,
            attached_once: false,
            hello: None,
            lanes: Vec::new(),
            plans: Vec::new(),
            requests: Vec::new(),
            idle: None,
            lost: None,
            lost_why: String::new(),
        }
    }
}

/// The most lines kept for the first lanes.
const UNSAID: usize = 20;

/// Carries the hosts' events to the room and the room's asks to the host of
/// the lane (or request) they are about.
struct Carrier {
    host_tx: mpsc::UnboundedSender<HostMsg>,
    listing_tx: mpsc::UnboundedSender<(bool, Vec<Request>)>,
    feed_tx: mpsc::UnboundedSender<FollowUpdate>,
    hosts: Vec<HostLink>,
    /// Several hosts: lanes are named `HOST/lane`.
    multi: bool,
    asked: u64,
    /// The host of the lane the room shows: a new lane, or a plan's request, goes there.
    current: usize,
    /// Which host each listed request is waiting on.
    decisions: std::collections::HashMap<String, usize>,
    /// Lines said while no host had shown a lane: said again to the first
    /// lanes (the screen without lanes that showed them is gone by then).
    unsaid: Vec<(Level, String)>,
    /// What the room is sent once the batch is over (see [`Carrier::emit`]).
    out: Vec<HostMsg>,
    /// Where in `out` the lanes go, and whether a host's lanes changed.
    lanes_at: Option<usize>,
    lanes_due: bool,
}

/// At most this many events of the hosts go to the room in one batch.
const EVENT_BATCH: usize = 256;

impl Carrier {
    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<(usize, RemoteEvent)>,
        mut requests: mpsc::UnboundedReceiver<HostRequest>,
        mut asks: mpsc::UnboundedReceiver<ClientMsg>,
    ) {
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some((host, event)) => {
                        self.on_event(host, event);
                        // What else the hosts said meanwhile goes to the room with it.
                        let mut taken = 1;
                        while taken < EVENT_BATCH
                            && let Ok((host, event)) = events.try_recv()
                        {
                            self.on_event(host, event);
                            taken += 1;
                        }
                    }
                    None => return,
                },
                Some(request) = requests.recv() => self.request(request),
                ask = asks.recv() => match ask {
                    Some(ask) => self.ask(ask),
                    None => return,
                },
            }
            self.flush();
        }
    }

    /// Queues `message` for the room. The lanes of every host are sent once a
    /// batch, where the batch's first list of lanes was: as hosts come (a
    /// hundred at start), the room takes the whole list a few times, not once
    /// a host; the reports after it name lanes the list holds.
    fn emit(&mut self, message: HostMsg) {
        if matches!(message, HostMsg::Lanes(_)) {
            self.lanes_due = true;
            if self.lanes_at.is_some() {
                return;
            }
            self.lanes_at = Some(self.out.len());
        }
        self.out.push(message);
    }

    /// Sends the room what the batch said.
    fn flush(&mut self) {
        if let Some(at) = self.lanes_at.take()
            && std::mem::take(&mut self.lanes_due)
        {
            self.out[at] = HostMsg::Lanes(self.all_lanes());
        }
        for message in self.out.drain(..) {
            let _ = self.host_tx.send(message);
        }
    }

    /// The room's name for `lane` of `host`.
    fn outward(&self, host: usize, lane: &LaneName) -> LaneName {
        match (&self.hosts[host].label, self.multi) {
            (label, true) => LaneName::on_host(label, lane),
            _ => lane.clone(),
        }
    }

    /// The host and its own name of a lane the room names.
    fn inward(&self, lane: &LaneName) -> Option<(usize, LaneName)> {
        if !self.multi {
            return Some((0, lane.clone()));
        }
        let (label, lane) = lane.host_and_lane()?;
        let host = self.hosts.iter().position(|host| host.label == label)?;
        Some((host, lane))
    }

    fn send(&mut self, host: usize, message: ClientMsg) {
        let _ = self.hosts[host].to_host.send(message);
    }

    /// Sends what a key asked of `host`; a lost host is said to be lost, and
    /// tried again now (what was asked is not kept for later: it may no
    /// longer make sense when the host is back).
    fn send_asked(&mut self, host: usize, message: ClientMsg, what: &str) {
        if let Some(since) = self.hosts[host].lost {
            let name = format!("host {}", self.hosts[host].label);
            let since = since.with_timezone(&chrono::Local).format("%H:%M");
            self.say(
                Level::Warn,
                format!("not sent to {name} (unreachable since {since}): {what}; trying to reach it again now"),
            );
        }
        self.send(host, message);
    }

    /// Every lane of `host`, as the room names it, told whether its host is lost.
    fn mark_reach(&mut self, host: usize) {
        let since = self.hosts[host].lost;
        let lanes: Vec<LaneName> = self.hosts[host]
            .lanes
            .iter()
            .map(|entry| self.outward(host, &entry.name))
            .collect();
        for lane in lanes {
            let report = crate::fleet::link::LaneReport::Unreachable(since);
            self.emit(HostMsg::Lane { lane, report });
        }
    }

    fn request(&mut self, request: HostRequest) {
        let (host, request) = match self.route(request) {
            Some(routed) => routed,
            None => return,
        };
        self.asked += 1;
        let re = Some(self.asked);
        self.send_asked(
            host,
            ClientMsg::Request {
                re,
                request,
                wait: false,
                by: String::new(),
            },
            "the request",
        );
    }

    /// The host a request is for, and the request as that host names things.
    fn route(&self, request: HostRequest) -> Option<(usize, HostRequest)> {
        let lane_of = |lane: &LaneName| self.inward(lane);
        let routed = match request {
            HostRequest::Command { lane, command } => {
                let (host, lane) = lane_of(&lane)?;
                (host, HostRequest::Command { lane, command })
            }
            HostRequest::Diff(lane) => lane_of(&lane).map(|(h, l)| (h, HostRequest::Diff(l)))?,
            HostRequest::Work(lane) => lane_of(&lane).map(|(h, l)| (h, HostRequest::Work(l)))?,
            HostRequest::Remove(lane) => {
                lane_of(&lane).map(|(h, l)| (h, HostRequest::Remove(l)))?
            }
            HostRequest::StopTask(lane) => {
                lane_of(&lane).map(|(h, l)| (h, HostRequest::StopTask(l)))?
            }
            HostRequest::MergeLane(lane) => {
                lane_of(&lane).map(|(h, l)| (h, HostRequest::MergeLane(l)))?
            }
            HostRequest::PushLane(lane) => {
                lane_of(&lane).map(|(h, l)| (h, HostRequest::PushLane(l)))?
            }
            HostRequest::RestartLane(lane) => {
                lane_of(&lane).map(|(h, l)| (h, HostRequest::RestartLane(l)))?
            }
            HostRequest::Tell { lane, text } => {
                let (host, lane) = lane_of(&lane)?;
                (host, HostRequest::Tell { lane, text })
            }
            // Only the room that started a host detaches it.
            HostRequest::Detached => return None,
            other @ (HostRequest::AddLane(_)
            | HostRequest::MergeStep { .. }
            | HostRequest::RetryPlan { .. }) => (self.current, other),
        };
        Some(routed)
    }

    fn ask(&mut self, ask: ClientMsg) {
        match ask {
            ClientMsg::Follow { lane, file } => {
                let Some((host, lane)) = self.inward(&lane) else {
                    return;
                };
                self.current = host;
                let follow = ClientMsg::Follow { lane, file };
                for (index, link) in self.hosts.iter_mut().enumerate() {
                    link.following = (index == host).then(|| follow.clone());
                }
                self.send(host, follow);
            }
            ClientMsg::Decide { ref id, .. } => {
                let host = self.decisions.get(id).copied().unwrap_or(self.current);
                let what = format!("the decision on request {id}");
                self.send_asked(host, ask, &what);
            }
            other => {
                let host = self.current;
                self.send(host, other);
            }
        }
    }

    fn say(&mut self, level: Level, text: String) {
        if self.hosts.iter().all(|host| host.lanes.is_empty()) && self.unsaid.len() < UNSAID {
            self.unsaid.push((level, text.clone()));
        }
        self.emit(HostMsg::Log { level, text });
    }

    /// How the room names a host in its lines.
    fn host_name(&self, host: usize) -> String {
        match (&self.hosts[host].label, self.multi) {
            (label, true) => format!("host {label}"),
            _ => "the host".to_string(),
        }
    }

    fn on_event(&mut self, host: usize, event: RemoteEvent) {
        match event {
            RemoteEvent::Hello(hello) => self.on_hello(host, &hello),
            RemoteEvent::Snapshot(snapshot) => self.on_snapshot(host, *snapshot),
            RemoteEvent::Host(message) => self.on_host_msg(host, message),
            RemoteEvent::Requests(requests) => {
                self.hosts[host].requests = requests;
                self.list();
            }
            RemoteEvent::Reply { ok, text, .. } => {
                let name = self.host_name(host);
                // A decision made is told to every room by the host itself.
                if !ok {
                    self.say(Level::Warn, format!("{name}: {text}"));
                }
            }
            RemoteEvent::Refused(why) => {
                let name = self.host_name(host);
                self.say(Level::Warn, format!("{name} refused: {why}"));
            }
            RemoteEvent::Overflowed(dropped) => self.say(
                Level::Warn,
                format!(
                    "this room fell behind: {dropped} changes skipped, the host's state read again"
                ),
            ),
            RemoteEvent::Output(output) => {
                let update = FollowUpdate {
                    file: output.file,
                    lines: output.lines.into_iter().map(Into::into).collect(),
                    stats: output.stats,
                    reset: output.reset,
                };
                let _ = self.feed_tx.send(update);
            }
            RemoteEvent::Lost { since, why, retry } => {
                let name = format!("host {}", self.hosts[host].label);
                // Each try again is not news: a new reason is.
                if self.hosts[host].lost.is_none() || self.hosts[host].lost_why != why {
                    self.say(Level::Warn, unreachable_text(&name, since, &why, retry));
                    self.hosts[host].lost_why = why;
                }
                if self.hosts[host].lost.is_none() {
                    self.hosts[host].lost = Some(since);
                    self.mark_reach(host);
                }
            }
        }
    }

    fn on_hello(&mut self, host: usize, hello: &crate::fleet::wire::Hello) {
        if self.hosts[host].lost.take().is_some() {
            self.hosts[host].lost_why.clear();
            self.mark_reach(host);
        }
        let name = self.host_name(host);
        // Said once the snapshot has made the lanes, so that every lane shows it.
        self.hosts[host].hello = Some(format!(
            "attached to {name} on {} in {} (clowder {}, PID {})",
            hello.host, hello.folder, hello.clowder, hello.pid
        ));
        if let Some(follow) = self.hosts[host].following.clone() {
            self.send(host, follow);
        }
    }

    fn on_snapshot(&mut self, host: usize, snapshot: crate::fleet::wire::HostSnapshot) {
        let mut messages = snapshot.replay();
        if self.hosts[host].attached_once {
            // The events already shown are not shown twice.
            messages.retain(|message| !is_recent(message));
        }
        self.hosts[host].attached_once = true;
        for message in messages {
            self.on_host_msg(host, message);
        }
        self.hosts[host].requests = snapshot.requests;
        self.list();
        if let Some(hello) = self.hosts[host].hello.take() {
            self.say(Level::Info, hello);
        }
    }

    /// A host's message, its lanes named as the room names them; the lists
    /// of lanes, plans and requests merged over every host.
    fn on_host_msg(&mut self, host: usize, message: HostMsg) {
        let renamed = match message {
            HostMsg::Lane { lane, report } => HostMsg::Lane {
                lane: self.outward(host, &lane),
                report,
            },
            HostMsg::LaneAdded { lane, result } => HostMsg::LaneAdded {
                lane: self.outward(host, &lane),
                result,
            },
            HostMsg::Lanes(entries) => {
                self.hosts[host].lanes = entries;
                // Made once the batch is over (see `emit`).
                HostMsg::Lanes(Vec::new())
            }
            HostMsg::Plans(plans) => {
                self.hosts[host].plans = plans;
                HostMsg::Plans(self.all_plans())
            }
            HostMsg::Idle { idle, signalled } => {
                self.hosts[host].idle = Some((idle, signalled));
                let every = |f: fn(&(bool, bool)) -> bool| {
                    self.hosts.iter().filter_map(|h| h.idle.as_ref()).any(f)
                };
                HostMsg::Idle {
                    idle: !every(|(idle, _)| !idle),
                    signalled: every(|(_, signalled)| *signalled),
                }
            }
            HostMsg::Log { level, text } if self.multi => {
                let name = self.host_name(host);
                HostMsg::Log {
                    level,
                    text: format!("{name}: {text}"),
                }
            }
            log @ HostMsg::Log { .. } => log,
        };
        let lanes_came = matches!(&renamed, HostMsg::Lanes(_))
            && self.hosts.iter().any(|host| !host.lanes.is_empty());
        self.emit(renamed);
        if lanes_came {
            for (level, text) in std::mem::take(&mut self.unsaid) {
                self.emit(HostMsg::Log { level, text });
            }
        }
    }

    fn all_lanes(&self) -> Vec<LaneEntry> {
        let mut all = Vec::new();
        for (index, host) in self.hosts.iter().enumerate() {
            for entry in &host.lanes {
                let mut entry = entry.clone();
                entry.name = self.outward(index, &entry.name);
                all.push(entry);
            }
        }
        all
    }

    fn all_plans(&self) -> Vec<PlanSummary> {
        let mut all = Vec::new();
        for (index, host) in self.hosts.iter().enumerate() {
            for plan in &host.plans {
                let mut plan = plan.clone();
                if let (true, label) = (self.multi, &self.hosts[index].label) {
                    plan.address = format!("{label}/{}", plan.address);
                    for step in &mut plan.steps {
                        step.lane = format!("{label}/{}", step.lane);
                    }
                }
                all.push(plan);
            }
        }
        all
    }

    /// Every host's waiting requests, each with the lane as the room names it.
    fn list(&mut self) {
        self.decisions.clear();
        let mut all = Vec::new();
        for (index, host) in self.hosts.iter().enumerate() {
            for pending in &host.requests {
                let mut request = pending.clone().into_request();
                if self.multi {
                    let label = &host.label;
                    request.lane = Some(match request.lane {
                        Some(lane) => format!("{label}/{lane}"),
                        None => label.clone(),
                    });
                }
                self.decisions.insert(request.id.clone(), index);
                all.push(request);
            }
        }
        let _ = self.listing_tx.send((true, all));
    }
}

fn is_recent(message: &HostMsg) -> bool {
    use crate::fleet::link::LaneReport;
    matches!(
        message,
        HostMsg::Log { .. }
            | HostMsg::Lane {
                report: LaneReport::Log { .. } | LaneReport::Event { .. },
                ..
            }
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fleet::link::LaneReport;
    use crate::fleet::registry::{LaneKind, LaneState};
    use crate::fleet::wire::{HostSnapshot, LaneFacts};

    fn host_snapshot(lanes: &[&str]) -> RemoteEvent {
        let mut snapshot = HostSnapshot::default();
        for lane in lanes {
            let name = LaneName::parse(lane).expect("a lane name");
            snapshot.lanes.push(LaneEntry {
                name: name.clone(),
                requested: LaneState::Active,
                max_iterations: Some(3),
                kind: LaneKind::Worktree,
                base: Some("main".into()),
            });
            let state = crate::ui::app::lanes::placeholder(lane, Some(3));
            snapshot.facts.push(LaneFacts {
                lane: name,
                snapshot: Some(Arc::new(state)),
                queued: false,
                ahead: None,
                ended: None,
            });
        }
        RemoteEvent::Snapshot(Box::new(snapshot))
    }

    fn carrier(hosts: usize) -> (Carrier, mpsc::UnboundedReceiver<HostMsg>) {
        let (host_tx, room) = mpsc::unbounded_channel();
        let (listing_tx, _listing) = mpsc::unbounded_channel();
        let (feed_tx, _feed) = mpsc::unbounded_channel();
        let links = (0..hosts)
            .map(|i| HostLink::new(mpsc::unbounded_channel().0, format!("h{}", i + 1)))
            .collect();
        let carrier = Carrier {
            host_tx,
            listing_tx,
            feed_tx,
            hosts: links,
            multi: hosts > 1,
            asked: 0,
            current: 0,
            decisions: std::collections::HashMap::new(),
            unsaid: Vec::new(),
            out: Vec::new(),
            lanes_at: None,
            lanes_due: false,
        };
        (carrier, room)
    }

    /// Hosts whose snapshots come in one batch give the room one list of
    /// every host's lanes, ahead of every lane's report.
    #[test]
    fn the_lanes_of_hosts_that_come_together_are_listed_once_before_their_reports() {
        let (mut carrier, mut room) = carrier(3);
        carrier.on_event(1, host_snapshot(&["a", "b"]));
        carrier.on_event(0, host_snapshot(&["a"]));
        carrier.on_event(2, host_snapshot(&["c"]));
        carrier.flush();
        let mut sent = Vec::new();
        while let Ok(message) = room.try_recv() {
            sent.push(message);
        }
        let lists: Vec<Vec<String>> = sent
            .iter()
            .filter_map(|m| match m {
                HostMsg::Lanes(lanes) => Some(lanes.iter().map(|l| l.name.to_string()).collect()),
                _ => None,
            })
            .collect();
        assert_eq!(lists, [["h1/a", "h2/a", "h2/b", "h3/c"]]);
        assert!(matches!(sent[0], HostMsg::Lanes(_)), "{:?}", sent[0]);
        let reports = sent
            .iter()
            .filter(|m| {
                matches!(
                    m,
                    HostMsg::Lane {
                        report: LaneReport::Snapshot { .. },
                        ..
                    }
                )
            })
            .count();
        assert_eq!(reports, 4);
        // A later host alone: the list again, with it.
        carrier.hosts[2].lanes.clear();
        carrier.on_event(2, host_snapshot(&["d"]));
        carrier.flush();
        let Ok(HostMsg::Lanes(lanes)) = room.try_recv() else {
            panic!("no list of lanes first");
        };
        assert_eq!(lanes.len(), 4);
        assert_eq!(lanes[3].name.to_string(), "h3/d");
    }
}

//! What the web inbox knows of the fleet: each host's lanes, facts and
//! pending requests, and the latest events, kept from the host protocol's
//! messages, with what each message changed, so that only those parts of
//! the page's view are made again.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::fleet::LaneName;
use crate::fleet::link::{HostMsg, LaneEntry, LaneReport, PlanSummary};
use crate::fleet::remote::RemoteEvent;
use crate::fleet::wire::{Hello, HostSnapshot, PendingRequest};
use crate::lane_status::{Facts, LaneStatus};
use crate::protocol::{ExitReason, Snapshot};
use crate::supervisor::core::Level;

/// Events the page shows, per host: as many as the room's pane keeps.
const EVENTS_KEPT: usize = 200;

/// One host as the page knows it.
#[derive(Default)]
pub struct HostState {
    /// The name its lanes go by when the page shows several hosts.
    pub label: Option<String>,
    pub hello: Option<Hello>,
    pub lanes: Vec<LaneEntry>,
    pub facts: HashMap<LaneName, LaneFacts>,
    pub requests: Vec<PendingRequest>,
    /// Why it cannot be reached now, if it cannot.
    pub lost: Option<String>,
    pub events: VecDeque<EventLine>,
    pub plans: Vec<PlanSummary>,
    pub costs: super::costs::Costs,
}

/// What the host said of one lane.
#[derive(Default, Clone)]
pub struct LaneFacts {
    pub snapshot: Option<Arc<Snapshot>>,
    pub queued: bool,
    pub ahead: Option<Option<u64>>,
    pub ended: Option<Result<ExitReason, String>>,
    /// When the run that ended had started: a snapshot of a later run (the
    /// lane run again) says it no longer has.
    pub ended_run: Option<DateTime<Utc>>,
}

/// Numbers every event line once, over every host: a page knows a line by it.
static NEXT_EVENT: AtomicU64 = AtomicU64::new(1);

/// One line of the events list.
#[derive(Debug, Clone, Serialize)]
pub struct EventLine {
    pub id: u64,
    pub at: DateTime<Utc>,
    pub level: &'static str,
    pub lane: Option<String>,
    pub text: String,
    /// The line that says its host is unreachable: each retry updates it
    /// rather than adding one.
    #[serde(skip)]
    pub lost: bool,
}

/// What changed since the view's parts were last made.
#[derive(Default)]
pub struct Dirty {
    /// Hosts whose every lane is made again (a new list, a snapshot, a name).
    pub hosts: BTreeSet<usize>,
    pub lanes: HashSet<(usize, LaneName)>,
    pub header: bool,
    pub requests: bool,
    pub events: bool,
    pub plans: bool,
}

/// The fleet over every host the page serves.
pub struct Model {
    pub hosts: Vec<HostState>,
    /// Several hosts: lanes are named `HOST/lane`.
    pub multi: bool,
    pub dirty: Dirty,
}

impl Model {
    pub fn new(labels: Vec<Option<String>>) -> Model {
        let multi = labels.len() > 1;
        let hosts: Vec<HostState> = labels
            .into_iter()
            .map(|label| HostState {
                label,
                lost: Some("not reached yet".to_string()),
                ..HostState::default()
            })
            .collect();
        // Everything is made at first.
        let dirty = Dirty {
            hosts: (0..hosts.len()).collect(),
            header: true,
            requests: true,
            events: true,
            plans: true,
            ..Dirty::default()
        };
        Model {
            hosts,
            multi,
            dirty,
        }
    }

    /// What changed since the last call.
    pub fn take_dirty(&mut self) -> Dirty {
        std::mem::take(&mut self.dirty)
    }

    /// Takes one event of host `index`; whether the page's view changed.
    pub fn apply(&mut self, index: usize, event: &RemoteEvent, now: DateTime<Utc>) -> bool {
        let Some(host) = self.hosts.get_mut(index) else {
            return false;
        };
        let dirty = &mut self.dirty;
        match event {
            RemoteEvent::Hello(hello) => {
                host.hello = Some(hello.clone());
                host.lost = None;
                // Its name may name its lanes and requests.
                dirty.hosts.insert(index);
                dirty.header = true;
                dirty.requests = true;
            }
            RemoteEvent::Snapshot(snapshot) => {
                host.take_snapshot(snapshot, now);
                dirty.hosts.insert(index);
                dirty.requests = true;
                dirty.events = true;
                dirty.plans = true;
            }
            RemoteEvent::Host(msg) => return host.take(msg, now, index, dirty),
            RemoteEvent::Requests(requests) if *requests == host.requests => return false,
            RemoteEvent::Requests(requests) => {
                // The lanes they name count them, and may need you now or no more.
                for pending in host.requests.iter().chain(requests) {
                    if let Some(lane) = pending.request.lane.as_deref()
                        && let Ok(lane) = LaneName::parse(lane)
                    {
                        dirty.lanes.insert((index, lane));
                    }
                }
                host.requests = requests.clone();
                dirty.requests = true;
            }
            RemoteEvent::Refused(reason) => {
                host.log(now, Level::Warn, None, reason);
                dirty.events = true;
            }
            RemoteEvent::Lost { since, why, retry } => {
                let name = match (self.multi, host_label(host)) {
                    (true, Some(label)) => format!("host {label}"),
                    _ => "host".to_string(),
                };
                let text = crate::fleet::remote::unreachable_text(&name, *since, why, *retry);
                host.lost = Some(why.clone());
                host.say_lost(now, &text);
                dirty.header = true;
                dirty.events = true;
            }
            RemoteEvent::Reply { .. } | RemoteEvent::Overflowed(_) | RemoteEvent::Output(_) => {
                return false;
            }
        }
        true
    }

    /// The host and its own name for a lane the page names (`HOST/lane` when
    /// several hosts are served).
    pub fn locate(&self, shown: &str) -> Option<(usize, LaneName)> {
        self.hosts.iter().enumerate().find_map(|(index, host)| {
            host.lanes
                .iter()
                .find(|entry| self.shown_name(host, &entry.name) == shown)
                .map(|entry| (index, entry.name.clone()))
        })
    }

    /// The host that holds request `id`.
    pub fn host_of_request(&self, id: &str) -> Option<usize> {
        self.hosts
            .iter()
            .position(|host| host.requests.iter().any(|r| r.request.id == id))
    }

    pub fn shown_name(&self, host: &HostState, lane: &LaneName) -> String {
        match (self.multi, host_label(host)) {
            (true, Some(label)) => format!("{label}/{lane}"),
            _ => lane.to_string(),
        }
    }
}

/// A host's name: the one given on the command line, else its own.
pub fn host_label(host: &HostState) -> Option<String> {
    host.label
        .clone()
        .or_else(|| host.hello.as_ref().map(|hello| hello.host.clone()))
}

impl HostState {
    fn take_snapshot(&mut self, snapshot: &HostSnapshot, now: DateTime<Utc>) {
        self.lanes = snapshot.lanes.clone();
        self.requests = snapshot.requests.clone();
        self.plans = snapshot.plans.clone();
        self.facts = snapshot
            .facts
            .iter()
            .map(|facts| {
                let lane = LaneFacts {
                    snapshot: facts.snapshot.clone(),
                    queued: facts.queued,
                    ahead: facts.ahead,
                    ended: facts.ended.clone(),
                    ended_run: None,
                };
                (facts.lane.clone(), lane)
            })
            .collect();
        // A snapshot's recent lines are what the host kept: they replace ours,
        // so that a reconnection does not show them twice.
        self.events.clear();
        let mut ignored = Dirty::default();
        for msg in &snapshot.recent {
            self.take(msg, now, 0, &mut ignored);
        }
    }

    /// Takes one message of host `index`, noting in `dirty` what it
    /// changed; whether the view changed.
    fn take(&mut self, msg: &HostMsg, now: DateTime<Utc>, index: usize, dirty: &mut Dirty) -> bool {
        match msg {
            HostMsg::Lane { lane, report } => {
                let changed = self.take_report(lane, report);
                match report {
                    LaneReport::Log { .. } | LaneReport::Event { .. } => dirty.events |= changed,
                    _ => {
                        dirty.lanes.insert((index, lane.clone()));
                    }
                }
                return changed;
            }
            HostMsg::Lanes(lanes) => {
                self.lanes = lanes.clone();
                dirty.hosts.insert(index);
                dirty.requests = true;
                return true;
            }
            HostMsg::Log { level, text } => self.log(now, *level, None, text),
            HostMsg::LaneAdded { lane, result } => {
                let (level, text) = match result {
                    Ok(text) => (Level::Info, text.clone()),
                    Err(why) => (Level::Warn, format!("lane {lane} not added: {why}")),
                };
                self.log(now, level, Some(lane), &text);
            }
            HostMsg::Plans(plans) if *plans == self.plans => return false,
            HostMsg::Plans(plans) => {
                self.plans = plans.clone();
                dirty.plans = true;
                return true;
            }
            HostMsg::Idle { .. } => return false,
        }
        dirty.events = true;
        true
    }

    fn take_report(&mut self, lane: &LaneName, report: &LaneReport) -> bool {
        let facts = self.facts.entry(lane.clone()).or_default();
        match report {
            LaneReport::Snapshot { snapshot, queued } => {
                // A lane run again has not ended (a status file read again
                // for a lane that does not run is of the run that ended).
                let again = match facts.ended_run {
                    Some(ended) => snapshot.loop_start > ended,
                    None => snapshot.exit_reason.is_none(),
                };
                if facts.ended.is_some() && again {
                    facts.ended = None;
                    facts.ended_run = None;
                }
                facts.snapshot = Some(Arc::clone(snapshot));
                facts.queued = *queued;
            }
            LaneReport::Ahead(ahead) => facts.ahead = Some(*ahead),
            LaneReport::Ended(ended) => {
                facts.ended = Some(ended.clone());
                facts.ended_run = facts.snapshot.as_ref().map(|s| s.loop_start);
            }
            LaneReport::Log { at, level, text } => {
                if crate::fleet::event_text::repeats_an_event(text) {
                    return false;
                }
                let text = crate::fleet::event_text::log_summary(text);
                self.log(*at, *level, Some(lane), &text);
            }
            LaneReport::Event { at, event } => {
                self.costs.take(lane, *at, event);
                let level = crate::fleet::event_text::level(event);
                let words = crate::fleet::event_text::summaries(event);
                let text = words.into_iter().next().unwrap_or_default();
                self.log(*at, level, Some(lane), &text);
            }
            LaneReport::Diff(_) | LaneReport::Removed(_) | LaneReport::Unreachable(_) => {
                return false;
            }
        }
        true
    }

    /// Says the host is unreachable once, and then updates that line while
    /// it stays so.
    fn say_lost(&mut self, now: DateTime<Utc>, text: &str) {
        let said = self.events.back_mut().filter(|line| line.lost);
        match said {
            Some(line) => line.text = crate::escape::one_line(text),
            None => {
                self.log(now, Level::Warn, None, text);
                if let Some(line) = self.events.back_mut() {
                    line.lost = true;
                }
            }
        }
    }

    pub fn log(&mut self, at: DateTime<Utc>, level: Level, lane: Option<&LaneName>, text: &str) {
        if self.events.len() == EVENTS_KEPT {
            self.events.pop_front();
        }
        self.events.push_back(EventLine {
            id: NEXT_EVENT.fetch_add(1, Ordering::Relaxed),
            at,
            level: level.as_str(),
            lane: lane.map(ToString::to_string),
            text: crate::escape::one_line(text),
            lost: false,
        });
    }

    /// The lane's state in the one vocabulary, as the room's Lanes rows say it.
    pub fn status(&self, entry: &LaneEntry) -> LaneStatus {
        let facts = self.facts.get(&entry.name);
        let snapshot = facts.and_then(|facts| facts.snapshot.as_deref());
        let ended = facts.and_then(|facts| facts.ended.as_ref());
        let pending = self.pending_of(&entry.name);
        LaneStatus::of(
            snapshot,
            Facts {
                ended: ended.map(|ended| ended.as_ref().map_err(|_| ())),
                queued: facts.is_some_and(|facts| facts.queued),
                pending,
                paused: entry.requested == crate::fleet::registry::LaneState::Paused,
            },
        )
    }

    /// The host's requests that name this lane.
    pub fn pending_of(&self, lane: &LaneName) -> usize {
        self.requests
            .iter()
            .filter(|pending| pending.request.lane.as_deref() == Some(lane.as_str()))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::wire::HostSnapshot;
    use std::time::Duration;

    fn snapshot(lanes: &[&str], requests: &[(&str, &str, &str)]) -> HostSnapshot {
        let lanes = lanes
            .iter()
            .map(|name| {
                serde_json::from_value(serde_json::json!({
                    "name": name, "requested": "active", "max_iterations": 3, "kind": "worktree"
                }))
                .expect("a lane entry")
            })
            .collect();
        let requests = requests
            .iter()
            .map(|(id, lane, created)| {
                let request = serde_json::from_value(serde_json::json!({
                    "id": id, "created": created, "kind": "tool", "title": "Bash: make",
                    "tool_name": "Bash", "tool_input": {"command": "make"}, "lane": lane
                }))
                .expect("a request");
                PendingRequest::from_listing(request)
            })
            .collect();
        HostSnapshot {
            lanes,
            requests,
            ..HostSnapshot::default()
        }
    }

    fn hello(host: &str) -> RemoteEvent {
        RemoteEvent::Hello(Hello {
            protocol: 1,
            clowder: "0".into(),
            host: host.into(),
            folder: "/srv".into(),
            pid: 1,
        })
    }

    #[test]
    fn several_hosts_name_their_lanes_and_requests_by_host() {
        let mut model = Model::new(vec![Some("laptop".into()), None]);
        let now = Utc::now();
        model.apply(0, &hello("ann"), now);
        model.apply(1, &hello("build1"), now);
        let older = snapshot(&["api"], &[("r1", "api", "2026-01-01T10:00:00Z")]);
        let newer = snapshot(&["api"], &[("r2", "api", "2026-01-01T09:00:00Z")]);
        model.apply(0, &RemoteEvent::Snapshot(Box::new(older)), now);
        model.apply(1, &RemoteEvent::Snapshot(Box::new(newer)), now);
        let mut parts = super::super::parts::Parts::new("run".into());
        let dirty = model.take_dirty();
        parts.refresh(&model, dirty);
        let view: serde_json::Value =
            serde_json::from_str(&parts.since(None, None).1).expect("json");
        let lanes: Vec<_> = view["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .map(|l| l["name"].clone())
            .collect();
        assert_eq!(lanes, ["laptop/api", "build1/api"]);
        // Oldest first, whichever host holds it.
        assert_eq!(view["requests"][0]["id"], "r2");
        assert_eq!(view["requests"][0]["lane"], "build1/api");
        assert_eq!(view["lanes"][1]["state"], "waiting");
        assert_eq!(model.host_of_request("r1"), Some(0));
        assert_eq!(model.locate("build1/api").map(|(host, _)| host), Some(1));
        assert_eq!(model.locate("api"), None);
    }

    #[test]
    fn a_lost_host_is_said_and_its_events_are_bounded() {
        let mut model = Model::new(vec![None]);
        let now = Utc::now();
        let lost = RemoteEvent::Lost {
            since: now,
            why: "the host hung up".into(),
            retry: Duration::from_secs(2),
        };
        for _ in 0..EVENTS_KEPT + 5 {
            assert!(model.apply(0, &lost, now));
        }
        assert_eq!(model.hosts[0].lost.as_deref(), Some("the host hung up"));
        assert_eq!(model.hosts[0].events.len(), 1, "said once, then updated");
        assert!(model.hosts[0].events[0].text.contains("host unreachable"));
        for index in 0..EVENTS_KEPT + 5 {
            model.hosts[0].log(now, Level::Info, None, &format!("line {index}"));
        }
        assert_eq!(model.hosts[0].events.len(), EVENTS_KEPT);
        model.apply(0, &hello("ann"), now);
        assert_eq!(model.hosts[0].lost, None);
    }

    #[test]
    fn a_lane_run_again_no_longer_reads_as_ended_and_an_old_status_does_not_undo_it() {
        use crate::protocol::{LoopState, Snapshot};
        let mut model = Model::new(vec![None]);
        let now = Utc::now();
        model.apply(
            0,
            &RemoteEvent::Snapshot(Box::new(snapshot(&["api"], &[]))),
            now,
        );
        let lane = LaneName::parse("api").expect("name");
        let report = |report| {
            RemoteEvent::Host(HostMsg::Lane {
                lane: lane.clone(),
                report,
            })
        };
        let run = |started, state| {
            let mut snapshot = Snapshot::starting(1, "agent".into(), started);
            snapshot.state = state;
            LaneReport::Snapshot {
                snapshot: Arc::new(snapshot),
                queued: false,
            }
        };
        let first = now - chrono::Duration::seconds(60);
        model.apply(0, &report(run(first, LoopState::SessionRunning)), now);
        model.apply(0, &report(LaneReport::Ended(Err("killed".into()))), now);
        let ended = |model: &Model| model.hosts[0].facts[&lane].ended.is_some();
        assert!(ended(&model));
        // The status file of the run that ended, read again: still ended.
        model.apply(0, &report(run(first, LoopState::SessionRunning)), now);
        assert!(ended(&model));
        model.apply(0, &report(run(now, LoopState::SessionRunning)), now);
        assert!(!ended(&model), "run again: not ended");
    }

    #[test]
    fn the_same_requests_again_change_nothing() {
        let mut model = Model::new(vec![None]);
        let now = Utc::now();
        let listed = snapshot(&["api"], &[("r1", "api", "2026-01-01T10:00:00Z")]).requests;
        assert!(model.apply(0, &RemoteEvent::Requests(listed.clone()), now));
        assert!(!model.apply(0, &RemoteEvent::Requests(listed), now));
    }
}

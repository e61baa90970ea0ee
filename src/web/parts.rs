//! The page's view kept as parts, each with the version that last changed
//! it: a row per lane and each fact of it, the lanes' order, the hosts, the
//! requests, each event line. A page that holds version `v` is sent only
//! what changed after `v`; a new page, one of an earlier run of the server,
//! or one too far behind to be told which lanes left, is sent the whole view.
//! Only the parts a host's message touched are made again.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::model::{Dirty, Model};
use super::view;
use crate::fleet::LaneName;

/// Lanes and event lines that left, remembered for the pages not yet told;
/// a page further behind than the oldest one forgotten gets the whole view.
const GONE_KEPT: usize = 20_000;

/// One lane's row: each fact with the version that last changed it.
struct Row {
    host: usize,
    version: u64,
    fields: BTreeMap<String, (u64, Value)>,
}

/// One event line as JSON.
struct EventPart {
    version: u64,
    /// Where it goes in the list: its time, then its number.
    key: (DateTime<Utc>, u64),
    json: String,
    /// The line that says a host is unreachable, whose text is updated.
    lost: bool,
}

/// The view as parts, and what left.
pub struct Parts {
    /// Names this run of the server: a page's version means nothing to another.
    epoch: String,
    version: u64,
    rows: HashMap<String, Row>,
    /// Where each host's lanes are in its list, by name.
    positions: Vec<HashMap<LaneName, usize>>,
    order: (u64, Vec<String>),
    hosts: (u64, String),
    requests: (u64, String),
    plans: (u64, String),
    events: BTreeMap<u64, EventPart>,
    gone_lanes: VecDeque<(u64, String)>,
    gone_events: VecDeque<(u64, u64)>,
    /// Pages older than this cannot be told everything that left.
    horizon: u64,
    /// The whole view at a version: one serialization serves every new page.
    full: Option<(u64, Arc<str>)>,
}

impl Parts {
    pub fn new(epoch: String) -> Parts {
        Parts {
            epoch,
            version: 0,
            rows: HashMap::new(),
            positions: Vec::new(),
            order: (0, Vec::new()),
            hosts: (0, "[]".to_string()),
            requests: (0, "[]".to_string()),
            plans: (0, "[]".to_string()),
            events: BTreeMap::new(),
            gone_lanes: VecDeque::new(),
            gone_events: VecDeque::new(),
            horizon: 0,
            full: None,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Makes again the parts `dirty` names; whether any changed (then the
    /// version moves on).
    pub fn refresh(&mut self, model: &Model, dirty: Dirty) -> bool {
        let next = self.version + 1;
        let mut changed = false;
        if dirty.header {
            changed |= set_json(&mut self.hosts, next, &view::host_views(model));
        }
        for &host in &dirty.hosts {
            changed |= self.refresh_host(model, host, next);
        }
        for (host, lane) in &dirty.lanes {
            if !dirty.hosts.contains(host) {
                changed |= self.refresh_lane(model, *host, lane, next);
            }
        }
        if !dirty.hosts.is_empty() {
            changed |= self.refresh_order(model, next);
        }
        if dirty.requests {
            changed |= set_json(&mut self.requests, next, &view::request_views(model));
        }
        if dirty.plans {
            changed |= set_json(&mut self.plans, next, &view::plan_views(model));
        }
        if dirty.events {
            changed |= self.refresh_events(model, next);
        }
        if changed {
            self.version = next;
        }
        changed
    }

    /// Every lane of host `index` made again; those it no longer has leave.
    fn refresh_host(&mut self, model: &Model, index: usize, next: u64) -> bool {
        let Some(host) = model.hosts.get(index) else {
            return false;
        };
        if self.positions.len() <= index {
            self.positions.resize_with(index + 1, HashMap::new);
        }
        let mut positions = HashMap::with_capacity(host.lanes.len());
        let mut seen = HashSet::with_capacity(host.lanes.len());
        let mut changed = false;
        for (at, entry) in host.lanes.iter().enumerate() {
            positions.insert(entry.name.clone(), at);
            let row = view::lane_view(model, host, entry);
            seen.insert(row.name.clone());
            changed |= self.set_row(index, &row, next);
        }
        self.positions[index] = positions;
        let left: Vec<String> = self
            .rows
            .iter()
            .filter(|(name, row)| row.host == index && !seen.contains(*name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in left {
            self.rows.remove(&name);
            self.gone_lanes.push_back((next, name));
            changed = true;
        }
        self.forget_old();
        changed
    }

    fn refresh_lane(&mut self, model: &Model, index: usize, lane: &LaneName, next: u64) -> bool {
        let Some(host) = model.hosts.get(index) else {
            return false;
        };
        let at = self.positions.get(index).and_then(|p| p.get(lane)).copied();
        // A lane the host reports before it lists it shows with the list.
        let Some(entry) = at.and_then(|at| host.lanes.get(at)) else {
            return false;
        };
        let row = view::lane_view(model, host, entry);
        self.set_row(index, &row, next)
    }

    /// Takes a lane's row: the facts that differ get version `next`.
    fn set_row(&mut self, host: usize, lane: &view::LaneView, next: u64) -> bool {
        let Ok(Value::Object(fields)) = serde_json::to_value(lane) else {
            return false;
        };
        let row = self.rows.entry(lane.name.clone()).or_insert_with(|| Row {
            host,
            version: next,
            fields: BTreeMap::new(),
        });
        row.host = host;
        let mut changed = row.fields.is_empty();
        // A fact the row no longer has is sent as none.
        for (key, slot) in &mut row.fields {
            if !fields.contains_key(key) && !slot.1.is_null() {
                *slot = (next, Value::Null);
                changed = true;
            }
        }
        for (key, value) in fields {
            match row.fields.get_mut(&key) {
                Some((_, old)) if *old == value => {}
                Some(slot) => {
                    *slot = (next, value);
                    changed = true;
                }
                None => {
                    row.fields.insert(key, (next, value));
                    changed = true;
                }
            }
        }
        if changed {
            row.version = next;
        }
        changed
    }

    fn refresh_order(&mut self, model: &Model, next: u64) -> bool {
        let order: Vec<String> = model
            .hosts
            .iter()
            .flat_map(|host| host.lanes.iter().map(|e| model.shown_name(host, &e.name)))
            .collect();
        if order == self.order.1 {
            return false;
        }
        self.order = (next, order);
        true
    }

    /// New event lines, the unreachable host's updated one, and those that
    /// left.
    fn refresh_events(&mut self, model: &Model, next: u64) -> bool {
        let lines = view::event_lines(model);
        let mut changed = false;
        let mut ids = HashSet::with_capacity(lines.len());
        for line in lines {
            ids.insert(line.id);
            let known = self.events.get(&line.id);
            // Lines are never changed but that one.
            if known.is_some_and(|part| !part.lost && !line.lost) {
                continue;
            }
            let json = serde_json::to_string(line).unwrap_or_else(|_| "{}".into());
            if known.is_some_and(|part| part.json == json) {
                continue;
            }
            let part = EventPart {
                version: next,
                key: (line.at, line.id),
                json,
                lost: line.lost,
            };
            self.events.insert(line.id, part);
            changed = true;
        }
        let left: Vec<u64> = self
            .events
            .keys()
            .filter(|id| !ids.contains(id))
            .copied()
            .collect();
        for id in left {
            self.events.remove(&id);
            self.gone_events.push_back((next, id));
            changed = true;
        }
        self.forget_old();
        changed
    }

    fn forget_old(&mut self) {
        while self.gone_lanes.len() > GONE_KEPT {
            if let Some((version, _)) = self.gone_lanes.pop_front() {
                self.horizon = self.horizon.max(version);
            }
        }
        while self.gone_events.len() > GONE_KEPT {
            if let Some((version, _)) = self.gone_events.pop_front() {
                self.horizon = self.horizon.max(version);
            }
        }
    }

    /// What a page at version `since` of run `epoch` lacks, as JSON: only
    /// what changed, or the whole view when that cannot be told; and the
    /// version it then holds.
    pub fn since(&mut self, epoch: Option<&str>, since: Option<u64>) -> (u64, Arc<str>) {
        match since {
            Some(since)
                if epoch == Some(self.epoch.as_str())
                    && since >= self.horizon
                    && since <= self.version =>
            {
                (self.version, Arc::from(self.delta(since)))
            }
            _ => (self.version, self.whole()),
        }
    }

    /// The whole view: every row in order, its facts that are not none.
    pub fn whole(&mut self) -> Arc<str> {
        if let Some((version, json)) = &self.full
            && *version == self.version
        {
            return Arc::clone(json);
        }
        let mut out = String::with_capacity(self.rows.len() * 200 + 4096);
        let _ = write!(
            out,
            r#"{{"epoch":{},"v":{},"full":true,"hosts":{},"requests":{},"plans":{},"lanes":["#,
            json_string(&self.epoch),
            self.version,
            self.hosts.1,
            self.requests.1,
            self.plans.1
        );
        let mut first = true;
        for name in &self.order.1 {
            if let Some(row) = self.rows.get(name) {
                comma(&mut out, &mut first);
                row_json(&mut out, row, None);
            }
        }
        out.push_str(r#"],"events":["#);
        self.events_json(&mut out, None);
        out.push_str("]}");
        let json: Arc<str> = Arc::from(out);
        self.full = Some((self.version, Arc::clone(&json)));
        json
    }

    /// What changed after version `since`.
    fn delta(&self, since: u64) -> String {
        let mut out = String::with_capacity(1024);
        let _ = write!(out, r#"{{"v":{},"full":false,"lanes":["#, self.version);
        let mut first = true;
        for row in self.rows.values().filter(|row| row.version > since) {
            comma(&mut out, &mut first);
            row_json(&mut out, row, Some(since));
        }
        out.push_str(r#"],"gone":["#);
        let mut first = true;
        for (_, name) in self.gone_lanes.iter().filter(|(v, _)| *v > since) {
            comma(&mut out, &mut first);
            out.push_str(&json_string(name));
        }
        out.push(']');
        if self.order.0 > since {
            let order = serde_json::to_string(&self.order.1).unwrap_or_else(|_| "[]".into());
            let _ = write!(out, r#","order":{order}"#);
        }
        if self.hosts.0 > since {
            let _ = write!(out, r#","hosts":{}"#, self.hosts.1);
        }
        if self.requests.0 > since {
            let _ = write!(out, r#","requests":{}"#, self.requests.1);
        }
        if self.plans.0 > since {
            let _ = write!(out, r#","plans":{}"#, self.plans.1);
        }
        out.push_str(r#","events":["#);
        self.events_json(&mut out, Some(since));
        out.push_str(r#"],"gone_events":["#);
        let mut first = true;
        for (_, id) in self.gone_events.iter().filter(|(v, _)| *v > since) {
            comma(&mut out, &mut first);
            let _ = write!(out, "{id}");
        }
        out.push_str("]}");
        out
    }

    /// The event lines changed after `since` (all without), oldest first.
    fn events_json(&self, out: &mut String, since: Option<u64>) {
        let mut lines: Vec<&EventPart> = self
            .events
            .values()
            .filter(|part| since.is_none_or(|since| part.version > since))
            .collect();
        lines.sort_by_key(|part| part.key);
        let mut first = true;
        for part in lines {
            comma(out, &mut first);
            out.push_str(&part.json);
        }
    }
}

/// Replaces `part` with `value`'s JSON when it differs; whether it did.
fn set_json<T: Serialize>(part: &mut (u64, String), next: u64, value: &T) -> bool {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "[]".into());
    if json == part.1 {
        return false;
    }
    *part = (next, json);
    true
}

/// A row's name and its facts changed after `since`; without, every fact
/// that is not none.
fn row_json(out: &mut String, row: &Row, since: Option<u64>) {
    out.push('{');
    let name = row.fields.get("name").map(|(_, name)| name.to_string());
    let _ = write!(out, r#""name":{}"#, name.as_deref().unwrap_or("\"\""));
    for (key, (version, value)) in &row.fields {
        let wanted = match since {
            Some(since) => *version > since,
            None => !value.is_null(),
        };
        if wanted && key != "name" {
            let _ = write!(out, ",{}:{value}", json_string(key));
        }
    }
    out.push('}');
}

fn comma(out: &mut String, first: &mut bool) {
    if !std::mem::take(first) {
        out.push(',');
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::link::{HostMsg, LaneEntry, LaneReport};
    use crate::fleet::remote::RemoteEvent;
    use crate::fleet::wire::HostSnapshot;
    use crate::protocol::{LoopState, Snapshot};

    fn entry(name: &str) -> LaneEntry {
        serde_json::from_value(serde_json::json!({
            "name": name, "requested": "active", "max_iterations": 3, "kind": "worktree"
        }))
        .expect("a lane entry")
    }

    fn running(lane: &str, iteration: u64) -> RemoteEvent {
        let mut snapshot = Snapshot::starting(1, "agent".into(), Utc::now());
        snapshot.state = LoopState::SessionRunning;
        snapshot.iteration = iteration;
        RemoteEvent::Host(HostMsg::Lane {
            lane: LaneName::parse(lane).expect("a name"),
            report: LaneReport::Snapshot {
                snapshot: Arc::new(snapshot),
                queued: false,
            },
        })
    }

    fn json(text: &str) -> Value {
        serde_json::from_str(text).expect("JSON")
    }

    /// A model of lanes `a`…, its parts made, and the version they are at.
    fn fleet(lanes: &[&str]) -> (Model, Parts) {
        let mut model = Model::new(vec![None]);
        let snapshot = HostSnapshot {
            lanes: lanes.iter().map(|name| entry(name)).collect(),
            ..HostSnapshot::default()
        };
        model.apply(0, &RemoteEvent::Snapshot(Box::new(snapshot)), Utc::now());
        let mut parts = Parts::new("run".into());
        let dirty = model.take_dirty();
        parts.refresh(&model, dirty);
        (model, parts)
    }

    fn apply(model: &mut Model, parts: &mut Parts, event: &RemoteEvent) -> bool {
        model.apply(0, event, Utc::now());
        let dirty = model.take_dirty();
        parts.refresh(model, dirty)
    }

    #[test]
    fn a_page_is_sent_only_the_facts_that_changed() {
        let (mut model, mut parts) = fleet(&["a", "b", "c"]);
        assert!(apply(&mut model, &mut parts, &running("b", 1)));
        let (v1, whole) = parts.since(None, None);
        let whole = json(&whole);
        assert_eq!(whole["full"], true);
        assert_eq!(whole["lanes"].as_array().map(Vec::len), Some(3));
        assert!(apply(&mut model, &mut parts, &running("b", 2)));
        let (v2, delta) = parts.since(Some("run"), Some(v1));
        assert!(v2 > v1);
        let delta = json(&delta);
        assert_eq!(delta["full"], false);
        let lanes = delta["lanes"].as_array().expect("lanes");
        assert_eq!(lanes.len(), 1, "{delta}");
        assert_eq!(lanes[0]["name"], "b");
        assert_eq!(lanes[0]["iteration"], 2);
        assert!(lanes[0].get("state").is_none(), "unchanged: {delta}");
        assert!(delta.get("order").is_none() && delta.get("requests").is_none());
        // The same again changes nothing; a page that holds it is sent nothing.
        assert!(!apply(&mut model, &mut parts, &running("b", 2)));
        let nothing = json(&parts.since(Some("run"), Some(v2)).1);
        assert_eq!(nothing["lanes"].as_array().map(Vec::len), Some(0));
    }

    #[test]
    fn a_lane_that_leaves_is_said_and_a_stranger_gets_the_whole_view() {
        let (mut model, mut parts) = fleet(&["a", "b"]);
        let v1 = parts.version();
        let lanes = RemoteEvent::Host(HostMsg::Lanes(vec![entry("b"), entry("c")]));
        assert!(apply(&mut model, &mut parts, &lanes));
        let delta = json(&parts.since(Some("run"), Some(v1)).1);
        assert_eq!(delta["gone"], serde_json::json!(["a"]));
        assert_eq!(delta["order"], serde_json::json!(["b", "c"]));
        assert_eq!(delta["lanes"][0]["name"], "c");
        // Another run's version, or one from the future, means nothing here.
        for (epoch, since) in [(Some("other"), Some(v1)), (Some("run"), Some(v1 + 99))] {
            assert_eq!(json(&parts.since(epoch, since).1)["full"], true);
        }
    }
}

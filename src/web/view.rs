//! The page's view of the fleet as JSON: the lanes as the room's rows show
//! them, the requests oldest first, the events newest last. Times go as
//! timestamps (sent with the server's `now`), so that the page counts ages
//! itself and nothing is sent while nothing changes.

use chrono::{DateTime, SubsecRound, Utc};
use serde::Serialize;

use super::model::{EventLine, HostState, Model, host_label};
use crate::fleet::link::LaneEntry;
use crate::fleet::wire::PendingRequest;

/// A subject longer than this many characters gets its end said apart.
const LONG_SUBJECT: usize = 400;
/// The characters of a long subject's end that are said.
const SUBJECT_END: usize = 160;

#[derive(Serialize)]
pub struct HostView {
    pub name: Option<String>,
    pub folder: Option<String>,
    /// Why it cannot be reached now; `null` while it is.
    pub lost: Option<String>,
}

/// A lane's row. Facts it lacks are left out: a page told only what changed
/// reads a missing fact as none, and 10,000 rows are sent shorter.
#[derive(Serialize)]
pub struct LaneView {
    pub name: String,
    pub glyph: &'static str,
    pub state: &'static str,
    /// The state with its one fact: `✗ failed (exit 1)`.
    pub label: String,
    pub needs_you: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u64>,
    /// Since when no output was written (the watchdog's clock), while a
    /// session runs; to the second, as the page counts it, so that a lane
    /// writing output changes its row once a second at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_limit_secs: Option<f64>,
    #[serde(
        serialize_with = "crate::fmt::usd_json",
        skip_serializing_if = "Option::is_none"
    )]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    pub pending: usize,
    /// Why the lane's agent runs without the approval gate, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ungated: Option<String>,
    /// A session runs now (`iteration` is its number).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub running: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// The loop stops once this session ends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stop_pending: bool,
    /// The branch it merges into, when it has one of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub task: bool,
}

/// A plan and its steps, in the plan file's order.
#[derive(Serialize)]
pub struct PlanView<'a> {
    pub name: &'a str,
    /// How a retry names it (`HOST/address` when several hosts are served).
    pub address: String,
    pub host: Option<String>,
    pub status: &'a str,
    pub base: &'a str,
    pub steps: Vec<StepView<'a>>,
}

#[derive(Serialize)]
pub struct StepView<'a> {
    pub id: &'a str,
    pub state: &'a str,
    pub depends_on: &'a [String],
    /// The lane as the page names it.
    pub lane: String,
}

#[derive(Serialize)]
pub struct RequestView {
    pub id: String,
    pub lane: Option<String>,
    pub kind: &'static str,
    pub tool: Option<String>,
    pub title: String,
    /// The full command or file: what the decision is about, every
    /// character that would show as nothing or reorder the text (bidi and
    /// zero-width ones, controls) in its visible form, `\u{202e}`.
    pub subject: String,
    /// The subject's length in characters.
    pub subject_chars: usize,
    /// How a subject too long to read whole in its card ends, as the room's
    /// popup says it: a tail after padding is seen before it is approved.
    pub subject_end: Option<String>,
    /// A patch or a question's text, when the request carries one.
    pub body: Option<String>,
    pub created: DateTime<Utc>,
    pub abandoned: bool,
}

/// Every host: its name, folder, and why it cannot be reached.
pub fn host_views(model: &Model) -> Vec<HostView> {
    model
        .hosts
        .iter()
        .map(|host| HostView {
            name: host_label(host),
            folder: host.hello.as_ref().map(|hello| hello.folder.clone()),
            lost: host.lost.clone(),
        })
        .collect()
}

/// Every host's requests, oldest first whichever host holds them.
pub fn request_views(model: &Model) -> Vec<RequestView> {
    let mut requests: Vec<RequestView> = model
        .hosts
        .iter()
        .flat_map(|host| {
            host.requests
                .iter()
                .map(move |r| request_view(model, host, r))
        })
        .collect();
    requests.sort_by_key(|request| request.created);
    requests
}

/// Every host's events, newest last.
pub fn event_lines(model: &Model) -> Vec<&EventLine> {
    let mut events: Vec<&EventLine> = model.hosts.iter().flat_map(|h| h.events.iter()).collect();
    events.sort_by_key(|event| (event.at, event.id));
    events
}

pub fn lane_view(model: &Model, host: &HostState, entry: &LaneEntry) -> LaneView {
    let status = host.status(entry);
    let facts = host.facts.get(&entry.name);
    let snapshot = facts.and_then(|facts| facts.snapshot.as_deref());
    let running = snapshot.is_some_and(|s| s.session_start.is_some() && !status.is_over());
    LaneView {
        name: model.shown_name(host, &entry.name),
        glyph: status.glyph(),
        state: status.word(),
        label: status.label(snapshot),
        needs_you: status.needs_you(),
        iteration: snapshot.map(|s| s.iteration),
        max_iterations: snapshot.map(|s| s.max_iterations).or(entry.max_iterations),
        idle_since: snapshot
            .filter(|_| running)
            .and_then(|s| s.last_output_growth.or(s.session_start))
            .map(|at| at.trunc_subsecs(0)),
        stale_limit_secs: snapshot.map(|s| s.stale_timeout_secs),
        cost_usd: snapshot.and_then(|s| s.totals.cost_usd),
        ahead: facts.and_then(|facts| facts.ahead.flatten()),
        pending: host.pending_of(&entry.name),
        ungated: snapshot.and_then(|s| s.ungated.clone()),
        running,
        paused: running && snapshot.is_some_and(|s| s.paused),
        stop_pending: running && snapshot.is_some_and(|s| s.stop_pending),
        base: entry
            .base
            .as_deref()
            .map(|base| crate::fleet::lanes::short_ref(base).to_string()),
        task: entry.kind.is_task(),
    }
}

/// Every host's plans, each host's in its own order.
pub fn plan_views(model: &Model) -> Vec<PlanView<'_>> {
    let mut plans = Vec::new();
    for host in &model.hosts {
        let label = host_label(host);
        let shown = |name: &str| match (model.multi, &label) {
            (true, Some(label)) => format!("{label}/{name}"),
            _ => name.to_string(),
        };
        for plan in &host.plans {
            let steps = plan
                .steps
                .iter()
                .map(|step| StepView {
                    id: &step.id,
                    state: &step.state,
                    depends_on: &step.depends_on,
                    lane: shown(&step.lane),
                })
                .collect();
            plans.push(PlanView {
                name: &plan.name,
                address: shown(&plan.address),
                host: label.clone(),
                status: &plan.status,
                base: crate::fleet::lanes::short_ref(&plan.base),
                steps,
            });
        }
    }
    plans
}

fn request_view(model: &Model, host: &HostState, pending: &PendingRequest) -> RequestView {
    let request = &pending.request;
    let lane = request
        .lane
        .as_deref()
        .and_then(|lane| host.lanes.iter().find(|entry| entry.name.as_str() == lane))
        .map(|entry| model.shown_name(host, &entry.name));
    let subject = request.subject();
    let subject_chars = subject.chars().count();
    let subject_end = (subject_chars > LONG_SUBJECT).then(|| {
        let tail: String = subject.chars().skip(subject_chars - SUBJECT_END).collect();
        crate::escape::one_line(&tail)
    });
    RequestView {
        id: request.id.clone(),
        lane,
        kind: match request.kind {
            crate::approvals::RequestKind::Tool => "tool",
            crate::approvals::RequestKind::Ask => "ask",
            crate::approvals::RequestKind::Session => "session",
        },
        tool: request.tool_name.as_deref().map(crate::escape::one_line),
        title: crate::escape::one_line(&request.title),
        subject: crate::escape::visible_lines(&subject).into_owned(),
        subject_chars,
        subject_end,
        body: request
            .body
            .as_deref()
            .map(|body| crate::escape::visible_lines(body).into_owned()),
        created: request.created,
        abandoned: pending.abandoned,
    }
}

//! The control room over a fleet: one row per lane with its [`LaneStatus`],
//! which lane the panes show, and each lane's view (output position, events)
//! kept while another lane is shown. Every message from the host names its
//! lane; commands for a lane go back with its name.

use std::cell::{Ref, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::listing::{self, Listing};
use super::{
    Action, AppState, EventLine, EventsView, Msg, OutputView, UiCommand, Usage, Viewing, update,
};
use crate::fleet::LaneName;
use crate::fleet::attention::{self, AttentionEvent};
use crate::fleet::link::{HostMsg, HostRequest, LaneEntry, LaneReport};
use crate::fleet::registry::{LaneKind, LaneState};
use crate::protocol::{Command, ExitReason, LoopState, Snapshot};
use crate::supervisor::core::Level;
use crate::ui::new_lane::NewLaneDialog;

/// A lane's state as every listing words it (see [`crate::lane_status`]); kept
/// per lane in [`LaneRow::status`], so that a change (old against new) can be noticed.
pub use crate::lane_status::LaneStatus;

/// One lane as the Lanes pane shows it.
#[derive(Debug, Clone)]
pub struct LaneRow {
    pub name: LaneName,
    pub requested: LaneState,
    pub max_iterations: Option<u64>,
    pub snapshot: Option<Arc<Snapshot>>,
    /// Waiting for a session slot.
    pub queued: bool,
    /// How its loop ended in this run, if it has.
    pub ended: Option<Result<ExitReason, String>>,
    pub ahead: Option<u64>,
    /// Its requests in the approvals inbox.
    pub pending: usize,
    pub status: LaneStatus,
    pub kind: LaneKind,
    /// The branch `M` merges it into.
    pub base: Option<String>,
    /// In an attached room: its host cannot be reached since then, and
    /// what it last said of the lane may be old.
    pub unreachable: Option<DateTime<Utc>>,
    /// The number of the last line said to every lane when it was added:
    /// it hears the lines said after.
    joined: u64,
}

impl LaneRow {
    fn new(entry: &LaneEntry) -> LaneRow {
        let mut row = LaneRow {
            name: entry.name.clone(),
            requested: entry.requested,
            max_iterations: entry.max_iterations,
            snapshot: None,
            queued: false,
            ended: None,
            ahead: None,
            pending: 0,
            status: LaneStatus::Queued,
            kind: entry.kind,
            base: entry.base.clone(),
            unreachable: None,
            joined: 0,
        };
        row.status = status_of(&row);
        row
    }

    /// Its loop runs now: commands reach it.
    pub fn live(&self) -> bool {
        self.ended.is_none()
            && self
                .snapshot
                .as_ref()
                .is_some_and(|s| s.state != LoopState::Stopped)
    }
}

impl listing::Listed for LaneRow {
    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn status(&self) -> LaneStatus {
        self.status
    }

    fn cost(&self) -> Option<f64> {
        self.snapshot
            .as_ref()
            .and_then(|s| s.totals.cost_usd)
            .filter(|c| c.is_finite())
    }

    fn silent_since(&self) -> Option<(DateTime<Utc>, Option<DateTime<Utc>>)> {
        let snapshot = self.snapshot.as_deref()?;
        if self.ended.is_some() || snapshot.state != LoopState::SessionRunning {
            return None;
        }
        let since = snapshot.last_output_growth.or(snapshot.session_start)?;
        Some((since, snapshot.paused_at))
    }
}

/// The lane's status from what its loop last said.
pub fn status_of(row: &LaneRow) -> LaneStatus {
    let facts = crate::lane_status::Facts {
        ended: row.ended.as_ref().map(|e| e.as_ref().map_err(|_| ())),
        queued: row.queued,
        pending: row.pending,
        paused: row.requested == LaneState::Paused,
    };
    if row.pending == 0
        && row.snapshot.is_none()
        && row.ended.is_none()
        && row.requested == LaneState::Stopped
    {
        return LaneStatus::Stopped;
    }
    LaneStatus::of(row.snapshot.as_deref(), facts)
}

/// The rows as the Lanes pane lists them, made again only when a row's place
/// in it (or the listing itself) changed: a busy lane that stays busy costs
/// nothing here, however many lanes there are.
#[derive(Debug, Clone, Default)]
struct Shown {
    /// The listed rows' indices, in the order shown.
    order: Vec<usize>,
    /// Rows that need you, listed or not.
    needing: usize,
    /// The second it was made at, for the order by idle time (which time moves).
    at: i64,
}

/// `D`: a lane's diff against its base, on top of everything.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffView {
    pub lane: LaneName,
    /// `None` while it is being computed.
    pub text: Option<Result<String, String>>,
    pub scroll: u16,
}

/// The fleet's part of the state.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// In registry order. Changed only here, which keeps [`Fleet::index`] and
    /// the listing's order true.
    pub rows: Vec<LaneRow>,
    /// Each row's place in `rows`, by name.
    index: HashMap<LaneName, usize>,
    /// `/`, `w`, `O`: which rows the Lanes pane lists, in what order.
    pub listing: Listing,
    /// The listing as last made; `None` when something moved a row in it.
    shown: RefCell<Option<Shown>>,
    /// The widest lane name, in cells (at most [`NAME_MAX`]).
    pub name_width: usize,
    /// The rows with requests waiting, as last counted.
    asking: Vec<usize>,
    /// The latest lines said to every lane, each with its number, for the
    /// lanes not shown (see [`tell_every_lane`]).
    common: VecDeque<(u64, EventLine)>,
    /// The number of the last line said to every lane.
    said: u64,
    /// Lanes that became held, failed or done since the caller last took
    /// them (see [`crate::ui::caller`]): found as each lane's news comes, not
    /// by looking at every lane.
    pub(crate) calls: Vec<AttentionEvent>,
    /// The lane the panes show.
    pub selected: Option<LaneName>,
    /// The other lanes' views, while they are not shown.
    views: HashMap<LaneName, LaneView>,
    /// No lane runs now.
    pub idle: bool,
    pub diff: Option<DiffView>,
    /// The fleet's folder, against which the new-lane dialog checks a prompt file.
    pub root: PathBuf,
    /// `n`: the new-lane dialog, owning every key while open.
    pub new_lane: Option<NewLaneDialog>,
}

/// The name column's widest.
pub const NAME_MAX: usize = 16;

/// The most calls kept for the caller to take.
const MAX_CALLS: usize = 1_000;

impl Fleet {
    /// The listed rows' indices in the order shown (see [`Listing`]).
    pub fn order(&self, now: DateTime<Utc>) -> Ref<'_, [usize]> {
        self.refresh(now);
        Ref::map(self.shown.borrow(), |shown| match shown {
            Some(shown) => shown.order.as_slice(),
            None => &[],
        })
    }

    /// How many lanes need you, listed or not.
    pub fn needing(&self, now: DateTime<Utc>) -> usize {
        self.refresh(now);
        self.shown
            .borrow()
            .as_ref()
            .map_or(0, |shown| shown.needing)
    }

    /// Makes the listing again if a row moved in it since it was made.
    fn refresh(&self, now: DateTime<Utc>) {
        let at = now.timestamp();
        let fresh =
            self.shown.borrow().as_ref().is_some_and(|shown| {
                self.listing.sort != listing::LaneSort::Idle || shown.at == at
            });
        if fresh {
            return;
        }
        let shown = Shown {
            order: self.listing.order(&self.rows, now),
            needing: self.rows.iter().filter(|r| r.status.needs_you()).count(),
            at,
        };
        *self.shown.borrow_mut() = Some(shown);
    }

    /// The listing must be made again before it is next read.
    pub(crate) fn relist(&mut self) {
        *self.shown.get_mut() = None;
    }

    pub fn selected_row(&self) -> Option<&LaneRow> {
        self.rows.get(self.selected_index()?)
    }

    /// The selected lane's place in `rows`.
    pub fn selected_index(&self) -> Option<usize> {
        self.index_of(self.selected.as_ref()?)
    }

    /// Lane `name`'s place in `rows`.
    pub fn index_of(&self, name: &LaneName) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn row(&self, name: &LaneName) -> Option<&LaneRow> {
        self.rows.get(self.index_of(name)?)
    }

    /// Where the selected lane is in the order shown.
    pub fn selected_position(&self, order: &[usize]) -> Option<usize> {
        let selected = self.selected_index()?;
        order.iter().position(|&i| i == selected)
    }

    /// Changes row `i` with `change`, then its status from its facts; the
    /// listing is made again only if that moves the row in it.
    fn change_row(&mut self, i: usize, change: impl FnOnce(&mut LaneRow)) {
        let Some(row) = self.rows.get_mut(i) else {
            return;
        };
        let before = self.listing.place_of(row);
        let seen = attention::lane_state(row.snapshot.as_deref(), row.ended.as_ref());
        change(row);
        row.status = status_of(row);
        if self.listing.place_of(row) != before {
            *self.shown.get_mut() = None;
        }
        let now = attention::lane_state(row.snapshot.as_deref(), row.ended.as_ref());
        if let Some(call) = now.and_then(|now| attention::lane_event(row.name.as_str(), seen, now))
        {
            // Taken after every batch; a room driven without a caller keeps the latest.
            if self.calls.len() >= MAX_CALLS {
                self.calls.remove(0);
            }
            self.calls.push(call);
        }
    }
}

/// What the panes show of one lane; swapped into [`AppState`] when it is selected.
#[derive(Debug, Clone)]
struct LaneView {
    snapshot: Arc<Snapshot>,
    output: OutputView,
    viewing: Viewing,
    usage: Usage,
    events: VecDeque<EventLine>,
    events_view: EventsView,
    growth_sample: Option<(u64, DateTime<Utc>)>,
    growth_rate: f64,
    finished: Option<ExitReason>,
    /// The number of the last line said to every lane that it has.
    heard: u64,
}

impl LaneView {
    fn new(snapshot: Arc<Snapshot>) -> LaneView {
        LaneView {
            snapshot,
            output: OutputView::default(),
            viewing: Viewing {
                global: None,
                file: None,
                live: true,
            },
            usage: Usage::default(),
            events: VecDeque::new(),
            events_view: EventsView::default(),
            growth_sample: None,
            growth_rate: 0.0,
            finished: None,
            heard: 0,
        }
    }

    /// A fresh view of a lane: its last snapshot, else a placeholder.
    fn of(row: Option<&LaneRow>, lane: &LaneName) -> LaneView {
        let snapshot = row.and_then(|r| r.snapshot.clone()).unwrap_or_else(|| {
            let max = row.and_then(|r| r.max_iterations);
            Arc::new(placeholder(lane.as_str(), max))
        });
        LaneView {
            heard: row.map_or(0, |r| r.joined),
            ..LaneView::new(snapshot)
        }
    }

    /// Puts this view into `state` and returns the one it replaces.
    fn swap_into(mut self, state: &mut AppState) -> LaneView {
        use std::mem::swap;
        swap(&mut self.snapshot, &mut state.snapshot);
        swap(&mut self.output, &mut state.output);
        swap(&mut self.viewing, &mut state.viewing);
        swap(&mut self.usage, &mut state.usage);
        swap(&mut self.events, &mut state.events);
        swap(&mut self.events_view, &mut state.events_view);
        swap(&mut self.growth_sample, &mut state.growth_sample);
        swap(&mut self.growth_rate, &mut state.growth_rate);
        swap(&mut self.finished, &mut state.finished);
        self
    }
}

/// A snapshot for a lane that has not said anything yet.
pub fn placeholder(lane: &str, max_iterations: Option<u64>) -> Snapshot {
    Snapshot {
        max_iterations: max_iterations.unwrap_or(0),
        ..Snapshot::starting(0, format!("lane {lane}"), DateTime::<Utc>::UNIX_EPOCH)
    }
}

/// Runs `f` on `lane`'s view as if it were shown; a lane not shown follows no
/// output file.
fn with_lane(
    state: &mut AppState,
    lane: &LaneName,
    f: impl FnOnce(&mut AppState) -> Vec<UiCommand>,
) -> Vec<UiCommand> {
    let Some(fleet) = state.fleet.as_mut() else {
        return Vec::new();
    };
    if fleet.selected.as_ref() == Some(lane) {
        return f(state);
    }
    let view = fleet
        .views
        .remove(lane)
        .unwrap_or_else(|| LaneView::of(fleet.row(lane), lane));
    let heard = view.heard;
    let shown = view.swap_into(state);
    let heard = catch_up(state, heard);
    let mut commands = f(state);
    let mut view = shown.swap_into(state);
    view.heard = heard;
    if let Some(fleet) = state.fleet.as_mut() {
        fleet.views.insert(lane.clone(), view);
    }
    commands.retain(|c| !matches!(c, UiCommand::Follow(_)));
    commands
}

/// Shows lane `name` in the panes; follows its session's output.
pub fn select(state: &mut AppState, name: &LaneName) -> Vec<UiCommand> {
    let Some(fleet) = state.fleet.as_mut() else {
        return Vec::new();
    };
    if fleet.selected.as_ref() == Some(name) {
        return Vec::new();
    }
    let Some(row) = fleet.row(name) else {
        return Vec::new();
    };
    let view = LaneView::of(Some(row), name);
    let view = fleet.views.remove(name).unwrap_or(view);
    let previous = fleet.selected.replace(name.clone());
    let said = fleet.said;
    let heard = view.heard;
    let mut old = view.swap_into(state);
    // The lane shown heard every line as it was said.
    old.heard = said;
    if let (Some(previous), Some(fleet)) = (previous, state.fleet.as_mut()) {
        fleet.views.insert(previous, old);
    }
    catch_up(state, heard);
    // The output lines kept were of the follower that stopped: read afresh.
    state.output.clear();
    state.output.expanded = None;
    state.events_view.expanded = false;
    state.usage = Usage::default();
    if !state.viewing.live && state.viewing.file.is_some() {
        state.viewing.live = true;
    }
    state.viewing.file = state.snapshot.output_file.clone();
    state.viewing.global = state.snapshot.global_iteration;
    state
        .viewing
        .file
        .clone()
        .map(UiCommand::Follow)
        .into_iter()
        .collect()
}

/// Selects the lane `delta` rows away in the order shown.
pub fn select_by(state: &mut AppState, delta: isize, now: DateTime<Utc>) -> Vec<UiCommand> {
    let Some(fleet) = &state.fleet else {
        return Vec::new();
    };
    let name = {
        let order = fleet.order(now);
        if order.is_empty() {
            return Vec::new();
        }
        let at = fleet.selected_position(&order).unwrap_or(0) as isize;
        let target = (at + delta).clamp(0, order.len() as isize - 1) as usize;
        fleet.rows[order[target]].name.clone()
    };
    select(state, &name)
}

/// After the listing changed: a lane it no longer lists gives way to the
/// first one it does, so that the panes show a lane in the list.
pub(super) fn keep_selection_listed(state: &mut AppState, now: DateTime<Utc>) -> Vec<UiCommand> {
    let Some(fleet) = &state.fleet else {
        return Vec::new();
    };
    let first = {
        let order = fleet.order(now);
        if fleet.selected_position(&order).is_some() {
            return Vec::new();
        }
        match order.first() {
            Some(&i) => fleet.rows[i].name.clone(),
            None => return Vec::new(),
        }
    };
    select(state, &first)
}

/// `1`–`9`: the lane whose number its row shows.
pub fn select_nth(state: &mut AppState, n: usize) -> Vec<UiCommand> {
    let Some(fleet) = &state.fleet else {
        return Vec::new();
    };
    // The number shown in the lane's row: its place in the registry, which
    // does not change as lanes start or stop needing a human.
    match n.checked_sub(1).and_then(|i| fleet.rows.get(i)) {
        Some(row) => {
            let name = row.name.clone();
            select(state, &name)
        }
        None => Vec::new(),
    }
}

/// The lane whose request an inbox command decides, if a lane's folder asked.
pub fn request_lane(state: &AppState, command: &UiCommand) -> Option<LaneName> {
    let id = match command {
        UiCommand::Approve { id }
        | UiCommand::ApproveAlways { id, .. }
        | UiCommand::Reject { id, .. } => id,
        _ => return None,
    };
    let fleet = state.fleet.as_ref()?;
    let lane = state
        .approvals
        .iter()
        .find(|r| &r.id == id)?
        .lane
        .as_deref()?;
    let i = *fleet.index.get(lane)?;
    fleet.rows.get(i).map(|row| row.name.clone())
}

/// A command for the shown lane's loop goes to that lane, by name.
pub(super) fn route(state: &AppState, commands: &mut [UiCommand]) {
    let Some(lane) = state.fleet.as_ref().and_then(|f| f.selected.clone()) else {
        return;
    };
    for command in commands.iter_mut() {
        if let UiCommand::Supervisor(inner) = command {
            *command = UiCommand::Host(HostRequest::Command {
                lane: lane.clone(),
                command: inner.clone(),
            });
        }
    }
}

/// The quit dialog's stop, for every lane whose loop runs (a stop after the
/// session only where none is asked yet: it is a toggle).
pub(crate) fn to_every_lane(fleet: &Fleet, command: &Command, commands: &mut Vec<UiCommand>) {
    for row in fleet.rows.iter().filter(|row| row.live()) {
        let pending = row.snapshot.as_ref().is_some_and(|s| s.stop_pending);
        if *command == Command::StopAfterCurrent && pending {
            continue;
        }
        commands.push(UiCommand::Host(HostRequest::Command {
            lane: row.name.clone(),
            command: command.clone(),
        }));
    }
}

/// The kind of the lane shown, with lanes.
pub fn selected_kind(state: &AppState) -> Option<LaneKind> {
    state.fleet.as_ref()?.selected_row().map(|row| row.kind)
}

/// `s`, `K` and `p` on a task lane: `s` asks its worker to stop through
/// state.json (done by the host); a watch-task lane's worker is not ours, so
/// `K` and `p` do not apply. Returns whether the action was taken here.
pub(super) fn on_task_lane(
    state: &mut AppState,
    action: Action,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) -> bool {
    let Some(row) = state.fleet.as_ref().and_then(Fleet::selected_row) else {
        return false;
    };
    let (lane, kind) = (row.name.clone(), row.kind);
    let refused = match (kind, action) {
        (LaneKind::Task | LaneKind::WatchTask, Action::StopAfter) => {
            commands.push(UiCommand::Host(HostRequest::StopTask(lane)));
            return true;
        }
        (LaneKind::WatchTask, Action::Kill) => "K (kill)",
        (LaneKind::WatchTask, Action::PauseResume) => "p (pause)",
        _ => return false,
    };
    let text = format!(
        "{refused} does not apply to watch-task lane {lane}: its worker is not a process of ours (s stops it through state.json)"
    );
    let log = Msg::Log {
        at: now,
        level: Level::Warn,
        text,
    };
    commands.extend(update(state, log, now));
    true
}

/// The inbox changed: each lane's count of waiting requests. Only the rows
/// whose count changes are touched: the lanes that asked, before or now.
pub(super) fn count_requests(state: &mut AppState) {
    let Some(fleet) = state.fleet.as_mut() else {
        return;
    };
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for request in &state.approvals {
        if let Some(&i) = request
            .lane
            .as_deref()
            .and_then(|lane| fleet.index.get(lane))
        {
            *counts.entry(i).or_default() += 1;
        }
    }
    let asked_before: Vec<usize> = std::mem::take(&mut fleet.asking);
    for i in asked_before.into_iter().chain(counts.keys().copied()) {
        let pending = counts.get(&i).copied().unwrap_or(0);
        if fleet.rows.get(i).is_some_and(|row| row.pending != pending) {
            fleet.change_row(i, |row| row.pending = pending);
        }
    }
    fleet.asking = counts.into_keys().collect();
}

/// A line in the events pane of every lane (news about the fleet): shown
/// now in the lane shown, and kept once for the others, which take it when
/// their view is next used ([`catch_up`]): a line costs one line, not one a lane.
fn tell_every_lane(state: &mut AppState, level: Level, text: &str, now: DateTime<Utc>) {
    let Some(line) = super::log_line(state, now, level, text.to_string()) else {
        return;
    };
    super::push_event(state, line.clone());
    let Some(fleet) = state.fleet.as_mut() else {
        return;
    };
    fleet.said += 1;
    if fleet.common.len() >= super::MAX_EVENT_LINES {
        fleet.common.pop_front();
    }
    fleet.common.push_back((fleet.said, line));
}

/// Puts the fleet's lines said after `heard` into the events of the lane in
/// `state`, in the order they came; returns the last one's number.
fn catch_up(state: &mut AppState, heard: u64) -> u64 {
    let Some(fleet) = state.fleet.as_ref() else {
        return heard;
    };
    let said = fleet.said;
    if said == heard {
        return said;
    }
    let missed: Vec<EventLine> = fleet
        .common
        .iter()
        .filter(|(n, _)| *n > heard)
        .map(|(_, line)| line.clone())
        .collect();
    for line in missed {
        super::push_event(state, line);
    }
    said
}

pub(super) fn on_host(
    state: &mut AppState,
    message: HostMsg,
    now: DateTime<Utc>,
) -> Vec<UiCommand> {
    match message {
        HostMsg::Lane { lane, report } => on_lane(state, &lane, report, now),
        HostMsg::Lanes(entries) => on_lanes(state, &entries, now),
        // The parent routes these to the Plan view.
        HostMsg::Plans(_) => Vec::new(),
        HostMsg::Log { level, text } => {
            tell_every_lane(state, level, &text, now);
            Vec::new()
        }
        HostMsg::LaneAdded { lane, result } => {
            on_lane_added(state, &lane, result, now);
            Vec::new()
        }
        HostMsg::Idle { idle, signalled } => {
            let Some(fleet) = state.fleet.as_mut() else {
                return Vec::new();
            };
            fleet.idle = idle;
            if idle && (state.quit_when_finished || signalled) {
                state.should_quit = true;
                return vec![UiCommand::Quit];
            }
            Vec::new()
        }
    }
}

/// The new-lane dialog's answer: an added lane closes it, a refusal stays in
/// it under its field; either is also said in the events pane.
fn on_lane_added(
    state: &mut AppState,
    lane: &LaneName,
    result: Result<String, String>,
    now: DateTime<Utc>,
) {
    let dialog = state.fleet.as_mut().and_then(|fleet| {
        let waiting = fleet.new_lane.as_ref()?.adding() == Some(lane);
        if waiting {
            fleet.new_lane.as_mut()
        } else {
            None
        }
    });
    let (level, text) = match result {
        Ok(text) => {
            if dialog.is_some()
                && let Some(fleet) = state.fleet.as_mut()
            {
                fleet.new_lane = None;
            }
            (Level::Info, text)
        }
        Err(why) => {
            let text = format!("refused: new lane {lane}: {why}");
            if let Some(dialog) = dialog {
                dialog.refuse(why);
            }
            (Level::Error, text)
        }
    };
    tell_every_lane(state, level, &text, now);
}

/// The registry's lanes: rows kept by name, new ones added, removed ones dropped.
fn on_lanes(state: &mut AppState, entries: &[LaneEntry], now: DateTime<Utc>) -> Vec<UiCommand> {
    let Some(fleet) = state.fleet.as_mut() else {
        return Vec::new();
    };
    let mut old: HashMap<LaneName, LaneRow> = fleet
        .rows
        .drain(..)
        .map(|row| (row.name.clone(), row))
        .collect();
    fleet.index.clear();
    for entry in entries {
        let said = fleet.said;
        let mut row = old.remove(&entry.name).unwrap_or_else(|| LaneRow {
            joined: said,
            ..LaneRow::new(entry)
        });
        row.requested = entry.requested;
        row.max_iterations = entry.max_iterations;
        row.kind = entry.kind;
        row.base = entry.base.clone();
        row.status = status_of(&row);
        fleet.index.insert(row.name.clone(), fleet.rows.len());
        fleet.rows.push(row);
    }
    for gone in old.keys() {
        fleet.views.remove(gone);
    }
    fleet.name_width = fleet
        .rows
        .iter()
        .map(|r| crate::fmt::width(r.name.as_str()))
        .max()
        .unwrap_or(4)
        .clamp(4, NAME_MAX);
    fleet.asking = (0..fleet.rows.len())
        .filter(|&i| fleet.rows[i].pending > 0)
        .collect();
    fleet.relist();
    let selected_gone = fleet.selected_index().is_none();
    count_requests(state);
    let Some(fleet) = state.fleet.as_mut().filter(|_| selected_gone) else {
        return Vec::new();
    };
    // The shown lane was removed: its view goes with it.
    fleet.selected = None;
    let first = fleet
        .order(now)
        .first()
        .map(|&i| fleet.rows[i].name.clone());
    let blank = LaneView::new(Arc::new(placeholder("fleet", None)));
    let _removed = blank.swap_into(state);
    match first {
        Some(name) => select(state, &name),
        None => Vec::new(),
    }
}

fn on_lane(
    state: &mut AppState,
    lane: &LaneName,
    report: LaneReport,
    now: DateTime<Utc>,
) -> Vec<UiCommand> {
    let Some(fleet) = state.fleet.as_mut() else {
        return Vec::new();
    };
    let Some(i) = fleet.index_of(lane) else {
        // Not (or no longer) in the registry.
        return Vec::new();
    };
    match report {
        LaneReport::Snapshot { snapshot, queued } => {
            fleet.change_row(i, |row| {
                if snapshot.state != LoopState::Stopped {
                    row.ended = None;
                }
                row.queued = queued;
                row.snapshot = Some(Arc::clone(&snapshot));
            });
            // A lane never shown keeps no view: its row holds the snapshot,
            // from which a view is made when it is shown.
            if fleet.selected.as_ref() != Some(lane) && !fleet.views.contains_key(lane) {
                return Vec::new();
            }
            with_lane(state, lane, |state| {
                update(state, Msg::Snapshot(snapshot), now)
            })
        }
        LaneReport::Log { at, level, text } => with_lane(state, lane, |state| {
            update(state, Msg::Log { at, level, text }, now)
        }),
        LaneReport::Event { at, event } => with_lane(state, lane, |state| {
            update(state, Msg::Event { at, event }, now)
        }),
        LaneReport::Ended(ended) => {
            fleet.change_row(i, |row| row.ended = Some(ended.clone()));
            with_lane(state, lane, |state| {
                let reason = match ended {
                    Ok(reason) => reason,
                    Err(message) => {
                        // It could not start: say why where its events are read.
                        let text = format!("the lane could not run: {message}");
                        let log = Msg::Log {
                            at: now,
                            level: Level::Error,
                            text,
                        };
                        update(state, log, now);
                        ExitReason::Fatal { message }
                    }
                };
                state.finished = Some(reason);
                Vec::new()
            })
        }
        LaneReport::Ahead(ahead) => {
            fleet.rows[i].ahead = ahead;
            Vec::new()
        }
        LaneReport::Unreachable(since) => {
            fleet.rows[i].unreachable = since;
            Vec::new()
        }
        LaneReport::Diff(text) => {
            if let Some(diff) = fleet.diff.as_mut().filter(|d| &d.lane == lane) {
                diff.text = Some(text);
            }
            Vec::new()
        }
        LaneReport::Removed(Ok(done)) => {
            let text = format!("lane rm {lane}: {}", done.join("; "));
            tell_every_lane(state, Level::Info, &text, now);
            Vec::new()
        }
        LaneReport::Removed(Err(why)) => {
            let text = format!("refused: lane rm {lane}: {why}");
            with_lane(state, lane, |state| {
                update(
                    state,
                    Msg::Log {
                        at: now,
                        level: Level::Error,
                        text,
                    },
                    now,
                )
            })
        }
    }
}

#[cfg(test)]
mod tests;

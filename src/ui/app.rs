//! The control room's state and its pure update function:
//! `update(&mut AppState, Msg, now) -> Vec<UiCommand>`.
//!
//! Nothing here touches a terminal, a process or a file: keys and supervisor
//! messages come in as [`Msg`], and what must happen outside comes back as
//! [`UiCommand`]s for the event loop to carry out.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};

use ratatui_textarea::TextArea;

use crate::agent::stream::{LineKind, Rendered, SessionStats};
use crate::approvals::{DoneRecord, Request};
use crate::fleet::link::{HostMsg, HostRequest};
use crate::fleet::registry::LaneKind;
use crate::protocol::{Command, Event, ExitReason, LoopState, Snapshot};
use crate::supervisor::core::Level;
use crate::ui::event_text;
use crate::ui::keymap::{self, Action, Context};
use crate::ui::new_lane::{DialogOutcome, NewLaneDialog};

/// Output lines kept in memory, whatever the size of the output file.
pub const MAX_OUTPUT_LINES: usize = 5_000;
/// Event lines kept for the event pane.
pub const MAX_EVENT_LINES: usize = 500;

/// The panes that can hold the focus, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    /// With lanes only: one row per lane.
    Lanes,
    Output,
    Watchdog,
    Counters,
    Approvals,
    Events,
}

impl Pane {
    pub const ALL: [Pane; 6] = [
        Pane::Lanes,
        Pane::Output,
        Pane::Watchdog,
        Pane::Counters,
        Pane::Approvals,
        Pane::Events,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Lanes => "Lanes",
            Pane::Output => "Session output",
            Pane::Watchdog => "Watchdog",
            Pane::Counters => "Counters",
            Pane::Approvals => "Approvals",
            Pane::Events => "Events",
        }
    }
}

/// A question on top of everything; keys answer it and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialog {
    Quit,
    KillSession,
    StopNow,
    /// `X`: remove the selected lane (as `lane rm`).
    RemoveLane,
}

/// Which session the output pane shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewing {
    pub global: Option<u64>,
    pub file: Option<PathBuf>,
    /// Follows the loop's current session as it changes.
    pub live: bool,
}

/// One entry of the events pane: a few words, and the full record behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct EventLine {
    pub at: DateTime<Utc>,
    pub level: Level,
    /// Its wordings, longest first; the pane shows the first that fits.
    pub text: Vec<String>,
    /// What Enter shows: the event's JSON record, or the whole log line.
    pub detail: String,
}

/// Where the user is in the events pane.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventsView {
    /// Index into the events; `None` follows the newest.
    pub selected: Option<usize>,
    /// The selected event's full record is shown on top.
    pub expanded: bool,
    pub scroll: u16,
}

impl EventsView {
    /// The entry the keys act on.
    pub fn current(&self, count: usize) -> Option<usize> {
        match self.selected {
            Some(index) => Some(index.min(count.checked_sub(1)?)),
            None => count.checked_sub(1),
        }
    }

    fn act(&mut self, action: Action, count: usize) {
        let Some(current) = self.current(count) else {
            return;
        };
        match action {
            Action::Up => self.selected = Some(current.saturating_sub(1)),
            Action::Down if current + 1 >= count => self.selected = None,
            Action::Down => self.selected = Some(current + 1),
            Action::Follow => self.selected = None,
            Action::Expand => {
                self.selected = Some(current);
                self.expanded = true;
                self.scroll = 0;
            }
            _ => {}
        }
    }

    /// Keeps the selection on the same entry when the oldest is dropped.
    fn dropped_front(&mut self) {
        if let Some(selected) = self.selected.as_mut() {
            *selected = selected.saturating_sub(1);
        }
    }
}

/// The output pane: a bounded window of rendered lines and where the user is in it.
#[derive(Debug, Clone, Default)]
pub struct OutputView {
    pub lines: VecDeque<Rendered>,
    /// Lines dropped from the front to keep memory bounded.
    pub dropped: u64,
    /// Index of the selected line; `None` means follow the tail.
    pub selected: Option<usize>,
    pub search: Option<String>,
    /// The search prompt being typed (keys go here, not to global bindings).
    pub search_input: Option<String>,
    pub expanded: Option<usize>,
    pub expanded_scroll: u16,
    /// The pane's last drawn height, for page moves.
    pub page: usize,
}

impl OutputView {
    pub fn following(&self) -> bool {
        self.selected.is_none()
    }

    /// The expanded line's full text: a tool call's input together with its result.
    pub fn expanded_detail(&self) -> Option<(String, String)> {
        let line = self.lines.get(self.expanded?)?;
        let mut detail = line.detail.as_deref().unwrap_or_default().to_owned();
        if line.kind == LineKind::ToolCall
            && let Some(id) = &line.tool_use_id
            && let Some(result) = self.lines.iter().find(|other| {
                other.kind == LineKind::ToolResult && other.tool_use_id.as_ref() == Some(id)
            })
        {
            let status = if result.is_error {
                "result (error)"
            } else {
                "result"
            };
            let body = result.detail.as_deref().unwrap_or(&result.text);
            detail.push_str(&format!("\n\n── {status} ──\n{body}"));
        }
        Some((line.text.clone(), detail))
    }

    fn push(&mut self, line: Rendered) {
        if self.lines.len() >= MAX_OUTPUT_LINES {
            self.lines.pop_front();
            self.dropped += 1;
            if let Some(selected) = self.selected.as_mut() {
                *selected = selected.saturating_sub(1);
            }
            if let Some(expanded) = self.expanded.as_mut() {
                *expanded = expanded.saturating_sub(1);
            }
        }
        match self.call_slot(&line) {
            Some(at) => {
                self.lines.insert(at, line);
                for index in [self.selected.as_mut(), self.expanded.as_mut()]
                    .into_iter()
                    .flatten()
                {
                    if *index >= at {
                        *index += 1;
                    }
                }
            }
            None => self.lines.push_back(line),
        }
    }

    /// Where a tool result goes when its call is not the last one shown
    /// (parallel calls): right under its own call, found by id.
    fn call_slot(&self, line: &Rendered) -> Option<usize> {
        const LOOK_BACK: usize = 500;
        let id = line
            .tool_use_id
            .as_ref()
            .filter(|_| line.kind == LineKind::ToolResult)?;
        let start = self.lines.len().saturating_sub(LOOK_BACK);
        let call = (start..self.lines.len()).rev().find(|&i| {
            self.lines[i].kind == LineKind::ToolCall
                && self.lines[i].tool_use_id.as_ref() == Some(id)
        })?;
        let later_call = self
            .lines
            .range(call + 1..)
            .any(|l| l.kind == LineKind::ToolCall);
        if !later_call {
            return None;
        }
        let mut at = call + 1;
        while self
            .lines
            .get(at)
            .is_some_and(|l| l.kind == LineKind::ToolResult && l.tool_use_id.as_ref() == Some(id))
        {
            at += 1;
        }
        Some(at)
    }

    fn clear(&mut self) {
        self.lines.clear();
        self.dropped = 0;
        self.selected = None;
        self.expanded = None;
    }

    fn last_index(&self) -> usize {
        self.lines.len().saturating_sub(1)
    }

    fn current(&self) -> usize {
        self.selected.unwrap_or_else(|| self.last_index())
    }

    fn move_by(&mut self, delta: isize) {
        if self.lines.is_empty() {
            return;
        }
        let target =
            (self.current() as isize + delta).clamp(0, self.last_index() as isize) as usize;
        // Moving down onto the last line resumes following.
        self.selected = if delta > 0 && target == self.last_index() {
            None
        } else {
            Some(target)
        };
    }

    fn find(&mut self, forward: bool) -> bool {
        let Some(query) = self.search.as_ref().map(|q| q.to_lowercase()) else {
            return false;
        };
        if query.is_empty() || self.lines.is_empty() {
            return false;
        }
        let count = self.lines.len();
        let start = self.current();
        for step in 1..=count {
            let index = if forward {
                (start + step) % count
            } else {
                (start + count - step % count) % count
            };
            let line = &self.lines[index];
            let hit = line.text.to_lowercase().contains(&query)
                || line
                    .detail
                    .as_ref()
                    .is_some_and(|d| d.to_lowercase().contains(&query));
            if hit {
                self.selected = Some(index);
                return true;
            }
        }
        false
    }
}

/// The current session's cost, tokens and turns, as its output shows them so
/// far. The run's totals are the supervisor's ([`Snapshot::totals`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub session: Option<SessionStats>,
    /// The global iteration `session` belongs to.
    pub session_global: Option<u64>,
}

/// The run's cost and turns: the supervisor's totals of finished sessions, plus
/// the running session's so far (the supervisor adds it when it ends). The
/// cost is unknown until some session reports one.
pub fn run_totals(state: &AppState) -> (Option<f64>, u64) {
    let snap = &state.snapshot;
    let totals = &snap.totals;
    let running = state.running_session()
        && state.usage.session_global.is_some()
        && state.usage.session_global == snap.global_iteration
        && snap.last_completed_global != snap.global_iteration;
    match state.usage.session.as_ref().filter(|_| running) {
        Some(live) => (
            match live.cost_usd.filter(|c| c.is_finite()) {
                Some(cost) => Some(totals.known_cost() + cost.max(0.0)),
                None => totals.cost_usd,
            },
            totals.turns.saturating_add(live.turns),
        ),
        None => (totals.cost_usd, totals.turns),
    }
}

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct AppState {
    pub snapshot: Arc<Snapshot>,
    pub output: OutputView,
    pub viewing: Viewing,
    pub usage: Usage,
    pub events: VecDeque<EventLine>,
    pub events_view: EventsView,
    pub focus: Pane,
    pub zoom: bool,
    pub help: bool,
    pub help_scroll: u16,
    pub dialog: Option<Dialog>,
    /// Bytes and time of the previous snapshot, for the growth rate.
    pub growth_sample: Option<(u64, DateTime<Utc>)>,
    pub growth_rate: f64,
    pub approvals: Vec<Request>,
    pub approvals_dir_exists: bool,
    /// The approval the keys act on (index into `approvals`).
    pub approval_selected: usize,
    /// The full request shown on top of everything.
    pub approval_expanded: bool,
    /// Finished requests, newest first, while the history view is shown.
    pub approval_history: Option<Vec<DoneRecord>>,
    /// The reason being typed for a rejection: the request id and the text box.
    pub reject_box: Option<(String, TextArea<'static>)>,
    /// The loop has ended; the screen stays until the user leaves.
    pub finished: Option<ExitReason>,
    /// The user chose to stop and leave as soon as the loop has ended.
    pub quit_when_finished: bool,
    pub should_quit: bool,
    pub no_color: bool,
    /// The quit dialog offers to leave the loop running in the background.
    pub can_detach: bool,
    /// With lanes: the Lanes pane, the lane shown, the other lanes' views.
    pub fleet: Option<lanes::Fleet>,
    /// The Plan view (`P`): the plans run here.
    pub plan: plan::PlanPane,
    /// `t`: the note being typed for a lane or the loop.
    pub tell_box: Option<tell::TellBox>,
    /// Why the last key did nothing, or what it did out of sight; shown in the
    /// status line until the next key.
    pub notice: Option<String>,
}

/// Something that happened, for [`update`].
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Snapshot(Arc<Snapshot>),
    Log {
        at: DateTime<Utc>,
        level: Level,
        text: String,
    },
    /// A supervisor event (the event log's record).
    Event {
        at: DateTime<Utc>,
        event: Box<Event>,
    },
    /// New lines of the session in view; `reset` starts a fresh view.
    Output {
        file: PathBuf,
        lines: Vec<Rendered>,
        stats: Box<SessionStats>,
        reset: bool,
    },
    Approvals {
        dir_exists: bool,
        pending: Vec<Request>,
    },
    /// The approval history, for the history view.
    History(Vec<DoneRecord>),
    Finished(ExitReason),
    /// Text pasted: it goes into the open text prompt, and is never read as keys.
    Paste(String),
    /// Keys that came in one read, as from a paste the terminal did not
    /// bracket. With a text prompt open they are typed into it. Otherwise,
    /// with three different printable characters or more, the printable keys
    /// are dropped (no letter of a paste acts: `q`, `S`, `K`…); with fewer,
    /// they act, but a question one of them asks is not answered by a later
    /// one. Enter, Esc and arrows act.
    Burst(Vec<KeyEvent>),
    /// News from the fleet host (with lanes), each about its lane.
    Host(HostMsg),
    Tick,
}

impl Msg {
    /// A key or the mouse: the user acted, and waits to see it.
    pub fn is_from_user(&self) -> bool {
        matches!(
            self,
            Msg::Key(_) | Msg::Mouse(_) | Msg::Paste(_) | Msg::Burst(_)
        )
    }
}

/// What the event loop must do after an update.
#[derive(Debug, Clone, PartialEq)]
pub enum UiCommand {
    Supervisor(Command),
    Approve {
        id: String,
    },
    /// Approve, and allow calls of `tool` starting with each of `prefixes` from
    /// now on (none: approve once); `covers` tells the user what that means.
    ApproveAlways {
        id: String,
        tool: String,
        prefixes: Vec<String>,
        covers: String,
    },
    Reject {
        id: String,
        reason: String,
    },
    /// Show this output file in the output pane (from its end).
    Follow(PathBuf),
    /// Read the approval history (the view was opened).
    LoadHistory,
    Quit,
    /// Close the control room and leave the loop running headless.
    Detach,
    /// For the fleet host (with lanes): a lane's command, a diff, a removal.
    Host(HostRequest),
    /// `t`: leave a note for the lane's (`None`: the loop's) next session.
    Tell {
        lane: Option<crate::fleet::LaneName>,
        text: String,
    },
    /// Suspend the screen, run a shell or an editor in the lane's folder in the
    /// foreground, then come back.
    RunInLane {
        lane: crate::fleet::LaneName,
        program: LaneProgram,
    },
}

/// What `o` and `e` run in a lane's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneProgram {
    Shell,
    Editor,
}

impl AppState {
    pub fn new(snapshot: Arc<Snapshot>, no_color: bool) -> AppState {
        AppState {
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
            focus: Pane::Output,
            zoom: false,
            help: false,
            help_scroll: 0,
            dialog: None,
            growth_sample: None,
            growth_rate: 0.0,
            approvals: Vec::new(),
            approvals_dir_exists: false,
            approval_selected: 0,
            approval_expanded: false,
            approval_history: None,
            reject_box: None,
            finished: None,
            quit_when_finished: false,
            should_quit: false,
            no_color,
            can_detach: false,
            fleet: None,
            plan: plan::PlanPane::default(),
            tell_box: None,
            notice: None,
        }
    }

    /// The control room over a fleet: lanes appear as the host names them.
    pub fn for_fleet(no_color: bool) -> AppState {
        let mut state = AppState::new(Arc::new(lanes::placeholder("fleet", None)), no_color);
        state.fleet = Some(lanes::Fleet::default());
        state.focus = Pane::Lanes;
        state
    }

    pub fn running_session(&self) -> bool {
        self.finished.is_none()
            && matches!(
                self.snapshot.state,
                LoopState::SessionRunning | LoopState::WatchdogKill
            )
            && self.snapshot.pgid.is_some()
    }

    /// Whether a text prompt takes the keys.
    pub fn typing(&self) -> bool {
        self.output.search_input.is_some() || self.reject_box.is_some() || self.tell_box.is_some()
    }

    pub fn selected_approval(&self) -> Option<&Request> {
        self.approvals.get(self.approval_selected)
    }
}

/// The output file of global session `global`, next to `current`.
fn sibling_output_file(current: &std::path::Path, global: u64) -> Option<PathBuf> {
    let name = current.file_name()?.to_str()?;
    let stem = name.strip_suffix(".jsonl")?;
    let (prefix, _) = stem.rsplit_once('-')?;
    Some(current.with_file_name(format!("{prefix}-{global}.jsonl")))
}

pub fn update(state: &mut AppState, msg: Msg, now: DateTime<Utc>) -> Vec<UiCommand> {
    let mut commands = update_inner(state, msg, now);
    lanes::route(state, &mut commands);
    commands
}

fn update_inner(state: &mut AppState, msg: Msg, now: DateTime<Utc>) -> Vec<UiCommand> {
    let mut commands = Vec::new();
    match msg {
        Msg::Key(key) => on_key(state, key, now, &mut commands),
        Msg::Paste(text) => on_paste(state, &text, now),
        Msg::Burst(keys) => on_burst(state, keys, now, &mut commands),
        Msg::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollUp => state.output.move_by(-3),
            MouseEventKind::ScrollDown => state.output.move_by(3),
            _ => {}
        },
        Msg::Snapshot(snapshot) => on_snapshot(state, snapshot, now, &mut commands),
        Msg::Log { at, level, text } => {
            if !event_text::repeats_an_event(&text) {
                let base = |plan: &str| {
                    let plans = &state.plan.plans;
                    plans
                        .iter()
                        .find(|p| p.name == plan)
                        .map(|p| p.base.clone())
                };
                let wordings = event_text::plan_wordings(&text, base)
                    .unwrap_or_else(|| vec![event_text::log_summary(&text)]);
                let line = EventLine {
                    at,
                    level,
                    text: wordings,
                    detail: text,
                };
                push_event(state, line);
            }
        }
        Msg::Event { at, event } => {
            let line = EventLine {
                at,
                level: event_text::level(&event),
                text: event_text::summaries(&event),
                detail: event_text::record(at, &event),
            };
            push_event(state, line);
        }
        Msg::Output {
            file,
            lines,
            stats,
            reset,
        } => {
            if state.viewing.file.as_ref() != Some(&file) {
                return commands;
            }
            if reset {
                state.output.clear();
            }
            for line in lines {
                state.output.push(line);
            }
            if state.viewing.global == state.snapshot.global_iteration {
                state.usage.session = Some(*stats);
                state.usage.session_global = state.viewing.global;
            }
        }
        Msg::Approvals {
            dir_exists,
            pending,
        } => {
            // Keep the selection on the same request as the list changes.
            let selected_id = state.selected_approval().map(|r| r.id.clone());
            state.approvals_dir_exists = dir_exists;
            state.approvals = pending;
            state.approval_selected = selected_id
                .and_then(|id| state.approvals.iter().position(|r| r.id == id))
                .unwrap_or(0);
            if state.approvals.is_empty() {
                state.approval_expanded = false;
            }
            // A request decided elsewhere (or timed out) closes its reason box.
            if let Some((id, _)) = &state.reject_box
                && !state.approvals.iter().any(|r| &r.id == id)
            {
                state.reject_box = None;
            }
            lanes::count_requests(state);
        }
        // The Plan view's news goes to it; the rest is about lanes.
        Msg::Host(HostMsg::Plans(plans)) => plan::set_plans(state, plans),
        Msg::Host(message) => commands = lanes::on_host(state, message, now),
        Msg::History(records) => {
            if state.approval_history.is_some() {
                state.approval_history = Some(records);
            }
        }
        Msg::Finished(reason) => {
            state.finished = Some(reason);
            if state.quit_when_finished {
                state.should_quit = true;
                commands.push(UiCommand::Quit);
            }
        }
        Msg::Tick => {}
    }
    commands
}

fn push_event(state: &mut AppState, line: EventLine) {
    if state.events.len() >= MAX_EVENT_LINES {
        state.events.pop_front();
        state.events_view.dropped_front();
    }
    state.events.push_back(line);
}

fn on_snapshot(
    state: &mut AppState,
    snapshot: Arc<Snapshot>,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) {
    let previous_global = state.snapshot.global_iteration;
    if snapshot.global_iteration != previous_global {
        state.usage = Usage::default();
        state.growth_sample = None;
        state.growth_rate = 0.0;
    }
    match state.growth_sample {
        Some((bytes, at)) if snapshot.output_bytes >= bytes => {
            let secs = (now - at).num_milliseconds() as f64 / 1000.0;
            if secs >= 1.0 {
                state.growth_rate = (snapshot.output_bytes - bytes) as f64 / secs;
                state.growth_sample = Some((snapshot.output_bytes, now));
            }
        }
        _ => state.growth_sample = Some((snapshot.output_bytes, now)),
    }
    if state.viewing.live
        && let Some(file) = &snapshot.output_file
        && state.viewing.file.as_ref() != Some(file)
    {
        state.viewing.file = Some(file.clone());
        state.viewing.global = snapshot.global_iteration;
        state.output.clear();
        commands.push(UiCommand::Follow(file.clone()));
    }
    state.snapshot = snapshot;
}

/// A paste fills the open text prompt (a rejection's reason, the search, the
/// new-lane dialog); with none open it is dropped, and the events pane says so.
fn on_paste(state: &mut AppState, text: &str, now: DateTime<Utc>) {
    if tell::paste(state, text) {
        return;
    }
    let one_line = || -> String {
        text.chars()
            .filter_map(|c| match c {
                '\n' | '\r' | '\t' => Some(' '),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect()
    };
    if let Some(dialog) = state.fleet.as_mut().and_then(|f| f.new_lane.as_mut()) {
        dialog.paste(text);
    } else if let Some((_, reason)) = state.reject_box.as_mut() {
        reason.insert_str(one_line());
    } else if let Some(query) = state.output.search_input.as_mut() {
        query.push_str(&one_line());
    } else {
        ignored_paste(state, text.chars().count(), now);
    }
}

fn on_burst(
    state: &mut AppState,
    keys: Vec<KeyEvent>,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) {
    let mut printable: Vec<char> = keys
        .iter()
        .filter_map(crate::ui::terminal::printable_char)
        .collect();
    printable.sort_unstable();
    printable.dedup();
    // A few keys at once may be a person's over a slow link, or a script's
    // (`j j M`); text has more different characters.
    let paste = printable.len() >= 3;
    let mut dropped = 0;
    for key in keys {
        let prompt_open =
            state.typing() || state.fleet.as_ref().is_some_and(|f| f.new_lane.is_some());
        let letter = crate::ui::terminal::printable_char(&key).is_some();
        if prompt_open {
            on_key(state, key, now, commands);
        } else if letter && (paste || asking(state)) {
            dropped += 1;
        } else {
            // Once a question is up, the rest of the letters are dropped
            // above: a question is never answered by a key that came with
            // the one that asked it (`qS`, `Ky` pasted).
            on_key(state, key, now, commands);
        }
    }
    if dropped > 0 {
        ignored_paste(state, dropped, now);
    }
}

/// A question is on screen (quit, kill, stop now, remove a lane, merge a step).
fn asking(state: &AppState) -> bool {
    state.dialog.is_some() || state.plan.confirm.is_some()
}

fn ignored_paste(state: &mut AppState, chars: usize, now: DateTime<Utc>) {
    let note = format!("ignored a paste of {chars} characters: no text prompt is open");
    update_inner(
        state,
        Msg::Log {
            at: now,
            level: Level::Info,
            text: note,
        },
        now,
    );
}

fn on_key(state: &mut AppState, key: KeyEvent, now: DateTime<Utc>, commands: &mut Vec<UiCommand>) {
    if key.kind == KeyEventKind::Release {
        return;
    }
    state.notice = None;
    if new_lane_key(state, key, commands) {
        return;
    }
    if state.tell_box.is_some() {
        tell::on_key(state, key, commands);
        return;
    }
    let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');

    // A text prompt owns every key: nothing typed there triggers a global action.
    if let Some((id, text)) = state.reject_box.as_mut() {
        match key.code {
            KeyCode::Esc => state.reject_box = None,
            KeyCode::Enter => {
                let reason = text.lines().join(" ").trim().to_string();
                let reason = if reason.is_empty() {
                    "rejected in the control room".to_string()
                } else {
                    reason
                };
                commands.push(UiCommand::Reject {
                    id: id.clone(),
                    reason,
                });
                state.reject_box = None;
            }
            _ if ctrl_c => state.reject_box = None,
            _ => {
                text.input(key);
            }
        }
        return;
    }
    if let Some(input) = state.output.search_input.as_mut() {
        match key.code {
            KeyCode::Esc => state.output.search_input = None,
            KeyCode::Enter => {
                let query = state.output.search_input.take().unwrap_or_default();
                state.output.search = (!query.is_empty()).then_some(query);
                state.output.find(false);
            }
            KeyCode::Backspace => {
                input.pop();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => input.push(c),
            _ if ctrl_c => state.output.search_input = None,
            _ => {}
        }
        return;
    }

    if let Some(dialog) = state.dialog {
        answer_dialog(state, dialog, key, commands);
        return;
    }

    let diff_open = state.fleet.as_ref().is_some_and(|f| f.diff.is_some());
    if state.output.expanded.is_some() || state.events_view.expanded || state.help || diff_open {
        if let Some(binding) = keymap::lookup(Context::Detail, &key) {
            on_detail(state, binding.action);
        }
        return;
    }
    if let Some(done) = plan::on_key(state, &key) {
        commands.extend(done);
        return;
    }

    if state.approval_expanded {
        match key.code {
            KeyCode::Char('a') | KeyCode::Char('A') | KeyCode::Char('r') => {}
            _ => {
                state.approval_expanded = false;
                return;
            }
        }
    }

    let pane = match state.focus {
        Pane::Lanes => Some(Context::Lanes),
        Pane::Output => Some(Context::Output),
        Pane::Approvals => Some(Context::Approvals),
        Pane::Events => Some(Context::Events),
        Pane::Watchdog | Pane::Counters => None,
    };
    let binding = pane
        .and_then(|context| keymap::lookup(context, &key))
        .filter(|b| available(state, b.action))
        .or_else(|| keymap::lookup(Context::Main, &key));
    state.notice = binding
        .filter(|b| !available(state, b.action))
        .and_then(|b| why_not::why_not(state, b.action, &key_text(&key)));
    if let Some(binding) = binding
        && available(state, binding.action)
    {
        if let (Action::SelectLane, KeyCode::Char(digit)) = (binding.action, key.code) {
            let n = digit.to_digit(10).unwrap_or(0) as usize;
            commands.extend(lanes::select_nth(state, n));
            return;
        }
        act(state, binding.action, now, commands);
    }
}

/// A key as the status line names it.
fn key_text(key: &KeyEvent) -> String {
    match key.code {
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Enter => "Enter".to_string(),
        KeyCode::Home => "Home".to_string(),
        other => format!("{other:?}"),
    }
}

/// While the new-lane dialog is open it owns every key; its lane is added by
/// the host (git must not run on the screen's thread), which tells how it went.
fn new_lane_key(state: &mut AppState, key: KeyEvent, commands: &mut Vec<UiCommand>) -> bool {
    let Some(fleet) = state.fleet.as_mut() else {
        return false;
    };
    let Some(dialog) = fleet.new_lane.as_mut() else {
        return false;
    };
    match dialog.handle_key(key) {
        DialogOutcome::Continue => {}
        DialogOutcome::Cancel => fleet.new_lane = None,
        // Open until the host says how it went: a refusal keeps what was typed.
        DialogOutcome::Submit(request) => {
            commands.push(UiCommand::Host(HostRequest::AddLane(request)));
        }
    }
    true
}

/// Whether `action` does something now; the status line shows only those.
pub fn available(state: &AppState, action: Action) -> bool {
    let live = state.finished.is_none();
    let held = state.snapshot.state == LoopState::Held && live;
    let lane_selected = state.fleet.as_ref().is_some_and(|f| f.selected.is_some());
    // Said not to apply, rather than silently ignored.
    let watched = live && lanes::selected_kind(state) == Some(LaneKind::WatchTask);
    match action {
        Action::SelectLane
        | Action::Diff
        | Action::RemoveLane
        | Action::MergeLane
        | Action::PushLane
        | Action::RestartLane
        | Action::OpenShell
        | Action::OpenEditor => lane_selected,
        Action::PlanView => state.fleet.is_some() && !state.plan.plans.is_empty(),
        Action::NewLane => state.fleet.is_some(),
        Action::Tell => match &state.fleet {
            Some(_) => lane_selected && !lanes::selected_kind(state).is_some_and(LaneKind::is_task),
            None => live,
        },
        Action::SearchNext => state.output.search.is_some(),
        Action::PauseResume => held || state.running_session() || watched,
        Action::Kill => state.running_session() || watched,
        Action::StopAfter | Action::StopNow => live,
        Action::Approve | Action::ApproveAlways | Action::Reject => !state.approvals.is_empty(),
        Action::Unzoom => state.zoom,
        Action::Expand => match state.focus {
            Pane::Approvals => !state.approvals.is_empty(),
            Pane::Events => !state.events.is_empty(),
            _ => true,
        },
        Action::Top => !state.output.lines.is_empty(),
        _ => true,
    }
}

/// Carries out a main-view action (its availability was checked).
fn act(state: &mut AppState, action: Action, now: DateTime<Utc>, commands: &mut Vec<UiCommand>) {
    let page = state.output.page.max(1) as isize;
    if lanes::on_task_lane(state, action, now, commands) {
        return;
    }
    match action {
        Action::Quit => ask_quit(state, commands),
        Action::Help => {
            state.help = true;
            state.help_scroll = 0;
        }
        Action::PauseResume => {
            let command = if state.snapshot.state == LoopState::Held || state.snapshot.paused {
                Command::Resume
            } else {
                Command::Pause
            };
            commands.push(UiCommand::Supervisor(command));
        }
        Action::Kill => state.dialog = Some(Dialog::KillSession),
        Action::StopAfter => commands.push(UiCommand::Supervisor(Command::StopAfterCurrent)),
        Action::StopNow => state.dialog = Some(Dialog::StopNow),
        Action::Approve | Action::ApproveAlways | Action::Reject => {
            on_decision(state, action, commands)
        }
        Action::FocusNext => state.focus = cycle(state, 1),
        Action::FocusPrev => state.focus = cycle(state, -1),
        Action::RemoveLane => state.dialog = Some(Dialog::RemoveLane),
        Action::NewLane => {
            if let Some(fleet) = state.fleet.as_mut() {
                let taken = fleet.rows.iter().map(|row| row.name.to_string());
                fleet.new_lane = Some(NewLaneDialog::new(&fleet.root).with_taken(taken));
            }
        }
        Action::Diff => show_diff(state, commands),
        Action::Tell => tell::open(state),
        Action::MergeLane
        | Action::PushLane
        | Action::RestartLane
        | Action::OpenShell
        | Action::OpenEditor => on_lane_work(state, action, commands),
        Action::PlanView => state.plan.shown = !state.plan.shown,
        Action::Zoom => state.zoom = !state.zoom,
        Action::Unzoom => state.zoom = false,
        _ => match state.focus {
            Pane::Lanes => on_lanes_action(state, action, commands),
            Pane::Output => on_output_action(state, action, page, commands),
            Pane::Approvals => on_approvals_action(state, action, commands),
            Pane::Events => state.events_view.act(action, state.events.len()),
            Pane::Watchdog | Pane::Counters => {}
        },
    }
}

/// `a`, `A`, `r` on the selected request, from any pane.
fn on_decision(state: &mut AppState, action: Action, commands: &mut Vec<UiCommand>) {
    match action {
        Action::Approve => {
            if let Some(request) = state.selected_approval() {
                commands.push(UiCommand::Approve {
                    id: request.id.clone(),
                });
            }
            state.approval_expanded = false;
        }
        Action::ApproveAlways => {
            if let Some(request) = state.selected_approval() {
                let command = match (&request.tool_name, request.subject()) {
                    (Some(tool), subject) if !subject.is_empty() => {
                        let rule = crate::approvals::policy::always_rule(
                            tool,
                            request.tool_input.as_ref(),
                        );
                        UiCommand::ApproveAlways {
                            id: request.id.clone(),
                            tool: tool.clone(),
                            prefixes: rule.prefixes,
                            covers: rule.note,
                        }
                    }
                    // Nothing to write a rule for (a question, or a call without input).
                    _ => UiCommand::Approve {
                        id: request.id.clone(),
                    },
                };
                commands.push(command);
            }
            state.approval_expanded = false;
        }
        Action::Reject => {
            if let Some(request) = state.selected_approval() {
                let mut text = TextArea::default();
                text.set_placeholder_text("why? (Enter rejects, Esc cancels)");
                state.reject_box = Some((request.id.clone(), text));
            }
            state.approval_expanded = false;
        }
        _ => {}
    }
}

/// `j`/`k` in the Lanes pane: another lane.
fn on_lanes_action(state: &mut AppState, action: Action, commands: &mut Vec<UiCommand>) {
    match action {
        Action::Down => commands.extend(lanes::select_by(state, 1)),
        Action::Up => commands.extend(lanes::select_by(state, -1)),
        _ => {}
    }
}

/// `M`, `U`, `R` for the host; `o`, `e` for the terminal's loop.
fn on_lane_work(state: &AppState, action: Action, commands: &mut Vec<UiCommand>) {
    let Some(lane) = state.fleet.as_ref().and_then(|f| f.selected.clone()) else {
        return;
    };
    commands.push(match action {
        Action::MergeLane => UiCommand::Host(HostRequest::MergeLane(lane)),
        Action::PushLane => UiCommand::Host(HostRequest::PushLane(lane)),
        Action::RestartLane => UiCommand::Host(HostRequest::RestartLane(lane)),
        Action::OpenEditor => UiCommand::RunInLane {
            lane,
            program: LaneProgram::Editor,
        },
        _ => UiCommand::RunInLane {
            lane,
            program: LaneProgram::Shell,
        },
    });
}

/// `D`: asks the host for the selected lane's diff, shown when it comes.
fn show_diff(state: &mut AppState, commands: &mut Vec<UiCommand>) {
    let Some(fleet) = state.fleet.as_mut() else {
        return;
    };
    let Some(lane) = fleet.selected.clone() else {
        return;
    };
    fleet.diff = Some(lanes::DiffView {
        lane: lane.clone(),
        text: None,
        scroll: 0,
    });
    commands.push(UiCommand::Host(HostRequest::Diff(lane)));
}

/// Keys while a full text (tool call, event, help, a diff) is on top.
fn on_detail(state: &mut AppState, action: Action) {
    if let Some(diff) = state.fleet.as_mut().and_then(|f| f.diff.as_mut()) {
        match action {
            Action::Down => diff.scroll = diff.scroll.saturating_add(1),
            Action::Up => diff.scroll = diff.scroll.saturating_sub(1),
            Action::PageDown => diff.scroll = diff.scroll.saturating_add(20),
            Action::PageUp => diff.scroll = diff.scroll.saturating_sub(20),
            Action::Close => {
                if let Some(fleet) = state.fleet.as_mut() {
                    fleet.diff = None;
                }
            }
            _ => {}
        }
        return;
    }
    let scroll = if state.help {
        &mut state.help_scroll
    } else if state.events_view.expanded {
        &mut state.events_view.scroll
    } else {
        &mut state.output.expanded_scroll
    };
    match action {
        Action::Down => *scroll = scroll.saturating_add(1),
        Action::Up => *scroll = scroll.saturating_sub(1),
        Action::PageDown => *scroll = scroll.saturating_add(10),
        Action::PageUp => *scroll = scroll.saturating_sub(10),
        Action::Close => {
            if state.help {
                state.help = false;
            } else if state.events_view.expanded {
                state.events_view.expanded = false;
            } else {
                state.output.expanded = None;
            }
        }
        _ => {}
    }
}

fn on_approvals_action(state: &mut AppState, action: Action, commands: &mut Vec<UiCommand>) {
    match action {
        Action::Down => {
            state.approval_selected =
                (state.approval_selected + 1).min(state.approvals.len().saturating_sub(1));
        }
        Action::Up => state.approval_selected = state.approval_selected.saturating_sub(1),
        Action::Expand => state.approval_expanded = true,
        Action::History => toggle_history(state, commands),
        _ => {}
    }
}

fn on_output_action(
    state: &mut AppState,
    action: Action,
    page: isize,
    commands: &mut Vec<UiCommand>,
) {
    let output = &mut state.output;
    match action {
        Action::Down => output.move_by(1),
        Action::Up => output.move_by(-1),
        Action::PageDown => output.move_by(page),
        Action::PageUp => output.move_by(-page),
        Action::Top => output.selected = Some(0),
        Action::Follow => output.selected = None,
        Action::Search => output.search_input = Some(String::new()),
        Action::SearchNext => {
            output.find(true);
        }
        Action::SearchPrev => {
            output.find(false);
        }
        Action::Expand => {
            let index = output.current();
            if output
                .lines
                .get(index)
                .is_some_and(|l| l.detail.is_some() || l.tool_use_id.is_some())
            {
                output.expanded = Some(index);
                output.expanded_scroll = 0;
            }
        }
        Action::PrevSession => browse(state, -1, commands),
        Action::NextSession => browse(state, 1, commands),
        _ => {}
    }
}

/// Shows the previous or next session's output; past the live one, follows live again.
fn browse(state: &mut AppState, delta: i64, commands: &mut Vec<UiCommand>) {
    let Some(current_file) = state
        .viewing
        .file
        .clone()
        .or_else(|| state.snapshot.output_file.clone())
    else {
        return;
    };
    let live_global = state.snapshot.global_iteration.unwrap_or(0);
    let Some(viewed) = state.viewing.global.or(state.snapshot.global_iteration) else {
        return;
    };
    let target = viewed as i64 + delta;
    if target < 1 {
        return;
    }
    let target = target as u64;
    if target >= live_global {
        state.viewing.live = true;
        state.viewing.global = state.snapshot.global_iteration;
        if let Some(file) = state.snapshot.output_file.clone() {
            state.viewing.file = Some(file.clone());
            state.output.clear();
            commands.push(UiCommand::Follow(file));
        }
        return;
    }
    if let Some(file) = sibling_output_file(&current_file, target) {
        state.viewing = Viewing {
            global: Some(target),
            file: Some(file.clone()),
            live: false,
        };
        state.output.clear();
        commands.push(UiCommand::Follow(file));
    }
}

fn toggle_history(state: &mut AppState, commands: &mut Vec<UiCommand>) {
    if state.approval_history.is_some() {
        state.approval_history = None;
    } else {
        state.approval_history = Some(Vec::new());
        commands.push(UiCommand::LoadHistory);
    }
}

fn ask_quit(state: &mut AppState, commands: &mut Vec<UiCommand>) {
    let ended = match &state.fleet {
        Some(fleet) => fleet.idle,
        None => state.finished.is_some(),
    };
    if ended {
        state.should_quit = true;
        commands.push(UiCommand::Quit);
    } else {
        state.dialog = Some(Dialog::Quit);
    }
}

fn answer_dialog(
    state: &mut AppState,
    dialog: Dialog,
    key: KeyEvent,
    commands: &mut Vec<UiCommand>,
) {
    let context = match dialog {
        Dialog::Quit => Context::QuitDialog,
        Dialog::KillSession | Dialog::StopNow | Dialog::RemoveLane => Context::Confirm,
    };
    let mut action = keymap::lookup(context, &key).map(|b| b.action);
    // The key that asked the question also answers it.
    let asked_by = match dialog {
        Dialog::KillSession => Some(Action::Kill),
        Dialog::StopNow => Some(Action::StopNow),
        Dialog::RemoveLane => Some(Action::RemoveLane),
        Dialog::Quit => None,
    };
    if action.is_none()
        && asked_by.is_some()
        && keymap::lookup(Context::Main, &key).map(|b| b.action) == asked_by
    {
        action = Some(Action::Confirm);
    }
    match (dialog, action) {
        (_, Some(Action::Cancel)) => state.dialog = None,
        (Dialog::Quit, Some(Action::StopNowThenQuit)) => {
            state.dialog = None;
            state.quit_when_finished = true;
            match &state.fleet {
                Some(fleet) => lanes::to_every_lane(fleet, &Command::StopNow, commands),
                None => commands.push(UiCommand::Supervisor(Command::StopNow)),
            }
        }
        (Dialog::Quit, Some(Action::StopAfterThenQuit)) => {
            state.dialog = None;
            state.quit_when_finished = true;
            match &state.fleet {
                Some(fleet) => lanes::to_every_lane(fleet, &Command::StopAfterCurrent, commands),
                None if !state.snapshot.stop_pending => {
                    commands.push(UiCommand::Supervisor(Command::StopAfterCurrent));
                }
                None => {}
            }
        }
        (Dialog::RemoveLane, Some(Action::Confirm)) => {
            state.dialog = None;
            if let Some(lane) = state.fleet.as_ref().and_then(|f| f.selected.clone()) {
                commands.push(UiCommand::Host(HostRequest::Remove(lane)));
            }
        }
        (Dialog::Quit, Some(Action::Detach)) if state.can_detach => {
            state.dialog = None;
            commands.push(UiCommand::Detach);
        }
        (Dialog::KillSession, Some(Action::Confirm)) => {
            state.dialog = None;
            commands.push(UiCommand::Supervisor(Command::KillSession));
        }
        (Dialog::StopNow, Some(Action::Confirm)) => {
            state.dialog = None;
            commands.push(UiCommand::Supervisor(Command::StopNow));
        }
        _ => {}
    }
}

/// The next pane in Tab order; the Lanes pane only with lanes.
fn cycle(state: &AppState, delta: isize) -> Pane {
    let panes: Vec<Pane> = Pane::ALL
        .into_iter()
        .filter(|p| *p != Pane::Lanes || state.fleet.is_some())
        .collect();
    let index = panes.iter().position(|p| *p == state.focus).unwrap_or(0) as isize;
    let count = panes.len() as isize;
    panes[((index + delta).rem_euclid(count)) as usize]
}

pub mod lanes;
pub mod observe;
pub mod plan;
pub mod tell;
mod why_not;

#[cfg(test)]
mod detail_tests;
#[cfg(test)]
mod pairing_tests;
#[cfg(test)]
mod paste_tests;

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
use crate::fleet::event_text;
use crate::fleet::link::{HostMsg, HostRequest};
use crate::fleet::registry::LaneKind;
use crate::protocol::{Command, Event, ExitReason, LoopState, Snapshot};
use crate::supervisor::core::Level;
use crate::ui::keymap::{self, Action, Context};
use crate::ui::new_lane::{DialogOutcome, NewLaneDialog};

pub use keys::available;
use keys::*;
pub use pane_state::{EventLine, EventsView, OutputView};

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
    /// `M`: merge the selected lane into its base (as `lane merge`).
    MergeLane,
}

/// Which session the output pane shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewing {
    pub global: Option<u64>,
    pub file: Option<PathBuf>,
    /// Follows the loop's current session as it changes.
    pub live: bool,
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
    /// A room attached to a host elsewhere: quitting it leaves the lanes running.
    pub attached: bool,
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
            attached: false,
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
        self.output.search_input.is_some()
            || self.reject_box.is_some()
            || self.tell_box.is_some()
            || self
                .fleet
                .as_ref()
                .is_some_and(|f| f.listing.typing.is_some())
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
        Msg::Paste(text) => on_paste(state, &text, now, &mut commands),
        Msg::Burst(keys) => on_burst(state, keys, now, &mut commands),
        Msg::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollUp => state.output.move_by(-3),
            MouseEventKind::ScrollDown => state.output.move_by(3),
            _ => {}
        },
        Msg::Snapshot(snapshot) => on_snapshot(state, snapshot, now, &mut commands),
        Msg::Log { at, level, text } => {
            if let Some(line) = log_line(state, at, level, text) {
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

/// A log line as the events pane shows it; `None` for one that repeats an event.
fn log_line(state: &AppState, at: DateTime<Utc>, level: Level, text: String) -> Option<EventLine> {
    if event_text::repeats_an_event(&text) {
        return None;
    }
    let base = |plan: &str| {
        let plans = &state.plan.plans;
        plans
            .iter()
            .find(|p| p.name == plan)
            .map(|p| p.base.clone())
    };
    let wordings = event_text::plan_wordings(&text, base)
        .unwrap_or_else(|| vec![event_text::log_summary(&text)]);
    Some(EventLine {
        at,
        level,
        text: wordings,
        detail: text,
    })
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
fn on_paste(state: &mut AppState, text: &str, now: DateTime<Utc>, commands: &mut Vec<UiCommand>) {
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
    } else if state
        .fleet
        .as_ref()
        .is_some_and(|f| f.listing.typing.is_some())
    {
        commands.extend(filter::type_text(state, &one_line(), now));
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

mod filter;
mod keys;
pub mod lanes;
pub mod listing;
pub mod observe;
mod pane_state;
pub mod plan;
pub mod tell;
mod why_not;

#[cfg(test)]
mod detail_tests;
#[cfg(test)]
mod pairing_tests;
#[cfg(test)]
mod paste_tests;

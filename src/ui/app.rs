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
use crate::protocol::{Command, ExitReason, LoopState, Snapshot};
use crate::supervisor::core::Level;

/// Output lines kept in memory, whatever the size of the output file.
pub const MAX_OUTPUT_LINES: usize = 5_000;
/// Event lines kept for the event pane.
pub const MAX_EVENT_LINES: usize = 500;

/// The panes that can hold the focus, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Output,
    Watchdog,
    Counters,
    Approvals,
    Events,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::Output,
        Pane::Watchdog,
        Pane::Counters,
        Pane::Approvals,
        Pane::Events,
    ];

    pub fn title(self) -> &'static str {
        match self {
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
}

/// Which session the output pane shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewing {
    pub global: Option<u64>,
    pub file: Option<PathBuf>,
    /// Follows the loop's current session as it changes.
    pub live: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventLine {
    pub at: DateTime<Utc>,
    pub level: Level,
    pub text: String,
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
        let mut detail = line.detail.clone().unwrap_or_default();
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
            let body = result.detail.clone().unwrap_or_else(|| result.text.clone());
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

/// Cost, tokens and turns: the current session's, and the run's so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub session: Option<SessionStats>,
    /// Totals of the sessions that have ended while the control room watched.
    pub run_cost_usd: f64,
    pub run_tokens: u64,
    pub run_turns: u64,
    pub run_sessions_counted: u64,
}

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct AppState {
    pub snapshot: Arc<Snapshot>,
    pub output: OutputView,
    pub viewing: Viewing,
    pub usage: Usage,
    pub events: VecDeque<EventLine>,
    pub focus: Pane,
    pub zoom: bool,
    pub help: bool,
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
    Tick,
}

/// What the event loop must do after an update.
#[derive(Debug, Clone, PartialEq)]
pub enum UiCommand {
    Supervisor(Command),
    Approve {
        id: String,
    },
    /// Approve, and allow calls of `tool` starting with `prefix` from now on.
    ApproveAlways {
        id: String,
        tool: String,
        prefix: String,
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
            focus: Pane::Output,
            zoom: false,
            help: false,
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
        }
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
        self.output.search_input.is_some() || self.reject_box.is_some()
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
    let mut commands = Vec::new();
    match msg {
        Msg::Key(key) => on_key(state, key, &mut commands),
        Msg::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollUp => state.output.move_by(-3),
            MouseEventKind::ScrollDown => state.output.move_by(3),
            _ => {}
        },
        Msg::Snapshot(snapshot) => on_snapshot(state, snapshot, now, &mut commands),
        Msg::Log { at, level, text } => {
            if state.events.len() >= MAX_EVENT_LINES {
                state.events.pop_front();
            }
            state.events.push_back(EventLine { at, level, text });
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
        }
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

fn on_snapshot(
    state: &mut AppState,
    snapshot: Arc<Snapshot>,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) {
    let previous_global = state.snapshot.global_iteration;
    if snapshot.global_iteration != previous_global {
        // The session in view ended: count it in the run's totals.
        if let Some(stats) = state.usage.session.take() {
            state.usage.run_cost_usd += stats.cost_usd.unwrap_or(0.0);
            state.usage.run_tokens += stats.input_tokens + stats.output_tokens;
            state.usage.run_turns += stats.turns;
            state.usage.run_sessions_counted += 1;
        }
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

fn on_key(state: &mut AppState, key: KeyEvent, commands: &mut Vec<UiCommand>) {
    if key.kind == KeyEventKind::Release {
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
        answer_dialog(state, dialog, key, ctrl_c, commands);
        return;
    }

    if state.output.expanded.is_some() {
        match key.code {
            KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => state.output.expanded = None,
            KeyCode::Char('j') | KeyCode::Down => {
                state.output.expanded_scroll = state.output.expanded_scroll.saturating_add(1)
            }
            KeyCode::Char('k') | KeyCode::Up => {
                state.output.expanded_scroll = state.output.expanded_scroll.saturating_sub(1)
            }
            KeyCode::PageDown => {
                state.output.expanded_scroll = state.output.expanded_scroll.saturating_add(10)
            }
            KeyCode::PageUp => {
                state.output.expanded_scroll = state.output.expanded_scroll.saturating_sub(10)
            }
            _ => {}
        }
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

    if state.help {
        if matches!(
            key.code,
            KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q')
        ) || ctrl_c
        {
            state.help = false;
        }
        return;
    }

    if ctrl_c {
        ask_quit(state, commands);
        return;
    }

    let page = state.output.page.max(1) as isize;
    match key.code {
        KeyCode::Char('q') => ask_quit(state, commands),
        KeyCode::Char('?') => state.help = true,
        KeyCode::Char('p')
            if state.snapshot.state == LoopState::Held && state.finished.is_none() =>
        {
            commands.push(UiCommand::Supervisor(Command::Resume));
        }
        KeyCode::Char('p') if state.running_session() => {
            let command = if state.snapshot.paused {
                Command::Resume
            } else {
                Command::Pause
            };
            commands.push(UiCommand::Supervisor(command));
        }
        KeyCode::Char('K') if state.running_session() => state.dialog = Some(Dialog::KillSession),
        KeyCode::Char('s') if state.finished.is_none() => {
            commands.push(UiCommand::Supervisor(Command::StopAfterCurrent))
        }
        KeyCode::Char('S') if state.finished.is_none() => state.dialog = Some(Dialog::StopNow),
        KeyCode::Char('a') if !state.approvals.is_empty() => {
            if let Some(request) = state.selected_approval() {
                commands.push(UiCommand::Approve {
                    id: request.id.clone(),
                });
            }
            state.approval_expanded = false;
        }
        KeyCode::Char('A') if !state.approvals.is_empty() => {
            if let Some(request) = state.selected_approval() {
                let command = match (&request.tool_name, request.subject()) {
                    (Some(tool), subject) if !subject.is_empty() => UiCommand::ApproveAlways {
                        id: request.id.clone(),
                        tool: tool.clone(),
                        prefix: subject,
                    },
                    // Nothing to write a rule for (a question, or a call without input).
                    _ => UiCommand::Approve {
                        id: request.id.clone(),
                    },
                };
                commands.push(command);
            }
            state.approval_expanded = false;
        }
        KeyCode::Char('r') if !state.approvals.is_empty() => {
            if let Some(request) = state.selected_approval() {
                let mut text = TextArea::default();
                text.set_placeholder_text("why? (Enter rejects, Esc cancels)");
                state.reject_box = Some((request.id.clone(), text));
            }
            state.approval_expanded = false;
        }
        KeyCode::Tab => state.focus = cycle(state.focus, 1),
        KeyCode::BackTab => state.focus = cycle(state.focus, -1),
        KeyCode::Char('z') => state.zoom = !state.zoom,
        KeyCode::Esc if state.zoom => state.zoom = false,
        _ if state.focus == Pane::Output => on_output_key(state, key, page, commands),
        _ if state.focus == Pane::Approvals => match key.code {
            KeyCode::Char('j') | KeyCode::Down => {
                state.approval_selected =
                    (state.approval_selected + 1).min(state.approvals.len().saturating_sub(1));
            }
            KeyCode::Char('k') | KeyCode::Up => {
                state.approval_selected = state.approval_selected.saturating_sub(1);
            }
            KeyCode::Enter if !state.approvals.is_empty() => state.approval_expanded = true,
            KeyCode::Char('h') => toggle_history(state, commands),
            _ => {}
        },
        _ => {}
    }
}

fn on_output_key(state: &mut AppState, key: KeyEvent, page: isize, commands: &mut Vec<UiCommand>) {
    let output = &mut state.output;
    match key.code {
        KeyCode::Char('j') | KeyCode::Down => output.move_by(1),
        KeyCode::Char('k') | KeyCode::Up => output.move_by(-1),
        KeyCode::PageDown => output.move_by(page),
        KeyCode::PageUp => output.move_by(-page),
        KeyCode::Char('g') | KeyCode::Home if !output.lines.is_empty() => output.selected = Some(0),
        KeyCode::Char('G') | KeyCode::End => output.selected = None,
        KeyCode::Char('/') => output.search_input = Some(String::new()),
        KeyCode::Char('n') => {
            output.find(true);
        }
        KeyCode::Char('N') => {
            output.find(false);
        }
        KeyCode::Enter => {
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
        KeyCode::Char('[') => browse(state, -1, commands),
        KeyCode::Char(']') => browse(state, 1, commands),
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
    if state.finished.is_some() {
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
    ctrl_c: bool,
    commands: &mut Vec<UiCommand>,
) {
    let cancel = ctrl_c
        || matches!(
            key.code,
            KeyCode::Esc | KeyCode::Char('c') | KeyCode::Char('n')
        );
    if cancel {
        state.dialog = None;
        return;
    }
    match dialog {
        Dialog::Quit => match key.code {
            KeyCode::Char('s') | KeyCode::Char('S') => {
                state.dialog = None;
                state.quit_when_finished = true;
                commands.push(UiCommand::Supervisor(Command::StopNow));
            }
            KeyCode::Char('a') => {
                state.dialog = None;
                state.quit_when_finished = true;
                if !state.snapshot.stop_pending {
                    commands.push(UiCommand::Supervisor(Command::StopAfterCurrent));
                }
            }
            KeyCode::Char('d') if state.can_detach => {
                state.dialog = None;
                commands.push(UiCommand::Detach);
            }
            _ => {}
        },
        Dialog::KillSession => {
            if matches!(
                key.code,
                KeyCode::Char('y') | KeyCode::Char('K') | KeyCode::Enter
            ) {
                state.dialog = None;
                commands.push(UiCommand::Supervisor(Command::KillSession));
            }
        }
        Dialog::StopNow => {
            if matches!(
                key.code,
                KeyCode::Char('y') | KeyCode::Char('S') | KeyCode::Enter
            ) {
                state.dialog = None;
                commands.push(UiCommand::Supervisor(Command::StopNow));
            }
        }
    }
}

fn cycle(pane: Pane, delta: isize) -> Pane {
    let index = Pane::ALL.iter().position(|p| *p == pane).unwrap_or(0) as isize;
    let count = Pane::ALL.len() as isize;
    Pane::ALL[((index + delta).rem_euclid(count)) as usize]
}

#[cfg(test)]
mod pairing_tests;

//! Keys: which binding a key press is in the current pane and dialog, whether
//! it can act now, and what it does to the state (or asks the host to do).

use super::*;

pub(super) fn on_key(
    state: &mut AppState,
    key: KeyEvent,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) {
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

    if filter::typing_key(state, key, now, commands) {
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
pub(super) fn key_text(key: &KeyEvent) -> String {
    match key.code {
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Enter => "Enter".to_string(),
        KeyCode::Home => "Home".to_string(),
        other => format!("{other:?}"),
    }
}

/// While the new-lane dialog is open it owns every key; its lane is added by
/// the host (git must not run on the screen's thread), which tells how it went.
pub(super) fn new_lane_key(
    state: &mut AppState,
    key: KeyEvent,
    commands: &mut Vec<UiCommand>,
) -> bool {
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
        // Nothing to list before the first lane.
        Action::FilterLanes | Action::NeedsYouOnly | Action::SortLanes => {
            state.fleet.as_ref().is_some_and(|f| !f.rows.is_empty())
        }
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
pub(super) fn act(
    state: &mut AppState,
    action: Action,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) {
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
        Action::MergeLane => state.dialog = Some(Dialog::MergeLane),
        Action::NewLane => {
            if let Some(fleet) = state.fleet.as_mut() {
                let taken = fleet.rows.iter().map(|row| row.name.to_string());
                fleet.new_lane = Some(NewLaneDialog::new(&fleet.root).with_taken(taken));
            }
        }
        Action::Diff => show_diff(state, commands),
        Action::Tell => tell::open(state),
        Action::PushLane | Action::RestartLane | Action::OpenShell | Action::OpenEditor => {
            on_lane_work(state, action, commands)
        }
        Action::PlanView => state.plan.shown = !state.plan.shown,
        Action::FilterLanes | Action::NeedsYouOnly | Action::SortLanes => {
            commands.extend(filter::act(state, action, now))
        }
        Action::Zoom => state.zoom = !state.zoom,
        Action::Unzoom => state.zoom = false,
        _ => match state.focus {
            Pane::Lanes => on_lanes_action(state, action, now, commands),
            Pane::Output => on_output_action(state, action, page, commands),
            Pane::Approvals => on_approvals_action(state, action, commands),
            Pane::Events => state.events_view.act(action, state.events.len()),
            Pane::Watchdog | Pane::Counters => {}
        },
    }
}

/// `a`, `A`, `r` on the selected request, from any pane.
pub(super) fn on_decision(state: &mut AppState, action: Action, commands: &mut Vec<UiCommand>) {
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
pub(super) fn on_lanes_action(
    state: &mut AppState,
    action: Action,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) {
    match action {
        Action::Down => commands.extend(lanes::select_by(state, 1, now)),
        Action::Up => commands.extend(lanes::select_by(state, -1, now)),
        _ => {}
    }
}

/// `M`, `U`, `R` for the host; `o`, `e` for the terminal's loop.
pub(super) fn on_lane_work(state: &AppState, action: Action, commands: &mut Vec<UiCommand>) {
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
pub(super) fn show_diff(state: &mut AppState, commands: &mut Vec<UiCommand>) {
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
pub(super) fn on_detail(state: &mut AppState, action: Action) {
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

pub(super) fn on_approvals_action(
    state: &mut AppState,
    action: Action,
    commands: &mut Vec<UiCommand>,
) {
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

pub(super) fn on_output_action(
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
pub(super) fn browse(state: &mut AppState, delta: i64, commands: &mut Vec<UiCommand>) {
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

pub(super) fn toggle_history(state: &mut AppState, commands: &mut Vec<UiCommand>) {
    if state.approval_history.is_some() {
        state.approval_history = None;
    } else {
        state.approval_history = Some(Vec::new());
        commands.push(UiCommand::LoadHistory);
    }
}

pub(super) fn ask_quit(state: &mut AppState, commands: &mut Vec<UiCommand>) {
    let ended = match &state.fleet {
        Some(fleet) => fleet.idle,
        None => state.finished.is_some(),
    };
    // An attached room is only a view: the host goes on without it.
    if ended || state.attached {
        state.should_quit = true;
        commands.push(UiCommand::Quit);
    } else {
        state.dialog = Some(Dialog::Quit);
    }
}

pub(super) fn answer_dialog(
    state: &mut AppState,
    dialog: Dialog,
    key: KeyEvent,
    commands: &mut Vec<UiCommand>,
) {
    let context = match dialog {
        Dialog::Quit => Context::QuitDialog,
        Dialog::KillSession | Dialog::StopNow | Dialog::RemoveLane | Dialog::MergeLane => {
            Context::Confirm
        }
    };
    let mut action = keymap::lookup(context, &key).map(|b| b.action);
    // The key that asked the question also answers it.
    let asked_by = match dialog {
        Dialog::KillSession => Some(Action::Kill),
        Dialog::StopNow => Some(Action::StopNow),
        Dialog::RemoveLane => Some(Action::RemoveLane),
        Dialog::MergeLane => Some(Action::MergeLane),
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
        (Dialog::MergeLane, Some(Action::Confirm)) => {
            state.dialog = None;
            if let Some(lane) = state.fleet.as_ref().and_then(|f| f.selected.clone()) {
                commands.push(UiCommand::Host(HostRequest::MergeLane(lane)));
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
pub(super) fn cycle(state: &AppState, delta: isize) -> Pane {
    let panes: Vec<Pane> = Pane::ALL
        .into_iter()
        .filter(|p| *p != Pane::Lanes || state.fleet.is_some())
        .collect();
    let index = panes.iter().position(|p| *p == state.focus).unwrap_or(0) as isize;
    let count = panes.len() as isize;
    panes[((index + delta).rem_euclid(count)) as usize]
}

//! What sits on top of the panes: the key help, confirmation dialogs, the
//! expanded tool call, the search prompt and the status line.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use super::expand_tabs;
use crate::escape::one_line;
use crate::fmt;
use crate::protocol::LoopState;
use crate::ui::app::{AppState, Dialog, Pane, available};
use crate::ui::keymap::{self, Action, Context, KEYMAP};

/// The help's key column, in cells; descriptions wrap under their own column.
const HELP_KEYS: usize = 16;

/// The contexts the help lists, in order.
const HELP_CONTEXTS: [Context; 9] = [
    Context::Main,
    Context::Lanes,
    Context::Output,
    Context::Approvals,
    Context::Events,
    Context::Detail,
    Context::QuitDialog,
    Context::Confirm,
    Context::Plan,
];

/// The keymap's context for the focused pane, if it has keys of its own.
fn pane_context(pane: Pane) -> Option<Context> {
    match pane {
        Pane::Lanes => Some(Context::Lanes),
        Pane::Output => Some(Context::Output),
        Pane::Approvals => Some(Context::Approvals),
        Pane::Events => Some(Context::Events),
        Pane::Watchdog | Pane::Counters => None,
    }
}

/// The status line's word for an action, as the state words it now.
fn status_word(state: &AppState, action: Action, word: &'static str) -> &'static str {
    let snap = &state.snapshot;
    match action {
        Action::PauseResume if snap.paused || snap.state == LoopState::Held => "resume",
        Action::StopAfter if snap.stop_pending => "cancel stop",
        _ => word,
    }
}

pub fn status_line(state: &AppState, frame: &mut Frame, area: Rect) {
    if let Some(input) = &state.output.search_input {
        let line = Line::from(vec![
            Span::styled("/", Style::default().fg(Color::Magenta)),
            Span::raw(one_line(input)),
            Span::styled("█", Style::default().fg(Color::Magenta)),
            Span::styled(
                "   Enter search · Esc cancel",
                Style::default().fg(Color::DarkGray),
            ),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    if let Some(typed) = state.fleet.as_ref().and_then(|f| f.listing.typing.as_ref()) {
        let line = Line::from(vec![
            Span::styled("lanes /", Style::default().fg(Color::Magenta)),
            Span::raw(one_line(typed)),
            Span::styled("█", Style::default().fg(Color::Magenta)),
            Span::styled(
                "   Enter keeps the filter · Esc clears it",
                Style::default().fg(Color::DarkGray),
            ),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let pane = pane_context(state.focus);
    let mut items: Vec<StatusItem> = KEYMAP
        .iter()
        .filter(|b| b.context == Context::Main || Some(b.context) == pane)
        .filter(|b| available(state, b.action))
        .filter_map(|b| {
            let (key, word) = b.status?;
            Some((
                format!(" {key} "),
                format!(" {} ", status_word(state, b.action, word)),
                give_way(b.action),
            ))
        })
        .collect();
    // Why the last key did nothing comes first; the keys that act follow.
    let note = state
        .notice
        .as_deref()
        .map(|note| fmt::fit(note, area.width as usize));
    let room =
        (area.width as usize).saturating_sub(note.as_deref().map_or(0, |n| fmt::width(n) + 2));
    keep_fitting(&mut items, room);
    let mut spans = Vec::new();
    if let Some(note) = note {
        spans.push(Span::styled(note, Style::default().fg(Color::Yellow)));
        spans.push(Span::raw("  "));
    }
    for (key, what, _) in items {
        spans.push(Span::styled(
            key,
            Style::default().fg(Color::Black).bg(Color::Gray),
        ));
        spans.push(Span::raw(what));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A key of the status line, its word, and how soon it gives way ([`give_way`]).
type StatusItem = (String, String, u8);

/// The items that fit in `room` cells: those that matter most are placed
/// first, each where it still fits; they stay in the table's order.
fn keep_fitting(items: &mut Vec<StatusItem>, room: usize) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].2);
    let mut used = 0;
    let mut shown = vec![false; items.len()];
    for i in order {
        let needs = fmt::width(&items[i].0) + fmt::width(&items[i].1);
        if items[i].2 == 0 || used + needs <= room {
            used += needs;
            shown[i] = true;
        }
    }
    let mut shown = shown.into_iter();
    items.retain(|_| shown.next().unwrap_or(false));
}

/// How soon a key leaves a status line too narrow for all: quit and help
/// never (0); moving the focus and zooming, which every pane has, first (2).
fn give_way(action: Action) -> u8 {
    match action {
        Action::Quit | Action::Help => 0,
        Action::FocusNext | Action::Zoom => 2,
        _ => 1,
    }
}

/// The help's lines for a popup `width` cells wide inside its border.
fn help_lines(width: usize) -> Vec<Line<'static>> {
    let text_width = width.saturating_sub(HELP_KEYS + 2).max(10);
    let indent = " ".repeat(HELP_KEYS + 2);
    let mut lines = Vec::new();
    for context in HELP_CONTEXTS {
        if !lines.is_empty() {
            lines.push(Line::raw(""));
        }
        lines.push(Line::styled(
            context.heading(),
            Style::default().add_modifier(Modifier::BOLD),
        ));
        for binding in keymap::documented(context) {
            for (i, part) in fmt::wrap(binding.help, text_width).into_iter().enumerate() {
                let key = if i == 0 {
                    Span::styled(
                        format!("{:>HELP_KEYS$}  ", binding.label),
                        Style::default().fg(Color::Cyan),
                    )
                } else {
                    Span::raw(indent.clone())
                };
                lines.push(Line::from(vec![key, Span::raw(part)]));
            }
        }
    }
    lines.push(Line::raw(""));
    for note in [
        "The mouse wheel scrolls the output.",
        "Keys typed into the search prompt or a reason never trigger these.",
    ] {
        for part in fmt::wrap(note, width) {
            lines.push(Line::styled(part, Style::default().fg(Color::DarkGray)));
        }
    }
    lines
}

/// A request's input: as JSON; a Codex patch as the files it touches, then the
/// patch itself line by line (and any other field as JSON).
fn input_lines(
    request: &crate::approvals::Request,
    input: &serde_json::Value,
) -> Vec<Line<'static>> {
    let subject = request.subject_of();
    let mut rest = input.clone();
    let patch = match (subject.kind, rest.as_object_mut()) {
        (crate::approvals::subject::Kind::Patch, Some(fields)) => fields.remove("command"),
        _ => None,
    };
    let Some(serde_json::Value::String(patch)) = patch else {
        let pretty = serde_json::to_string_pretty(input).unwrap_or_default();
        return pretty.lines().map(|l| Line::raw(one_line(l))).collect();
    };
    let mut lines = Vec::new();
    match crate::approvals::patch::touched(&patch) {
        Ok(files) => lines.extend(
            files
                .iter()
                .map(|file| Line::raw(format!("{:<9}{}", file.op.word(), one_line(&file.path)))),
        ),
        Err(why) => lines.push(Line::styled(
            format!("unreadable patch: {}", one_line(&why)),
            Style::default().fg(Color::Red),
        )),
    }
    lines.push(Line::raw(""));
    lines.extend(patch.lines().map(|l| Line::raw(one_line(l))));
    if rest.as_object().is_some_and(|fields| !fields.is_empty()) {
        lines.push(Line::raw(""));
        let pretty = serde_json::to_string_pretty(&rest).unwrap_or_default();
        lines.extend(pretty.lines().map(|l| Line::raw(one_line(l))));
    }
    lines
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}

/// When the request does not fit its popup (a long command runs past the
/// bottom), a line saying how long its subject is and how it ends, so that a tail
/// after padding is seen before it is approved.
fn cut_subject_end(
    request: &crate::approvals::Request,
    lines: &[Line],
    rect: Rect,
) -> Option<String> {
    let width = rect.width.saturating_sub(2).max(1) as usize;
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(width).max(1)).sum();
    let subject = request.subject();
    if rows <= rect.height.saturating_sub(2) as usize || subject.is_empty() {
        return None;
    }
    let count = subject.chars().count();
    let keep = (width * 3).saturating_sub(40).max(40);
    let tail: String = subject.chars().skip(count.saturating_sub(keep)).collect();
    Some(format!(
        "length   {count} chars, cut below; it ends: …{}",
        one_line(&tail)
    ))
}

/// `  y  kill    n / Esc  cancel`, from the keymap.
fn confirm_keys(what: &str) -> String {
    let mut bindings = keymap::documented(Context::Confirm);
    let yes = bindings.next().map_or("y", |b| b.label);
    let no = bindings.next().map_or("n", |b| b.label);
    format!("  {yes}  {what}    {no}  cancel")
}

/// A popup whose lines are already laid out (no wrapping).
fn popup_lines(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    lines: Vec<Line<'static>>,
    color: Color,
) {
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(Style::default().fg(color))
        .title(Span::styled(
            format!(" {title} "),
            Style::default().add_modifier(Modifier::BOLD),
        ));
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn popup(frame: &mut Frame, area: Rect, title: &str, lines: Vec<Line<'static>>, color: Color) {
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(Style::default().fg(color))
        .title(Span::styled(
            format!(" {title} "),
            Style::default().add_modifier(Modifier::BOLD),
        ));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect) {
    if let Some(diff) = state.fleet.as_ref().and_then(|f| f.diff.as_ref()) {
        draw_diff(diff, frame, area);
    }
    if let Some((heading, detail)) = state.output.expanded_detail() {
        let rect = centered(
            area,
            area.width.saturating_sub(8),
            area.height.saturating_sub(4),
        );
        let lines: Vec<Line> = detail
            .lines()
            .skip(state.output.expanded_scroll as usize)
            .map(|l| Line::raw(one_line(&expand_tabs(l))))
            .collect();
        popup(
            frame,
            rect,
            &format!("{} — j/k scroll · Esc close", one_line(heading.trim())),
            lines,
            Color::Cyan,
        );
    }
    if state.approval_expanded
        && let Some(request) = state.selected_approval()
    {
        let rect = centered(
            area,
            area.width.saturating_sub(8),
            area.height.saturating_sub(4),
        );
        let mut lines = vec![
            Line::raw(format!("id       {}", one_line(&request.id))),
            Line::raw(format!("title    {}", one_line(&request.title))),
            Line::raw(format!(
                "tool     {}",
                one_line(request.tool_name.as_deref().unwrap_or("-"))
            )),
            Line::raw(format!(
                "session  {}",
                one_line(request.session_id.as_deref().unwrap_or("-"))
            )),
            Line::raw(format!(
                "cwd      {}",
                one_line(request.cwd.as_deref().unwrap_or("-"))
            )),
            Line::raw(format!(
                "created  {}",
                request.created.format("%Y-%m-%d %H:%M:%S UTC")
            )),
            Line::raw(""),
        ];
        if let Some(input) = &request.tool_input {
            lines.extend(input_lines(request, input));
        }
        if let Some(body) = &request.body {
            lines.push(Line::raw(""));
            lines.extend(body.lines().map(|l| Line::raw(one_line(l))));
        }
        if let Some(end) = cut_subject_end(request, &lines, rect) {
            lines.insert(6, Line::raw(end));
        }
        popup(
            frame,
            rect,
            "Request — a approve · r reject · Esc close",
            lines,
            Color::Yellow,
        );
    }
    if let Some((id, text)) = &state.reject_box {
        draw_reject(state, id, text, frame, area);
    }
    if let Some(open) = &state.tell_box {
        let rect = centered(area, 70, 3);
        frame.render_widget(Clear, rect);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Double)
            .border_style(Style::default().fg(Color::Cyan))
            .title(Span::styled(
                format!(
                    " Note for {} — Enter leaves it, Esc cancels ",
                    open.target()
                ),
                Style::default().add_modifier(Modifier::BOLD),
            ));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        frame.render_widget(&open.text, inner);
    }
    if state.help {
        let rect = centered(area, 84.min(area.width.saturating_sub(2)), area.height);
        let lines = help_lines(rect.width.saturating_sub(2) as usize);
        let visible = rect.height.saturating_sub(2) as usize;
        let scroll = (state.help_scroll as usize).min(lines.len().saturating_sub(visible));
        let title = if lines.len() > visible {
            "Keys — j/k scroll · Esc close"
        } else {
            "Keys — Esc close"
        };
        let lines = lines.into_iter().skip(scroll).collect();
        popup_lines(frame, rect, title, lines, Color::Cyan);
    }
    if state.events_view.expanded
        && let Some(index) = state.events_view.current(state.events.len())
        && let Some(event) = state.events.get(index)
    {
        let rect = centered(
            area,
            area.width.saturating_sub(8),
            area.height.saturating_sub(4),
        );
        let lines: Vec<Line> = event
            .detail
            .lines()
            .skip(state.events_view.scroll as usize)
            .map(|l| Line::raw(one_line(&expand_tabs(l))))
            .collect();
        popup(
            frame,
            rect,
            &format!("Event at {} — j/k scroll · Esc close", fmt::clock(event.at)),
            lines,
            Color::Cyan,
        );
    }
    if let Some(dialog) = state.dialog {
        let (title, lines, keys, color) = match dialog {
            Dialog::Quit => {
                let question = if state.fleet.is_some() {
                    "Lanes are still running. Stop every lane?"
                } else {
                    "The loop is still running. Stop it?"
                };
                let mut lines = vec![Line::raw(question), Line::raw("")];
                for binding in keymap::documented(Context::QuitDialog) {
                    if binding.action == Action::Detach && !state.can_detach {
                        continue;
                    }
                    let help = match binding.action {
                        Action::Detach if state.fleet.is_some() => {
                            "detach: quit; the lanes run on in the background"
                        }
                        Action::Detach => "detach: quit; the loop runs on in the background",
                        _ => binding.help,
                    };
                    lines.push(Line::raw(format!("  {}  {help}", binding.label)));
                }
                ("Quit clowder?", lines, None, Color::Yellow)
            }
            Dialog::KillSession => (
                "Kill the session?",
                vec![
                    Line::raw("TERM to its process group, KILL after the grace period."),
                    Line::raw("The loop goes on with the next session."),
                ],
                Some(confirm_keys("kill")),
                Color::Red,
            ),
            Dialog::StopNow => (
                "Stop now?",
                vec![Line::raw("Kill the session and stop the loop.")],
                Some(confirm_keys("stop now")),
                Color::Red,
            ),
            Dialog::RemoveLane => {
                let lane = state
                    .fleet
                    .as_ref()
                    .and_then(|f| f.selected.as_ref())
                    .map_or_else(String::new, ToString::to_string);
                (
                    "Remove the lane?",
                    vec![
                        Line::raw(format!("Remove lane {lane}: its worktree, and its branch")),
                        Line::raw("if its base has every commit. Refused when work"),
                        Line::raw("would be lost (see the events pane)."),
                    ],
                    Some(confirm_keys("remove")),
                    Color::Red,
                )
            }
            Dialog::MergeLane => merge_question(state),
        };
        dialog_box(frame, area, title, lines, keys, color);
    }
}

/// `M`: which lane goes into which base, and how many commits.
fn merge_question(state: &AppState) -> (&'static str, Vec<Line<'static>>, Option<String>, Color) {
    let row = state.fleet.as_ref().and_then(|f| f.selected_row());
    let lane = row.map_or_else(String::new, |row| row.name.to_string());
    let base = row
        .and_then(|row| row.base.as_deref())
        .map_or("its base", |base| {
            base.strip_prefix("refs/heads/").unwrap_or(base)
        });
    let commits = match row.and_then(|row| row.ahead) {
        Some(1) => "its 1 commit".to_string(),
        Some(n) => format!("its {n} commits"),
        None => "its commits (not counted yet)".to_string(),
    };
    (
        "Merge the lane?",
        vec![
            Line::raw(format!(
                "Merge lane {lane} into {}: {commits} ahead of it.",
                one_line(base)
            )),
            Line::raw("Made in a scratch worktree and checked ([fleet] verify) first;"),
            Line::raw(format!(
                "{} moves only if the check passes (as `clowder lane merge`).",
                one_line(base)
            )),
        ],
        Some(confirm_keys("merge")),
        Color::Yellow,
    )
}

/// Lines of the rejected request's text at most, in the reject dialog.
const REJECT_SHOWN: usize = 6;

/// `r`: which lane asks what (the command whole, wrapped), then the reason
/// being typed.
fn draw_reject(
    state: &AppState,
    id: &str,
    text: &ratatui_textarea::TextArea<'static>,
    frame: &mut Frame,
    area: Rect,
) {
    let width = 70.min(area.width);
    let inner = width.saturating_sub(2) as usize;
    let request = state.approvals.iter().find(|r| r.id == id);
    let id = one_line(id);
    let mut about = vec![match request.map(|r| r.lane.as_deref()) {
        Some(Some(lane)) => format!("lane {} asks (request {id}):", one_line(lane)),
        Some(None) if state.fleet.is_some() => format!("asked outside any lane (request {id}):"),
        Some(None) => format!("the loop asks (request {id}):"),
        // Decided elsewhere meanwhile: the host refuses a second decision.
        None => format!("request {id} is no longer waiting"),
    }];
    if let Some(request) = request {
        about.extend(super::approvals::described(request, inner, REJECT_SHOWN));
    }
    about.push(String::new());
    let height = (about.len() + 3 + 2) as u16;
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(Style::default().fg(Color::Red))
        .title(Span::styled(
            " Reject — reason, Enter rejects, Esc cancels ",
            Style::default().add_modifier(Modifier::BOLD),
        ));
    let inside = block.inner(rect);
    frame.render_widget(block, rect);
    let [top, bottom] =
        Layout::vertical([Constraint::Length(about.len() as u16), Constraint::Min(1)])
            .areas(inside);
    let lines: Vec<Line> = about.into_iter().map(Line::raw).collect();
    frame.render_widget(Paragraph::new(lines), top);
    frame.render_widget(text, bottom);
}

/// A question in a box as tall as its wrapped text, with the keys that answer
/// it on its last line: kept there when the terminal is too small for the text.
fn dialog_box(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    mut lines: Vec<Line<'static>>,
    keys: Option<String>,
    color: Color,
) {
    let longest = lines.iter().map(Line::width).max().unwrap_or(0);
    let width = (longest + 2).clamp(56, u16::MAX as usize) as u16;
    let width = width.min(area.width);
    let inner = width.saturating_sub(2).max(1) as usize;
    if keys.is_some() {
        lines.push(Line::raw(""));
    }
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let keys_rows = usize::from(keys.is_some());
    let height = (rows + keys_rows + 2).min(u16::MAX as usize) as u16;
    let rect = centered(area, width, height);
    popup(frame, rect, title, lines, color);
    if let Some(keys) = keys
        && rect.height > 2
    {
        let row = Rect {
            x: rect.x + 1,
            y: rect.y + rect.height - 2,
            width: rect.width.saturating_sub(2),
            height: 1,
        };
        let keys = fmt::fit(&keys, row.width as usize);
        frame.render_widget(Clear, row);
        frame.render_widget(Paragraph::new(Line::raw(keys)), row);
    }
}

/// `D`: the lane's diff, coloured as git colours it.
fn draw_diff(diff: &crate::ui::app::lanes::DiffView, frame: &mut Frame, area: Rect) {
    let rect = centered(
        area,
        area.width.saturating_sub(4),
        area.height.saturating_sub(2),
    );
    let lines: Vec<Line> = match &diff.text {
        None => vec![Line::raw("computing the diff…")],
        Some(Err(why)) => vec![Line::styled(one_line(why), Style::default().fg(Color::Red))],
        Some(Ok(text)) => text
            .lines()
            .skip(diff.scroll as usize)
            .take(rect.height as usize)
            .map(diff_line)
            .collect(),
    };
    popup_lines(
        frame,
        rect,
        &format!(
            "Diff of lane {} against its base — j/k PgUp/PgDn scroll · Esc close",
            diff.lane
        ),
        lines,
        Color::Cyan,
    );
}

fn diff_line(line: &str) -> Line<'static> {
    let color = if line.starts_with("+++") || line.starts_with("---") {
        Some(Color::White)
    } else if line.starts_with('+') {
        Some(Color::Green)
    } else if line.starts_with('-') {
        Some(Color::Red)
    } else if line.starts_with("@@") {
        Some(Color::Cyan)
    } else {
        None
    };
    let text = one_line(&expand_tabs(line));
    match color {
        Some(color) => Line::styled(text, Style::default().fg(color)),
        None => Line::raw(text),
    }
}

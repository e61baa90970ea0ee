//! What sits on top of the panes: the key help, confirmation dialogs, the
//! expanded tool call, the search prompt and the status line.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use crate::approvals::escape;
use crate::ui::app::{AppState, Dialog, Pane};
use crate::ui::sanitize;

const HELP: &[(&str, &str)] = &[
    (
        "p",
        "pause / resume the session (SIGSTOP / SIGCONT to its group)",
    ),
    ("K", "kill the session now (asks first); the loop goes on"),
    ("s", "stop after this session (again: cancel)"),
    ("S", "stop now (asks first)"),
    ("q, Ctrl-C", "quit: asks whether to stop the loop"),
    ("Tab / Shift-Tab", "move the focus between panes"),
    ("z", "zoom the focused pane"),
    ("j k ↑ ↓", "scroll the output (stops following)"),
    ("PgUp PgDn", "scroll a page"),
    ("g / G", "top / follow the tail"),
    ("mouse wheel", "scroll the output"),
    ("/  n  N", "search the output, next, previous"),
    ("Enter", "expand the selected tool call and its result"),
    ("[  ]", "previous / next session of this run"),
    ("a", "approve the selected request in the approval queue"),
    (
        "A",
        "approve, and always allow this tool with this command prefix",
    ),
    ("r", "reject it: type a reason, Enter sends, Esc cancels"),
    (
        "Enter (Approvals)",
        "show the whole request; j/k select another",
    ),
    ("h (Approvals)", "history: how finished requests ended"),
    ("?", "this help; Esc closes it"),
];

pub fn status_line(state: &AppState, frame: &mut Frame, area: Rect) {
    if let Some(input) = &state.output.search_input {
        let line = Line::from(vec![
            Span::styled("/", Style::default().fg(Color::Magenta)),
            Span::raw(sanitize(input)),
            Span::styled("█", Style::default().fg(Color::Magenta)),
            Span::styled(
                "   Enter search · Esc cancel",
                Style::default().fg(Color::DarkGray),
            ),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let keys: &[(&str, &str)] = if state.finished.is_some() {
        &[("q", "quit"), ("[ ]", "sessions"), ("?", "help")]
    } else if state.focus == Pane::Output {
        &[
            (
                "p",
                if state.snapshot.paused {
                    "resume"
                } else {
                    "pause"
                },
            ),
            ("K", "kill"),
            (
                "s",
                if state.snapshot.stop_pending {
                    "cancel stop"
                } else {
                    "stop after"
                },
            ),
            ("S", "stop now"),
            ("j/k", "scroll"),
            ("/", "search"),
            ("Enter", "expand"),
            ("[ ]", "sessions"),
            ("Tab", "focus"),
            ("z", "zoom"),
            ("q", "quit"),
            ("?", "help"),
        ]
    } else {
        &[
            (
                "p",
                if state.snapshot.paused {
                    "resume"
                } else {
                    "pause"
                },
            ),
            ("K", "kill"),
            (
                "s",
                if state.snapshot.stop_pending {
                    "cancel stop"
                } else {
                    "stop after"
                },
            ),
            ("S", "stop now"),
            ("Tab", "focus"),
            ("z", "zoom"),
            ("q", "quit"),
            ("?", "help"),
        ]
    };
    let mut spans = Vec::new();
    for (key, what) in keys {
        spans.push(Span::styled(
            format!(" {key} "),
            Style::default().fg(Color::Black).bg(Color::Gray),
        ));
        spans.push(Span::raw(format!(" {what} ")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
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
    if let Some((heading, detail)) = state.output.expanded_detail() {
        let rect = centered(
            area,
            area.width.saturating_sub(8),
            area.height.saturating_sub(4),
        );
        let lines: Vec<Line> = detail
            .lines()
            .skip(state.output.expanded_scroll as usize)
            .map(|l| Line::raw(sanitize(l)))
            .collect();
        popup(
            frame,
            rect,
            &format!("{} — j/k scroll · Esc close", sanitize(heading.trim())),
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
            Line::raw(format!("id       {}", escape(&request.id))),
            Line::raw(format!("title    {}", escape(&request.title))),
            Line::raw(format!(
                "tool     {}",
                escape(request.tool_name.as_deref().unwrap_or("-"))
            )),
            Line::raw(format!(
                "session  {}",
                escape(request.session_id.as_deref().unwrap_or("-"))
            )),
            Line::raw(format!(
                "cwd      {}",
                escape(request.cwd.as_deref().unwrap_or("-"))
            )),
            Line::raw(format!(
                "created  {}",
                request.created.format("%Y-%m-%d %H:%M:%S UTC")
            )),
            Line::raw(""),
        ];
        if let Some(input) = &request.tool_input {
            let pretty = serde_json::to_string_pretty(input).unwrap_or_default();
            lines.extend(pretty.lines().map(|l| Line::raw(escape(l))));
        }
        if let Some(body) = &request.body {
            lines.push(Line::raw(""));
            lines.extend(body.lines().map(|l| Line::raw(escape(l))));
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
        let rect = centered(area, 70, 7);
        frame.render_widget(Clear, rect);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Double)
            .border_style(Style::default().fg(Color::Red))
            .title(Span::styled(
                format!(
                    " Reject {} — reason, Enter rejects, Esc cancels ",
                    escape(id)
                ),
                Style::default().add_modifier(Modifier::BOLD),
            ));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        frame.render_widget(text, inner);
    }
    if state.help {
        let rect = centered(area, 76, HELP.len() as u16 + 4);
        let mut lines: Vec<Line> = HELP
            .iter()
            .map(|(key, what)| {
                Line::from(vec![
                    Span::styled(format!("{key:>16}  "), Style::default().fg(Color::Cyan)),
                    Span::raw(*what),
                ])
            })
            .collect();
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            "Keys typed into the search prompt never trigger these.",
            Style::default().fg(Color::DarkGray),
        ));
        popup(frame, rect, "Keys", lines, Color::Cyan);
    }
    if let Some(dialog) = state.dialog {
        let (title, lines, color) = match dialog {
            Dialog::Quit => {
                let mut lines = vec![
                    Line::raw("The loop is still running. Stop it?"),
                    Line::raw(""),
                    Line::raw("  s  stop now (kill the session), then quit"),
                    Line::raw("  a  stop after this session, then quit"),
                ];
                if state.can_detach {
                    lines.push(Line::raw(
                        "  d  detach: quit, the loop runs on in the background",
                    ));
                }
                lines.push(Line::raw("  c  cancel (Esc)"));
                ("Quit clowder?", lines, Color::Yellow)
            }
            Dialog::KillSession => (
                "Kill the session?",
                vec![
                    Line::raw("TERM to its process group, KILL after the grace period."),
                    Line::raw("The loop goes on with the next session."),
                    Line::raw(""),
                    Line::raw("  y  kill    n / Esc  cancel"),
                ],
                Color::Red,
            ),
            Dialog::StopNow => (
                "Stop now?",
                vec![
                    Line::raw("Kill the session and stop the loop."),
                    Line::raw(""),
                    Line::raw("  y  stop now    n / Esc  cancel"),
                ],
                Color::Red,
            ),
        };
        let rect = centered(area, 56, lines.len() as u16 + 2);
        popup(frame, rect, title, lines, color);
    }
}

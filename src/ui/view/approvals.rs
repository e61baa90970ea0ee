//! The approvals pane: what waits for a human, oldest first, with how long it has
//! waited; `a` approves the selected request, `r` rejects it with a reason.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, short_duration, title};
use crate::approvals::{DoneRecord, Request, RequestKind, escape};
use crate::ui::app::{AppState, Pane};

/// `▶ Bash  rm -rf build` for a tool call, `? title` for a question; escaped.
pub fn request_line(request: &Request) -> String {
    match request.kind {
        RequestKind::Tool => format!(
            "▶ {}  {}",
            escape(request.tool_name.as_deref().unwrap_or("tool")),
            escape(&request.subject())
        ),
        RequestKind::Ask => format!("? {}", escape(&request.title)),
        RequestKind::Session => format!("● {}", escape(&request.title)),
    }
}

/// The history view: finished requests, newest first, with how each ended.
fn draw_history(state: &AppState, records: &[DoneRecord], frame: &mut Frame, area: Rect) {
    let block = pane_block(
        state,
        Pane::Approvals,
        title(format!("Approvals · history ({}) · h back", records.len())),
    );
    let height = block.inner(area).height as usize;
    let lines: Vec<Line> = if records.is_empty() {
        vec![Line::styled(
            "no finished requests yet",
            Style::default().fg(Color::DarkGray),
        )]
    } else {
        records
            .iter()
            .take(height)
            .map(|record| {
                let (mark, color) = match record.outcome.as_str() {
                    "approved" => ("✓", Color::Green),
                    "rejected" => ("✗", Color::Red),
                    "timed_out" => ("◌", Color::Yellow),
                    _ => ("·", Color::DarkGray),
                };
                let reason = record
                    .decision
                    .as_ref()
                    .and_then(|d| d.reason.as_deref())
                    .filter(|r| !r.is_empty())
                    .map_or_else(String::new, |r| format!(": {}", escape(r)));
                Line::from(vec![
                    Span::styled(format!("{mark} "), Style::default().fg(color)),
                    Span::raw(request_line(&record.request)),
                    Span::styled(
                        format!(
                            "  {}{reason} · {}",
                            record.outcome.replace('_', " "),
                            short_duration(record.waited_secs as i64)
                        ),
                        Style::default().fg(Color::DarkGray),
                    ),
                ])
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    if let Some(records) = &state.approval_history {
        draw_history(state, records, frame, area);
        return;
    }
    let count = state.approvals.len();
    let name = if count > 0 {
        format!("Approvals ({count} waiting) · a approve · r reject")
    } else {
        "Approvals".to_string()
    };
    let block = pane_block(state, Pane::Approvals, title(name));
    let height = block.inner(area).height as usize;
    let lines: Vec<Line> = if count == 0 {
        let text = if state.approvals_dir_exists {
            "nothing waiting for you"
        } else {
            "no approval queue (.clowder/approvals)"
        };
        vec![Line::styled(text, Style::default().fg(Color::DarkGray))]
    } else {
        let start = state
            .approval_selected
            .saturating_sub(height.saturating_sub(1));
        state
            .approvals
            .iter()
            .enumerate()
            .skip(start)
            .take(height)
            .map(|(index, request)| {
                let waited = short_duration(request.age_secs(now));
                let mut line = Line::from(vec![
                    Span::styled(request_line(request), Style::default().fg(Color::Yellow)),
                    Span::styled(format!("  {waited}"), Style::default().fg(Color::DarkGray)),
                ]);
                if index == state.approval_selected {
                    line = line.patch_style(Style::default().add_modifier(Modifier::REVERSED));
                }
                line
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

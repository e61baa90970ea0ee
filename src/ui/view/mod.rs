//! Pure view functions: `fn(&AppState, &mut Frame, Rect, now)`, one file per pane.
//! Time is passed in, so every screen can be snapshot-tested.

mod approvals;
mod counters;
mod events;
mod header;
mod lanes;
mod output;
mod overlay;
mod plan;
mod watchdog;

pub(crate) use lanes::row_text as lane_row_text;

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};

use super::app::{AppState, Pane};

/// Below this the panes cannot be laid out; one line says so instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

pub fn draw(state: &AppState, frame: &mut Frame, now: DateTime<Utc>) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "clowder: terminal too small ({}x{}, need {MIN_WIDTH}x{MIN_HEIGHT}) — the loop keeps running",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(text), area);
        return;
    }
    let [header_area, body, status_area] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(8),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(state, frame, header_area, now);
    let body = match &state.fleet {
        Some(fleet) if !state.zoom => {
            // Room for every lane up to a third of the screen; the rest scrolls.
            let wanted = fleet.rows.len().max(1) as u16 + 3;
            let height = wanted.min(body.height / 3).max(4);
            let [lanes_area, rest] =
                Layout::vertical([Constraint::Length(height), Constraint::Min(8)]).areas(body);
            draw_pane(state, Pane::Lanes, frame, lanes_area, now);
            rest
        }
        _ => body,
    };
    if state.zoom {
        draw_pane(state, state.focus, frame, body, now);
    } else {
        let side = side_width(body.width);
        let [left, right] =
            Layout::horizontal([Constraint::Min(30), Constraint::Length(side)]).areas(body);
        if state.plan.shown {
            plan::draw(state, frame, left);
        } else {
            draw_pane(state, Pane::Output, frame, left, now);
        }
        // Waiting requests get room: they are what needs the human.
        let shown = match &state.approval_history {
            Some(records) => records.len().max(1),
            None => approvals::wanted_rows(state, side.saturating_sub(2) as usize),
        };
        let approvals_height = (shown as u16 + 2).clamp(3, 10);
        // On a short screen the counters' lowest rows give way to two events.
        let counters_height = 12.min(right.height.saturating_sub(4 + approvals_height + 4));
        let [watch_area, counters_area, approvals_area, events_area] = Layout::vertical([
            // The gauge and one line under it.
            Constraint::Length(4),
            Constraint::Length(counters_height),
            Constraint::Length(approvals_height),
            Constraint::Min(3),
        ])
        .areas(right);
        draw_pane(state, Pane::Watchdog, frame, watch_area, now);
        draw_pane(state, Pane::Counters, frame, counters_area, now);
        draw_pane(state, Pane::Approvals, frame, approvals_area, now);
        draw_pane(state, Pane::Events, frame, events_area, now);
    }
    overlay::status_line(state, frame, status_area);
    overlay::draw(state, frame, area);
    if let Some(dialog) = state.fleet.as_ref().and_then(|f| f.new_lane.as_ref()) {
        dialog.render(frame, area);
    }
    if state.no_color {
        strip_colors(frame);
    }
}

/// The side column's width: a third of the screen up to 48 columns; on a wide
/// screen, what the output does not need of its 120 columns goes to the side,
/// whose events and requests are cut first, up to 96 columns.
fn side_width(width: u16) -> u16 {
    let third = (width / 3).clamp(30, 48);
    third.max(width.saturating_sub(120).min(96))
}

fn draw_pane(state: &AppState, pane: Pane, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    match pane {
        Pane::Lanes => lanes::draw(state, frame, area, now),
        Pane::Output => output::draw(state, frame, area),
        Pane::Watchdog => watchdog::draw(state, frame, area, now),
        Pane::Counters => counters::draw(state, frame, area, now),
        Pane::Approvals => approvals::draw(state, frame, area, now),
        Pane::Events => events::draw(state, frame, area),
    }
}

/// A pane's frame: its title, and a highlighted border when it has the focus.
fn pane_block(state: &AppState, pane: Pane, title: Line<'static>) -> Block<'static> {
    let focused = state.focus == pane;
    let style = if focused {
        Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::default().fg(Color::DarkGray)
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(style)
        .title(title)
}

fn title(text: impl Into<String>) -> Line<'static> {
    Line::from(Span::styled(
        format!(" {} ", text.into()),
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

/// A line of output or of a file with its tabs as four spaces: a terminal
/// moves a tab to the next stop, which the console leaves it to do, but the
/// screen's cells draw no tab. Escaping is then [`crate::escape::one_line`]'s,
/// as for the console.
fn expand_tabs(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\t') {
        std::borrow::Cow::Owned(text.replace('\t', "    "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// NO_COLOR: keep bold and reverse for emphasis, drop every colour.
fn strip_colors(frame: &mut Frame) {
    for cell in frame.buffer_mut().content.iter_mut() {
        cell.fg = Color::Reset;
        cell.bg = Color::Reset;
    }
}

/// The approvals pane names the one duration formatter by this name.
pub(super) use crate::fmt::duration as short_duration;

//! The Lanes pane (with lanes): one row per lane — name, status as a glyph and a
//! word, iteration, idle time against the stale limit, cost, commits ahead of
//! its base, waiting requests — those that need a human first.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::{pane_block, title};
use crate::fmt;
use crate::protocol::LoopState;
use crate::ui::app::lanes::{Fleet, LaneRow, LaneStatus};
use crate::ui::app::{AppState, Pane};

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    let Some(fleet) = &state.fleet else {
        return;
    };
    let order = fleet.order(now);
    let block = pane_block(state, Pane::Lanes, title(heading(fleet, order.len(), now)));
    let inner = block.inner(area);
    let name_width = fleet.name_width;
    let visible = (inner.height as usize).saturating_sub(1);
    let position = fleet.selected_position(&order).unwrap_or(0);
    // The selected lane stays in view; a long list scrolls under it.
    let offset = position.saturating_sub(visible.saturating_sub(1));
    let below = order.len().saturating_sub(offset + visible);
    frame.render_widget(with_more(block, offset, below), area);
    let mut lines = vec![Line::styled(
        header(name_width),
        Style::default().fg(Color::DarkGray),
    )];
    for &index in order.iter().skip(offset).take(visible) {
        lines.push(row_line(
            state,
            fleet,
            &fleet.rows[index],
            index,
            name_width,
            now,
        ));
    }
    if order.is_empty() && !fleet.rows.is_empty() {
        lines.push(Line::styled(
            "    no lane matches (/ then Esc: every lane; w: not only those that need you)",
            Style::default().fg(Color::DarkGray),
        ));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The pane's title: how many lanes, how many need you, and how they are
/// listed when not all or not in the usual order.
fn heading(fleet: &Fleet, listed: usize, now: DateTime<Utc>) -> String {
    let listing = &fleet.listing;
    let total = fleet.rows.len();
    let mut heading = match (total, fleet.needing(now)) {
        (0, _) => "Lanes — none yet (clowder lane add NAME)".to_string(),
        (n, 0) => format!("Lanes {n}"),
        (n, k) => format!("Lanes {n} · {k} need you"),
    };
    if listing.narrowed() {
        heading.push_str(&format!(" · {listed} shown"));
    }
    if !listing.query().is_empty() {
        heading.push_str(&format!(" · /{}", crate::escape::one_line(listing.query())));
    }
    if listing.needs_you_only {
        heading.push_str(" · only those that need you");
    }
    if let Some(words) = listing.sort.words() {
        heading.push_str(&format!(" · {words}"));
    }
    heading
}

/// Lanes scrolled out of the pane are counted on its border: above at the
/// top, below at the bottom.
fn with_more(block: Block<'static>, above: usize, below: usize) -> Block<'static> {
    let more = |arrow: &str, n: usize| {
        Line::styled(
            format!(" {arrow} {n} more "),
            Style::default().fg(Color::Yellow),
        )
        .right_aligned()
    };
    let block = if above > 0 {
        block.title_top(more("↑", above))
    } else {
        block
    };
    if below > 0 {
        block.title_bottom(more("↓", below))
    } else {
        block
    }
}

fn header(name_width: usize) -> String {
    format!(
        "    {:<name_width$} {:<21} {:>6} {:>13} {:>6} {:>5}  asks",
        "lane", "state", "iter", "idle / limit", "cost", "ahead"
    )
}

fn row_line(
    state: &AppState,
    fleet: &Fleet,
    row: &LaneRow,
    index: usize,
    name_width: usize,
    now: DateTime<Utc>,
) -> Line<'static> {
    let selected = fleet.selected.as_ref() == Some(&row.name);
    let marker = if selected { "▶" } else { " " };
    // The lane's own number (its place in the registry), whatever row it is on.
    let key = if index < 9 {
        (index + 1).to_string()
    } else {
        " ".to_string()
    };
    let name = fmt::fit(row.name.as_str(), name_width);
    let text = format!("{marker} {key} {name:<name_width$} {}", row_text(row, now));
    let shade = match row.unreachable {
        Some(_) => Color::DarkGray,
        None => color(row.status),
    };
    let mut style = Style::default().fg(shade);
    if selected {
        style = style.add_modifier(Modifier::BOLD);
        if state.focus == Pane::Lanes {
            style = style.add_modifier(Modifier::REVERSED);
        }
    }
    Line::from(Span::styled(text, style))
}

/// A row's columns after its name: what a lane's news can change on screen.
pub fn row_text(row: &LaneRow, now: DateTime<Utc>) -> String {
    let snapshot = row.snapshot.as_deref();
    // A failed lane says how its agent last ended, a backoff until when; a
    // lane whose host is lost, since when (what it said before may be old).
    let word = match row.unreachable {
        Some(since) => format!(
            "⚠ unreachable {}",
            since.with_timezone(&chrono::Local).format("%H:%M")
        ),
        None => row.status.label(snapshot),
    };
    let iteration = snapshot.map_or_else(
        || "-".to_string(),
        |s| match s.max_iterations {
            0 => format!("{}/∞", s.iteration),
            max => format!("{}/{max}", s.iteration),
        },
    );
    let cost = match snapshot.map(|s| s.totals.cost_usd) {
        None => "-".to_string(),
        Some(None) => "?".to_string(),
        Some(Some(cost)) => format!("${cost:.2}"),
    };
    let ahead = row
        .ahead
        .map_or_else(|| "-".to_string(), |n| format!("+{n}"));
    let mut asks = if row.pending > 0 {
        format!("⚑{} ", row.pending)
    } else {
        String::new()
    };
    if snapshot.is_some_and(|s| s.ungated.is_some()) {
        asks.push_str("UNGATED");
    }
    format!(
        "{:<21} {iteration:>6} {:>13} {cost:>6} {ahead:>5}  {}",
        fmt::fit(&word, 21),
        idle(row, now),
        asks.trim_end(),
    )
}

/// `12s / 20m` while a session runs: how long since it last wrote, against the
/// watchdog's limit (the clock stands still while paused).
fn idle(row: &LaneRow, now: DateTime<Utc>) -> String {
    let Some(snapshot) = row.snapshot.as_deref() else {
        return "-".to_string();
    };
    if row.ended.is_some()
        || row.unreachable.is_some()
        || snapshot.state != LoopState::SessionRunning
    {
        return "-".to_string();
    }
    let end = snapshot.paused_at.unwrap_or(now);
    let Some(since) = snapshot.last_output_growth.or(snapshot.session_start) else {
        return "-".to_string();
    };
    format!(
        "{} / {}",
        fmt::duration((end - since).num_seconds().max(0)),
        fmt::duration(snapshot.stale_timeout_secs as i64)
    )
}

fn color(status: LaneStatus) -> Color {
    match status {
        LaneStatus::Running => Color::Green,
        LaneStatus::WaitingForYou | LaneStatus::Held => Color::Yellow,
        LaneStatus::Failed => Color::Red,
        LaneStatus::Backoff { .. } => Color::Magenta,
        LaneStatus::Paused | LaneStatus::Queued => Color::Blue,
        LaneStatus::Done | LaneStatus::Stopped | LaneStatus::NotStarted | LaneStatus::Unknown => {
            Color::Gray
        }
    }
}

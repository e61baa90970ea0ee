//! The watchdog pane: time since the output last grew, against the stale limit.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Gauge, Paragraph};

use super::{pane_block, title};
use crate::fmt;
use crate::ui::app::{AppState, Pane};

/// Seconds without growth, frozen at the pause while paused.
pub fn idle_secs(state: &AppState, now: DateTime<Utc>) -> Option<f64> {
    let snap = &state.snapshot;
    let last = snap.last_output_growth?;
    let until = snap.paused_at.unwrap_or(now);
    Some(((until - last).num_milliseconds() as f64 / 1000.0).max(0.0))
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    let snap = &state.snapshot;
    let paused = snap.paused;
    let name = if paused {
        "Watchdog (frozen: paused)"
    } else {
        "Watchdog"
    };
    let block = pane_block(state, Pane::Watchdog, title(name));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [gauge_area, info_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    let limit = snap.stale_timeout_secs.max(0.001);
    match idle_secs(state, now).filter(|_| state.running_session()) {
        Some(idle) => {
            let ratio = (idle / limit).clamp(0.0, 1.0);
            let color = if paused {
                Color::Blue
            } else if ratio >= 0.85 {
                Color::Red
            } else if ratio >= 0.5 {
                Color::Yellow
            } else {
                Color::Green
            };
            let label = format!(
                "{} / {}",
                fmt::duration(idle as i64),
                fmt::duration(limit.round() as i64)
            );
            frame.render_widget(
                Gauge::default()
                    .ratio(ratio)
                    .label(label)
                    .gauge_style(Style::default().fg(color).bg(Color::DarkGray)),
                gauge_area,
            );
            let rate = if paused {
                "paused".to_string()
            } else {
                format!("{}/s", fmt::bytes(state.growth_rate as u64))
            };
            let written = fmt::bytes(snap.output_bytes);
            let text = fmt::first_fitting(
                &[
                    format!("{written} written · {rate}"),
                    format!("{written} · {rate}"),
                    written,
                ],
                (info_area.width as usize).saturating_sub(1),
            );
            frame.render_widget(Paragraph::new(Line::from(text)), info_area);
        }
        None => {
            let limit = fmt::duration(limit.round() as i64);
            let text = fmt::first_fitting(
                &[
                    format!("no session running · limit {limit}"),
                    format!("no session · limit {limit}"),
                    format!("limit {limit}"),
                ],
                (gauge_area.width as usize).saturating_sub(1),
            );
            frame.render_widget(
                Paragraph::new(text).style(Style::default().fg(Color::DarkGray)),
                gauge_area,
            );
        }
    }
}

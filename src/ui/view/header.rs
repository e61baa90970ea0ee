//! The header: loop state, iteration, uptime, agent, PID/PGID, paused, STOP pending.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::short_duration;
use crate::protocol::LoopState;
use crate::ui::app::AppState;

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    let snap = &state.snapshot;
    let (label, color) = if let Some(reason) = &state.finished {
        (format!("■ stopped: {}", reason.label()), Color::Gray)
    } else if snap.paused {
        ("‖ PAUSED".to_string(), Color::Yellow)
    } else {
        match snap.state {
            LoopState::SessionRunning => ("● running".to_string(), Color::Green),
            LoopState::WatchdogKill => ("✖ watchdog kill".to_string(), Color::Red),
            LoopState::RateLimitedBackoff => ("◔ rate-limited".to_string(), Color::Yellow),
            LoopState::Retrying => ("↻ retrying".to_string(), Color::Yellow),
            LoopState::DiskFull => (
                "✖ DISK FULL: no new session until space returns".to_string(),
                Color::Red,
            ),
            LoopState::ShuttingDown => ("… stopping".to_string(), Color::Magenta),
            LoopState::AwaitingApproval => (
                "? session waits for your approval".to_string(),
                Color::Yellow,
            ),
            LoopState::Held => (
                format!(
                    "‖ HELD: {} (p resumes)",
                    crate::approvals::escape(snap.held_reason.as_deref().unwrap_or("rejected"))
                ),
                Color::Red,
            ),
            other => (
                format!("○ {}", other.as_str().replace('_', " ")),
                Color::Blue,
            ),
        }
    };
    let global = snap
        .global_iteration
        .map_or_else(|| "-".to_string(), |g| g.to_string());
    let mut uptime = short_duration((now - snap.loop_start).num_seconds());
    if let Some(limit) = snap.max_runtime_secs {
        uptime.push_str(&format!(" of {}", short_duration(limit as i64)));
    }
    let mut first = vec![
        Span::styled(
            " clowder ",
            Style::default()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::styled(
            label,
            Style::default().fg(color).add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "   iteration {}/{} (global {global})   up {uptime}",
            snap.iteration, snap.max_iterations
        )),
    ];
    if snap.stop_pending && state.finished.is_none() {
        first.push(Span::styled(
            "   STOP pending",
            Style::default()
                .fg(Color::Magenta)
                .add_modifier(Modifier::BOLD),
        ));
    }
    let process = match (snap.agent_pid, snap.pgid) {
        (Some(pid), Some(pgid)) => format!("PID {pid} · PGID {pgid}"),
        _ => "no session process".to_string(),
    };
    let second = Line::from(vec![
        Span::styled(" agent ", Style::default().fg(Color::DarkGray)),
        Span::raw(snap.agent_command.clone()),
        Span::styled("   ", Style::default()),
        Span::styled(process, Style::default().fg(Color::DarkGray)),
        Span::styled(
            format!("   clowder PID {}", snap.pid),
            Style::default().fg(Color::DarkGray),
        ),
    ]);
    frame.render_widget(Paragraph::new(vec![Line::from(first), second]), area);
}

//! The header: loop state, iteration, uptime, agent (UNGATED when its calls
//! bypass the approval gate), PID/PGID, paused, STOP pending.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::fmt;
use crate::protocol::{Ending, ExitReason, LoopState, Snapshot};
use crate::ui::app::AppState;

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    // With lanes, the header is the shown lane's; with none shown there is no
    // loop to describe (the placeholder's PID and start time mean nothing).
    if let Some(fleet) = &state.fleet
        && fleet.selected.is_none()
    {
        let what = if fleet.rows.is_empty() {
            "no lanes (n adds one)"
        } else {
            "no lane selected"
        };
        draw_without_lane(frame, area, what);
        return;
    }
    let snap = &state.snapshot;
    let (label, color) = if let Some(reason) = &state.finished {
        finished_label(reason, snap)
    } else if snap.paused {
        ("‖ PAUSED".to_string(), Color::Yellow)
    } else {
        match snap.state {
            LoopState::SessionRunning => match &snap.agent_retrying {
                Some(retrying) => (
                    format!("● running · {}", retrying.describe()),
                    Color::Yellow,
                ),
                None => ("● running".to_string(), Color::Green),
            },
            LoopState::WatchdogKill => ("✖ watchdog kill".to_string(), Color::Red),
            LoopState::RateLimitedBackoff => ("◔ rate-limited".to_string(), Color::Yellow),
            LoopState::ErrorBackoff => ("◔ server error, waiting".to_string(), Color::Yellow),
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
                    crate::escape::one_line(snap.held_reason.as_deref().unwrap_or("rejected"))
                ),
                Color::Red,
            ),
            other => (
                format!("○ {}", other.as_str().replace('_', " ")),
                Color::Blue,
            ),
        }
    };
    // With lanes the header is the shown lane's.
    let label = match state.fleet.as_ref().and_then(|f| f.selected.as_ref()) {
        Some(lane) => format!("lane {lane}  {label}"),
        None => label,
    };
    // One cell stays free at the end, so a value never seems cut.
    let width = (area.width as usize).saturating_sub(1);
    let global = snap
        .global_iteration
        .map_or_else(|| "-".to_string(), |g| g.to_string());
    let mut uptime = fmt::duration((now - snap.loop_start).num_seconds());
    if let Some(limit) = snap.max_runtime_secs {
        uptime.push_str(&format!(" of {}", fmt::duration(limit as i64)));
    }
    let stop = if snap.stop_pending && state.finished.is_none() {
        "   STOP pending"
    } else {
        ""
    };
    let runtime_color = match snap.max_runtime_secs {
        Some(limit) if limit > 0.0 => {
            let used = (now - snap.loop_start).num_seconds() as f64;
            if used >= limit {
                Color::Red
            } else if used >= limit * 0.8 {
                Color::Yellow
            } else {
                Color::Reset
            }
        }
        _ => Color::Reset,
    };
    let badge = " clowder ";
    let label = fmt::fit(
        &label,
        width.saturating_sub(badge.len() + 1 + fmt::width(stop)),
    );
    let room = width.saturating_sub(badge.len() + 1 + fmt::width(&label) + fmt::width(stop));
    let (it, max) = (snap.iteration, snap.max_iterations);
    let middle = fmt::first_fitting(
        &[
            format!("   iteration {it}/{max} (global {global})   up {uptime}"),
            format!("  {it}/{max} (global {global})  up {uptime}"),
            format!("  {it}/{max} #{global}"),
            String::new(),
        ],
        room,
    );
    let mut first = vec![
        Span::styled(
            badge,
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
        Span::styled(middle, Style::default().fg(runtime_color)),
    ];
    if !stop.is_empty() {
        first.push(Span::styled(
            stop,
            Style::default()
                .fg(Color::Magenta)
                .add_modifier(Modifier::BOLD),
        ));
    }
    let process = match (snap.agent_pid, snap.pgid) {
        (Some(pid), Some(pgid)) => format!("PID {pid} · PGID {pgid}"),
        _ => "no session process".to_string(),
    };
    let own = format!("   clowder PID {}", snap.pid);
    // An agent whose calls never reach the gate says so before anything else.
    let ungated = if snap.ungated.is_some() {
        "UNGATED "
    } else {
        ""
    };
    let fixed = " agent ".len() + ungated.len() + 3 + fmt::width(&process);
    let own = if fixed + fmt::width(&own) + 12 <= width {
        own
    } else {
        String::new()
    };
    let room = width.saturating_sub(fixed + fmt::width(&own));
    let shown = crate::escape::visible(&snap.agent_command);
    let command = fmt::fit(&fmt::shorten_paths(&shown, room), room);
    let second = Line::from(vec![
        Span::styled(" agent ", Style::default().fg(Color::DarkGray)),
        Span::styled(
            ungated,
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
        Span::raw(command),
        Span::styled("   ", Style::default()),
        Span::styled(process, Style::default().fg(Color::DarkGray)),
        Span::styled(own, Style::default().fg(Color::DarkGray)),
    ]);
    frame.render_widget(Paragraph::new(vec![Line::from(first), second]), area);
}

/// A loop that ended: why, and for an agent that failed every session, how.
fn finished_label(reason: &ExitReason, snap: &Snapshot) -> (String, Color) {
    if Ending::of(Some(reason), Some(snap)) == Ending::Failed && snap.failed_every_session() {
        let code = snap.last_exit_code.unwrap_or_default();
        let sessions = snap.counters.sessions;
        let each = if sessions == 1 {
            "in its one session".to_string()
        } else {
            format!("non-zero in each of {sessions} sessions")
        };
        return (format!("✗ failed: exit {code}, {each}"), Color::Red);
    }
    (format!("■ stopped: {}", reason.label()), Color::Gray)
}

fn draw_without_lane(frame: &mut Frame, area: Rect, what: &str) {
    let width = (area.width as usize).saturating_sub(1);
    let badge = " clowder ";
    let line = Line::from(vec![
        Span::styled(
            badge,
            Style::default()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::styled(
            fmt::fit(what, width.saturating_sub(badge.len() + 1)),
            Style::default()
                .fg(Color::Gray)
                .add_modifier(Modifier::BOLD),
        ),
    ]);
    frame.render_widget(Paragraph::new(vec![line]), area);
}

//! The header: loop state, iteration, uptime, agent (UNGATED when its calls
//! bypass the approval gate), PID/PGID, paused, STOP pending.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::fmt;
use crate::lane_status::{Facts, LaneStatus};
use crate::protocol::{ExitReason, LoopState, Snapshot};
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
    let status = shown_status(state);
    let lost = state
        .fleet
        .as_ref()
        .and_then(|f| f.selected_row())
        .and_then(|row| row.unreachable);
    // What a lost host said last may be old: its state is not claimed.
    let (label, color) = match lost {
        Some(since) => (
            format!(
                "⚠ host unreachable since {}",
                since.with_timezone(&chrono::Local).format("%H:%M")
            ),
            Color::DarkGray,
        ),
        None => (label(status, snap, state.finished.as_ref()), color(status)),
    };
    // With lanes the header is the shown lane's.
    let label = match state.fleet.as_ref().and_then(|f| f.selected.as_ref()) {
        Some(lane) => format!("lane {lane}  {label}"),
        None => label,
    };
    // A lane that has not reported yet has no loop to time.
    let started = snap.pid != 0;
    // One cell stays free at the end, so a value never seems cut.
    let width = (area.width as usize).saturating_sub(1);
    let global = snap
        .global_iteration
        .map_or_else(|| "-".to_string(), |g| g.to_string());
    let end = if status.is_over() {
        snap.last_update
    } else {
        now
    };
    let mut uptime = fmt::duration((end - snap.loop_start).num_seconds());
    if let Some(limit) = snap.max_runtime_secs {
        uptime.push_str(&format!(" of {}", fmt::duration(limit as i64)));
    }
    let stop = if snap.stop_pending && !status.is_over() {
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
    let middle = if started {
        fmt::first_fitting(
            &[
                format!("   iteration {it}/{max} (global {global})   up {uptime}"),
                format!("  {it}/{max} (global {global})  up {uptime}"),
                format!("  {it}/{max} #{global}"),
                String::new(),
            ],
            room,
        )
    } else {
        String::new()
    };
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
    let process = session_process(status, snap);
    // A lane's clowder only while its loop runs: one that ended may have been
    // an earlier run's. A single loop's is the room's own process.
    let own = if started && (state.fleet.is_none() || !status.is_over()) {
        format!("   clowder PID {}", snap.pid)
    } else {
        String::new()
    };
    // An agent whose calls never reach the gate says so before anything else.
    let ungated = if snap.ungated.is_some() {
        "UNGATED "
    } else {
        ""
    };
    // An agent that takes a note while it runs says so (`t` reaches it now);
    // without the mark, notes wait for the next session.
    let notes = if snap.notes_now { " · notes now" } else { "" };
    let fixed = " agent ".len() + ungated.len() + notes.len() + 3 + fmt::width(&process);
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
        Span::styled(notes, Style::default().fg(Color::Green)),
        Span::styled("   ", Style::default()),
        Span::styled(process, Style::default().fg(Color::DarkGray)),
        Span::styled(own, Style::default().fg(Color::DarkGray)),
    ]);
    frame.render_widget(Paragraph::new(vec![Line::from(first), second]), area);
}

/// The shown loop's state: its row's, with lanes; else from its snapshot.
fn shown_status(state: &AppState) -> LaneStatus {
    if let Some(row) = state.fleet.as_ref().and_then(|f| f.selected_row()) {
        return row.status;
    }
    // A single loop's requests are all its own, as a lane's are in its row.
    let facts = Facts {
        ended: state.finished.as_ref().map(Ok),
        pending: state.approvals.iter().filter(|r| !r.abandoned).count(),
        ..Facts::default()
    };
    LaneStatus::of(Some(&state.snapshot), facts)
}

/// `● running: retrying (attempt 2)`: the state's glyph and word, then what
/// the loop itself says about it.
fn label(status: LaneStatus, snap: &Snapshot, finished: Option<&ExitReason>) -> String {
    let head = format!("{} {}", status.glyph(), status.word());
    match detail(status, snap, finished.or(snap.exit_reason.as_ref())) {
        Some(detail) => format!("{head}: {detail}"),
        None => head,
    }
}

fn detail(status: LaneStatus, snap: &Snapshot, ended: Option<&ExitReason>) -> Option<String> {
    let text = match status {
        LaneStatus::Running => match (snap.state, &snap.agent_retrying) {
            (LoopState::SessionRunning, Some(retrying)) => retrying.describe().to_string(),
            (LoopState::WatchdogKill, _) => "watchdog kill".into(),
            (LoopState::ShuttingDown, _) => "stopping".into(),
            (LoopState::PreHooks, _) => "pre-session hooks".into(),
            (LoopState::PostHooks, _) => "post-session hooks".into(),
            _ => return None,
        },
        LaneStatus::Backoff { until } => {
            let why = match snap.state {
                LoopState::RateLimitedBackoff => "rate-limited",
                LoopState::ErrorBackoff => "server error, waiting",
                _ => "retry",
            };
            match until {
                Some(at) => format!("{why} until {}", fmt::clock_short(at)),
                None => why.into(),
            }
        }
        LaneStatus::Held if snap.state == LoopState::DiskFull => {
            "DISK FULL: no new session until space returns".into()
        }
        LaneStatus::Held => format!(
            "{} (p resumes)",
            crate::approvals::escape(snap.held_reason.as_deref().unwrap_or("rejected"))
        ),
        LaneStatus::WaitingForYou if snap.state == LoopState::AwaitingApproval => {
            "session waits for your approval".into()
        }
        LaneStatus::WaitingForYou => "a request waits in the inbox".into(),
        // A lane that has not reported has only a placeholder (PID 0).
        LaneStatus::Queued if snap.pid == 0 => "has not started yet".into(),
        LaneStatus::Queued => "waits for a session slot".into(),
        LaneStatus::Failed if snap.failed_every_session() => {
            let code = snap.last_exit_code.unwrap_or_default();
            match snap.counters.sessions {
                1 => format!("exit {code} in its one session"),
                n => format!("exit {code}, non-zero in each of {n} sessions"),
            }
        }
        LaneStatus::Done | LaneStatus::Failed | LaneStatus::Stopped => ended?.label(),
        _ => return None,
    };
    Some(text)
}

/// The current session's processes, or that there is none: a queued, ended
/// or between-sessions loop shows no PID of an earlier session.
fn session_process(status: LaneStatus, snap: &Snapshot) -> String {
    let current = !status.is_over()
        && status != LaneStatus::Queued
        && matches!(
            snap.state,
            LoopState::SessionRunning | LoopState::WatchdogKill
        );
    match (snap.agent_pid, snap.pgid) {
        (Some(pid), Some(pgid)) if current => format!("PID {pid} · PGID {pgid}"),
        _ => "no session process".to_string(),
    }
}

fn color(status: LaneStatus) -> Color {
    match status {
        LaneStatus::Running => Color::Green,
        LaneStatus::WaitingForYou | LaneStatus::Backoff { .. } | LaneStatus::Paused => {
            Color::Yellow
        }
        LaneStatus::Held | LaneStatus::Failed => Color::Red,
        LaneStatus::Queued => Color::Blue,
        _ => Color::Gray,
    }
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

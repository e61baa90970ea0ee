//! The counters pane: productive iterations, retries, rate limits and backoff
//! countdown, watchdog kills, last exit, commit; cost, tokens and turns.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, short_duration, title};
use crate::protocol::LoopState;
use crate::ui::app::{AppState, Pane};

fn row(label: &str, value: String, color: Color) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{label:<12}"), Style::default().fg(Color::DarkGray)),
        Span::styled(value, Style::default().fg(color)),
    ])
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    let snap = &state.snapshot;
    let c = &snap.counters;
    let mut lines = vec![
        row(
            "productive",
            format!(
                "{}/{} · {} sessions",
                c.productive, snap.max_iterations, c.sessions
            ),
            Color::Green,
        ),
        row(
            "empty",
            format!(
                "{} retries · {} given up",
                c.empty_retries, c.empty_iterations
            ),
            if c.empty_retries > 0 {
                Color::Yellow
            } else {
                Color::Reset
            },
        ),
        row(
            "rate limits",
            format!(
                "{} in a row · {} total",
                snap.consecutive_rate_limits, c.rate_limits
            ),
            if snap.consecutive_rate_limits > 0 {
                Color::Yellow
            } else {
                Color::Reset
            },
        ),
        row(
            "kills",
            format!("{} watchdog · {} by you", c.watchdog_kills, c.user_kills),
            if c.watchdog_kills > 0 {
                Color::Red
            } else {
                Color::Reset
            },
        ),
        row(
            "last exit",
            match (snap.last_exit_code, snap.last_committed) {
                (Some(code), committed) => format!(
                    "{code}{}",
                    if committed == Some(true) {
                        " · committed"
                    } else {
                        ""
                    }
                ),
                (None, _) => "-".to_string(),
            },
            Color::Reset,
        ),
    ];
    if let Some(at) = snap.next_session_at
        && state.finished.is_none()
    {
        let secs = (at - now).num_seconds().max(0);
        let what = match snap.state {
            LoopState::RateLimitedBackoff => "backoff",
            LoopState::Retrying => "retry in",
            LoopState::DiskFull => "disk check",
            _ => "next in",
        };
        let mut text = short_duration(secs);
        if let Some(reset) = snap.rate_limit_resets_at {
            text.push_str(&format!(" → {}", reset.format("%H:%M:%SZ")));
        }
        lines.push(row(what, text, Color::Yellow));
    }
    let usage = &state.usage;
    match &usage.session {
        Some(stats) => {
            let cost = stats
                .cost_usd
                .map_or_else(|| "-".to_string(), |c| format!("${c:.4}"));
            lines.push(row(
                "session",
                format!("{cost} · {} turns", stats.turns),
                Color::Cyan,
            ));
            lines.push(row(
                "tool calls",
                format!("{} · {} failed", stats.tool_calls, stats.tool_errors),
                if stats.tool_errors > 0 {
                    Color::Yellow
                } else {
                    Color::Cyan
                },
            ));
            lines.push(row(
                "tokens",
                format!("{} in · {} out", stats.input_tokens, stats.output_tokens),
                Color::Cyan,
            ));
        }
        None => lines.push(row("session", "-".to_string(), Color::DarkGray)),
    }
    let session_cost = usage
        .session
        .as_ref()
        .and_then(|s| s.cost_usd)
        .unwrap_or(0.0);
    let run_cost = usage.run_cost_usd + session_cost;
    let budget = match state.snapshot.max_cost_usd {
        Some(limit) => format!(" of ${limit:.2}"),
        None => String::new(),
    };
    lines.push(row(
        "run",
        format!(
            "${run_cost:.4}{budget} · {} turns",
            usage.run_turns + usage.session.as_ref().map_or(0, |s| s.turns)
        ),
        match state.snapshot.max_cost_usd {
            Some(limit) if run_cost >= limit * 0.8 => Color::Yellow,
            _ => Color::Cyan,
        },
    ));
    let block = pane_block(state, Pane::Counters, title("Counters"));
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

//! The counters pane: productive iterations, retries, rate limits and backoff
//! countdown, watchdog kills, last exit, commit; cost, tokens and turns.
//!
//! Each value has a long and a short wording; the pane uses the longest that
//! fits, so a narrow pane shows whole words. Rows that do not fit are dropped
//! from the bottom, least important last.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, title};
use crate::fmt;
use crate::protocol::{LoopState, Snapshot};
use crate::ui::app::{AppState, Pane, run_totals};

/// A row: its label, then its wordings from the longest to the shortest.
struct Row {
    label: &'static str,
    values: Vec<String>,
    color: Color,
}

fn row(label: &'static str, values: Vec<String>, color: Color) -> Row {
    Row {
        label,
        values,
        color,
    }
}

/// Yellow from 80 % of a limit, red at the limit.
fn budget_color(value: f64, limit: Option<f64>, normal: Color) -> Color {
    match limit {
        Some(limit) if limit > 0.0 && value >= limit => Color::Red,
        Some(limit) if limit > 0.0 && value >= limit * 0.8 => Color::Yellow,
        _ => normal,
    }
}

fn warn_if(on: bool, color: Color) -> Color {
    if on { color } else { Color::Reset }
}

fn loop_rows(state: &AppState, now: DateTime<Utc>) -> Vec<Row> {
    let snap = &state.snapshot;
    let c = &snap.counters;
    let mut rows = vec![
        row(
            "productive",
            vec![
                format!(
                    "{}/{} · {} sessions",
                    c.productive, snap.max_iterations, c.sessions
                ),
                format!(
                    "{}/{} · {} sess.",
                    c.productive, snap.max_iterations, c.sessions
                ),
                format!("{}/{}", c.productive, snap.max_iterations),
            ],
            Color::Green,
        ),
        row(
            "empty",
            vec![
                format!(
                    "{} retries · {} given up",
                    c.empty_retries, c.empty_iterations
                ),
                format!("{} retry · {} lost", c.empty_retries, c.empty_iterations),
            ],
            warn_if(c.empty_retries > 0, Color::Yellow),
        ),
        row(
            "rate limits",
            vec![
                format!(
                    "{} in a row · {} total",
                    snap.consecutive_rate_limits, c.rate_limits
                ),
                format!(
                    "{} now · {} total",
                    snap.consecutive_rate_limits, c.rate_limits
                ),
            ],
            warn_if(snap.consecutive_rate_limits > 0, Color::Yellow),
        ),
        row(
            "kills",
            vec![
                format!("{} watchdog · {} by you", c.watchdog_kills, c.user_kills),
                format!("{} idle · {} by you", c.watchdog_kills, c.user_kills),
                format!("{} idle · {} you", c.watchdog_kills, c.user_kills),
            ],
            warn_if(c.watchdog_kills > 0, Color::Red),
        ),
        row(
            "last exit",
            vec![match (snap.last_exit_code, last_session_committed(snap)) {
                (Some(code), true) => format!("{code} · committed"),
                (Some(code), _) => code.to_string(),
                (None, _) => "-".to_string(),
            }],
            Color::Reset,
        ),
    ];
    // Only once there is one, like overage below; never in the rate-limit row.
    if c.transient_errors > 0 {
        rows.insert(
            3,
            row(
                "server errors",
                vec![
                    format!(
                        "{} in a row · {} total",
                        snap.consecutive_errors, c.transient_errors
                    ),
                    format!(
                        "{} now · {} total",
                        snap.consecutive_errors, c.transient_errors
                    ),
                ],
                warn_if(snap.consecutive_errors > 0, Color::Yellow),
            ),
        );
    }
    // Only once there is one: most runs never pay for overage.
    if c.overages > 0 {
        rows.insert(
            3,
            row(
                "overage",
                vec![
                    format!("{} past a limit, paid", c.overages),
                    c.overages.to_string(),
                ],
                Color::Yellow,
            ),
        );
    }
    if let Some(at) = snap.next_session_at
        && state.finished.is_none()
    {
        let secs = (at - now).num_seconds().max(0);
        let what = match snap.state {
            LoopState::RateLimitedBackoff | LoopState::ErrorBackoff => "backoff",
            LoopState::Retrying => "retry in",
            LoopState::DiskFull => "disk check",
            _ => "next in",
        };
        let wait = fmt::duration(secs);
        let values = match snap.rate_limit_resets_at {
            Some(reset) => vec![
                format!("{wait} (resets {})", fmt::clock(reset)),
                format!("{wait} (resets {})", fmt::clock_short(reset)),
                wait,
            ],
            None => vec![wait],
        };
        rows.push(row(what, values, Color::Yellow));
    }
    rows
}

fn usage_rows(state: &AppState) -> Vec<Row> {
    let snap = &state.snapshot;
    let mut rows = Vec::new();
    let session = state.usage.session.as_ref();
    match session {
        Some(stats) => {
            let cost = stats.cost_usd;
            let (long, short) = cost.map_or_else(
                || ("-".to_string(), "-".to_string()),
                |c| (format!("${c:.4}"), format!("${c:.2}")),
            );
            let turns = if counts_known(state, stats) {
                stats.turns.to_string()
            } else {
                "?".to_string()
            };
            rows.push(row(
                "session",
                vec![
                    format!("{long} · {turns} turns"),
                    format!("{short} · {turns} turns"),
                    short,
                ],
                budget_color(
                    cost.unwrap_or(0.0),
                    snap.max_cost_per_session_usd,
                    Color::Cyan,
                ),
            ));
        }
        None => rows.push(row("session", vec!["-".to_string()], Color::DarkGray)),
    }
    let (run_cost, run_turns) = run_totals(state);
    // An agent that reports no cost (Codex) leaves it unknown, not $0.
    let (long, short) = run_cost.map_or_else(
        || ("$?".to_string(), "$?".to_string()),
        |c| (format!("${c:.4}"), format!("${c:.2}")),
    );
    let mut values = Vec::new();
    if let Some(limit) = snap.max_cost_usd {
        values.push(format!("{long} of ${limit:.2} · {run_turns} turns"));
        values.push(format!("{short} of ${limit:.2} · {run_turns} turns"));
        values.push(format!("{short}/{limit:.2} · {run_turns} turns"));
        values.push(format!("{short} of ${limit:.2}"));
    } else {
        values.push(format!("{long} · {run_turns} turns"));
        values.push(format!("{short} · {run_turns} turns"));
    }
    rows.push(row(
        "run",
        values,
        budget_color(run_cost.unwrap_or(0.0), snap.max_cost_usd, Color::Cyan),
    ));
    let reviewer = &snap.totals.reviewer;
    if reviewer.calls > 0 {
        let calls = fmt::count(reviewer.calls);
        rows.push(row(
            "reviewer",
            vec![
                format!("{calls} calls · ${:.4} (in run)", reviewer.cost_usd),
                format!("{calls} calls · ${:.4}", reviewer.cost_usd),
                format!("{calls} calls · ${:.2}", reviewer.cost_usd),
            ],
            Color::Cyan,
        ));
    }
    if let Some(stats) = session {
        rows.push(row(
            "tool calls",
            vec![format!(
                "{} · {} failed",
                stats.tool_calls, stats.tool_errors
            )],
            match snap.max_tool_calls_per_session {
                Some(limit) => {
                    budget_color(stats.tool_calls as f64, Some(limit as f64), Color::Cyan)
                }
                None if stats.tool_errors > 0 => Color::Yellow,
                None => Color::Cyan,
            },
        ));
        let tokens = if counts_known(state, stats) {
            vec![
                format!("{} in · {} out", stats.input_tokens, stats.output_tokens),
                format!(
                    "{} in · {} out",
                    fmt::count(stats.input_tokens),
                    fmt::count(stats.output_tokens)
                ),
            ]
        } else {
            vec!["? in · ? out".to_string()]
        };
        rows.push(row("tokens", tokens, Color::Cyan));
    }
    rows
}

/// Whether the session's turns and tokens are known: a finished stream
/// without its ending (Claude's `result`, Codex's `turn.completed`) leaves
/// them unknown, whatever partial sums it held; a running one shows them so far.
/// A format clowder does not read leaves them unknown throughout.
fn counts_known(state: &AppState, stats: &crate::agent::stream::SessionStats) -> bool {
    !stats.unrecognised_format && (stats.ended || stats.lines == 0 || state.running_session())
}

/// A label in at most seven cells.
fn short_label(label: &'static str) -> &'static str {
    match label {
        "productive" => "done",
        "rate limits" => "limits",
        "server errors" => "5xx",
        "last exit" => "exit",
        "retry in" => "retry",
        "disk check" => "disk",
        "next in" => "next",
        "tool calls" => "tools",
        other => other,
    }
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    let block = pane_block(state, Pane::Counters, title("Counters"));
    let inner = block.inner(area);
    let mut rows = loop_rows(state, now);
    rows.extend(usage_rows(state));
    // A narrow pane gives the values the room, with shorter labels.
    let narrow = inner.width < 34;
    let label_width = if narrow { 8 } else { 12 };
    // One cell stays free before the border, so a value never seems cut.
    let value_width = (inner.width as usize).saturating_sub(label_width + 1);
    let lines: Vec<Line> = rows
        .into_iter()
        .take(inner.height as usize)
        .map(|row| {
            Line::from(vec![
                Span::styled(
                    format!(
                        "{:<label_width$}",
                        if narrow {
                            short_label(row.label)
                        } else {
                            row.label
                        }
                    ),
                    Style::default().fg(Color::DarkGray),
                ),
                Span::styled(
                    fmt::first_fitting(&row.values, value_width),
                    Style::default().fg(row.color),
                ),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// `last_committed` belongs to the last productive session; it says nothing of a
/// later rate-limited or empty one, whose exit code is the one shown.
fn last_session_committed(snap: &Snapshot) -> bool {
    snap.last_committed == Some(true)
        && snap.last_completed_global.is_some()
        && snap.last_completed_global == snap.last_session.as_ref().map(|s| s.global)
}

//! `harness.status`: the loop's latest [`Snapshot`] as JSON, replaced atomically,
//! and its human rendering for `clowder --status`.

use std::io;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::versioned::{self, Format};
use crate::lane_status::{Facts, LaneStatus};
use crate::protocol::{LoopState, Snapshot};

/// Version 0 is a status written before versions were kept: the same fields.
/// A loop that starts replaces whatever status is there, newer or not.
pub const FORMAT: Format = Format {
    current: 1,
    first: 0,
    unversioned: Some(0),
    migrate: versioned::no_changes,
    in_struct: false,
};

pub fn write(path: &Path, snapshot: &Snapshot) -> io::Result<()> {
    let mut json = FORMAT.to_vec_pretty(snapshot).map_err(io::Error::other)?;
    json.push(b'\n');
    super::replace_atomically(path, &json)
}

/// Reads the status file; the error says which file and what is wrong with it.
pub fn read(path: &Path) -> Result<(Snapshot, String), String> {
    let text = super::small_file::read_to_string(path).map_err(|err| {
        if err.kind() == io::ErrorKind::NotFound {
            format!(
                "{}: no status file: no loop has run in this folder (or the status file is configured elsewhere)",
                path.display()
            )
        } else {
            format!("{}: cannot read: {err}", path.display())
        }
    })?;
    // The version first; then the text itself, for errors that say where (no
    // version so far changed a field).
    FORMAT
        .upgrade(&text)
        .map_err(|err| format!("{}: {err}", path.display()))?;
    let snapshot = serde_json::from_str(&text).map_err(|err| {
        format!(
            "{}:{}:{}: not a clowder status file: {err}",
            path.display(),
            err.line(),
            err.column()
        )
    })?;
    Ok((snapshot, text))
}

/// Whether the process that wrote the status is still alive: the live process
/// with its pid and, when the status records it, its start time. Never its name:
/// a packaged `clowder-0.1` or a wrapper's `.clowder-wrapped` is clowder too. A
/// status written before start times were recorded falls back to the pid alone.
pub fn writer_alive(snapshot: &Snapshot) -> bool {
    let Ok(pid) = i32::try_from(snapshot.pid) else {
        return false;
    };
    crate::proc_stat::read_proc_stat(pid).is_some_and(|info| {
        info.is_live()
            && snapshot
                .pid_start_ticks
                .is_none_or(|ticks| ticks == info.start_ticks)
    })
}

/// The `--status` report.
pub fn render(
    snapshot: &Snapshot,
    alive: bool,
    now: DateTime<Utc>,
    current_size: Option<u64>,
) -> String {
    let mut lines = Vec::new();
    let running = alive && snapshot.state != LoopState::Stopped;
    if running {
        let mut state = format!("running (PID {})", snapshot.pid);
        if snapshot.paused {
            state.push_str(", session paused");
        }
        if snapshot.stop_pending {
            state.push_str(", stop pending");
        }
        lines.push(format!("Loop state: {state}"));
    } else if snapshot.state == LoopState::Stopped {
        let reason = snapshot
            .exit_reason
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |r| r.label());
        lines.push(format!(
            "Loop state: not running — last run ended at {} ({reason})",
            snapshot.last_update.format("%Y-%m-%d %H:%M:%S UTC")
        ));
    } else {
        lines.push(format!(
            "Loop state: not running — PID {} is gone; it was {} at {} (last state shown below)",
            snapshot.pid,
            snapshot.state.as_str(),
            snapshot.last_update.format("%Y-%m-%d %H:%M:%S UTC")
        ));
    }
    let global = snapshot
        .global_iteration
        .map_or_else(|| "-".to_string(), |g| g.to_string());
    lines.push(format!(
        "Current iteration: {}/{} (global: {global})",
        snapshot.iteration, snapshot.max_iterations
    ));
    // The one vocabulary's word, then the loop's own state in brackets.
    let status = LaneStatus::of_status_file(snapshot, alive, Facts::default());
    let raw = snapshot.state.as_str();
    match &snapshot.agent_retrying {
        Some(retrying) if running => lines.push(format!(
            "State: {} — {} [{raw}]",
            status.label(Some(snapshot)),
            retrying.describe()
        )),
        _ => lines.push(format!("State: {} [{raw}]", status.label(Some(snapshot)))),
    }
    if let Some(why) = &snapshot.ungated {
        lines.push(format!("Approvals: UNGATED — {why}"));
    }
    let size = current_size
        .unwrap_or(snapshot.output_bytes)
        .max(snapshot.output_bytes);
    let growth = if !running {
        String::new()
    } else if snapshot.state == LoopState::SessionRunning {
        let recent = snapshot
            .last_output_growth
            .is_some_and(|at| (now - at).num_seconds() < 10);
        if let Some(retrying) = &snapshot.agent_retrying {
            format!(" ({})", retrying.describe())
        } else if size > snapshot.output_bytes || recent {
            " (growing)".to_string()
        } else {
            let idle = snapshot
                .last_output_growth
                .map_or(0, |at| (now - at).num_seconds().max(0));
            format!(" (idle {})", crate::fmt::duration(idle))
        }
    } else {
        String::new()
    };
    lines.push(format!(
        "Session output: {}{growth}",
        crate::fmt::bytes(size)
    ));
    let end = if running { now } else { snapshot.last_update };
    lines.push(format!(
        "Uptime: {}",
        crate::fmt::duration((end - snapshot.loop_start).num_seconds().max(0))
    ));
    match (snapshot.last_completed_iteration, snapshot.last_committed) {
        (Some(iteration), committed) => {
            let global = snapshot
                .last_completed_global
                .map_or_else(String::new, |g| format!(" (global {g})"));
            let commit = if committed == Some(true) {
                "committed"
            } else {
                "no commit"
            };
            lines.push(format!(
                "Last completed: iteration {iteration}{global} — {commit}"
            ));
        }
        (None, _) => lines.push("Last completed: none yet".to_string()),
    }
    if let Some(at) = snapshot.next_session_at
        && running
    {
        let secs = (at - now).num_seconds().max(0);
        lines.push(format!("Next session in: {}", crate::fmt::duration(secs)));
    }
    let c = &snapshot.counters;
    lines.push(format!(
        "Counters: {} sessions, {} productive, {} empty retries, {} rate limits ({} in a row), {} server errors ({} in a row), {} watchdog kills, {} hook failures",
        c.sessions,
        c.productive,
        c.empty_retries,
        c.rate_limits,
        snapshot.consecutive_rate_limits,
        c.transient_errors,
        snapshot.consecutive_errors,
        c.watchdog_kills,
        c.hook_failures
    ));
    if c.overages > 0 {
        lines.push(format!(
            "Overage: {} (rate limits passed by paying for overage)",
            c.overages
        ));
    }
    if let Some(line) = cost_line(snapshot) {
        lines.push(line);
    }
    lines.join("\n")
}

/// `Cost: $0.1234 total, last session $0.0412 · 6 turns · 4 tool calls`, once a
/// session has ended.
fn cost_line(snapshot: &Snapshot) -> Option<String> {
    let last = snapshot.last_session.as_ref()?;
    let cost = last
        .cost_usd
        .map_or_else(|| "cost unknown".to_string(), |c| format!("${c:.4}"));
    let mut parts = vec![format!("last session {cost}")];
    parts.push(match last.turns {
        Some(turns) => plural(turns, "turn", "turns"),
        None => "? turns".to_string(),
    });
    parts.push(plural(last.tool_calls, "tool call", "tool calls"));
    if let Some(result) = last.result().filter(|r| r != "success") {
        parts.push(format!("result {result}"));
    }
    let total = snapshot
        .totals
        .cost_usd
        .map_or_else(|| "unknown".to_string(), |c| format!("${c:.4}"));
    Some(format!("Cost: {total} total, {}", parts.join(" · ")))
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_line_shows_the_run_total_and_the_last_session() {
        let mut snapshot: Snapshot = serde_json::from_str(MINIMAL_STATUS).expect("old status");
        assert_eq!(
            snapshot.last_session, None,
            "an older status file still reads"
        );
        assert_eq!(cost_line(&snapshot), None);
        snapshot.totals.cost_usd = Some(0.1234);
        snapshot.last_session = Some(crate::protocol::SessionSummary {
            cost_usd: Some(0.0412),
            turns: Some(6),
            tool_calls: 4,
            result_subtype: Some("success".into()),
            ..Default::default()
        });
        assert_eq!(
            cost_line(&snapshot).as_deref(),
            Some("Cost: $0.1234 total, last session $0.0412 · 6 turns · 4 tool calls")
        );
        let last = snapshot.last_session.as_mut().expect("set");
        last.cost_usd = None;
        last.turns = Some(1);
        last.tool_calls = 1;
        last.result_is_error = Some(true);
        assert_eq!(
            cost_line(&snapshot).as_deref(),
            Some(
                "Cost: $0.1234 total, last session cost unknown · 1 turn · 1 tool call · result error"
            )
        );
    }

    /// A status file as written before session statistics existed.
    const MINIMAL_STATUS: &str = r#"{"lane":0,"pid":1,"state":"stopped","agent_command":"claude","stale_timeout_secs":1200.0,"paused":false,"paused_at":null,"stop_pending":false,"iteration":1,"max_iterations":1,"global_iteration":1,"output_file":null,"output_bytes":0,"loop_start":"2026-01-01T00:00:00Z","session_start":null,"last_output_growth":null,"last_update":"2026-01-01T00:00:00Z","last_completed_iteration":null,"last_completed_global":null,"last_committed":null,"last_exit_code":null,"consecutive_rate_limits":0,"pgid":null,"agent_pid":null,"next_session_at":null,"rate_limit_resets_at":null,"counters":{"sessions":0,"productive":0,"empty_retries":0,"empty_iterations":0,"rate_limits":0,"watchdog_kills":0,"user_kills":0,"hook_failures":0,"commits":0},"exit_reason":null}"#;
}

//! The words of the events lists, the room's pane and the web page's alike:
//! each supervisor event said in a few words, with the full record kept for
//! when the user opens it. Both clients read them from here, below both.

use chrono::{DateTime, Utc};

use crate::fmt;
use crate::lane_status::LaneStatus;
use crate::protocol::{Event, KillReason, NoteHow, TimedEvent};
use crate::supervisor::core::Level;

/// The `status=` of the supervisor's log lines that an [`Event`] also reports:
/// the pane shows the event instead of the line.
const STATUSES_WITH_AN_EVENT: &[&str] = &[
    "session_running",
    "watchdog_kill",
    "session_complete",
    "retrying",
    "rate_limited_backoff",
    "error_backoff",
    "paused",
    "resumed",
    "doom_loop",
    "budget_exceeded",
    "disk_full",
    "held",
    "note_queued",
    "note_delivered",
];

/// Whether a log line only repeats an event that the pane shows anyway.
pub fn repeats_an_event(line: &str) -> bool {
    line.starts_with("loop_start ")
        || line
            .split_whitespace()
            .take(4)
            .filter_map(|word| word.strip_prefix("status="))
            .any(|status| STATUSES_WITH_AN_EVENT.contains(&status.trim_end_matches(':')))
}

/// A log line in a few words: its leading `iteration=N global=G` becomes `#G`.
pub fn log_summary(line: &str) -> String {
    let mut rest = line;
    let mut global = None;
    loop {
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        if let Some(g) = word.strip_prefix("global=") {
            global = Some(g.to_string());
        } else if word.strip_prefix("iteration=").is_none() || tail.is_empty() {
            break;
        }
        rest = tail;
    }
    match global {
        Some(g) => format!("#{g} {rest}"),
        None => rest.to_string(),
    }
}

/// A plan's console line (`plan=dia event=step_ready step=a approved`, or
/// `plan=dia step=a …` from its driver) as the pane says it, longest wording
/// first: `step a ready (approved)`, `step a ready`. `base` is the plan's base
/// branch, when known. None for any other line.
pub fn plan_wordings(line: &str, base: impl Fn(&str) -> Option<String>) -> Option<Vec<String>> {
    let rest = line.strip_prefix("plan=")?;
    let (plan, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let mut word = |key: &str| {
        let value = rest.strip_prefix(key)?;
        let (value, tail) = value.split_once(' ').unwrap_or((value, ""));
        rest = tail;
        Some(value.to_string())
    };
    let kind = word("event=");
    let step = word("step=");
    // The console shows a newline of the detail escaped: the first line says enough.
    let detail = rest.split("\\n").next().unwrap_or_default().trim();
    let into = || base(plan).map_or_else(|| "merged".to_string(), |b| format!("merged into {b}"));
    let (short, long) = sentence(kind.as_deref(), plan, step.as_deref(), detail, into);
    let mut wordings: Vec<String> = long.filter(|_| !detail.is_empty()).into_iter().collect();
    wordings.push(short);
    Some(wordings)
}

/// The short and the long wording of a plan's line: `kind` is its `event=`,
/// `step` its `step=`; `into` says where a merged step went.
fn sentence(
    kind: Option<&str>,
    plan: &str,
    step: Option<&str>,
    detail: &str,
    into: impl Fn() -> String,
) -> (String, Option<String>) {
    let s = step.unwrap_or("?");
    let said = |short: String| {
        let long = format!("{short}: {detail}");
        (short, Some(long))
    };
    match kind {
        Some("plan_started") => (format!("plan {plan} started"), None),
        Some("step_ready") => (
            format!("step {s} ready"),
            Some(format!("step {s} ready ({detail})")),
        ),
        Some("step_started") => (format!("step {s} started"), None),
        Some("step_done") => (format!("step {s} done"), None),
        Some("step_failed") => said(format!("step {s} failed")),
        Some("step_retried") => said(format!("step {s} retried")),
        Some("step_blocked") => said(format!("step {s} blocked")),
        Some("step_waiting") => said(format!("step {s} waits")),
        Some("merge_passed") => {
            let into = into();
            (
                format!("step {s} {into}"),
                Some(format!("step {s} {into} ({detail})")),
            )
        }
        Some("merge_conflict" | "merge_check_failed") => said(format!("step {s} not merged")),
        Some("plan_done") => (
            format!("plan {plan} ended"),
            Some(format!("plan {plan} {detail}")),
        ),
        Some("plan_cleanup") => said(format!("plan {plan} cleaned up")),
        Some(other) => (
            format!("plan {plan}: {other}"),
            Some(format!("plan {plan}: {other} {s} {detail}")),
        ),
        None if step.is_some() => (format!("step {s}"), Some(format!("step {s} {detail}"))),
        None => (
            format!("plan {plan}"),
            Some(format!("plan {plan}: {detail}")),
        ),
    }
}

/// How loud an event is in the pane.
pub fn level(event: &Event) -> Level {
    match event {
        Event::AgentError { .. } | Event::DiskFull { .. } | Event::HookFailed { .. } => {
            Level::Error
        }
        Event::RateLimited { .. }
        | Event::TransientError { .. }
        | Event::WatchdogStale { .. }
        | Event::WatchdogKill { .. }
        | Event::SessionKilled { .. }
        | Event::EmptyRetry { .. }
        | Event::DoomLoop { .. }
        | Event::BudgetExceeded { .. }
        | Event::SessionAbandoned { .. }
        | Event::LeakedPid { .. }
        | Event::HandoffInvalid { .. } => Level::Warn,
        Event::SessionGate {
            approved: false, ..
        } => Level::Warn,
        _ => Level::Info,
    }
}

/// The whole event as the event log stores it, for the detail view.
pub fn record(at: DateTime<Utc>, event: &Event) -> String {
    let timed = TimedEvent {
        ts: at,
        event: event.clone(),
    };
    serde_json::to_string_pretty(&timed).unwrap_or_else(|_| format!("{event:?}"))
}

fn secs(value: f64) -> String {
    fmt::duration(value.round() as i64)
}

/// The event in a few words, longest wording first: the pane shows the first
/// that fits. `#2 rate limited, next in 3s (resets 14:00)`, `#2 rate limited`.
pub fn summaries(event: &Event) -> Vec<String> {
    match event {
        Event::SessionStart { global, pid, .. } => vec![
            format!("#{global} started, PID {pid}"),
            format!("#{global} started"),
        ],
        Event::RateLimited {
            global,
            backoff_secs,
            resets_at,
            ..
        } => {
            let next = format!("#{global} rate limited, next in {}", secs(*backoff_secs));
            let mut wordings = Vec::new();
            if let Some(at) = resets_at {
                wordings.push(format!("{next} (resets {})", fmt::clock_short(*at)));
            }
            wordings.push(next);
            wordings.push(format!("#{global} rate limited"));
            wordings
        }
        Event::SessionComplete { .. } => session_complete(event),
        Event::LoopStart { .. } => vec![summary(event), "loop started".to_string()],
        Event::WatchdogStale {
            global,
            agent_retrying: Some(retrying),
            ..
        } => vec![
            format!("#{global} {}, killing", retrying.describe()),
            format!("#{global} agent retrying, killing"),
        ],
        Event::WatchdogStale {
            global, heartbeat, ..
        } => {
            // A followed task's worker is never killed; a task lane's kill is
            // its own event.
            let short = if *heartbeat {
                format!("#{global} no heartbeat")
            } else {
                format!("#{global} no output, killing")
            };
            vec![summary(event), short]
        }
        Event::LoopEnd {
            reason, counters, ..
        } => {
            let status = LaneStatus::ended_with(reason, counters);
            vec![
                summary(event),
                format!("{} {}: {}", status.glyph(), status.word(), reason.label()),
            ]
        }
        Event::SessionGate {
            iteration,
            approved,
            ..
        } => vec![
            summary(event),
            format!(
                "iteration {iteration} {}",
                if *approved {
                    "approved"
                } else {
                    "rejected, held"
                }
            ),
        ],
        Event::NoteQueued { why, .. } => {
            let mut forms = vec![summary(event)];
            if let Some(why) = why {
                forms.push(format!("note left for the next session ({why})"));
            }
            forms.push("note queued".into());
            forms
        }
        Event::NoteDelivered { global, how, .. } => match how {
            NoteHow::Now => vec![
                summary(event),
                format!("#{global} {}", crate::store::notes::TOLD_NOW),
                format!("#{global} told now: your note"),
            ],
            NoteHow::Prompt => vec![summary(event), format!("#{global} took your note")],
        },
        _ => vec![summary(event)],
    }
}

/// The event in one sentence.
fn summary(event: &Event) -> String {
    match event {
        Event::LoopStart { max_iterations, .. } => {
            format!("loop started, up to {max_iterations} iterations")
        }
        Event::SessionStart { global, pid, .. } => format!("#{global} started, PID {pid}"),
        Event::SessionAbandoned { pgid, killed, .. } => {
            format!("earlier run's session (group {pgid}): {killed} killed")
        }
        Event::WatchdogStale {
            global,
            agent_retrying: Some(retrying),
            ..
        } => format!("#{global} {}, killing", retrying.describe()),
        Event::WatchdogStale {
            global,
            idle_secs,
            heartbeat,
            ..
        } => {
            if *heartbeat {
                format!("#{global} no heartbeat for {}", secs(*idle_secs))
            } else {
                format!("#{global} no output for {}, killing", secs(*idle_secs))
            }
        }
        Event::WatchdogKill { global, .. } => format!("#{global} killed by the watchdog"),
        Event::SessionKilled { global, reason, .. } => {
            let why = match reason {
                KillReason::Watchdog => "by the watchdog",
                KillReason::User => "by you",
                KillReason::StopNow => "to stop now",
                KillReason::Budget => "over budget",
                KillReason::DoomLoop => "in a doom loop",
                KillReason::AgentError => "as the agent cannot work",
            };
            format!("#{global} killed {why}")
        }
        Event::LingeringKilled {
            global, processes, ..
        } => format!("#{global} killed {processes} leftover process(es)"),
        Event::EmptyRetry {
            global,
            retry,
            max_retries,
            ..
        } => format!("#{global} empty output, retry {retry}/{max_retries}"),
        Event::RateLimited {
            global,
            backoff_secs,
            resets_at,
            ..
        } => {
            let mut text = format!("#{global} rate limited, next in {}", secs(*backoff_secs));
            if let Some(at) = resets_at {
                text.push_str(&format!(" (resets {})", fmt::clock_short(*at)));
            }
            text
        }
        Event::TransientError {
            global,
            backoff_secs,
            ..
        } => format!("#{global} server error, next in {}", secs(*backoff_secs)),
        Event::HookFailed {
            kind,
            exit_code,
            timed_out,
            command,
            ..
        } => {
            let how = match (timed_out, exit_code) {
                (true, _) => "timed out".to_string(),
                (false, Some(code)) => format!("exit {code}"),
                (false, None) => "killed".to_string(),
            };
            let kind = match kind {
                crate::protocol::HookKind::PreSession => "pre-session",
                crate::protocol::HookKind::PostSession => "post-session",
            };
            format!("{kind} hook failed ({how}): {command}")
        }
        Event::IterationSkipped { iteration, reason } => {
            format!("iteration {iteration} skipped: {reason}")
        }
        Event::SessionComplete { .. } => session_complete(event).remove(0),
        Event::BudgetExceeded {
            budget,
            limit,
            value,
            ..
        } => format!("over budget: {}", budget.describe(*limit, *value)),
        Event::DoomLoop {
            global,
            tool,
            repeats,
            action,
            ..
        } => format!("#{global} same {tool} call ×{repeats}: {}", action.as_str()),
        Event::Overage { global, count, .. } => {
            format!("#{global} past a rate limit on overage ×{count}")
        }
        Event::UnrecognisedOutputFormat { global, .. } => {
            format!("#{global} output format not recognised: nothing counted")
        }
        Event::DoomLoopGate {
            global, approved, ..
        } => format!(
            "#{global} doom loop {}",
            if *approved { "allowed on" } else { "rejected" }
        ),
        Event::DiskFull { dir, free_bytes } => format!(
            "disk full: {} free in {}",
            fmt::bytes(*free_bytes),
            dir.display()
        ),
        Event::DiskSpaceRestored { waited_secs } => {
            format!("disk space back after {}", secs(*waited_secs))
        }
        Event::HandoffInvalid { file, .. } => format!("handoff unusable: {}", file.display()),
        Event::AgentError { global, reason, .. } => format!("#{global} agent error: {reason}"),
        Event::Paused { global } => format!("#{global} paused"),
        Event::Resumed {
            global,
            paused_secs,
            ..
        } => format!("#{global} resumed after {}", secs(*paused_secs)),
        Event::StopRequested { source } => format!("stop requested ({source})"),
        Event::StopCancelled => "stop cancelled".to_string(),
        Event::SessionGate {
            iteration,
            approved,
            reason,
        } => format!(
            "iteration {iteration} {}: {reason}",
            if *approved {
                "approved"
            } else {
                "rejected, held"
            }
        ),
        Event::LoopResumed => "loop resumed".to_string(),
        Event::LoopEnd {
            reason,
            iterations,
            counters,
            ..
        } => {
            let status = LaneStatus::ended_with(reason, counters);
            format!(
                "loop ended {} {}: {} after {iterations} iterations",
                status.glyph(),
                status.word(),
                reason.label()
            )
        }
        Event::LeakedPid {
            global,
            pid,
            command,
            killed,
        } => format!(
            "#{global} {} escaped process {pid} ({command})",
            if *killed { "killed" } else { "could not kill" }
        ),
        Event::NoteQueued { text, why, .. } => {
            let text = crate::store::notes::one_line(text);
            match why {
                Some(why) => format!("note queued: \"{text}\": left for the next session ({why})"),
                None => format!("note queued: \"{text}\""),
            }
        }
        Event::Asked { action, by } => format!("{action} asked by {}", crate::escape::one_line(by)),
        Event::NoteDelivered {
            global, text, how, ..
        } => {
            let text = crate::store::notes::one_line(text);
            match how {
                NoteHow::Prompt => format!("#{global} took your note: \"{text}\""),
                NoteHow::Now => format!(
                    "#{global} took your note: {}: \"{text}\"",
                    crate::store::notes::TOLD_NOW
                ),
            }
        }
    }
}

/// `#2 done in 3m 4s, exit 0, committed, $0.04`, then shorter.
fn session_complete(event: &Event) -> Vec<String> {
    let Event::SessionComplete {
        global,
        exit_code,
        duration_secs,
        committed,
        rate_limited,
        transient_error,
        productive,
        cost_usd,
        ..
    } = event
    else {
        return vec![String::new()];
    };
    let outcome = if *committed {
        ", committed"
    } else if *rate_limited {
        ", rate limited"
    } else if *transient_error {
        ", server error"
    } else if !productive {
        ", not productive"
    } else {
        ""
    };
    let took = secs(*duration_secs);
    let mut wordings = Vec::new();
    if let Some(cost) = cost_usd {
        wordings.push(format!(
            "#{global} done in {took}, exit {exit_code}{outcome}, ${cost:.2}"
        ));
    }
    wordings.push(format!(
        "#{global} done in {took}, exit {exit_code}{outcome}"
    ));
    wordings.push(format!("#{global} exit {exit_code}{outcome}"));
    wordings.push(format!("#{global} exit {exit_code}"));
    wordings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_line(line: &str) -> Vec<String> {
        let base = |plan: &str| (plan == "dia").then(|| "main".to_string());
        plan_wordings(line, base).expect("a plan line")
    }

    #[test]
    fn plan_events_read_as_sentences() {
        for (line, wordings) in [
            ("plan=dia event=plan_started", vec!["plan dia started"]),
            (
                "plan=dia event=step_ready step=a approved",
                vec!["step a ready (approved)", "step a ready"],
            ),
            ("plan=dia event=step_ready step=b", vec!["step b ready"]),
            ("plan=dia event=step_started step=b", vec!["step b started"]),
            (
                "plan=dia event=merge_passed step=b",
                vec!["step b merged into main"],
            ),
            (
                "plan=other event=merge_passed step=b merged by hand",
                vec!["step b merged (merged by hand)", "step b merged"],
            ),
            (
                "plan=dia event=merge_check_failed step=c the verify check failed on the merged result:\\ntail",
                vec![
                    "step c not merged: the verify check failed on the merged result:",
                    "step c not merged",
                ],
            ),
            (
                "plan=dia event=step_failed step=c exit 1 in each of 2 sessions",
                vec![
                    "step c failed: exit 1 in each of 2 sessions",
                    "step c failed",
                ],
            ),
            (
                "plan=dia event=plan_done completed",
                vec!["plan dia completed", "plan dia ended"],
            ),
            (
                "plan=dia step=y rejected: no",
                vec!["step y rejected: no", "step y"],
            ),
        ] {
            assert_eq!(plan_line(line), wordings, "{line}");
        }
        assert_eq!(plan_wordings("request r1 approved", |_| None), None);
    }

    #[test]
    fn a_rate_limit_reads_in_a_few_words() {
        let resets = DateTime::from_timestamp(1_800_000_000, 0).expect("valid time");
        let event = Event::RateLimited {
            iteration: 2,
            global: 2,
            reason: "429".into(),
            consecutive: 1,
            backoff_secs: 3.0,
            resets_at: Some(resets),
        };
        assert_eq!(
            summaries(&event),
            [
                format!(
                    "#2 rate limited, next in 3s (resets {})",
                    resets.format("%H:%M")
                ),
                "#2 rate limited, next in 3s".to_string(),
                "#2 rate limited".to_string(),
            ]
        );
        assert!(record(resets, &event).contains("\"backoff_secs\": 3.0"));
    }

    #[test]
    fn status_lines_give_way_to_their_events() {
        assert!(repeats_an_event(
            "iteration=2 global=2 status=rate_limited_backoff consecutive=1/5"
        ));
        assert!(repeats_an_event(
            "iteration=3 status=held: the session was rejected"
        ));
        assert!(!repeats_an_event(
            "iteration=3 status=awaiting_approval: the session waits for a human"
        ));
        assert_eq!(
            log_summary("iteration=3 global=7 empty after 2 retries, moving on"),
            "#7 empty after 2 retries, moving on"
        );
        assert_eq!(log_summary("request r1 approved"), "request r1 approved");
    }
}

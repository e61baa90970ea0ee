//! The one vocabulary for a loop's state, as people read it: one word and one
//! glyph per state, used alike by the control room's header and Lanes rows,
//! `clowder lanes` (and its JSON `state`), `clowder --status` and the events.
//! The raw [`LoopState`] stays what `harness.status` records.

use chrono::{DateTime, Utc};

use crate::protocol::{Counters, Ending, ExitReason, LoopState, Snapshot};

/// A loop's state in the one vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneStatus {
    /// A session runs, or the loop is between sessions on its own.
    Running,
    /// Waits for a human: a request in the approvals inbox, or a session
    /// that waits for approval before it starts.
    WaitingForYou,
    /// A retry delay or a rate-limit backoff, until then.
    Backoff {
        until: Option<DateTime<Utc>>,
    },
    /// A human rejected a session (or the disk is full): it waits to be resumed.
    Held,
    Paused,
    /// Waits for a session slot (`[fleet] max_parallel`), or has not started yet.
    Queued,
    /// No loop has run for it yet (outside a running fleet).
    NotStarted,
    /// Its sessions ran out or its task was completed.
    Done,
    /// An error ended it, or its agent exited non-zero in every session.
    Failed,
    /// A person, a STOP file or a signal stopped it, or its clowder is gone.
    Stopped,
    /// Its status file cannot be read.
    Unknown,
}

/// What, besides its last snapshot, decides a loop's state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    /// How it ended in this run, if it has (`Err`: it could not start).
    pub ended: Option<Result<&'a ExitReason, ()>>,
    /// It waits for a session slot.
    pub queued: bool,
    /// Its requests in the approvals inbox.
    pub pending: usize,
    /// The user asked for it to be paused.
    pub paused: bool,
}

impl LaneStatus {
    /// A human should look at it.
    pub fn needs_you(self) -> bool {
        matches!(
            self,
            LaneStatus::WaitingForYou | LaneStatus::Held | LaneStatus::Failed
        )
    }

    pub fn glyph(self) -> &'static str {
        match self {
            LaneStatus::Running => "●",
            LaneStatus::WaitingForYou => "?",
            LaneStatus::Backoff { .. } => "◔",
            LaneStatus::Held => "!",
            LaneStatus::Paused => "‖",
            LaneStatus::Queued => "…",
            LaneStatus::NotStarted => "○",
            LaneStatus::Done => "✓",
            LaneStatus::Failed => "✗",
            LaneStatus::Stopped => "■",
            LaneStatus::Unknown => "·",
        }
    }

    /// The state's word: the same on the screen, in `lanes --json` and `--status`.
    pub fn word(self) -> &'static str {
        match self {
            LaneStatus::Running => "running",
            LaneStatus::WaitingForYou => "waiting",
            LaneStatus::Backoff { .. } => "backing off",
            LaneStatus::Held => "held",
            LaneStatus::Paused => "paused",
            LaneStatus::Queued => "queued",
            LaneStatus::NotStarted => "not started",
            LaneStatus::Done => "done",
            LaneStatus::Failed => "failed",
            LaneStatus::Stopped => "stopped",
            LaneStatus::Unknown => "unknown",
        }
    }

    /// `✗ failed (exit 1)`, `◔ backing off 14:05`: glyph, word, and the one
    /// fact that belongs to the state, if any, short enough for a row.
    pub fn label(self, snapshot: Option<&Snapshot>) -> String {
        let head = format!("{} {}", self.glyph(), self.word());
        match (self, self.detail(snapshot)) {
            (LaneStatus::Backoff { until: Some(at) }, _) => {
                format!("{head} {}", crate::fmt::clock_short(at))
            }
            (_, Some(detail)) => format!("{head} ({detail})"),
            (_, None) => head,
        }
    }

    /// The exit code of a failed loop's agent; the end of a backoff.
    pub fn detail(self, snapshot: Option<&Snapshot>) -> Option<String> {
        match self {
            LaneStatus::Failed => snapshot
                .and_then(|s| s.last_exit_code)
                .filter(|code| *code != 0)
                .map(|code| format!("exit {code}")),
            LaneStatus::Backoff { until: Some(at) } => {
                Some(format!("until {}", crate::fmt::clock_short(at)))
            }
            _ => None,
        }
    }

    /// Its loop has ended (done, failed, stopped) or never ran.
    pub fn is_over(self) -> bool {
        matches!(
            self,
            LaneStatus::Done
                | LaneStatus::Failed
                | LaneStatus::Stopped
                | LaneStatus::NotStarted
                | LaneStatus::Unknown
        )
    }

    /// How a loop that stopped for `reason` ended, its last status being `snapshot`.
    pub fn ended(reason: Option<&ExitReason>, snapshot: Option<&Snapshot>) -> LaneStatus {
        from_ending(Ending::of(reason, snapshot))
    }

    /// As [`LaneStatus::ended`], from an event's counters (`loop_end`).
    pub fn ended_with(reason: &ExitReason, counters: &Counters) -> LaneStatus {
        match reason {
            ExitReason::MaxIterations if counters.none_succeeded() => LaneStatus::Failed,
            _ => LaneStatus::ended(Some(reason), None),
        }
    }

    /// A loop's state from its last snapshot (if any) and `facts`.
    pub fn of(snapshot: Option<&Snapshot>, facts: Facts<'_>) -> LaneStatus {
        if facts.pending > 0 {
            return LaneStatus::WaitingForYou;
        }
        match facts.ended {
            Some(Ok(reason)) => return LaneStatus::ended(Some(reason), snapshot),
            Some(Err(())) => return LaneStatus::Failed,
            None => {}
        }
        let Some(snapshot) = snapshot else {
            return if facts.paused {
                LaneStatus::Paused
            } else {
                LaneStatus::Queued
            };
        };
        match snapshot.state {
            LoopState::Held | LoopState::DiskFull => LaneStatus::Held,
            LoopState::AwaitingApproval => LaneStatus::WaitingForYou,
            LoopState::Stopped => LaneStatus::ended(snapshot.exit_reason.as_ref(), Some(snapshot)),
            _ if snapshot.paused || facts.paused => LaneStatus::Paused,
            _ if facts.queued => LaneStatus::Queued,
            LoopState::RateLimitedBackoff | LoopState::ErrorBackoff | LoopState::Retrying => {
                LaneStatus::Backoff {
                    until: snapshot.rate_limit_resets_at.or(snapshot.next_session_at),
                }
            }
            _ => LaneStatus::Running,
        }
    }

    /// From a status file read outside the loop: `alive` says whether the
    /// clowder that wrote it still runs (a dead one's loop is stopped,
    /// whatever it last wrote).
    pub fn of_status_file(snapshot: &Snapshot, alive: bool, facts: Facts<'_>) -> LaneStatus {
        if !alive && snapshot.state != LoopState::Stopped {
            return LaneStatus::Stopped;
        }
        if !alive {
            return LaneStatus::ended(snapshot.exit_reason.as_ref(), Some(snapshot));
        }
        LaneStatus::of(Some(snapshot), facts)
    }
}

fn from_ending(ending: Ending) -> LaneStatus {
    match ending {
        Ending::Done => LaneStatus::Done,
        Ending::Failed => LaneStatus::Failed,
        Ending::Stopped => LaneStatus::Stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(state: LoopState) -> Snapshot {
        let mut s = Snapshot::starting(1, "agent".into(), DateTime::<Utc>::UNIX_EPOCH);
        s.state = state;
        s
    }

    #[test]
    fn every_state_has_its_own_word_and_glyph() {
        let all = [
            LaneStatus::Running,
            LaneStatus::WaitingForYou,
            LaneStatus::Backoff { until: None },
            LaneStatus::Held,
            LaneStatus::Paused,
            LaneStatus::Queued,
            LaneStatus::NotStarted,
            LaneStatus::Done,
            LaneStatus::Failed,
            LaneStatus::Stopped,
            LaneStatus::Unknown,
        ];
        let words: std::collections::HashSet<_> = all.iter().map(|s| s.word()).collect();
        let glyphs: std::collections::HashSet<_> = all.iter().map(|s| s.glyph()).collect();
        assert_eq!(words.len(), all.len());
        assert_eq!(glyphs.len(), all.len());
    }

    #[test]
    fn a_queued_loop_is_queued_even_while_its_status_says_a_session_runs() {
        let s = snapshot(LoopState::SessionRunning);
        let facts = Facts {
            queued: true,
            ..Facts::default()
        };
        assert_eq!(LaneStatus::of(Some(&s), facts), LaneStatus::Queued);
    }

    #[test]
    fn a_loop_whose_clowder_is_gone_is_stopped() {
        let s = snapshot(LoopState::SessionRunning);
        let status = LaneStatus::of_status_file(&s, false, Facts::default());
        assert_eq!(status, LaneStatus::Stopped);
    }

    #[test]
    fn a_failed_loop_says_its_exit_code() {
        let mut s = snapshot(LoopState::Stopped);
        s.exit_reason = Some(ExitReason::MaxIterations);
        s.counters.sessions = 2;
        s.counters.failed_exits = 2;
        s.last_exit_code = Some(3);
        let status = LaneStatus::of(Some(&s), Facts::default());
        assert_eq!(status.label(Some(&s)), "✗ failed (exit 3)");
        let ended = LaneStatus::ended_with(&ExitReason::MaxIterations, &s.counters);
        assert_eq!(ended, LaneStatus::Failed);
    }
}

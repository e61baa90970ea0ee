//! Calling a human, on the host: which changes need one ([`detect`], pure),
//! what the host sees of its lanes and loop ([`watch`]), the `[ui]
//! on_attention` command it runs for each call ([`command`]) and the `[ui]
//! notify_url` it POSTs each call to ([`notify`]). The host calls whether a
//! control room is attached or not; a room only rings its terminal.

mod command;
mod notify;
mod watch;

use std::collections::BTreeMap;

use crate::lane_status::{Facts, LaneStatus};
use crate::protocol::{ExitReason, LoopState, Snapshot};

pub use command::COMMAND_TIMEOUT;
pub use notify::Say;
pub use watch::{Attention, watch_host, watch_loop};

/// Says the watcher's lines on the console, as a headless run says its own.
pub fn console_say(verbosity: crate::console::Verbosity) -> Say {
    use crate::supervisor::runtime::Reporter;
    std::sync::Arc::new(move |level, text: &str| {
        crate::console::Console::new(verbosity).log(chrono::Utc::now(), level, text);
    })
}

/// Says the watcher's lines nowhere but in the diagnostics (`CLOWDER_LOG`).
pub fn unsaid() -> Say {
    std::sync::Arc::new(|_, _: &str| {})
}

/// What matters of a lane's state for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionState {
    Held,
    Failed,
    Done,
    Other,
}

impl AttentionState {
    /// A lane's state as its snapshot tells it (`state`, `exit_reason`): held;
    /// or, once stopped, done when it ended well (exit code 0) and failed
    /// otherwise. Stopped by a signal or a closed terminal, someone stopped it:
    /// no call (a Ctrl-C on a headless fleet calls nobody).
    pub fn of(state: LoopState, exit_reason: Option<&ExitReason>) -> AttentionState {
        match (state, exit_reason) {
            (LoopState::Held, _) => AttentionState::Held,
            (LoopState::Stopped, Some(ExitReason::Signal { .. } | ExitReason::TerminalClosed)) => {
                AttentionState::Other
            }
            (LoopState::Stopped, Some(reason)) if reason.exit_code() == 0 => AttentionState::Done,
            (LoopState::Stopped, Some(_)) => AttentionState::Failed,
            _ => AttentionState::Other,
        }
    }
}

/// A pending approval request, as attention needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRequest {
    /// The lane that asked; None for a single loop (or a producer outside lanes).
    pub lane: Option<String>,
    pub title: String,
}

/// What was seen at one moment: each lane's state, by name, and the
/// pending requests, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    pub lanes: BTreeMap<String, AttentionState>,
    pub pending: BTreeMap<String, PendingRequest>,
}

/// Why a human is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    ApprovalRequested,
    LaneHeld,
    LaneFailed,
    LaneDone,
}

impl EventKind {
    /// The name given to `on_attention` as `CLOWDER_EVENT`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::LaneHeld => "lane_held",
            EventKind::LaneFailed => "lane_failed",
            EventKind::LaneDone => "lane_done",
        }
    }
}

/// One call for attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionEvent {
    /// The lane it is about; "" when there is none.
    pub lane: String,
    pub event: EventKind,
    /// One line for a human (made safe for the terminal only when written).
    pub text: String,
}

/// The calls for attention between two observations. With no previous one (at
/// start-up) lanes already held, failed or done are not announced, but pending
/// requests are, once. A lane seen for the first time is not announced either:
/// what counts is a lane *becoming* held, failed or done.
pub fn detect(previous: Option<&Observation>, current: &Observation) -> Vec<AttentionEvent> {
    let mut events: Vec<AttentionEvent> = current
        .pending
        .iter()
        .filter(|(id, _)| previous.is_none_or(|p| !p.pending.contains_key(*id)))
        .map(|(_, request)| approval_event(request))
        .collect();
    let Some(previous) = previous else {
        return events;
    };
    for (lane, state) in &current.lanes {
        if let Some(event) = lane_event(lane, previous.lanes.get(lane).copied(), *state) {
            events.push(event);
        }
    }
    events
}

/// The call for lane `lane` whose state went from `before` (`None`: not seen
/// yet) to `now`, if that needs a human: becoming held, failed or done.
pub fn lane_event(
    lane: &str,
    before: Option<AttentionState>,
    now: AttentionState,
) -> Option<AttentionEvent> {
    if before.is_none_or(|before| before == now) {
        return None;
    }
    let (event, word) = match now {
        AttentionState::Held => (EventKind::LaneHeld, "held"),
        AttentionState::Failed => (EventKind::LaneFailed, "failed"),
        AttentionState::Done => (EventKind::LaneDone, "done"),
        AttentionState::Other => return None,
    };
    Some(AttentionEvent {
        lane: lane.to_string(),
        event,
        text: format!("lane {lane} is {word}"),
    })
}

fn approval_event(request: &PendingRequest) -> AttentionEvent {
    let lane = request.lane.clone().unwrap_or_default();
    let text = if lane.is_empty() {
        format!("approval requested: {}", request.title)
    } else {
        format!("{lane}: approval requested: {}", request.title)
    };
    AttentionEvent {
        lane,
        event: EventKind::ApprovalRequested,
        text,
    }
}

/// A lane's attention state from how its loop ended in this run, or else its
/// last snapshot; `None` before either (then its first state, even done from
/// an earlier run, is its first sight, not a change).
pub fn lane_state(
    snapshot: Option<&Snapshot>,
    ended: Option<&Result<ExitReason, String>>,
) -> Option<AttentionState> {
    let facts = Facts {
        ended: ended.map(|e| e.as_ref().map_err(|_| ())),
        ..Default::default()
    };
    // Failed as its row says, though its exit code may be 0 (an agent that
    // exited non-zero in every session ends the loop with max_iterations).
    if (snapshot.is_some() || ended.is_some())
        && LaneStatus::of(snapshot, facts) == LaneStatus::Failed
    {
        return Some(AttentionState::Failed);
    }
    Some(match (ended, snapshot) {
        (Some(Ok(reason)), _) => AttentionState::of(LoopState::Stopped, Some(reason)),
        (Some(Err(_)), _) => AttentionState::Failed,
        (None, Some(snapshot)) => AttentionState::of(snapshot.state, snapshot.exit_reason.as_ref()),
        (None, None) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(lanes: &[(&str, AttentionState)], pending: &[(&str, &str)]) -> Observation {
        Observation {
            lanes: lanes.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            pending: pending
                .iter()
                .map(|(id, lane)| {
                    let request = PendingRequest {
                        lane: (!lane.is_empty()).then(|| lane.to_string()),
                        title: format!("Bash: run {id}"),
                    };
                    (id.to_string(), request)
                })
                .collect(),
        }
    }

    #[test]
    fn a_snapshot_tells_held_done_and_failed() {
        let of = AttentionState::of;
        assert_eq!(of(LoopState::SessionRunning, None), Other);
        assert_eq!(of(LoopState::AwaitingApproval, None), Other);
        assert_eq!(of(LoopState::Held, None), Held);
        assert_eq!(
            of(LoopState::Stopped, Some(&ExitReason::MaxIterations)),
            Done
        );
        let fatal = ExitReason::Fatal {
            message: "boom".into(),
        };
        assert_eq!(of(LoopState::Stopped, Some(&fatal)), Failed);
        let signal = ExitReason::Signal {
            signal: "SIGINT".into(),
            forced: false,
        };
        assert_eq!(of(LoopState::Stopped, Some(&signal)), Other);
        assert_eq!(
            of(LoopState::Stopped, Some(&ExitReason::TerminalClosed)),
            Other
        );
    }

    fn kinds(events: &[AttentionEvent]) -> Vec<(String, &'static str)> {
        events
            .iter()
            .map(|e| (e.lane.clone(), e.event.as_str()))
            .collect()
    }

    use AttentionState::*;

    #[test]
    fn start_up_announces_pending_requests_but_not_lanes() {
        let now = observation(
            &[("a", Held), ("b", Done), ("c", Failed), ("d", Other)],
            &[("r1", "a"), ("r2", "")],
        );
        let events = detect(None, &now);
        assert_eq!(
            kinds(&events),
            vec![
                ("a".into(), "approval_requested"),
                ("".into(), "approval_requested")
            ]
        );
        assert_eq!(events[0].text, "a: approval requested: Bash: run r1");
        assert_eq!(events[1].text, "approval requested: Bash: run r2");
        // The next look announces them no more.
        assert!(detect(Some(&now), &now).is_empty());
    }

    #[test]
    fn each_new_request_is_announced_once() {
        let before = observation(&[("a", Other)], &[("r1", "a")]);
        let after = observation(&[("a", Other)], &[("r1", "a"), ("r2", "a")]);
        assert_eq!(
            kinds(&detect(Some(&before), &after)),
            vec![("a".into(), "approval_requested")]
        );
        // A request decided (gone) calls nobody.
        let decided = observation(&[("a", Other)], &[("r2", "a")]);
        assert!(detect(Some(&after), &decided).is_empty());
    }

    #[test]
    fn a_lane_becoming_held_failed_or_done_is_announced() {
        for (state, name) in [
            (Held, "lane_held"),
            (Failed, "lane_failed"),
            (Done, "lane_done"),
        ] {
            let before = observation(&[("a", Other), ("b", Other)], &[]);
            let after = observation(&[("a", state), ("b", Other)], &[]);
            let events = detect(Some(&before), &after);
            assert_eq!(kinds(&events), vec![("a".into(), name)], "{state:?}");
            assert!(events[0].text.starts_with("lane a is "), "{events:?}");
        }
    }

    #[test]
    fn moving_between_attention_states_is_announced_but_staying_is_not() {
        let held = observation(&[("a", Held)], &[]);
        let failed = observation(&[("a", Failed)], &[]);
        assert_eq!(
            kinds(&detect(Some(&held), &failed)),
            vec![("a".into(), "lane_failed")]
        );
        assert!(detect(Some(&failed), &failed).is_empty());
        // Going back to work needs no human.
        let running = observation(&[("a", Other)], &[]);
        assert!(detect(Some(&held), &running).is_empty());
        // And held again after that is a new call.
        assert_eq!(
            kinds(&detect(Some(&running), &held)),
            vec![("a".into(), "lane_held")]
        );
    }

    #[test]
    fn a_lane_seen_for_the_first_time_is_not_announced() {
        let before = observation(&[("a", Other)], &[]);
        let after = observation(&[("a", Other), ("new", Done)], &[]);
        assert!(detect(Some(&before), &after).is_empty());
    }
}

//! What attention looks at in the control room's state: each lane's state and
//! the pending requests, as an [`Observation`] for [`crate::fleet::attention::detect`].

use super::AppState;
use crate::fleet::attention::{AttentionEvent, AttentionState, Observation, PendingRequest};

/// The state's observation: the pending requests, and a single loop as one
/// lane named `loop_name` (the folder's name). A fleet's lanes are not in it:
/// their calls are found as their news comes ([`take_lane_calls`]), so that
/// looking costs what changed, not what there is.
pub fn observe(state: &AppState, loop_name: &str) -> Observation {
    let lanes = match &state.fleet {
        Some(_) => Default::default(),
        None => {
            let ended = state.finished.clone().map(Ok);
            let attention =
                crate::fleet::attention::lane_state(Some(&state.snapshot), ended.as_ref())
                    .unwrap_or(AttentionState::Other);
            [(loop_name.to_string(), attention)].into()
        }
    };
    let pending = state
        .approvals
        .iter()
        .map(|request| {
            let pending = PendingRequest {
                lane: request.lane.clone(),
                title: request.title.clone(),
            };
            (request.id.clone(), pending)
        })
        .collect();
    Observation { lanes, pending }
}

/// The fleet's lanes that became held, failed or done since last taken.
pub fn take_lane_calls(state: &mut AppState) -> Vec<AttentionEvent> {
    state
        .fleet
        .as_mut()
        .map(|fleet| std::mem::take(&mut fleet.calls))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{DateTime, Utc};

    use super::*;
    use crate::approvals::{Request, RequestKind};
    use crate::fleet::LaneName;
    use crate::fleet::attention::{EventKind, detect};
    use crate::fleet::link::{HostMsg, LaneEntry, LaneReport};
    use crate::fleet::registry::{LaneKind, LaneState};
    use crate::protocol::{ExitReason, LoopState};
    use crate::ui::app::lanes::placeholder;
    use crate::ui::app::{Msg, update};

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).expect("valid time")
    }

    fn lanes(names: &[&str]) -> Msg {
        let entries = names
            .iter()
            .map(|name| LaneEntry {
                name: LaneName::parse(name).expect("a valid name"),
                requested: LaneState::Active,
                max_iterations: Some(2),
                kind: LaneKind::Worktree,
                base: Some("main".into()),
            })
            .collect();
        Msg::Host(HostMsg::Lanes(entries))
    }

    fn report(lane: &str, report: LaneReport) -> Msg {
        let lane = LaneName::parse(lane).expect("a valid name");
        Msg::Host(HostMsg::Lane { lane, report })
    }

    fn snapshot(lane: &str, state: LoopState) -> Msg {
        let mut snapshot = placeholder(lane, Some(2));
        snapshot.state = state;
        let snapshot = Arc::new(snapshot);
        report(
            lane,
            LaneReport::Snapshot {
                snapshot,
                queued: false,
            },
        )
    }

    fn request(id: &str, lane: &str) -> Request {
        Request {
            id: id.into(),
            created: t0(),
            kind: RequestKind::Ask,
            title: "deploy?".into(),
            tool_name: None,
            tool_input: None,
            session_id: None,
            cwd: None,
            body: None,
            lane: Some(lane.into()),
            abandoned: false,
        }
    }

    /// A fleet's lanes are called for as their news comes: a lane that ends
    /// well is done, a held one held, a failed start failed, each once; a
    /// lane's first state is no call. Its requests are observed, naming it.
    #[test]
    fn a_fleets_lanes_are_called_for_as_they_change_and_requests_observed() {
        let mut state = AppState::for_fleet(true);
        update(&mut state, lanes(&["auth", "docs", "api"]), t0());
        for lane in ["auth", "docs", "api"] {
            update(&mut state, snapshot(lane, LoopState::SessionRunning), t0());
        }
        assert!(take_lane_calls(&mut state).is_empty());
        let before = observe(&state, "ignored");
        assert!(before.lanes.is_empty());
        assert!(before.pending.is_empty());

        update(&mut state, snapshot("docs", LoopState::Held), t0());
        let ended = LaneReport::Ended(Ok(ExitReason::MaxIterations));
        update(&mut state, report("auth", ended), t0());
        let failed = LaneReport::Ended(Err("the lane's folder is missing".into()));
        update(&mut state, report("api", failed), t0());
        // Held again is no news.
        update(&mut state, snapshot("docs", LoopState::Held), t0());
        let pending = vec![request("r1", "docs")];
        let inbox = Msg::Approvals {
            dir_exists: true,
            pending,
        };
        update(&mut state, inbox, t0());
        let after = observe(&state, "ignored");
        assert_eq!(after.pending["r1"].lane.as_deref(), Some("docs"));

        let calls: Vec<(String, EventKind)> = take_lane_calls(&mut state)
            .into_iter()
            .map(|e| (e.lane, e.event))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("docs".to_string(), EventKind::LaneHeld),
                ("auth".to_string(), EventKind::LaneDone),
                ("api".to_string(), EventKind::LaneFailed),
            ]
        );
        assert!(take_lane_calls(&mut state).is_empty());
        let requests: Vec<EventKind> = detect(Some(&before), &after)
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(requests, vec![EventKind::ApprovalRequested]);
        assert!(detect(Some(&after), &observe(&state, "x")).is_empty());
    }

    /// A lane whose agent exited non-zero in every session calls for attention
    /// as failed, as its row says, not as done.
    #[test]
    fn a_lane_that_failed_every_session_is_called_for_as_failed() {
        let mut state = AppState::for_fleet(true);
        update(&mut state, lanes(&["flaky"]), t0());
        update(
            &mut state,
            snapshot("flaky", LoopState::SessionRunning),
            t0(),
        );
        let mut failing = placeholder("flaky", Some(2));
        failing.state = LoopState::Stopped;
        failing.counters.sessions = 2;
        failing.counters.failed_exits = 2;
        failing.last_exit_code = Some(1);
        let snapshot = LaneReport::Snapshot {
            snapshot: Arc::new(failing),
            queued: false,
        };
        update(&mut state, report("flaky", snapshot), t0());
        let ended = LaneReport::Ended(Ok(ExitReason::MaxIterations));
        update(&mut state, report("flaky", ended), t0());
        let calls = take_lane_calls(&mut state);
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].event, EventKind::LaneFailed);
    }

    /// A single loop is one lane named after its folder; it is done once finished well.
    #[test]
    fn a_single_loop_is_one_lane_named_after_its_folder() {
        let mut state = AppState::new(Arc::new(placeholder("loop", Some(2))), true);
        let running = observe(&state, "project");
        assert_eq!(running.lanes["project"], AttentionState::Other);
        update(&mut state, Msg::Finished(ExitReason::Completed), t0());
        let done = observe(&state, "project");
        assert_eq!(done.lanes["project"], AttentionState::Done);
        let events = detect(Some(&running), &done);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event, EventKind::LaneDone);
    }
}

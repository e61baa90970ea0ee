//! The control room's header with lanes, drawn into a `TestBackend`: it
//! describes the selected lane's current session in the words of its row, or
//! says there is none; never a finished session's PID, never running while the
//! row says queued.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use clowder::fleet::LaneName;
use clowder::fleet::link::{HostMsg, LaneEntry, LaneReport};
use clowder::fleet::registry::{LaneKind, LaneState};
use clowder::protocol::{ExitReason, LoopState, Snapshot};
use clowder::ui::app::lanes::placeholder;
use clowder::ui::app::{AppState, Msg, update};
use clowder::ui::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_600, 0).expect("valid time")
}

/// A lane's snapshot whose session (agent PID 5151) is running.
fn running(lane: &str) -> Snapshot {
    let mut snapshot = placeholder(lane, Some(10));
    snapshot.state = LoopState::SessionRunning;
    snapshot.pid = 4242;
    snapshot.agent_command = "claude".into();
    snapshot.iteration = 2;
    snapshot.loop_start = now() - Duration::minutes(10);
    snapshot.last_update = now() - Duration::minutes(1);
    snapshot.pgid = Some(5151);
    snapshot.agent_pid = Some(5151);
    snapshot.session_start = Some(now() - Duration::minutes(3));
    snapshot
}

/// One lane, `solo`, selected, that last reported `snapshot`.
fn room(snapshot: Snapshot, queued: bool) -> AppState {
    let mut state = AppState::for_fleet(false);
    let entry = LaneEntry {
        name: LaneName::parse("solo").expect("a valid name"),
        requested: LaneState::Active,
        max_iterations: Some(10),
        kind: LaneKind::Worktree,
        base: Some("main".into()),
    };
    update(&mut state, Msg::Host(HostMsg::Lanes(vec![entry])), now());
    report(
        &mut state,
        LaneReport::Snapshot {
            snapshot: Arc::new(snapshot),
            queued,
        },
    );
    state
}

fn report(state: &mut AppState, report: LaneReport) {
    let lane = LaneName::parse("solo").expect("a valid name");
    update(state, Msg::Host(HostMsg::Lane { lane, report }), now());
}

/// The header's two lines and the Lanes pane's row of `solo`.
fn header_and_row(state: &AppState) -> (String, String) {
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).expect("test terminal");
    terminal
        .draw(|frame| view::draw(state, frame, now()))
        .expect("draw");
    let screen = format!("{}", terminal.backend());
    let lines: Vec<&str> = screen.lines().collect();
    let row = lines
        .iter()
        .find(|l| l.contains(" solo "))
        .map_or_else(String::new, |l| l.to_string());
    (lines[..2].join("\n"), row)
}

#[test]
fn a_queued_lane_is_queued_in_the_header_too_with_no_session_process() {
    let (header, row) = header_and_row(&room(running("solo"), true));
    assert!(row.contains("… queued"), "{row}");
    assert!(header.contains("… queued"), "{header}");
    assert!(!header.contains("running"), "{header}");
    assert!(!header.contains("PID 5151"), "{header}");
    assert!(header.contains("no session process"), "{header}");
}

#[test]
fn a_done_lane_shows_no_pid_of_its_last_process() {
    let mut last = running("solo");
    last.state = LoopState::Stopped;
    last.exit_reason = Some(ExitReason::MaxIterations);
    let mut state = room(last, false);
    report(&mut state, LaneReport::Ended(Ok(ExitReason::MaxIterations)));
    let (header, row) = header_and_row(&state);
    assert!(row.contains("✓ done"), "{row}");
    assert!(header.contains("✓ done: max_iterations"), "{header}");
    assert!(!header.contains("PID 5151"), "{header}");
    assert!(!header.contains("clowder PID"), "{header}");
    assert!(header.contains("no session process"), "{header}");
}

#[test]
fn a_running_lane_shows_its_session_and_its_clowder() {
    let (header, row) = header_and_row(&room(running("solo"), false));
    assert!(row.contains("● running"), "{row}");
    assert!(header.contains("lane solo  ● running"), "{header}");
    assert!(header.contains("PID 5151 · PGID 5151"), "{header}");
    assert!(header.contains("clowder PID 4242"), "{header}");
}

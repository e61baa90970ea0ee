//! The control room over a fleet drawn into a `TestBackend` and compared with
//! insta snapshots: the Lanes pane (those that need you first), the selected
//! lane's panes, the inbox with each request's lane, and a lane's diff.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use clowder::agent::stream::{LineKind, Rendered, SessionStats};
use clowder::approvals::{Request, RequestKind};
use clowder::fleet::LaneName;
use clowder::fleet::link::{HostMsg, LaneEntry, LaneReport};
use clowder::fleet::registry::{LaneKind, LaneState};
use clowder::protocol::{ExitReason, LoopState, Snapshot};
use clowder::ui::app::lanes::placeholder;
use clowder::ui::app::{AppState, Msg, update};
use clowder::ui::view;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("valid time")
}

fn now() -> DateTime<Utc> {
    t0() + Duration::minutes(10)
}

fn name(text: &str) -> LaneName {
    LaneName::parse(text).expect("a valid lane name")
}

fn snapshot(lane: &str, state: LoopState, iteration: u64, cost: f64) -> Snapshot {
    let mut snapshot = placeholder(lane, Some(10));
    snapshot.state = state;
    snapshot.pid = 4242;
    snapshot.agent_command = "claude".into();
    snapshot.stale_timeout_secs = 1200.0;
    snapshot.iteration = iteration;
    snapshot.global_iteration = Some(iteration);
    snapshot.loop_start = t0();
    snapshot.totals.cost_usd = Some(cost);
    if state == LoopState::SessionRunning {
        snapshot.pgid = Some(5151);
        snapshot.agent_pid = Some(5151);
        snapshot.session_start = Some(now() - Duration::minutes(3));
        snapshot.last_output_growth = Some(now() - Duration::seconds(12));
        snapshot.output_file = Some(PathBuf::from(format!(
            "/work/.clowder/lanes/{lane}/claude-iteration-{iteration}.jsonl"
        )));
        snapshot.output_bytes = 18_400;
    }
    snapshot
}

fn send(state: &mut AppState, lane: &str, report: LaneReport) {
    let message = HostMsg::Lane {
        lane: name(lane),
        report,
    };
    update(state, Msg::Host(message), now());
}

fn line(kind: LineKind, text: &str) -> Rendered {
    Rendered {
        kind,
        text: text.into(),
        detail: None,
        tool_use_id: None,
        is_error: false,
    }
}

/// Four lanes: one running (shown), one asking through the gate, one backing
/// off a rate limit, one done.
fn fleet() -> AppState {
    let mut state = AppState::for_fleet(false);
    let entries = ["auth", "docs", "api", "search-index"]
        .into_iter()
        .map(|lane| LaneEntry {
            name: name(lane),
            requested: LaneState::Active,
            max_iterations: Some(10),
            kind: LaneKind::Worktree,
            base: Some("main".into()),
        })
        .collect();
    update(&mut state, Msg::Host(HostMsg::Lanes(entries)), now());
    let mut limited = snapshot("api", LoopState::RateLimitedBackoff, 2, 0.41);
    limited.rate_limit_resets_at = Some(t0() + Duration::minutes(45));
    let mut done = snapshot("search-index", LoopState::Stopped, 10, 2.75);
    done.exit_reason = Some(ExitReason::MaxIterations);
    let snapshots = [
        ("auth", snapshot("auth", LoopState::SessionRunning, 3, 1.20)),
        ("docs", snapshot("docs", LoopState::SessionRunning, 1, 0.08)),
        ("api", limited),
        ("search-index", done),
    ];
    for (lane, snapshot) in snapshots {
        let report = LaneReport::Snapshot {
            snapshot: Arc::new(snapshot),
            queued: false,
        };
        send(&mut state, lane, report);
    }
    send(
        &mut state,
        "search-index",
        LaneReport::Ended(Ok(ExitReason::MaxIterations)),
    );
    for (lane, ahead) in [("auth", 2), ("docs", 0), ("api", 1), ("search-index", 7)] {
        send(&mut state, lane, LaneReport::Ahead(Some(ahead)));
    }
    send(
        &mut state,
        "auth",
        LaneReport::Log {
            at: t0() + Duration::minutes(7),
            level: clowder::supervisor::core::Level::Info,
            text: "session 3 started".into(),
        },
    );
    let file = state
        .viewing
        .file
        .clone()
        .expect("auth's session is followed");
    let output = Msg::Output {
        file,
        lines: vec![
            line(
                LineKind::Text,
                "I'll add the token refresh to the session middleware.",
            ),
            line(LineKind::ToolCall, "▶ Edit  src/auth/session.rs"),
            line(LineKind::ToolResult, "  ok"),
        ],
        stats: Box::new(SessionStats::default()),
        reset: true,
    };
    update(&mut state, output, now());
    let request = Request {
        id: "20270115-0802-docs".into(),
        created: t0() + Duration::minutes(8),
        kind: RequestKind::Tool,
        title: "Bash".into(),
        tool_name: Some("Bash".into()),
        tool_input: Some(serde_json::json!({"command": "git push origin clowder/docs"})),
        session_id: None,
        cwd: None,
        body: None,
        lane: Some("docs".into()),
        abandoned: false,
    };
    let approvals = Msg::Approvals {
        dir_exists: true,
        pending: vec![request],
    };
    update(&mut state, approvals, now());
    state
}

fn render(state: &AppState, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|frame| view::draw(state, frame, now()))
        .expect("draw");
    format!("{}", terminal.backend())
}

#[test]
fn fleet_lanes_and_inbox() {
    insta::assert_snapshot!(render(&fleet(), 120, 40));
}

#[test]
fn fleet_lanes_and_inbox_at_80x24() {
    insta::assert_snapshot!(render(&fleet(), 80, 24));
}

#[test]
fn fleet_diff_of_a_lane() {
    let mut state = fleet();
    let press = KeyEvent::new(KeyCode::Char('D'), KeyModifiers::NONE);
    update(&mut state, Msg::Key(press), now());
    let diff = " work-auth.txt | 1 +\n 1 file changed, 1 insertion(+)\n\ndiff --git a/work-auth.txt b/work-auth.txt\n--- a/work-auth.txt\n+++ b/work-auth.txt\n@@ -1 +1,2 @@\n auth 1\n-auth 2\n+auth 2 and 3\n";
    send(&mut state, "auth", LaneReport::Diff(Ok(diff.into())));
    insta::assert_snapshot!(render(&state, 100, 30));
}

/// Added lines are green, removed ones red, hunk headers cyan.
#[test]
fn fleet_diff_is_coloured() {
    let mut state = fleet();
    let press = KeyEvent::new(KeyCode::Char('D'), KeyModifiers::NONE);
    update(&mut state, Msg::Key(press), now());
    let diff = "@@ -1 +1 @@\n-old\n+new\n";
    send(&mut state, "auth", LaneReport::Diff(Ok(diff.into())));
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).expect("test terminal");
    terminal
        .draw(|frame| view::draw(&state, frame, now()))
        .expect("draw");
    let buffer = terminal.backend().buffer();
    let colour_of = |text: &str| {
        (0..buffer.area.height)
            .find_map(|y| {
                let row: String = (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect();
                let x = row.find(text)?;
                let x = row[..x].chars().count() as u16;
                Some(buffer[(x, y)].fg)
            })
            .unwrap_or_else(|| panic!("{text:?} is not on the screen"))
    };
    use ratatui::style::Color;
    assert_eq!(colour_of("@@ -1 +1 @@"), Color::Cyan);
    assert_eq!(colour_of("-old"), Color::Red);
    assert_eq!(colour_of("+new"), Color::Green);
}

/// A hundred lanes: the list scrolls so that the selected one stays in view.
#[test]
fn fleet_of_a_hundred_lanes_scrolls_at_80x24() {
    let mut state = AppState::for_fleet(false);
    let names: Vec<String> = (1..=100).map(|i| format!("lane-{i:03}")).collect();
    let entries = names
        .iter()
        .map(|lane| LaneEntry {
            name: name(lane),
            requested: LaneState::Active,
            max_iterations: Some(10),
            kind: LaneKind::Worktree,
            base: Some("main".into()),
        })
        .collect();
    update(&mut state, Msg::Host(HostMsg::Lanes(entries)), now());
    for lane in &names {
        let report = LaneReport::Snapshot {
            snapshot: Arc::new(snapshot(lane, LoopState::SessionRunning, 1, 0.0)),
            queued: false,
        };
        send(&mut state, lane, report);
    }
    for _ in 0..57 {
        let press = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
        update(&mut state, Msg::Key(press), now());
    }
    let screen = render(&state, 80, 24);
    assert!(screen.contains("▶   lane-058"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn quitting_a_fleet_asks_about_every_lane() {
    let mut state = fleet();
    let press = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    update(&mut state, Msg::Key(press), now());
    let screen = render(&state, 120, 40);
    assert!(
        screen.contains("Lanes are still running. Stop every lane?"),
        "{screen}"
    );
}

/// A lane whose agent runs without the gate says UNGATED on its row, and in the
/// header while it is shown; the others do not.
#[test]
fn an_ungated_lane_says_so_on_its_row_and_in_the_header() {
    let mut state = fleet();
    let mut auth = snapshot("auth", LoopState::SessionRunning, 3, 1.20);
    auth.ungated = Some("Codex 0.101.0 runs no hooks".into());
    let report = LaneReport::Snapshot {
        snapshot: Arc::new(auth),
        queued: false,
    };
    send(&mut state, "auth", report);
    let screen = render(&state, 120, 40);
    let rows: Vec<&str> = screen.lines().filter(|l| l.contains("UNGATED")).collect();
    assert_eq!(rows.len(), 2, "{screen}");
    assert!(rows.iter().any(|l| l.contains("agent UNGATED")), "{screen}");
    assert!(rows.iter().any(|l| l.contains("auth")), "{screen}");
    assert!(
        !screen
            .lines()
            .any(|l| l.contains("docs") && l.contains("UNGATED"))
    );
}

//! The whole control-room screen drawn into a `TestBackend` in each state and
//! compared with insta snapshots. Time is passed in, so nothing here depends on
//! the clock.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use clowder::agent::stream::{LineKind, Rendered, SessionStats};
use clowder::approvals::{Request, RequestKind};
use clowder::protocol::{Counters, ExitReason, LaneId, LoopState, Snapshot};
use clowder::ui::app::{AppState, Msg, UiCommand, update};
use clowder::ui::view;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("valid time")
}

fn snapshot() -> Snapshot {
    let start = t0();
    Snapshot {
        lane: LaneId(0),
        pid: 4242,
        state: LoopState::SessionRunning,
        agent_command: "claude".into(),
        stale_timeout_secs: 1200.0,
        paused: false,
        paused_at: None,
        stop_pending: false,
        iteration: 3,
        max_iterations: 25,
        global_iteration: Some(41),
        output_file: Some(PathBuf::from("/work/claude-iteration-41.jsonl")),
        output_bytes: 48_200,
        loop_start: start,
        session_start: Some(start + Duration::minutes(50)),
        last_output_growth: Some(start + Duration::minutes(61)),
        last_update: start + Duration::minutes(62),
        last_completed_iteration: Some(2),
        last_completed_global: Some(40),
        last_committed: Some(true),
        last_exit_code: Some(0),
        consecutive_rate_limits: 0,
        pgid: Some(5151),
        agent_pid: Some(5151),
        agent_start_ticks: None,
        next_session_at: None,
        rate_limit_resets_at: None,
        counters: Counters {
            sessions: 4,
            productive: 2,
            empty_retries: 1,
            empty_iterations: 0,
            rate_limits: 1,
            watchdog_kills: 0,
            user_kills: 0,
            hook_failures: 0,
            commits: 2,
        },
        exit_reason: None,
        held_reason: None,
        last_session: None,
        totals: Default::default(),
        max_cost_usd: None,
        max_runtime_secs: None,
    }
}

fn line(kind: LineKind, text: &str, detail: Option<&str>, is_error: bool) -> Rendered {
    Rendered {
        kind,
        text: text.into(),
        detail: detail.map(str::to_string),
        tool_use_id: None,
        is_error,
    }
}

fn state_with(snapshot: Snapshot) -> AppState {
    let now = t0() + Duration::minutes(62);
    let mut state = AppState::new(Arc::new(snapshot.clone()), false);
    update(&mut state, Msg::Snapshot(Arc::new(snapshot)), now);
    let file = state.viewing.file.clone().expect("following the session");
    let stats = SessionStats {
        turns: 4,
        tool_calls: 3,
        input_tokens: 7_500,
        output_tokens: 420,
        cost_usd: Some(0.0412),
        ..SessionStats::default()
    };
    let lines = vec![
        line(
            LineKind::System,
            "● session started · model claude-sonnet-4-5 · 3 tools",
            None,
            false,
        ),
        line(
            LineKind::Text,
            "Reading the task list to pick the next item.",
            None,
            false,
        ),
        line(
            LineKind::ToolCall,
            "▶ Read  TODO.md",
            Some("{\n  \"file_path\": \"TODO.md\"\n}"),
            false,
        ),
        line(
            LineKind::ToolResult,
            "  ↳ - [x] parse config (+2 lines)",
            None,
            false,
        ),
        Rendered {
            tool_use_id: Some("toolu_7".into()),
            ..line(
                LineKind::ToolCall,
                "▶ Bash  cargo test retry",
                Some("{\n  \"command\": \"cargo test retry\"\n}"),
                false,
            )
        },
        Rendered {
            tool_use_id: Some("toolu_7".into()),
            ..line(
                LineKind::ToolResult,
                "  ✗ test retry::empty_output ... FAILED (+1 lines)",
                Some(
                    "test retry::empty_output ... FAILED\nthread 'retry::empty_output' panicked: expected 2 retries, got 0",
                ),
                true,
            )
        },
        line(
            LineKind::Thinking,
            "✻ thinking (812 chars)",
            Some("The counter is never incremented."),
            false,
        ),
        line(
            LineKind::Text,
            "The retry counter is never incremented. Fixing it.",
            None,
            false,
        ),
    ];
    update(
        &mut state,
        Msg::Output {
            file,
            lines,
            stats: Box::new(stats),
            reset: true,
        },
        now,
    );
    for (minute, text) in [
        (50, "iteration=3 global=41 status=session_running pid=5151"),
        (
            49,
            "iteration=2 global=40 status=session_complete exit=0 bytes=3651",
        ),
    ] {
        update(
            &mut state,
            Msg::Log {
                at: t0() + Duration::minutes(minute),
                level: clowder::supervisor::core::Level::Info,
                text: text.into(),
            },
            now,
        );
    }
    state
}

fn render(state: &AppState, width: u16, height: u16, now: DateTime<Utc>) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|frame| view::draw(state, frame, now))
        .expect("draw");
    format!("{}", terminal.backend())
}

fn now() -> DateTime<Utc> {
    t0() + Duration::minutes(62)
}

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

#[test]
fn running() {
    let state = state_with(snapshot());
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

#[test]
fn running_at_80x24() {
    let state = state_with(snapshot());
    insta::assert_snapshot!(render(&state, 80, 24, now()));
}

#[test]
fn paused() {
    let mut snap = snapshot();
    snap.paused = true;
    snap.paused_at = Some(t0() + Duration::minutes(61) + Duration::seconds(30));
    let state = state_with(snap);
    insta::assert_snapshot!(render(&state, 120, 40, now() + Duration::minutes(30)));
}

#[test]
fn watchdog_near_the_limit() {
    let mut snap = snapshot();
    snap.last_output_growth = Some(now() - Duration::seconds(1100));
    let state = state_with(snap);
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

#[test]
fn rate_limit_backoff_countdown() {
    let mut snap = snapshot();
    snap.state = LoopState::RateLimitedBackoff;
    snap.pgid = None;
    snap.agent_pid = None;
    snap.consecutive_rate_limits = 2;
    snap.next_session_at = Some(now() + Duration::seconds(95));
    snap.rate_limit_resets_at = Some(now() + Duration::seconds(95));
    let state = state_with(snap);
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

fn request(id: &str, minutes_ago: i64, tool: &str, input: serde_json::Value) -> Request {
    Request {
        id: id.into(),
        created: now() - Duration::minutes(minutes_ago),
        kind: RequestKind::Tool,
        title: format!("{tool} wants to run"),
        tool_name: Some(tool.into()),
        tool_input: Some(input),
        session_id: Some("s-1".into()),
        cwd: Some("/work".into()),
        body: None,
        abandoned: false,
    }
}

fn with_approvals() -> AppState {
    let mut state = state_with(snapshot());
    update(
        &mut state,
        Msg::Approvals {
            dir_exists: true,
            pending: vec![
                request(
                    "req-1",
                    3,
                    "Bash",
                    serde_json::json!({"command": "rm -rf build"}),
                ),
                request(
                    "req-2",
                    1,
                    "Edit",
                    serde_json::json!({"file_path": "src/main.rs", "old_string": "a", "new_string": "b"}),
                ),
                request(
                    "req-3",
                    0,
                    "Bash",
                    serde_json::json!({"command": "echo \u{1b}[31mred\u{1b}[0m"}),
                ),
            ],
        },
        now(),
    );
    state
}

#[test]
fn approvals_pending() {
    let state = with_approvals();
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

/// The pane at 80x24, focused: long values end with `…` at a word's end, long
/// paths keep their file name, and a request whose waiter is gone is marked.
#[test]
fn approvals_at_80x24() {
    let mut state = state_with(snapshot());
    let mut abandoned = request(
        "req-3",
        2,
        "Bash",
        serde_json::json!({"command": "cargo test --workspace --all-features"}),
    );
    abandoned.abandoned = true;
    update(
        &mut state,
        Msg::Approvals {
            dir_exists: true,
            pending: vec![
                request(
                    "req-1",
                    3,
                    "Edit",
                    serde_json::json!({"file_path": "/home/me/projects/acme-mobile-app/packages/ui_shell/lib/src/features/navigation/oi_sidebar.dart"}),
                ),
                request(
                    "req-2",
                    1,
                    "Bash",
                    serde_json::json!({"command": "flutter test integration_test/navigation_flow_test.dart --device-id linux"}),
                ),
                abandoned,
            ],
        },
        now(),
    );
    for _ in 0..3 {
        update(&mut state, key(KeyCode::Tab), now());
    }
    assert_eq!(state.focus, clowder::ui::app::Pane::Approvals);
    insta::assert_snapshot!(render(&state, 80, 24, now()));
    update(&mut state, key(KeyCode::Char('z')), now());
    insta::assert_snapshot!("approvals_at_80x24_zoomed", render(&state, 80, 24, now()));
}

#[test]
fn approval_reject_dialog() {
    let mut state = with_approvals();
    update(&mut state, key(KeyCode::Char('r')), now());
    for c in "not on main".chars() {
        update(&mut state, key(KeyCode::Char(c)), now());
    }
    insta::assert_snapshot!(render(&state, 120, 40, now()));
    let commands = update(&mut state, key(KeyCode::Enter), now());
    assert_eq!(
        commands,
        vec![UiCommand::Reject {
            id: "req-1".into(),
            reason: "not on main".into()
        }]
    );
}

#[test]
fn approval_full_request() {
    let mut state = with_approvals();
    update(&mut state, key(KeyCode::Tab), now());
    update(&mut state, key(KeyCode::Tab), now());
    update(&mut state, key(KeyCode::Tab), now());
    update(&mut state, key(KeyCode::Char('j')), now());
    update(&mut state, key(KeyCode::Enter), now());
    insta::assert_snapshot!(render(&state, 120, 40, now()));
    let commands = update(&mut state, key(KeyCode::Char('a')), now());
    assert_eq!(commands, vec![UiCommand::Approve { id: "req-2".into() }]);
}

#[test]
fn help_overlay() {
    let mut state = state_with(snapshot());
    update(&mut state, key(KeyCode::Char('?')), now());
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

#[test]
fn quit_dialog_and_scrolled_output() {
    let mut state = state_with(snapshot());
    update(&mut state, key(KeyCode::Char('k')), now());
    update(&mut state, key(KeyCode::Char('k')), now());
    update(&mut state, key(KeyCode::Char('q')), now());
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

#[test]
fn expanded_tool_call() {
    let mut state = state_with(snapshot());
    for _ in 0..3 {
        update(&mut state, key(KeyCode::Char('k')), now());
    }
    update(&mut state, key(KeyCode::Enter), now());
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

#[test]
fn stopped() {
    let mut snap = snapshot();
    snap.state = LoopState::Stopped;
    snap.pgid = None;
    snap.agent_pid = None;
    let mut state = state_with(snap);
    update(&mut state, Msg::Finished(ExitReason::MaxIterations), now());
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

#[test]
fn small_terminal() {
    let state = state_with(snapshot());
    insta::assert_snapshot!(render(&state, 50, 12, now()));
}

#[test]
fn no_color_keeps_the_layout_and_drops_colours() {
    let mut state = state_with(snapshot());
    state.no_color = true;
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("test terminal");
    terminal
        .draw(|frame| view::draw(&state, frame, now()))
        .expect("draw");
    let buffer = terminal.backend().buffer();
    assert!(
        buffer
            .content
            .iter()
            .all(|cell| cell.fg == ratatui::style::Color::Reset
                && cell.bg == ratatui::style::Color::Reset)
    );
}

#[test]
fn keys_typed_into_search_never_trigger_actions() {
    let mut state = state_with(snapshot());
    update(&mut state, key(KeyCode::Char('/')), now());
    let mut commands = Vec::new();
    for c in "pKsSq".chars() {
        commands.extend(update(&mut state, key(KeyCode::Char(c)), now()));
    }
    assert!(commands.is_empty(), "{commands:?}");
    assert_eq!(state.output.search_input.as_deref(), Some("pKsSq"));
    assert!(state.dialog.is_none());
}

#[test]
fn approval_history() {
    use clowder::approvals::{DecisionKind, DecisionRecord, DoneRecord};
    let mut state = with_approvals();
    for _ in 0..3 {
        update(&mut state, key(KeyCode::Tab), now());
    }
    let commands = update(&mut state, key(KeyCode::Char('h')), now());
    assert_eq!(commands, vec![UiCommand::LoadHistory]);
    let done =
        |id: &str, outcome: &str, kind: Option<DecisionKind>, reason: Option<&str>| DoneRecord {
            request: request(
                id,
                10,
                "Bash",
                serde_json::json!({"command": format!("make {id}")}),
            ),
            decision: kind.map(|decision| DecisionRecord {
                id: id.into(),
                decision,
                reason: reason.map(str::to_string),
                decided_at: now(),
                request_hash: "0".repeat(64),
            }),
            outcome: outcome.into(),
            waited_secs: 42.0,
        };
    update(
        &mut state,
        Msg::History(vec![
            done(
                "deploy",
                "rejected",
                Some(DecisionKind::Reject),
                Some("not on Friday"),
            ),
            done("lint", "approved", Some(DecisionKind::Approve), None),
            done("release", "timed_out", None, None),
        ]),
        now(),
    );
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

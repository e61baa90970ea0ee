//! The whole control-room screen drawn into a `TestBackend` in each state and
//! compared with insta snapshots. Time is passed in, so nothing here depends on
//! the clock.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use clowder::agent::stream::{LineKind, Rendered, SessionStats};
use clowder::approvals::{Request, RequestKind};
use clowder::protocol::{
    Counters, Event, ExitReason, LaneId, LoopState, SessionSummary, Snapshot, Totals,
};
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
        pid_start_ticks: None,
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
        consecutive_errors: 0,
        agent_retrying: None,
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
            transient_errors: 0,
            watchdog_kills: 0,
            user_kills: 0,
            hook_failures: 0,
            commits: 2,
            overages: 0,
            failed_exits: 0,
            error_results: 0,
        },
        exit_reason: None,
        held_reason: None,
        // Session 40 ended last (committed); 41 runs.
        last_session: Some(SessionSummary {
            global: 40,
            ..SessionSummary::default()
        }),
        // The supervisor's sums of the sessions before this one.
        totals: Totals {
            cost_usd: Some(0.30),
            turns: 38,
            tool_calls: 40,
            input_tokens: 90_000,
            output_tokens: 8_000,
            ..Totals::default()
        },
        max_cost_usd: None,
        max_runtime_secs: None,
        max_cost_per_session_usd: None,
        max_tool_calls_per_session: None,
        ungated: None,
        notes_now: false,
    }
}

fn line(kind: LineKind, text: &str, detail: Option<&str>, is_error: bool) -> Rendered {
    Rendered {
        kind,
        text: text.into(),
        detail: detail.map(Into::into),
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
    let events = [
        (
            49,
            Event::SessionComplete {
                iteration: 2,
                global: 40,
                output_bytes: 3651,
                exit_code: 0,
                duration_secs: 184.0,
                committed: true,
                retries: 0,
                rate_limited: false,
                transient_error: false,
                productive: true,
                cost_usd: Some(0.12),
                turns: Some(9),
                tool_calls: 7,
                input_tokens: Some(9000),
                output_tokens: Some(800),
                result: Some("success".into()),
                killed: None,
                budget: None,
            },
        ),
        (
            50,
            Event::SessionStart {
                iteration: 3,
                global: 41,
                pid: 5151,
                pgid: 5151,
                output_file: PathBuf::from(
                    "/home/me/projects/app/lib/src/features/navigation/claude-iteration-41.jsonl",
                ),
                agent_start_ticks: None,
            },
        ),
    ];
    for (minute, event) in events {
        update(
            &mut state,
            Msg::Event {
                at: t0() + Duration::minutes(minute),
                event: Box::new(event),
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

/// The agent waiting out a 429 on its own is said in the header; a server
/// error's wait and counter never read as a rate limit.
#[test]
fn an_agent_retrying_and_a_server_error_are_told_apart_from_rate_limits() {
    let mut snap = snapshot();
    snap.agent_retrying = Some(clowder::protocol::AgentRetrying {
        rate_limit: true,
        message: "Reconnecting... 1/5 (429 Too Many Requests)".into(),
    });
    let screen = render(&state_with(snap), 120, 40, now());
    assert!(
        screen.contains("rate limited (the agent is retrying)"),
        "{screen}"
    );

    let mut snap = snapshot();
    snap.state = LoopState::ErrorBackoff;
    snap.pgid = None;
    snap.agent_pid = None;
    snap.consecutive_errors = 2;
    snap.counters.rate_limits = 0;
    snap.counters.transient_errors = 3;
    snap.next_session_at = Some(now() + Duration::seconds(8));
    let screen = render(&state_with(snap), 120, 40, now());
    assert!(screen.contains("server error, waiting"), "{screen}");
    assert!(screen.contains("2 in a row · 3 total"), "{screen}");
    assert!(!screen.contains("rate-limited"), "{screen}");
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
        lane: None,
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

/// One request at 80x24: the pane's free rows show its whole command, wrapped,
/// and the reject dialog names the lane that asks and what it asks.
#[test]
fn one_request_at_80x24_shows_its_whole_command_and_r_names_the_lane() {
    let mut state = state_with(snapshot());
    let mut asked = request(
        "req-7",
        1,
        "Bash",
        serde_json::json!({"command": "rm -rf /home/me/projects/acme/build/cache node_modules"}),
    );
    asked.lane = Some("api".into());
    update(
        &mut state,
        Msg::Approvals {
            dir_exists: true,
            pending: vec![asked],
        },
        now(),
    );
    let screen = render(&state, 80, 24, now());
    insta::assert_snapshot!(screen);
    update(&mut state, key(KeyCode::Char('r')), now());
    let screen = render(&state, 80, 24, now());
    assert!(
        screen.contains("lane api asks (request req-7):"),
        "{screen}"
    );
    insta::assert_snapshot!(
        "reject_dialog_at_80x24_names_the_lane_and_the_command",
        screen
    );
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
                decided_by: None,
            }),
            outcome: outcome.into(),
            waited_secs: 42.0,
            review: None,
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
            DoneRecord {
                decision: Some(DecisionRecord {
                    id: "test".into(),
                    decision: DecisionKind::Approve,
                    reason: Some("runs the tests".into()),
                    decided_at: now(),
                    request_hash: "0".repeat(64),
                    decided_by: Some("reviewer judge-1".into()),
                }),
                ..done("test", "approved", None, None)
            },
            DoneRecord {
                decision: Some(DecisionRecord {
                    id: "push".into(),
                    decision: DecisionKind::Approve,
                    reason: None,
                    decided_at: now(),
                    request_hash: "0".repeat(64),
                    decided_by: Some("clowder approve (user me, pid 42)".into()),
                }),
                ..done("push", "approved", None, None)
            },
        ]),
        now(),
    );
    insta::assert_snapshot!(render(&state, 120, 40, now()));
}

/// The rows of a rendered screen (the text between the quotes of each line).
fn rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('"')?.strip_suffix('"').map(str::to_string))
        .collect()
}

/// The run's cost and turns are the supervisor's totals (plus the running
/// session's so far), whatever sessions the control room saw or browsed.
#[test]
fn run_totals_are_the_supervisors() {
    let mut state = state_with(snapshot());
    let screen = render(&state, 120, 40, now());
    assert!(screen.contains("$0.3412 · 42 turns"), "{screen}");
    // Browsing an older session changes nothing in the run's totals.
    update(&mut state, key(KeyCode::Char('[')), now());
    update(
        &mut state,
        Msg::Output {
            file: PathBuf::from("/work/claude-iteration-40.jsonl"),
            lines: Vec::new(),
            stats: Box::new(SessionStats {
                turns: 9,
                cost_usd: Some(0.12),
                ..SessionStats::default()
            }),
            reset: true,
        },
        now(),
    );
    update(&mut state, key(KeyCode::Char(']')), now());
    let screen = render(&state, 120, 40, now());
    assert!(screen.contains("$0.3412 · 42 turns"), "{screen}");
    // Two fast sessions ended between two snapshots: the supervisor counted them.
    let mut snap = snapshot();
    snap.global_iteration = Some(43);
    snap.output_file = Some(PathBuf::from("/work/claude-iteration-43.jsonl"));
    snap.last_completed_global = Some(42);
    snap.totals.cost_usd = Some(0.34);
    snap.totals.turns = 42;
    update(&mut state, Msg::Snapshot(Arc::new(snap)), now());
    let screen = render(&state, 120, 40, now());
    assert!(screen.contains("$0.3400 · 42 turns"), "{screen}");
}

/// The run's cost turns yellow near `[guard] max_cost_usd` and red at it.
#[test]
fn budget_warnings_follow_the_supervisors_totals() {
    let colour_of = |limit: f64| {
        let mut snap = snapshot();
        snap.max_cost_usd = Some(limit);
        let state = state_with(snap);
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("test terminal");
        terminal
            .draw(|frame| view::draw(&state, frame, now()))
            .expect("draw");
        let buffer = terminal.backend().buffer().clone();
        let screen = rows(&format!("{}", terminal.backend()));
        let (y, row) = screen
            .iter()
            .enumerate()
            .find(|(_, r)| r.contains("│run "))
            .expect("a run row");
        let prefix = &row[..row.find("$0.34").expect("the run's cost")];
        let x = prefix.chars().count() as u16;
        buffer[(x, y as u16)].fg
    };
    use ratatui::style::Color;
    assert_eq!(colour_of(5.0), Color::Cyan);
    assert_eq!(colour_of(0.40), Color::Yellow);
    assert_eq!(colour_of(0.30), Color::Red);
}

/// Cuts seen at 80x24 before values were fitted to their pane.
const BAD_CUTS: &[&str] = &[
    "limit 3│",
    "0 gi│",
    "status=",
    "· 4 session│",
    "· 4 turn│",
    "420 ou│",
    "0 b│",
    " zoo\"",
    " e\"",
];

/// The states worth seeing at 80x24.
fn small_screens() -> Vec<(&'static str, String)> {
    let mut screens = Vec::new();
    let state = state_with(snapshot());
    screens.push(("running", render(&state, 80, 24, now())));
    let mut snap = snapshot();
    snap.paused = true;
    snap.paused_at = Some(now());
    snap.stop_pending = true;
    snap.max_runtime_secs = Some(8.0 * 3600.0);
    snap.max_cost_usd = Some(5.0);
    snap.agent_command =
        "claude -p --output-format stream-json --verbose --dangerously-skip-permissions".into();
    screens.push(("paused", render(&state_with(snap), 80, 24, now())));
    let mut snap = snapshot();
    snap.state = LoopState::RateLimitedBackoff;
    snap.pgid = None;
    snap.agent_pid = None;
    snap.consecutive_rate_limits = 2;
    snap.next_session_at = Some(now() + Duration::seconds(95));
    snap.rate_limit_resets_at = Some(now() + Duration::seconds(95));
    screens.push(("rate limited", render(&state_with(snap), 80, 24, now())));
    let mut snap = snapshot();
    snap.state = LoopState::Stopped;
    snap.pgid = None;
    snap.agent_pid = None;
    let mut state = state_with(snap);
    update(&mut state, Msg::Finished(ExitReason::MaxIterations), now());
    screens.push(("stopped", render(&state, 80, 24, now())));
    screens
}

#[test]
fn every_pane_fits_80x24_without_cutting_a_value() {
    for (name, screen) in small_screens() {
        for bad in BAD_CUTS {
            assert!(!screen.contains(bad), "{name}: {bad:?} in\n{screen}");
        }
        for (y, row) in rows(&screen).iter().enumerate() {
            let cells: Vec<char> = row.chars().collect();
            // The side panes' text never runs into their right border, unless
            // it ends with an ellipsis on purpose.
            if cells.last() == Some(&'│') {
                let before = cells[cells.len() - 2];
                assert!(
                    before == ' ' || before == '…' || before == '█',
                    "{name}: row {y} runs into the border: {row}"
                );
            }
            // Header and status line end in whole words.
            if (y < 2 || y == 23) && cells.last() != Some(&' ') {
                assert_eq!(cells.last(), Some(&'…'), "{name}: row {y}: {row}");
            }
        }
    }
}

#[test]
fn paused_with_budgets_at_80x24() {
    let (_, screen) = small_screens().remove(1);
    insta::assert_snapshot!(screen);
}

#[test]
fn rate_limited_at_80x24() {
    let (_, screen) = small_screens().remove(2);
    insta::assert_snapshot!(screen);
}

#[test]
fn help_at_80x24_wraps_under_its_description() {
    let mut state = state_with(snapshot());
    update(&mut state, key(KeyCode::Char('?')), now());
    let screen = render(&state, 80, 24, now());
    insta::assert_snapshot!(screen);
    let rows = rows(&screen);
    let first = rows
        .iter()
        .position(|r| r.contains("p  pause / resume"))
        .expect("the p line");
    let column = rows[first].find("pause / resume").expect("description");
    let next = &rows[first + 1];
    assert!(
        next[..column].chars().all(|c| !c.is_alphanumeric())
            && next[column..].starts_with(|c: char| c.is_alphanumeric()),
        "the wrapped line starts under its description:\n{}\n{next}",
        rows[first]
    );
    // It scrolls: the last section comes into sight.
    for _ in 0..80 {
        update(&mut state, key(KeyCode::Char('j')), now());
    }
    let screen = render(&state, 80, 24, now());
    assert!(screen.contains("Quit dialog"), "{screen}");
    update(&mut state, key(KeyCode::Esc), now());
    assert!(!state.help);
}

#[test]
fn quit_dialog_at_80x24_uses_the_main_views_letters() {
    let mut state = state_with(snapshot());
    state.can_detach = true;
    update(&mut state, key(KeyCode::Char('q')), now());
    let screen = render(&state, 80, 24, now());
    insta::assert_snapshot!(screen);
    assert!(
        screen.contains("s  stop after this session, then quit"),
        "{screen}"
    );
    assert!(
        screen.contains("S  stop now (kill the session), then quit"),
        "{screen}"
    );
    let commands = update(&mut state, key(KeyCode::Char('S')), now());
    assert_eq!(
        commands,
        vec![UiCommand::Supervisor(clowder::protocol::Command::StopNow)]
    );
    let mut state = state_with(snapshot());
    update(&mut state, key(KeyCode::Char('q')), now());
    let commands = update(&mut state, key(KeyCode::Char('s')), now());
    assert_eq!(
        commands,
        vec![UiCommand::Supervisor(
            clowder::protocol::Command::StopAfterCurrent
        )]
    );
    assert!(state.dialog.is_none() && state.quit_when_finished);
}

#[test]
fn an_events_full_record_opens_on_enter() {
    let mut state = state_with(snapshot());
    update(
        &mut state,
        Msg::Event {
            at: now(),
            event: Box::new(Event::RateLimited {
                iteration: 2,
                global: 2,
                reason: "usage limit reached".into(),
                consecutive: 1,
                backoff_secs: 3.0,
                resets_at: Some(now() + Duration::minutes(15)),
            }),
        },
        now(),
    );
    for _ in 0..4 {
        update(&mut state, key(KeyCode::Tab), now());
    }
    update(&mut state, key(KeyCode::Char('z')), now());
    let screen = render(&state, 120, 40, now());
    assert!(
        screen.contains("09:02:00 #2 rate limited, next in 3s (resets 09:17)"),
        "{screen}"
    );
    update(&mut state, key(KeyCode::Enter), now());
    let screen = render(&state, 80, 24, now());
    insta::assert_snapshot!(screen);
    assert!(screen.contains("\"event\": \"rate_limited\""), "{screen}");
    assert!(screen.contains("usage limit reached"), "{screen}");
    update(&mut state, key(KeyCode::Esc), now());
    assert!(!state.events_view.expanded);
}

#[test]
fn committed_is_shown_only_for_the_session_whose_exit_code_is_shown() {
    let screen = render(&state_with(snapshot()), 120, 40, now());
    assert!(screen.contains("last exit   0 · committed"), "{screen}");
    // Session 41 was rate-limited after the committed session 40.
    let mut snap = snapshot();
    snap.last_exit_code = Some(1);
    snap.last_session = Some(SessionSummary {
        global: 41,
        ..SessionSummary::default()
    });
    let screen = render(&state_with(snap), 120, 40, now());
    assert!(screen.contains("last exit   1 "), "{screen}");
    assert!(!screen.contains("last exit   1 · committed"), "{screen}");
}

#[test]
fn the_counters_show_overage_once_there_is_one() {
    let mut snap = snapshot();
    assert!(!render(&state_with(snap.clone()), 120, 40, now()).contains("overage"));
    snap.counters.overages = 2;
    let shown = render(&state_with(snap), 120, 40, now());
    assert!(shown.contains("2 past a limit, paid"), "{shown}");
}

#[test]
fn a_session_read_to_its_end_without_a_result_shows_unknown_turns() {
    let mut snap = snapshot();
    snap.state = LoopState::Stopped;
    snap.pgid = None;
    let mut state = state_with(snap);
    let file = state.viewing.file.clone().expect("following the session");
    let stats = |ended| SessionStats {
        turns: 2,
        lines: 3,
        input_tokens: 120,
        output_tokens: 7,
        ended,
        ..SessionStats::default()
    };
    for (ended, shown, tokens) in [
        (false, "? turns", "? in · ? out"),
        (true, "2 turns", "120 in · 7 out"),
    ] {
        update(
            &mut state,
            Msg::Output {
                file: file.clone(),
                lines: Vec::new(),
                stats: Box::new(stats(ended)),
                reset: true,
            },
            now(),
        );
        let screen = render(&state, 120, 40, now());
        assert!(screen.contains(shown), "{shown}: {screen}");
        // Partial sums are not shown as the session's tokens.
        assert!(screen.contains(tokens), "{tokens}: {screen}");
    }
}

/// A Codex agent without the gate hook is marked UNGATED in the header; a Codex
/// patch waits in the inbox by the files it touches, and its popup lists them
/// before the patch itself.
#[test]
fn codex_patch_request_and_ungated_header() {
    let mut snap = snapshot();
    snap.agent_command = "codex".into();
    snap.ungated = Some("Codex has no `clowder gate` PreToolUse hook".into());
    let mut state = state_with(snap);
    let patch = "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: lib/a.rs\n@@ fn main()\n-    old();\n+    new();\n*** Delete File: notes.txt\n*** End Patch\n";
    update(
        &mut state,
        Msg::Approvals {
            dir_exists: true,
            pending: vec![request(
                "req-9",
                2,
                "apply_patch",
                serde_json::json!({ "command": patch }),
            )],
        },
        now(),
    );
    insta::assert_snapshot!("codex_patch_in_the_inbox", render(&state, 120, 40, now()));
    for _ in 0..3 {
        update(&mut state, key(KeyCode::Tab), now());
    }
    update(&mut state, key(KeyCode::Enter), now());
    insta::assert_snapshot!("codex_patch_popup", render(&state, 120, 40, now()));
}

#[test]
fn a_run_whose_agent_reports_no_cost_shows_it_unknown() {
    let mut snap = snapshot();
    snap.state = LoopState::Stopped;
    snap.pgid = None;
    snap.totals.cost_usd = None;
    snap.totals.turns = 3;
    let mut state = state_with(snap);
    let file = state.viewing.file.clone().expect("following the session");
    update(
        &mut state,
        Msg::Output {
            file,
            lines: Vec::new(),
            stats: Box::new(SessionStats {
                turns: 1,
                lines: 5,
                ended: true,
                ..SessionStats::default()
            }),
            reset: true,
        },
        now(),
    );
    let screen = render(&state, 120, 40, now());
    assert!(screen.contains("$? · 3 turns"), "{screen}");
    assert!(!screen.contains("$0.0000 · 3 turns"), "{screen}");
}

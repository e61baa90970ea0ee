//! The control room's Plan view (`P`) drawn into a `TestBackend` and compared
//! with insta snapshots: a diamond plan with steps in varied states; and its
//! keys: Enter shows a step's lane, `M` asks, then merges a step under review.

use chrono::{DateTime, Utc};
use clowder::fleet::LaneName;
use clowder::fleet::link::{HostMsg, HostRequest, LaneEntry};
use clowder::fleet::plans::{PlanSummary, StepSummary};
use clowder::fleet::registry::{LaneKind, LaneState};
use clowder::ui::app::{AppState, Msg, UiCommand, update};
use clowder::ui::view;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_600, 0).expect("valid time")
}

fn step(id: &str, state: &str, deps: &[&str]) -> StepSummary {
    StepSummary {
        id: id.into(),
        state: state.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        lane: format!("diamond-{id}"),
    }
}

/// a → b, c → d (the diamond), e failed and f blocked behind it, g waiting.
fn diamond() -> PlanSummary {
    PlanSummary {
        name: "diamond".into(),
        address: "diamond".into(),
        status: "running".into(),
        base: "main".into(),
        steps: vec![
            step("a", "merged", &[]),
            step("b", "needs review", &["a"]),
            step("c", "running", &["a"]),
            step("d", "pending", &["b", "c"]),
            step("e", "failed", &[]),
            step("f", "blocked", &["e"]),
            step("g", "waiting for approval", &[]),
        ],
    }
}

fn key(state: &mut AppState, code: KeyCode) -> Vec<UiCommand> {
    let event = KeyEvent::new(code, KeyModifiers::NONE);
    update(state, Msg::Key(event), now())
}

/// The control room with the diamond's lanes, its Plan view shown.
fn room() -> AppState {
    let mut state = AppState::for_fleet(false);
    let entries = ["a", "b", "c", "e"]
        .into_iter()
        .map(|id| LaneEntry {
            name: LaneName::parse(&format!("diamond-{id}")).expect("a valid lane name"),
            requested: LaneState::Active,
            max_iterations: Some(5),
            kind: LaneKind::Worktree,
            base: Some("main".into()),
        })
        .collect();
    update(&mut state, Msg::Host(HostMsg::Lanes(entries)), now());
    update(
        &mut state,
        Msg::Host(HostMsg::Plans(vec![diamond()])),
        now(),
    );
    assert!(state.plan.shown, "the first plan opens the Plan view");
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
fn plan_view_of_a_diamond() {
    let mut state = room();
    key(&mut state, KeyCode::Char('j'));
    insta::assert_snapshot!(render(&state, 120, 40));
}

#[test]
fn plan_view_of_a_diamond_at_80x24() {
    insta::assert_snapshot!(render(&room(), 80, 24));
}

/// `M` on the step under review asks first; `y` sends the merge to the host.
#[test]
fn m_asks_then_merges_the_step_under_review() {
    let mut state = room();
    key(&mut state, KeyCode::Char('j'));
    assert!(key(&mut state, KeyCode::Char('M')).is_empty());
    insta::assert_snapshot!(render(&state, 120, 40));
    let commands = key(&mut state, KeyCode::Char('y'));
    let merge = HostRequest::MergeStep {
        plan: "diamond".into(),
        step: "b".into(),
    };
    assert_eq!(commands, vec![UiCommand::Host(merge)]);
}

/// `M` on a step not under review says why and sends nothing.
#[test]
fn m_refuses_a_running_step() {
    let mut state = room();
    for _ in 0..2 {
        key(&mut state, KeyCode::Char('j'));
    }
    assert!(key(&mut state, KeyCode::Char('M')).is_empty());
    assert!(key(&mut state, KeyCode::Char('y')).is_empty());
    let note = state.plan.note.clone().unwrap_or_default();
    assert!(note.contains("step c is running"), "{note}");
}

/// `P` closes the view and opens it again; a later change of the plans
/// leaves it as the user put it.
#[test]
fn p_toggles_the_plan_view() {
    let mut state = room();
    key(&mut state, KeyCode::Char('P'));
    assert!(!state.plan.shown);
    update(
        &mut state,
        Msg::Host(HostMsg::Plans(vec![diamond()])),
        now(),
    );
    assert!(!state.plan.shown);
    key(&mut state, KeyCode::Char('P'));
    assert!(state.plan.shown);
}

/// Enter on a step selects its lane in the Lanes pane and closes the view.
#[test]
fn enter_selects_the_steps_lane() {
    let mut state = room();
    key(&mut state, KeyCode::Char('j'));
    key(&mut state, KeyCode::Char('j'));
    key(&mut state, KeyCode::Enter);
    let selected = state.fleet.as_ref().and_then(|f| f.selected.clone());
    assert_eq!(selected.map(|n| n.to_string()), Some("diamond-c".into()));
    assert!(!state.plan.shown);
}

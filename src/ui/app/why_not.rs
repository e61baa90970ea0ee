//! Why a key does nothing here: the words the status line shows in place of
//! silence when a bound key cannot act (`n` in a single-loop room, `D` with
//! no lane, `a` with no request waiting).

use super::AppState;
use crate::protocol::LoopState;
use crate::ui::keymap::Action;

/// What `key` (as the user pressed it) would do, and why it does not now;
/// None for a key that needs no word (scrolling past the end, Esc).
pub fn why_not(state: &AppState, action: Action, key: &str) -> Option<String> {
    let single = state.fleet.is_none();
    let no_lane = || {
        if single {
            "this room runs a single loop".to_string()
        } else {
            "there is no lane yet (n adds one)".to_string()
        }
    };
    let (does, why) = match action {
        // A folder's loop and its lanes do not run at once: the lanes are a
        // fleet that `clowder` starts in place of the single loop.
        Action::NewLane if single => (
            "adds a lane to a fleet",
            "quit, `clowder lane add NAME`, then `clowder`".to_string(),
        ),
        Action::NewLane => ("adds a lane", no_lane()),
        Action::SelectLane => ("shows a lane", no_lane()),
        Action::Diff => ("shows a lane's diff", no_lane()),
        Action::RemoveLane => ("removes a lane", no_lane()),
        Action::MergeLane => ("merges a lane", no_lane()),
        Action::PushLane => ("pushes a lane's branch", no_lane()),
        Action::RestartLane => ("runs a finished lane again", no_lane()),
        Action::OpenShell => ("opens a shell in a lane", no_lane()),
        Action::OpenEditor => ("opens an editor in a lane", no_lane()),
        Action::FilterLanes | Action::NeedsYouOnly | Action::SortLanes => {
            ("lists lanes", no_lane())
        }
        Action::PlanView if single => (
            "shows plans",
            "they run with lanes: `clowder plan run FILE` starts one".to_string(),
        ),
        Action::PlanView => (
            "shows plans",
            "no plan has run in this folder: `clowder plan run FILE` starts one".to_string(),
        ),
        Action::Tell => ("leaves a note", tell_not(state)),
        Action::Approve | Action::ApproveAlways => {
            ("approves a request", "none is waiting".to_string())
        }
        Action::Reject => ("rejects a request", "none is waiting".to_string()),
        Action::PauseResume | Action::Kill => {
            let does = if action == Action::Kill {
                "kills the session"
            } else {
                "pauses the session"
            };
            (does, no_session(state))
        }
        Action::StopAfter | Action::StopNow => ("stops the loop", "it has ended".to_string()),
        Action::Top => ("goes to the top", "there is no output yet".to_string()),
        Action::Expand => ("shows the selected entry", "there is none".to_string()),
        _ => return None,
    };
    Some(format!("{key} {does}: {why}"))
}

fn tell_not(state: &AppState) -> String {
    match state.fleet.as_ref() {
        None => "the loop has ended: `clowder tell TEXT` leaves a note for its next start".into(),
        Some(fleet) => match fleet.selected_row() {
            None => "no lane is selected".into(),
            Some(row) => format!(
                "lane {} follows a task directory: clowder builds no prompt for it",
                row.name
            ),
        },
    }
}

fn no_session(state: &AppState) -> String {
    if state.finished.is_some() {
        "the loop has ended".to_string()
    } else if state.snapshot.state == LoopState::Held {
        "the loop is held".to_string()
    } else {
        "no session runs now".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{DateTime, Utc};
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use crate::ui::app::{AppState, Msg, lanes, update};

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).expect("valid time")
    }

    fn press(state: &mut AppState, c: char) {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        update(state, Msg::Key(key), t0());
    }

    fn status_line(state: &AppState) -> String {
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
        terminal
            .draw(|frame| crate::ui::view::draw(state, frame, t0()))
            .expect("draw");
        let shown = terminal.backend().to_string();
        shown.lines().nth(23).unwrap_or_default().to_string()
    }

    #[test]
    fn n_in_the_single_loop_room_says_how_to_make_a_fleet() {
        let snapshot = Arc::new(lanes::placeholder("loop", Some(5)));
        let mut state = AppState::new(snapshot, true);
        assert!(!status_line(&state).contains("new lane"));
        press(&mut state, 'n');
        let line = status_line(&state);
        assert!(
            line.contains(
                "n adds a lane to a fleet: quit, `clowder lane add NAME`, then `clowder`"
            ),
            "{line}"
        );
        // The next key that acts takes the words away.
        press(&mut state, '?');
        assert_eq!(state.notice, None);
    }

    #[test]
    fn lane_keys_without_lanes_say_so_and_n_is_offered() {
        let mut state = AppState::for_fleet(true);
        let line = status_line(&state);
        assert!(line.contains(" n  new lane "), "{line}");
        press(&mut state, 'D');
        let line = status_line(&state);
        assert!(
            line.contains("D shows a lane's diff: there is no lane yet (n adds one)"),
            "{line}"
        );
        press(&mut state, '3');
        assert_eq!(
            state.notice.as_deref(),
            Some("3 shows a lane: there is no lane yet (n adds one)")
        );
        press(&mut state, 'a');
        assert_eq!(
            state.notice.as_deref(),
            Some("a approves a request: none is waiting")
        );
    }
}

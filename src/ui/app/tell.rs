//! `t`: a one-line note for the selected lane, or for the single loop. The
//! room writes the note (see [`crate::store::notes`]); the loop decides and
//! logs whether its running session takes it now (an agent that reads its
//! stdin while it runs) or its next session reads it at the top of its prompt.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::TextArea;

use super::{AppState, UiCommand};
use crate::fleet::LaneName;

/// The note being typed, and whom it is for (`None`: the single loop).
#[derive(Debug, Clone)]
pub struct TellBox {
    pub lane: Option<LaneName>,
    pub text: TextArea<'static>,
}

impl TellBox {
    /// Who the note is for, as the box's title says it.
    pub fn target(&self) -> String {
        match &self.lane {
            Some(lane) => format!("lane {lane}"),
            None => "the loop".to_string(),
        }
    }
}

/// Opens the box for the selected lane, or the loop.
pub(super) fn open(state: &mut AppState) {
    let lane = match &state.fleet {
        Some(fleet) => match fleet.selected.clone() {
            Some(lane) => Some(lane),
            None => return,
        },
        None => None,
    };
    let mut text = TextArea::default();
    text.set_placeholder_text("a note for the agent (Enter tells it, Esc cancels)");
    state.tell_box = Some(TellBox { lane, text });
}

/// A key while the box is open: it takes every key. Enter leaves the note
/// (an empty one is dropped), Esc or Ctrl-C cancels.
pub(super) fn on_key(state: &mut AppState, key: KeyEvent, commands: &mut Vec<UiCommand>) {
    let Some(open) = state.tell_box.as_mut() else {
        return;
    };
    let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
    match key.code {
        KeyCode::Esc => state.tell_box = None,
        _ if ctrl_c => state.tell_box = None,
        KeyCode::Enter => {
            let text = open.text.lines().join(" ").trim().to_string();
            let lane = open.lane.clone();
            state.tell_box = None;
            if text.is_empty() {
                state.notice = Some("an empty note: nothing was left".into());
            } else {
                commands.push(UiCommand::Tell { lane, text });
            }
        }
        _ => {
            open.text.input(key);
        }
    }
}

/// Text pasted into the open box, on one line.
pub(super) fn paste(state: &mut AppState, text: &str) -> bool {
    let Some(open) = state.tell_box.as_mut() else {
        return false;
    };
    let line: String = text
        .chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect();
    open.text.insert_str(line);
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Utc;
    use crossterm::event::KeyEvent;

    use super::super::{Msg, lanes, update};
    use super::*;

    fn key(code: KeyCode) -> Msg {
        Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn tell_commands(commands: &[UiCommand]) -> Vec<&UiCommand> {
        commands
            .iter()
            .filter(|c| matches!(c, UiCommand::Tell { .. }))
            .collect()
    }

    /// Letters typed in the box are text, not keys: `q` and `S` neither ask nor stop.
    #[test]
    fn t_takes_a_line_and_enter_leaves_it_for_the_loop() {
        let mut state = AppState::new(Arc::new(lanes::placeholder("loop", Some(2))), true);
        update(&mut state, key(KeyCode::Char('t')), Utc::now());
        assert!(state.tell_box.is_some() && state.typing());
        for c in "qS now".chars() {
            let commands = update(&mut state, key(KeyCode::Char(c)), Utc::now());
            assert!(commands.is_empty(), "{commands:?}");
        }
        update(&mut state, Msg::Paste("\nplease".into()), Utc::now());
        let commands = update(&mut state, key(KeyCode::Enter), Utc::now());
        assert_eq!(
            tell_commands(&commands),
            [&UiCommand::Tell {
                lane: None,
                text: "qS now please".into()
            }]
        );
        assert!(state.tell_box.is_none() && state.dialog.is_none());

        update(&mut state, key(KeyCode::Char('t')), Utc::now());
        update(&mut state, key(KeyCode::Char('x')), Utc::now());
        let commands = update(&mut state, key(KeyCode::Esc), Utc::now());
        assert!(tell_commands(&commands).is_empty());
        assert!(state.tell_box.is_none());
    }

    #[test]
    fn p_without_plans_says_why() {
        let mut state = AppState::new(Arc::new(lanes::placeholder("loop", Some(2))), true);
        update(&mut state, key(KeyCode::Char('P')), Utc::now());
        assert!(!state.plan.shown);
        let notice = state.notice.clone().unwrap_or_default();
        assert!(notice.contains("clowder plan run"), "{notice}");
        // The next key clears it.
        update(&mut state, key(KeyCode::Char('?')), Utc::now());
        assert!(state.notice.is_none());
    }
}

//! Pastes and keys that come in one read: never read as the room's keys.

use super::*;

fn room() -> AppState {
    AppState::new(Arc::new(lanes::placeholder("loop", Some(2))), true)
}

fn burst(text: &str) -> Msg {
    Msg::Burst(
        text.chars()
            .map(|c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
            .collect(),
    )
}

fn stops(commands: &[UiCommand]) -> bool {
    commands.iter().any(|c| {
        matches!(
            c,
            UiCommand::Supervisor(Command::StopNow | Command::StopAfterCurrent) | UiCommand::Quit
        )
    })
}

#[test]
fn a_pasted_line_with_q_and_s_neither_asks_nor_stops() {
    let mut state = room();
    let commands = update(&mut state, burst("hello qS world"), Utc::now());
    assert!(!stops(&commands), "{commands:?}");
    assert!(state.dialog.is_none());
    let commands = update(&mut state, Msg::Paste("hello qS world".into()), Utc::now());
    assert!(!stops(&commands), "{commands:?}");
    assert!(state.dialog.is_none());
}

#[test]
fn of_two_keys_at_once_the_second_never_answers_the_first() {
    let mut state = room();
    let commands = update(&mut state, burst("qS"), Utc::now());
    assert_eq!(state.dialog, Some(Dialog::Quit));
    assert!(!stops(&commands), "{commands:?}");
}

#[test]
fn a_paste_fills_the_open_search_prompt() {
    let mut state = room();
    update(
        &mut state,
        Msg::Key(KeyEvent::new(KeyCode::Char('/'), KeyModifiers::NONE)),
        Utc::now(),
    );
    update(&mut state, Msg::Paste("qS\nx".into()), Utc::now());
    update(&mut state, burst("yz"), Utc::now());
    assert_eq!(state.output.search_input.as_deref(), Some("qS xyz"));
}

#[test]
fn a_few_keys_at_once_still_act() {
    // Two keys that came together, as over a slow link: zoom, then the help.
    let mut state = room();
    update(&mut state, burst("z?"), Utc::now());
    assert!(state.zoom && state.help);
}

//! `/`, `w`, `O`: the keys that change which lanes the Lanes pane lists and
//! in what order ([`super::listing`]); the lane shown stays one listed.

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::lanes;
use super::{AppState, UiCommand};
use crate::ui::keymap::Action;

/// `/` (open the prompt), `w` and `O` (with lanes; availability checked).
pub fn act(state: &mut AppState, action: Action, now: DateTime<Utc>) -> Vec<UiCommand> {
    let Some(fleet) = state.fleet.as_mut() else {
        return Vec::new();
    };
    let listing = &mut fleet.listing;
    match action {
        Action::FilterLanes => listing.typing = Some(listing.filter.clone()),
        Action::NeedsYouOnly => listing.needs_you_only = !listing.needs_you_only,
        Action::SortLanes => listing.sort = listing.sort.next(),
        _ => return Vec::new(),
    }
    fleet.relist();
    lanes::keep_selection_listed(state, now)
}

/// A key while `/`'s prompt is open: it owns every key (none acts as a
/// command); the lanes are listed anew as it is typed. Returns whether it took the key.
pub fn typing_key(
    state: &mut AppState,
    key: KeyEvent,
    now: DateTime<Utc>,
    commands: &mut Vec<UiCommand>,
) -> bool {
    let Some(fleet) = state.fleet.as_mut() else {
        return false;
    };
    let listing = &mut fleet.listing;
    let Some(typed) = listing.typing.as_mut() else {
        return false;
    };
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Esc => {
            listing.typing = None;
            listing.filter.clear();
        }
        KeyCode::Char('c') if ctrl => {
            listing.typing = None;
            listing.filter.clear();
        }
        KeyCode::Enter => listing.filter = listing.typing.take().unwrap_or_default(),
        KeyCode::Backspace => {
            typed.pop();
        }
        KeyCode::Char(c) if !ctrl => typed.push(c),
        _ => return true,
    }
    fleet.relist();
    commands.extend(lanes::keep_selection_listed(state, now));
    true
}

/// Text pasted into `/`'s prompt.
pub fn type_text(state: &mut AppState, text: &str, now: DateTime<Utc>) -> Vec<UiCommand> {
    let Some(fleet) = state.fleet.as_mut() else {
        return Vec::new();
    };
    let Some(typed) = fleet.listing.typing.as_mut() else {
        return Vec::new();
    };
    // Lane names hold no white space: a pasted name's line break is no part of it.
    typed.extend(text.chars().filter(|c| !c.is_whitespace()));
    fleet.relist();
    lanes::keep_selection_listed(state, now)
}

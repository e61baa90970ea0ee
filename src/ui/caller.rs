//! Calls a human from the control room: after each batch of news the state is
//! observed ([`observe`]); the calls for attention between two observations
//! ([`detect`]) are signalled on the terminal after the next draw, so that an
//! escape never lands in the middle of a frame. Only the terminal is rung:
//! `on_attention` is run by the host.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::app::AppState;
use super::app::observe::{observe, take_lane_calls};
use super::attention::Notifier;
use crate::config::UiConfig;
use crate::fleet::attention::{AttentionEvent, Observation, detect};

pub(super) struct Caller {
    notifier: Notifier,
    /// The single loop's name in the calls (the folder's name).
    loop_name: String,
    last: Option<Observation>,
    due: Vec<AttentionEvent>,
    /// When the requests were last observed: a large inbox is listed in
    /// full, so news is looked at at most every [`LOOK_GAP`] (the room's
    /// one-second tick looks again).
    looked: Option<Instant>,
}

/// The shortest time between two observations.
const LOOK_GAP: Duration = Duration::from_millis(250);

impl Caller {
    /// `dir` is the fleet's (or the loop's) folder, whose name is the single loop's.
    pub(super) fn new(config: &UiConfig, dir: &Path) -> Caller {
        let full = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let loop_name = full
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        Caller {
            notifier: Notifier::new(config),
            loop_name,
            last: None,
            due: Vec::new(),
            looked: None,
        }
    }

    /// Looks at the state after an update; what changed is signalled by [`Caller::signal`].
    pub(super) fn look(&mut self, state: &mut AppState) {
        self.due.extend(take_lane_calls(state));
        if self.looked.is_some_and(|at| at.elapsed() < LOOK_GAP) {
            return;
        }
        self.looked = Some(Instant::now());
        let now = observe(state, &self.loop_name);
        if self.last.as_ref() == Some(&now) {
            return;
        }
        self.due.extend(detect(self.last.as_ref(), &now));
        self.last = Some(now);
    }

    /// Signals the calls due, on `terminal` (flushed); call it right after a draw.
    pub(super) fn signal(&mut self, terminal: &mut impl Write) {
        if self.due.is_empty() {
            return;
        }
        let due = std::mem::take(&mut self.due);
        if let Err(err) = self.notifier.notify(terminal, &due) {
            tracing::warn!("cannot signal a call for attention on the terminal: {err}");
        }
    }
}

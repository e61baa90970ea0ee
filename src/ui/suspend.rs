//! Ctrl-Z and SIGTSTP in the control room, as full-screen programs handle them:
//! the running sessions are paused first (their groups stopped, the watchdog's
//! clock with them), then the terminal is given back and clowder stops; after
//! `fg` the screen is taken again, repainted, and the sessions paused here are
//! resumed.

use std::io;
use std::time::{Duration, Instant};

use super::terminal::{Inputs, TerminalGuard};
use crate::detach::Detacher;

/// How long the stop waits for the loops to report their sessions paused.
const PAUSE_WAIT: Duration = Duration::from_secs(2);

/// A suspend asked for, waiting for the pauses it asked for; `T` names a
/// session to resume afterwards (a lane, or the single loop's).
#[derive(Debug)]
pub(super) struct Suspend<T> {
    to_resume: Vec<T>,
    asked: Instant,
}

impl<T> Suspend<T> {
    /// `paused_here`: the sessions this suspend has asked to pause.
    pub(super) fn new(paused_here: Vec<T>) -> Suspend<T> {
        Suspend {
            to_resume: paused_here,
            asked: Instant::now(),
        }
    }

    pub(super) fn waits_for(&self) -> &[T] {
        &self.to_resume
    }

    /// Whether to stop now: every session asked is paused (`all_paused`), or
    /// the wait is over.
    pub(super) fn due(&self, all_paused: bool) -> bool {
        all_paused || self.asked.elapsed() >= PAUSE_WAIT
    }

    /// Gives the terminal back and stops until continued; returns the sessions
    /// to resume. `parent`: the waiting parent, which stops with this process.
    pub(super) fn stop(
        self,
        guard: &mut TerminalGuard,
        inputs: &mut Inputs,
        parent: Option<&Detacher>,
    ) -> io::Result<Vec<T>> {
        inputs.pause_events();
        let result = guard.suspend(|| {
            if let Some(parent) = parent {
                parent.suspending();
            }
        });
        inputs.reopen();
        result.map(|()| self.to_resume)
    }
}

//! Waiting for a loop's answer to a note told to it: whether its running
//! session took the note now, or the note waits for the next session (see
//! [`crate::store::notes`]). Every teller (`clowder tell`, the host for the
//! room and the web page) asks here.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::store::notes::{self, Note, Verdict};

/// Why a note waits when the folder's loop does not run.
pub const NO_LOOP: &str = "no loop runs here now";
/// Why a note waits when its lane does not run.
pub const NO_LANE: &str = "the lane is not running now";

/// How long a teller waits for the loop to decide a note: the loop wakes on
/// the note's bell, so it is mostly a few milliseconds; a loop busy
/// elsewhere keeps the note for its next session.
const VERDICT_WAIT: Duration = Duration::from_secs(5);
/// How often the teller looks at the note meanwhile.
const VERDICT_POLL: Duration = Duration::from_millis(20);

/// Leaves `text` for the loop whose control folder is `control_dir` and
/// waits for its decision; `idle` says why when it does not run.
pub fn tell_blocking(
    control_dir: &Path,
    running: bool,
    idle: &str,
    text: &str,
) -> Result<(Note, Verdict), String> {
    let note = notes::leave(control_dir, text, chrono::Utc::now())?;
    if !running {
        return Ok((note, notes::not_running(idle)));
    }
    let deadline = Instant::now() + VERDICT_WAIT;
    loop {
        if let Some(verdict) = decided(control_dir, &note.id, deadline) {
            return Ok((note, verdict));
        }
        std::thread::sleep(VERDICT_POLL);
    }
}

/// Waits, on an async runtime, for the running loop's decision on note `id`.
pub async fn verdict(control_dir: &Path, id: &str) -> Verdict {
    let deadline = Instant::now() + VERDICT_WAIT;
    loop {
        if let Some(verdict) = decided(control_dir, id, deadline) {
            return verdict;
        }
        tokio::time::sleep(VERDICT_POLL).await;
    }
}

/// The loop's decision on note `id`; past `deadline`, the teller's own: the
/// note waits for the next session.
fn decided(control_dir: &Path, id: &str, deadline: Instant) -> Option<Verdict> {
    notes::verdict(control_dir, id).or_else(|| {
        (Instant::now() >= deadline)
            .then(|| notes::hold(control_dir, id))
            .flatten()
    })
}

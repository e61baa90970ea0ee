//! Telling a note to a loop or a lane (`clowder tell TEXT`, `clowder lane
//! tell NAME TEXT`, `t` in the room, the web page's Tell): the note is left
//! (see [`crate::store::notes`]), and the teller waits for the loop to decide
//! whether its running session takes it now or the next session does.

use std::path::Path;
use std::time::{Duration, Instant};

use super::LaneName;
use super::lanes::Failure;
use crate::store::lock::InstanceLock;
use crate::store::notes::{self, Note, Verdict};
use crate::store::paths;

/// `clowder tell TEXT`, in the current folder; the exit code.
pub fn run(words: &[String]) -> i32 {
    let result = std::env::current_dir()
        .map_err(|err| Failure::Failed(format!("cannot read the current folder: {err}")))
        .and_then(|root| for_the_loop(&root, words))
        .map(|done| done.iter().for_each(|line| println!("clowder: {line}")));
    super::lanes::report(result)
}

/// Leaves a note for the single loop of `root`. With no loop running, the note
/// waits for the next one started here.
pub fn for_the_loop(root: &Path, words: &[String]) -> Result<Vec<String>, Failure> {
    if super::host::has_lanes(root).map_err(Failure::Usage)? {
        return Err(Failure::Usage(
            "this folder runs lanes: tell one of them with `clowder lane tell NAME TEXT` (see `clowder lanes`)"
                .into(),
        ));
    }
    let lock = InstanceLock::acquire(root);
    // Taking the lock means nobody holds it: no loop runs here now.
    let running = lock.is_err();
    drop(lock);
    let control_dir = paths::state_dir(root);
    let (note, verdict) =
        tell_blocking(&control_dir, running, NO_LOOP, &words.join(" ")).map_err(Failure::Usage)?;
    Ok(vec![format!(
        "note {} for the loop in this folder: {}",
        note.id,
        verdict.answer()
    )])
}

/// Leaves a note for lane `name` of the fleet in `root`.
pub fn for_a_lane(root: &Path, name: &LaneName, words: &[String]) -> Result<Vec<String>, Failure> {
    let registry = super::registry::load(root)?;
    let Some(lane) = registry.lane(name) else {
        return Err(Failure::Usage(format!(
            "no lane named {name} (see `clowder lanes`)"
        )));
    };
    if lane.kind.is_task() {
        return Err(Failure::Refused(format!(
            "lane {name} follows a task directory: clowder builds no prompt for it"
        )));
    }
    let files = super::lane_files_dir(root, name);
    let lock = super::lane_lock_path(root, name);
    let running = InstanceLock::acquire_file(&lock).is_err();
    let (note, verdict) =
        tell_blocking(&files, running, NO_LANE, &words.join(" ")).map_err(Failure::Usage)?;
    Ok(vec![format!(
        "note {} for lane {name}: {}",
        note.id,
        verdict.answer()
    )])
}

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

/// Whether the loop or lane whose lock is `lock` runs now.
pub fn runs(lock: &Path) -> bool {
    InstanceLock::acquire_file(lock).is_err()
}

//! Telling a note to a loop or a lane (`clowder tell TEXT`, `clowder lane
//! tell NAME TEXT`, `t` in the room, the web page's Tell): the note is left
//! (see [`crate::store::notes`]), and the teller waits for the loop to decide
//! whether its running session takes it now or the next session does.

use std::path::Path;

use super::LaneName;
use super::lanes::Failure;
use super::note_answer::{NO_LANE, NO_LOOP, tell_blocking};
use crate::store::lock::InstanceLock;
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

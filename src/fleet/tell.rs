//! `clowder tell TEXT` and `clowder lane tell NAME TEXT`: a note for the next
//! session of the loop running here, or of a lane (see [`crate::store::notes`]).

use std::path::Path;

use super::LaneName;
use super::lanes::Failure;
use crate::store::lock::InstanceLock;
use crate::store::notes;
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
    let note = notes::leave(
        &paths::state_dir(root),
        &words.join(" "),
        chrono::Utc::now(),
    )
    .map_err(Failure::Usage)?;
    // Taking the lock means nobody holds it: no loop runs here now.
    let running = InstanceLock::acquire(root).is_err();
    let when = if running {
        "its next session gets it at the top of its prompt"
    } else {
        "no loop runs here now: the next one started here gets it in its first session"
    };
    Ok(vec![format!(
        "note {} left for the loop in this folder: {when}",
        note.id
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
    let note =
        notes::leave(&files, &words.join(" "), chrono::Utc::now()).map_err(Failure::Usage)?;
    let lock = super::lane_lock_path(root, name);
    let running = InstanceLock::acquire_file(&lock).is_err();
    let when = if running {
        "its next session gets it at the top of its prompt"
    } else {
        "the lane is not running now: its next session gets it when it runs again"
    };
    Ok(vec![format!(
        "note {} left for lane {name}: {when}",
        note.id
    )])
}

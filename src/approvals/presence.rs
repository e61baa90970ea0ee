//! Whether a person is there to ask: whoever shows the queue to one (a control
//! room, an attached client or web page, a notifier) touches `.watched` in the
//! queue's folder while it does; the gate reads how fresh it is. Nobody there
//! means a call that only a person could decide is better denied now than left
//! waiting for its timeout.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The mark's name in the queue's folder (a dot file: never read as a request).
const MARK: &str = ".watched";
/// How often the mark is touched while someone is there.
const TOUCH_EVERY: Duration = Duration::from_secs(5);
/// How old a mark may be and still mean someone is there.
const FRESH: Duration = Duration::from_secs(30);

fn mark_path(dir: &Path) -> PathBuf {
    dir.join(MARK)
}

fn age(path: &Path, now: SystemTime) -> Option<Duration> {
    let modified = std::fs::symlink_metadata(path).ok()?.modified().ok()?;
    Some(now.duration_since(modified).unwrap_or(Duration::ZERO))
}

/// Says that someone is there, at most every [`TOUCH_EVERY`]. The queue's
/// folder is made as the queue makes it (0700) when it is not there yet: the
/// first call of a run must find the mark too.
pub fn mark(dir: &Path) {
    let path = mark_path(dir);
    let now = SystemTime::now();
    if age(&path, now).is_some_and(|age| age < TOUCH_EVERY) {
        return;
    }
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    if made.is_err() {
        return;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path);
    if let Ok(file) = file {
        let _ = file.set_modified(now);
    }
}

/// Whether someone said, lately, that they are there.
pub fn watched(dir: &Path) -> bool {
    age(&mark_path(dir), SystemTime::now()).is_some_and(|age| age < FRESH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_mark_means_someone_is_there_and_an_old_one_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!watched(dir.path()));
        mark(dir.path());
        assert!(watched(dir.path()));
        let old = SystemTime::now() - Duration::from_secs(120);
        let file = std::fs::File::options()
            .write(true)
            .open(mark_path(dir.path()))
            .expect("open");
        file.set_modified(old).expect("set time");
        assert!(!watched(dir.path()));
        mark(dir.path());
        assert!(watched(dir.path()));
        let queue = dir.path().join("new/approvals");
        assert!(!watched(&queue));
        mark(&queue);
        assert!(watched(&queue));
        assert!(
            crate::approvals::Queue::open(&queue).is_ok(),
            "made as the queue makes it"
        );
    }
}

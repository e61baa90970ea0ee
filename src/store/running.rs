//! `.clowder/running/`: one small JSON file per process group clowder has
//! started and not yet seen end (a session or a hook), written and fsynced
//! before the group can do anything, removed once it is gone. What a killed
//! clowder leaves here is what the next start must end.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::versioned::{self, Format};

/// Version 0 is a record written before versions were kept: the same fields.
const FORMAT: Format = Format {
    current: 1,
    first: 0,
    unversioned: Some(0),
    migrate: versioned::no_changes,
    in_struct: false,
};

pub use super::paths::RUNNING_DIR;

/// One started process group, with what proves that a process is its.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The `CLOWDER_SESSION` value every process of it inherits.
    pub token: String,
    /// `session` or `hook`.
    pub kind: String,
    /// The session's global number, or the hook's command.
    pub what: String,
    /// The clowder that started it.
    pub clowder_pid: u32,
    /// The leader; 0 while it is being started (then `start_ticks` is clowder's).
    pub pid: i32,
    pub pgid: i32,
    /// The leader's start time in clock ticks since boot: nothing older is its.
    pub start_ticks: u64,
    /// Its cgroup, when sessions run in cgroups.
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
}

/// The records folder of a project.
#[derive(Debug, Clone)]
pub struct Running {
    dir: PathBuf,
}

impl Running {
    pub fn new(working_dir: &Path) -> Running {
        Running {
            dir: super::paths::state_dir(working_dir).join(RUNNING_DIR),
        }
    }

    /// The records kept in `dir` itself (a fleet lane keeps them in its files folder).
    pub fn in_dir(dir: PathBuf) -> Running {
        Running { dir }
    }

    fn path(&self, token: &str) -> PathBuf {
        self.dir.join(format!("{token}.json"))
    }

    /// Writes `record` durably (a later run must find it even after a SIGKILL).
    pub fn add(&self, record: &Record) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let bytes = FORMAT.to_vec(record).map_err(io::Error::other)?;
        super::write_atomically(&self.path(&record.token), &bytes)
    }

    pub fn remove(&self, token: &str) {
        let _ = std::fs::remove_file(self.path(token));
    }

    /// Every readable record. The temp files of interrupted writes are removed
    /// (nobody else writes here: the instance lock is held); a record that
    /// cannot be read is left for [`Running::set_aside_unreadable`]. A record
    /// made by a newer clowder is left in place, unread, and said in the log:
    /// its process is that clowder's to end.
    pub fn all(&self) -> Vec<Record> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut records = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if !is_record(&path) {
                if is_temp(&path) {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            match read_record(&path) {
                Ok(record) => records.push(record),
                Err(err) if versioned::is_newer(&err) => {
                    tracing::warn!("{}: {err}: left as it is", path.display());
                }
                Err(_) => {}
            }
        }
        records
    }

    /// Moves each record that cannot be read aside, to `NAME.json.unreadable`:
    /// it may be the only trace of processes still to end, for a person to
    /// look at. Returns a warning for each.
    pub fn set_aside_unreadable(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut said = Vec::new();
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            let err = match read_record(&path) {
                Err(err) if is_record(&path) && !versioned::is_newer(&err) => err,
                _ => continue,
            };
            let aside = super::paths::aside(&path, "unreadable");
            said.push(match std::fs::rename(&path, &aside) {
                Ok(()) => format!(
                    "{}: not a record of a running session ({err}): kept as {}; any process it named is not ended",
                    path.display(),
                    aside.display()
                ),
                Err(move_err) => format!(
                    "{}: not a record of a running session ({err}), and cannot be moved aside: {move_err}",
                    path.display()
                ),
            });
        }
        said
    }
}

fn read_record(path: &Path) -> Result<Record, String> {
    super::small_file::read_to_string(path)
        .map_err(|err| err.to_string())
        .and_then(|text| FORMAT.parse::<Record>(&text))
}

fn is_record(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// `.NAME.XXXXXX.tmp`: a write that never finished.
fn is_temp(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let running = Running::new(dir.path());
        let record = Record {
            token: "1.2.s3".into(),
            kind: "session".into(),
            what: "3".into(),
            clowder_pid: 1,
            pid: 10,
            pgid: 10,
            start_ticks: 99,
            cgroup: Some(PathBuf::from("/sys/fs/cgroup/x")),
        };
        running.add(&record).expect("add");
        std::fs::write(dir.path().join(".clowder/running/junk.json"), "x").expect("junk");
        assert_eq!(running.all(), vec![record]);
        let said = running.set_aside_unreadable();
        assert!(said[0].contains("junk.json.unreadable"), "{said:?}");
        assert!(
            dir.path()
                .join(".clowder/running/junk.json.unreadable")
                .exists()
        );
        running.remove("1.2.s3");
        assert!(running.all().is_empty());
    }
}

//! `.iteration_counter`: the last global iteration number handed out, so that a
//! second run continues numbering where the first stopped.
//!
//! A number is persisted before the session that uses it starts, so a crash can
//! never make a later run reuse it. The counter is not the only record of the
//! numbers used: every session has an output file named after its number and a
//! `session_start` event in the event log. Their highest number is a floor for
//! the counter, so a counter file that is missing, corrupt or restored from an
//! old backup never makes a number come round again; and as the counter itself
//! is kept when it is higher, no number is skipped either.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::events;

pub struct Counter {
    path: PathBuf,
    last: u64,
}

/// The outcome of reading the counter, with what had to be recovered.
pub struct Loaded {
    pub counter: Counter,
    pub warnings: Vec<String>,
}

/// The highest number each of the other records shows as handed out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The highest `N` of the output files `{prefix}-{N}.jsonl`.
    pub output_files: u64,
    /// The highest `global` of the event log's `session_start` events.
    pub event_log: u64,
}

impl Evidence {
    fn highest(self) -> u64 {
        self.output_files.max(self.event_log)
    }

    fn describe(self) -> String {
        format!(
            "the highest number in use: {} (output files {}, event log {})",
            self.highest(),
            self.output_files,
            self.event_log
        )
    }
}

/// Reads the counter at `path`, floored by the output files `{prefix}-{N}.jsonl`
/// in `output_dir` and by the `session_start` events of `event_log` (if the log
/// is kept). Whatever had to be recovered comes back as warnings.
pub fn recover(path: &Path, output_dir: &Path, prefix: &str, event_log: Option<&Path>) -> Loaded {
    let mut warnings = Vec::new();
    let logged = match event_log.map(events::highest_session_global) {
        Some(Ok(highest)) => highest,
        Some(Err(err)) => {
            warnings.push(format!(
                "{}: cannot read the event log ({err}); the iteration counter is checked against the output files only",
                event_log.map_or_else(String::new, |p| p.display().to_string())
            ));
            0
        }
        None => 0,
    };
    let evidence = Evidence {
        output_files: highest_output_number(output_dir, prefix),
        event_log: logged,
    };
    let mut loaded = Counter::load(path, evidence);
    warnings.append(&mut loaded.warnings);
    loaded.warnings = warnings;
    loaded
}

impl Counter {
    /// Reads the counter; it never goes below what `evidence` shows in use.
    pub fn load(path: &Path, evidence: Evidence) -> Loaded {
        let floor = evidence.highest();
        let (last, warning) = match super::small_file::read_to_string(path) {
            Ok(text) => match text.trim().parse::<u64>() {
                Ok(value) if value >= floor => (value, None),
                Ok(value) => (
                    floor,
                    Some(format!(
                        "{}: says {value}, behind {}; continuing after {floor}",
                        path.display(),
                        evidence.describe()
                    )),
                ),
                Err(_) => (
                    floor,
                    Some(format!(
                        "{}: expected a whole number, found {:?}; continuing after {}",
                        path.display(),
                        text.chars().take(40).collect::<String>(),
                        evidence.describe()
                    )),
                ),
            },
            // A first run: nothing to recover, nothing to say.
            Err(err) if err.kind() == io::ErrorKind::NotFound && floor == 0 => (0, None),
            Err(err) if err.kind() == io::ErrorKind::NotFound => (
                floor,
                Some(format!(
                    "{}: missing; continuing after {}",
                    path.display(),
                    evidence.describe()
                )),
            ),
            Err(err) => (
                floor,
                Some(format!(
                    "{}: cannot read ({err}); continuing after {}",
                    path.display(),
                    evidence.describe()
                )),
            ),
        };
        Loaded {
            counter: Counter {
                path: path.to_path_buf(),
                last,
            },
            warnings: warning.into_iter().collect(),
        }
    }

    pub fn last(&self) -> u64 {
        self.last
    }

    pub fn next(&self) -> u64 {
        self.last + 1
    }

    /// Records `value` as handed out.
    pub fn commit(&mut self, value: u64) -> io::Result<()> {
        self.last = self.last.max(value);
        super::write_atomically(&self.path, format!("{}\n", self.last).as_bytes())
    }
}

/// The highest `N` among files named `{prefix}-{N}.jsonl` in `dir`.
pub fn highest_output_number(dir: &Path, prefix: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let head = format!("{prefix}-");
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            name.strip_prefix(&head)?
                .strip_suffix(".jsonl")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// Creates a fresh output file for the first free number at or after `from`:
/// an existing file is never appended to, truncated or overwritten.
pub fn create_output_file(dir: &Path, prefix: &str, from: u64) -> io::Result<(u64, PathBuf, File)> {
    let mut number = from;
    loop {
        let path = dir.join(format!("{prefix}-{number}.jsonl"));
        match OpenOptions::new().append(true).create_new(true).open(&path) {
            Ok(file) => return Ok((number, path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => number += 1,
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(output_files: u64) -> Evidence {
        Evidence {
            output_files,
            event_log: 0,
        }
    }

    #[test]
    fn counter_survives_and_never_goes_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".iteration_counter");
        let mut loaded = Counter::load(&path, Evidence::default());
        assert!(loaded.warnings.is_empty(), "a first run recovers nothing");
        assert_eq!(loaded.counter.next(), 1);
        loaded.counter.commit(1).expect("commit");
        loaded.counter.commit(2).expect("commit");
        assert_eq!(Counter::load(&path, files(0)).counter.next(), 3);
        std::fs::write(&path, "garbage").expect("write");
        let recovered = Counter::load(&path, files(7));
        assert_eq!(recovered.warnings.len(), 1);
        assert_eq!(recovered.counter.next(), 8);
    }

    #[test]
    fn the_highest_record_wins_and_the_counter_is_kept_when_ahead() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".iteration_counter");
        let both = Evidence {
            output_files: 4,
            event_log: 6,
        };
        for (content, next, warned) in [
            (None, 7, true),
            (Some(""), 7, true),
            (Some("\u{0}\u{1}garbage"), 7, true),
            (Some("5\n"), 7, true),
            (Some("6\n"), 7, false),
            // Ahead of the other records (a session whose start was never
            // logged): its number is not handed out again, and none is skipped.
            (Some("9\n"), 10, false),
        ] {
            match content {
                Some(text) => std::fs::write(&path, text).expect("write"),
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
            let loaded = Counter::load(&path, both);
            assert_eq!(loaded.counter.next(), next, "{content:?}");
            assert_eq!(!loaded.warnings.is_empty(), warned, "{content:?}");
        }
        let missing = Counter::load(&dir.path().join("nothing"), both);
        assert!(
            missing.warnings[0].contains("missing")
                && missing.warnings[0].contains("output files 4, event log 6"),
            "{:?}",
            missing.warnings
        );
    }

    #[test]
    fn recover_reads_the_output_files_and_the_event_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".iteration_counter");
        let log = dir.path().join("events.jsonl");
        std::fs::write(dir.path().join("run-2.jsonl"), "").expect("write");
        std::fs::write(
            &log,
            "{\"event\":\"session_start\",\"global\":5}\n{\"event\":\"session_start\",\"glo",
        )
        .expect("write");
        std::fs::write(&path, "oops").expect("write");
        let loaded = recover(&path, dir.path(), "run", Some(&log));
        assert_eq!(loaded.counter.next(), 6);
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        // Without the event log, the output files are all there is.
        assert_eq!(recover(&path, dir.path(), "run", None).counter.next(), 3);
    }

    #[test]
    fn existing_output_files_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("run-3.jsonl"), "old").expect("write");
        assert_eq!(highest_output_number(dir.path(), "run"), 3);
        let (number, path, _) = create_output_file(dir.path(), "run", 3).expect("create");
        assert_eq!(number, 4);
        assert!(path.ends_with("run-4.jsonl"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("run-3.jsonl")).expect("read"),
            "old"
        );
    }
}

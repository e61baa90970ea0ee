//! `.iteration_counter`: the last global iteration number handed out, so that a
//! second run continues numbering where the first stopped.
//!
//! A number is persisted before the session that uses it starts, so a crash can
//! never make a later run reuse it. When the file is missing or unreadable, the
//! highest number found among the existing output files is used instead, so the
//! numbering still never goes back.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

pub struct Counter {
    path: PathBuf,
    last: u64,
}

/// The outcome of reading the counter, with what had to be recovered.
pub struct Loaded {
    pub counter: Counter,
    pub warning: Option<String>,
}

impl Counter {
    /// Reads the counter; `highest_existing` is the highest global number among the
    /// output files already on disk, a floor for the counter.
    pub fn load(path: &Path, highest_existing: u64) -> Loaded {
        let (last, warning) = match std::fs::read_to_string(path) {
            Ok(text) => match text.trim().parse::<u64>() {
                Ok(value) => (value, None),
                Err(_) => (
                    0,
                    Some(format!(
                        "{}: expected a whole number, found {:?}; continuing after the highest output file ({highest_existing})",
                        path.display(),
                        text.chars().take(40).collect::<String>()
                    )),
                ),
            },
            Err(err) if err.kind() == io::ErrorKind::NotFound => (0, None),
            Err(err) => (
                0,
                Some(format!(
                    "{}: cannot read ({err}); continuing after the highest output file ({highest_existing})",
                    path.display()
                )),
            ),
        };
        Loaded {
            counter: Counter {
                path: path.to_path_buf(),
                last: last.max(highest_existing),
            },
            warning,
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

    #[test]
    fn counter_survives_and_never_goes_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".iteration_counter");
        let mut loaded = Counter::load(&path, 0);
        assert_eq!(loaded.counter.next(), 1);
        loaded.counter.commit(1).expect("commit");
        loaded.counter.commit(2).expect("commit");
        assert_eq!(Counter::load(&path, 0).counter.next(), 3);
        std::fs::write(&path, "garbage").expect("write");
        let recovered = Counter::load(&path, 7);
        assert!(recovered.warning.is_some());
        assert_eq!(recovered.counter.next(), 8);
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

//! The iteration whose actions are under way, in `iteration.jsonl`: the answer is
//! written before its first action runs, then a line as each action starts and
//! another when it is done, each synced. A worker killed meanwhile leaves the file;
//! the next one reads which actions ran, runs none of them twice, and says so.
//! The file goes once the iteration is in `actions.jsonl`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::task::{FileError, JOURNAL_FILE};
use super::tools::ActionResult;
use crate::store::versioned::Format;

/// The first line's format; the lines after it are [`Entry`]s.
const HEAD_FORMAT: Format = Format {
    current: 1,
    first: 1,
    unversioned: None,
    migrate: crate::store::versioned::no_changes,
    in_struct: false,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Head {
    iteration: u64,
    timestamp: DateTime<Utc>,
    /// The answer whose actions run, as received.
    llm_response: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    /// Action number N (from 0) is about to run.
    Start(usize),
    /// Action N ran; its result, without its arguments (they are in the answer).
    Done(usize, ActionResult),
}

/// The open journal of the iteration under way.
pub(crate) struct Journal {
    path: PathBuf,
    file: File,
}

/// What a killed worker's journal says.
#[derive(Debug)]
pub(crate) struct Interrupted {
    pub iteration: u64,
    pub timestamp: DateTime<Utc>,
    pub llm_response: String,
    /// Results of the actions that ran to their end, by number.
    pub done: BTreeMap<usize, ActionResult>,
    /// Actions that started, done or not.
    pub started: BTreeSet<usize>,
}

fn error(path: &Path, err: impl std::fmt::Display) -> FileError {
    FileError {
        path: path.to_path_buf(),
        message: err.to_string(),
    }
}

impl Journal {
    /// A new journal for `iteration`'s answer `raw`, replacing any old one.
    pub(crate) fn begin(dir: &Path, iteration: u64, raw: &str) -> Result<Journal, FileError> {
        let path = dir.join(JOURNAL_FILE);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|err| error(&path, err))?;
        let mut journal = Journal { path, file };
        let head = Head {
            iteration,
            timestamp: Utc::now(),
            llm_response: raw.to_string(),
        };
        let line = HEAD_FORMAT
            .to_vec(&head)
            .map_err(|err| error(&journal.path, err))?;
        journal.write_line(line)?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|err| error(dir, err))?;
        Ok(journal)
    }

    /// Opens an existing journal to go on with it, after the line a kill cut.
    pub(crate) fn reopen(dir: &Path) -> Result<Journal, FileError> {
        let path = dir.join(JOURNAL_FILE);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|err| error(&path, err))?;
        let mut journal = Journal { path, file };
        if !journal.ends_a_line()? {
            journal.write_line(Vec::new())?;
        }
        Ok(journal)
    }

    fn ends_a_line(&self) -> Result<bool, FileError> {
        super::task::ends_a_line(&self.file).map_err(|err| error(&self.path, err))
    }

    pub(crate) fn start(&mut self, action: usize) -> Result<(), FileError> {
        self.entry(&Entry::Start(action))
    }

    pub(crate) fn done(&mut self, action: usize, result: &ActionResult) -> Result<(), FileError> {
        let mut lean = result.clone();
        lean.args = serde_json::Map::new();
        self.entry(&Entry::Done(action, lean))
    }

    fn entry(&mut self, entry: &Entry) -> Result<(), FileError> {
        let line = serde_json::to_vec(entry).map_err(|err| error(&self.path, err))?;
        self.write_line(line)
    }

    fn write_line(&mut self, mut line: Vec<u8>) -> Result<(), FileError> {
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .map_err(|err| error(&self.path, err))
    }
}

/// Removes the journal once its iteration is in `actions.jsonl`.
pub(crate) fn remove(dir: &Path) -> Result<(), FileError> {
    let path = dir.join(JOURNAL_FILE);
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(error(&path, err)),
        _ => Ok(()),
    }
}

/// The journal a killed worker left, if any. A line cut by the kill is ignored;
/// a first line that cannot be read is an error (the file is left as it is).
pub(crate) fn read(dir: &Path) -> Result<Option<Interrupted>, FileError> {
    let path = dir.join(JOURNAL_FILE);
    let file = match crate::store::small_file::open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(error(&path, err)),
    };
    let mut lines = io::BufReader::new(file).lines();
    let first = match lines.next() {
        Some(Ok(line)) => line,
        // Killed before the first line was whole: no action had started.
        None => return Ok(None),
        Some(Err(err)) => return Err(error(&path, err)),
    };
    let head: Head = match HEAD_FORMAT.parse(&first) {
        Ok(head) => head,
        Err(_) if !first.ends_with('}') => return Ok(None),
        Err(err) => return Err(error(&path, format!("line 1: {err}"))),
    };
    let mut found = Interrupted {
        iteration: head.iteration,
        timestamp: head.timestamp,
        llm_response: head.llm_response,
        done: BTreeMap::new(),
        started: BTreeSet::new(),
    };
    for line in lines {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Entry>(&line) {
            Ok(Entry::Start(n)) => {
                found.started.insert(n);
            }
            Ok(Entry::Done(n, result)) => {
                found.started.insert(n);
                found.done.insert(n, result);
            }
            // A line a kill cut short.
            Err(_) => {}
        }
    }
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(tool: &str) -> ActionResult {
        ActionResult {
            tool: tool.into(),
            args: serde_json::Map::new(),
            ok: true,
            output: Some("fine".into()),
            error: None,
            security_violation: false,
            skipped: false,
            interrupted: false,
        }
    }

    #[test]
    fn a_journal_cut_anywhere_says_what_started_and_what_ended() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read(dir.path()).expect("none").is_none());
        let mut journal = Journal::begin(dir.path(), 3, r#"{"actions":[]}"#).expect("begin");
        journal.start(0).expect("start");
        journal.done(0, &result("write_file")).expect("done");
        journal.start(1).expect("start");
        drop(journal);
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL_FILE))
            .expect("open");
        file.write_all(br#"{"done":[1,{"tool":"re"#)
            .expect("a cut line");
        let found = read(dir.path()).expect("read").expect("some");
        assert_eq!(found.iteration, 3);
        assert_eq!(found.llm_response, r#"{"actions":[]}"#);
        assert_eq!(found.started.iter().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(found.done.keys().copied().collect::<Vec<_>>(), [0]);
        let mut again = Journal::reopen(dir.path()).expect("reopen");
        again.start(2).expect("start");
        let found = read(dir.path()).expect("read").expect("some");
        assert_eq!(found.started.iter().copied().collect::<Vec<_>>(), [0, 1, 2]);
        remove(dir.path()).expect("remove");
        assert!(read(dir.path()).expect("gone").is_none());
        remove(dir.path()).expect("removing twice is fine");
    }

    #[test]
    fn a_head_cut_short_is_no_journal_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL_FILE);
        std::fs::write(&path, r#"{"schema_version":1,"iteration":2,"times"#).expect("write");
        assert!(read(dir.path()).expect("cut").is_none());
        std::fs::write(&path, "{\"schema_version\":9,\"iteration\":2}\n").expect("write");
        let err = read(dir.path()).expect_err("newer");
        assert!(err.to_string().contains("newer clowder"), "{err}");
    }
}

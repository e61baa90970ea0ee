//! The event log: one JSON object per line, appended, each with `ts` and `event`.
//!
//! Every event is one `write` on a file opened with `O_APPEND`, so concurrent
//! readers (`tail -f`, the control room) never see a line torn by clowder itself.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::protocol::{Event, TimedEvent};

pub struct EventLog {
    path: PathBuf,
    file: File,
}

impl EventLog {
    /// Opens (creating) the log for append. A log whose last line was cut off, by a
    /// crash or a full disk, gets a newline first so the next event starts clean.
    pub fn open(path: &Path) -> io::Result<EventLog> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)?;
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(EventLog {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn append(&mut self, ts: DateTime<Utc>, event: &Event) -> io::Result<()> {
        let record = TimedEvent {
            ts,
            event: event.clone(),
        };
        let mut line = serde_json::to_vec(&record).map_err(io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)
    }

    /// Makes what was appended durable; used for events a later run relies on.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// Lines longer than this are skipped unread: no event clowder writes comes near
/// it, and a reader of a damaged log must not hold a gigabyte "line" in memory.
const MAX_LINE: usize = 64 * 1024;

/// The highest global number of the `session_start` events in the log at `path`
/// (0 without any, or without the file). A session starts only with a number
/// the counter has handed out, so this is a floor for the counter.
///
/// Lines that are not events (torn by a crash, a full disk, edited by hand)
/// are skipped.
pub fn highest_session_global(path: &Path) -> io::Result<u64> {
    let mut highest = 0;
    let read = for_each_line(path, |line| {
        highest = highest.max(session_start_global(line).unwrap_or(0));
    });
    match read {
        Ok(()) => Ok(highest),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(err) => Err(err),
    }
}

/// Calls `each` with every line of the log at `path` (a last line without
/// its newline too), streamed: memory stays bounded whatever its size, and
/// lines longer than [`MAX_LINE`] are skipped unread.
pub fn for_each_line(path: &Path, mut each: impl FnMut(&[u8])) -> io::Result<()> {
    // A regular file only: a FIFO would wait forever, `/dev/zero` never end.
    let file = super::small_file::open(path)?;
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut overlong = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (chunk, line_ends) = match memchr::memchr(b'\n', buf) {
            Some(at) => (&buf[..at], true),
            None => (buf, false),
        };
        let consumed = chunk.len() + usize::from(line_ends);
        if !overlong {
            if line.len() + chunk.len() > MAX_LINE {
                overlong = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(consumed);
        if line_ends {
            if !overlong {
                each(&line);
            }
            line.clear();
            overlong = false;
        }
    }
    if !overlong && !line.is_empty() {
        each(&line);
    }
    Ok(())
}

/// The `global` of a `session_start` line; only the two fields are read, so a
/// line of an older or newer clowder still counts.
fn session_start_global(line: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct Probe {
        event: String,
        global: Option<u64>,
    }
    // Most lines are other events: skip them without parsing.
    memchr::memmem::find(line, b"session_start")?;
    let probe: Probe = serde_json::from_slice(line).ok()?;
    (probe.event == "session_start")
        .then_some(probe.global)
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_closed_before_the_next_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, b"{\"ts\":\"x\",\"event\":\"loop_st").expect("write");
        let mut log = EventLog::open(&path).expect("open");
        log.append(Utc::now(), &Event::StopCancelled)
            .expect("append");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let parsed: serde_json::Value = serde_json::from_str(lines[1]).expect("json");
        assert_eq!(parsed["event"], "stop_cancelled");
    }

    #[test]
    fn the_highest_session_start_is_found_past_garbage_and_torn_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        assert_eq!(highest_session_global(&path).expect("missing"), 0);
        let start = |global: u64| {
            format!(
                "{{\"ts\":\"2026-01-01T00:00:00Z\",\"event\":\"session_start\",\"iteration\":1,\"global\":{global},\"pid\":1,\"pgid\":1,\"output_file\":\"x\"}}\n"
            )
        };
        let mut text = String::new();
        text.push_str(&start(3));
        text.push_str("not json at all\n\n");
        // Other events carry a global too; only session starts hand one out.
        text.push_str("{\"event\":\"session_complete\",\"global\":99}\n");
        text.push_str("{\"event\":\"session_abandoned\",\"global\":null}\n");
        text.push_str(&start(9));
        // A line far over the limit, with a session start buried in it.
        text.push_str(&"x".repeat(MAX_LINE * 3));
        text.push_str(&start(500));
        text.push_str(&start(7));
        // Torn by a crash: no closing brace, no newline.
        text.push_str("{\"event\":\"session_start\",\"global\":1000");
        std::fs::write(&path, &text).expect("write");
        assert_eq!(highest_session_global(&path).expect("read"), 9);

        // A whole last line without its newline still counts.
        std::fs::write(&path, start(12).trim_end()).expect("write");
        assert_eq!(highest_session_global(&path).expect("read"), 12);
    }
}

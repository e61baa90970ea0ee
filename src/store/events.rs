//! The event log: one JSON object per line, appended, each with `ts` and `event`.
//!
//! Every event is one `write` on a file opened with `O_APPEND`, so concurrent
//! readers (`tail -f`, the control room) never see a line torn by clowder itself.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

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
}

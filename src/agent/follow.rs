//! Follows a session's output file as it grows, for the control room: reads only
//! new bytes, parses them incrementally, and keeps memory bounded however large
//! the file gets (a file already large is read from near its end; a reader that
//! falls far behind skips ahead rather than buffering).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use super::stream::{AgentFormat, LineKind, Rendered, SessionStats, StreamParser};

/// How much of an existing file's end is read when following starts.
pub const TAIL_WINDOW: u64 = 2 * 1024 * 1024;
/// Read at most this much per poll, so one poll never stalls the UI's thread.
const CHUNK: u64 = 1024 * 1024;
/// Further behind than this, skip to the last [`TAIL_WINDOW`] instead of catching up.
const MAX_LAG: u64 = 32 * 1024 * 1024;
const POLL: Duration = Duration::from_millis(200);

/// New lines of the followed file.
#[derive(Debug, Clone)]
pub struct FollowUpdate {
    pub file: PathBuf,
    pub lines: Vec<Rendered>,
    pub stats: SessionStats,
    /// Start the view afresh (first update of a file).
    pub reset: bool,
}

fn skipped_line(bytes: u64) -> Rendered {
    Rendered {
        kind: LineKind::System,
        text: format!(
            "… {} of earlier output not shown …",
            crate::fmt::bytes(bytes)
        ),
        detail: None,
        tool_use_id: None,
        is_error: false,
    }
}

/// Polls `file` until the receiver is gone (or the task is aborted).
pub async fn follow(
    file: PathBuf,
    format: AgentFormat,
    updates: mpsc::UnboundedSender<FollowUpdate>,
) {
    let mut parser = StreamParser::new(format);
    let mut offset: u64 = 0;
    let mut first = true;
    let mut handle: Option<File> = None;
    loop {
        if updates.is_closed() {
            return;
        }
        if handle.is_none() {
            handle = File::open(&file).ok();
        }
        let mut lines = Vec::new();
        if let Some(reader) = handle.as_mut()
            && let Ok(meta) = reader.metadata()
        {
            let size = meta.len();
            if size < offset {
                // Replaced or truncated by someone else: start over.
                offset = 0;
                parser = StreamParser::new(format);
                first = true;
            }
            let lag = size - offset;
            if (first && size > TAIL_WINDOW) || lag > MAX_LAG {
                let jump_to = size - TAIL_WINDOW.min(size);
                lines.push(skipped_line(jump_to - offset));
                offset = jump_to;
                // Resume at a line boundary: the parser must not see half a line.
                if let Some(boundary) = next_line_start(reader, offset) {
                    offset = boundary;
                }
            }
            if size > offset && reader.seek(SeekFrom::Start(offset)).is_ok() {
                let mut buf = Vec::new();
                if let Ok(read) = reader.take(CHUNK).read_to_end(&mut buf) {
                    offset += read as u64;
                    lines.extend(parser.feed(&buf));
                }
            }
        }
        if first || !lines.is_empty() {
            let update = FollowUpdate {
                file: file.clone(),
                lines,
                stats: parser.stats().clone(),
                reset: first,
            };
            if updates.send(update).is_err() {
                return;
            }
            first = false;
        }
        tokio::time::sleep(POLL).await;
    }
}

fn next_line_start(reader: &mut File, from: u64) -> Option<u64> {
    reader.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    let read = reader.read(&mut buf).ok()?;
    memchr::memchr(b'\n', &buf[..read]).map(|i| from + i as u64 + 1)
}

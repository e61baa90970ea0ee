//! Follows a session's output file as it grows, for the control room: the lane
//! on screen in a fleet, or an older session of a single loop (a single loop's
//! live session is shown by its own reader). Reads only new bytes, parses them
//! incrementally, and keeps memory bounded however large the file gets (a file
//! already large is read from near its end; a reader that falls far behind skips
//! ahead rather than buffering). It runs on a thread of its own, woken by a
//! change notification on the file (and by a slow poll in case notifications are
//! lost), so no reading happens on the screen's thread.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::stream::{AgentFormat, LineKind, Rendered, SessionStats, StreamParser};

/// How much of an existing file's end is read when following starts.
pub const TAIL_WINDOW: u64 = 2 * 1024 * 1024;
/// Read at most this much per wake, so the screen gets news of a flood in steps.
const CHUNK: u64 = 1024 * 1024;
/// Further behind than this, skip to the last [`TAIL_WINDOW`] instead of catching up.
const MAX_LAG: u64 = 32 * 1024 * 1024;
/// Reads when no change notification came (notifications can be lost).
const POLL: Duration = Duration::from_secs(1);
/// At least this long between two reads: a fast writer costs a few reads a
/// second, not one per write.
pub const MIN_GAP: Duration = Duration::from_millis(200);

/// New lines of the followed file.
#[derive(Debug, Clone)]
pub struct FollowUpdate {
    pub file: PathBuf,
    pub lines: Vec<Rendered>,
    pub stats: SessionStats,
    /// Start the view afresh (first update of a file).
    pub reset: bool,
}

/// The line that stands for `bytes` of output read without display lines.
pub fn skipped_line(bytes: u64) -> Rendered {
    skipped_note(format!(
        "… {} of earlier output not shown …",
        crate::fmt::bytes(bytes)
    ))
}

/// A line of ours among the agent's, saying what is not shown.
pub fn skipped_note(text: String) -> Rendered {
    Rendered {
        kind: LineKind::System,
        text,
        detail: None,
        tool_use_id: None,
        is_error: false,
    }
}

/// Following one file; dropping it stops the thread.
pub struct Follower {
    stop: Arc<AtomicBool>,
    wake: std_mpsc::Sender<()>,
    _watch: Option<crate::wake::Watch>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower").finish_non_exhaustive()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.wake.send(());
    }
}

/// Follows `file` on a thread of its own until the [`Follower`] is dropped or
/// the receiver is gone.
pub fn follow(
    file: PathBuf,
    format: AgentFormat,
    updates: mpsc::UnboundedSender<FollowUpdate>,
) -> Follower {
    let (wake, woken) = std_mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let hint = wake.clone();
    // The process's one inotify instance: a follower adds no thread of its own,
    // and the session's reader already watches the same folder.
    let watch = crate::wake::Watch::start(std::slice::from_ref(&file), move || {
        let _ = hint.send(());
    });
    let stopped = Arc::clone(&stop);
    // Without a thread nothing is followed; the rest of the screen still works.
    let _ = std::thread::Builder::new()
        .name("output-follower".into())
        .spawn(move || follow_loop(&file, format, &updates, &woken, &stopped));
    Follower {
        stop,
        wake,
        _watch: watch,
    }
}

fn follow_loop(
    file: &std::path::Path,
    format: AgentFormat,
    updates: &mpsc::UnboundedSender<FollowUpdate>,
    woken: &std_mpsc::Receiver<()>,
    stop: &AtomicBool,
) {
    let mut tail = Tail::new(format);
    loop {
        if updates.is_closed() || stop.load(Ordering::Acquire) {
            return;
        }
        if let Some(update) = tail.read(file)
            && updates.send(update).is_err()
        {
            return;
        }
        std::thread::sleep(MIN_GAP);
        match woken.recv_timeout(POLL) {
            Ok(()) | Err(std_mpsc::RecvTimeoutError::Timeout) => {}
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
        }
        while woken.try_recv().is_ok() {}
    }
}

/// Where following one file stands.
struct Tail {
    format: AgentFormat,
    parser: StreamParser,
    offset: u64,
    first: bool,
    handle: Option<File>,
}

impl Tail {
    fn new(format: AgentFormat) -> Tail {
        Tail {
            format,
            parser: StreamParser::new(format),
            offset: 0,
            first: true,
            handle: None,
        }
    }

    /// What was added since the last read; `None` when nothing was.
    fn read(&mut self, file: &std::path::Path) -> Option<FollowUpdate> {
        if self.handle.is_none() {
            self.handle = File::open(file).ok();
        }
        let mut lines = Vec::new();
        if let Some(reader) = self.handle.as_mut()
            && let Ok(meta) = reader.metadata()
        {
            let size = meta.len();
            if size < self.offset {
                // Replaced or truncated by someone else: start over.
                self.offset = 0;
                self.parser = StreamParser::new(self.format);
                self.first = true;
            }
            let lag = size - self.offset;
            if (self.first && size > TAIL_WINDOW) || lag > MAX_LAG {
                let jump_to = size - TAIL_WINDOW.min(size);
                lines.push(skipped_line(jump_to - self.offset));
                self.offset = jump_to;
                // Resume at a line boundary: the parser must not see half a line.
                if let Some(boundary) = next_line_start(reader, self.offset) {
                    self.offset = boundary;
                }
            }
            if size > self.offset && reader.seek(SeekFrom::Start(self.offset)).is_ok() {
                let mut buf = Vec::new();
                if let Ok(read) = reader.take(CHUNK).read_to_end(&mut buf) {
                    self.offset += read as u64;
                    lines.extend(self.parser.feed(&buf));
                }
            }
        }
        if !self.first && lines.is_empty() {
            return None;
        }
        let update = FollowUpdate {
            file: file.to_path_buf(),
            lines,
            stats: self.parser.stats().clone(),
            reset: self.first,
        };
        self.first = false;
        Some(update)
    }
}

fn next_line_start(reader: &mut File, from: u64) -> Option<u64> {
    reader.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    let read = reader.read(&mut buf).ok()?;
    memchr::memchr(b'\n', &buf[..read]).map(|i| from + i as u64 + 1)
}

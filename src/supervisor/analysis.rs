//! Reading a session's output while it is written, so that little is left to read
//! when the session ends.
//!
//! A [`SessionReader`] is fed on the session's reader thread ([`super::reading`])
//! as the file grows, and [`SessionReader::finish`] reads the rest when the
//! session ends. One reader decodes each line once for the classification (rate
//! limits, fatal errors, commit patterns), the statistics, the guards and the
//! completion promise. Whatever the chunking, the result is that of one pass
//! over the whole file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::follow::{TAIL_WINDOW, skipped_line};
use crate::agent::{
    AgentFormat, Detectors, OutputScan, Rendered, SessionStats, StreamParser, ToolCallSig,
};

/// Size of one read.
const READ_BYTES: usize = 256 * 1024;

/// What one session's output told.
#[derive(Debug)]
pub struct Analysis {
    /// The size of the output file when the rest was read.
    pub output_bytes: u64,
    /// The scan; the default (nothing found) if the file could not be read.
    pub scan: OutputScan,
    pub stats: SessionStats,
    /// The agent's final message held the completion promise.
    pub promise_kept: bool,
    /// Whether the agent did something ([`StreamParser::acted`]); `None`
    /// when its output cannot tell.
    pub acted: Option<bool>,
    /// Tool calls not yet taken by [`SessionReader::progress`] (empty unless
    /// recording), for the guards to see one at a time.
    pub new_calls: Vec<ToolCallSig>,
    /// Display lines not yet taken by [`SessionReader::take_shown`] (empty
    /// unless [`SessionReader::show`] was called).
    pub shown: Vec<Rendered>,
}

impl Analysis {
    /// The analysis of output that could not be read: it finds nothing.
    pub fn unread(path: &Path) -> Analysis {
        Analysis {
            output_bytes: std::fs::metadata(path).map_or(0, |m| m.len()),
            scan: OutputScan::default(),
            stats: SessionStats::default(),
            promise_kept: false,
            acted: None,
            new_calls: Vec::new(),
            shown: Vec::new(),
        }
    }
}

/// What a running session did so far, for the budgets and the doom-loop check.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub tool_calls: u64,
    pub cost_usd: Option<f64>,
    /// Tool calls read since the last [`SessionReader::progress`], in order
    /// (empty unless [`SessionReader::record_tool_calls`] was called).
    pub new_calls: Vec<ToolCallSig>,
}

/// One session's output file, read from the start as it grows.
#[derive(Debug)]
pub struct SessionReader {
    path: PathBuf,
    file: Option<File>,
    /// How far the reader has been fed.
    offset: u64,
    parser: StreamParser,
    /// A read failed: the scan says nothing (as a failed one-pass scan did).
    failed: bool,
    buf: Vec<u8>,
    /// Display lines for the screen, when somebody watches.
    shown: Option<Shown>,
}

/// The display lines built while reading, for the control room's output pane.
#[derive(Debug, Default)]
struct Shown {
    lines: Vec<Rendered>,
    /// Bytes read without display lines since the last line shown: a reader
    /// far behind the writer builds lines only for the last [`TAIL_WINDOW`].
    skipped: u64,
}

impl SessionReader {
    pub fn new(
        path: &Path,
        detectors: Arc<Detectors>,
        format: AgentFormat,
        promise: Option<&str>,
    ) -> SessionReader {
        let mut parser = StreamParser::statistics_only(format);
        parser.classify_with(detectors);
        if let Some(promise) = promise {
            parser.watch_final_text(promise);
        }
        SessionReader {
            path: path.to_path_buf(),
            file: None,
            offset: 0,
            parser,
            failed: false,
            buf: Vec::new(),
            shown: None,
        }
    }

    /// Build display lines of what is read from now on, for
    /// [`SessionReader::take_shown`]: the same decoding serves the screen and
    /// the guards. Only the lines within [`TAIL_WINDOW`] of the file's end when
    /// read are built; a marker stands for the bytes before them.
    pub fn show(&mut self) {
        self.shown.get_or_insert_with(Shown::default);
    }

    /// Whether display lines are built ([`SessionReader::show`]).
    pub fn showing(&self) -> bool {
        self.shown.is_some()
    }

    /// The display lines built since the last call.
    pub fn take_shown(&mut self) -> Vec<Rendered> {
        self.shown
            .as_mut()
            .map(|shown| std::mem::take(&mut shown.lines))
            .unwrap_or_default()
    }

    /// The agent's own retry of a failed request, if its last lines read so
    /// far are one.
    pub fn agent_retrying(&self) -> Option<crate::protocol::AgentRetrying> {
        self.parser
            .agent_retrying()
            .map(|found| crate::protocol::AgentRetrying {
                rate_limit: found.kind == crate::agent::StopKind::RateLimit,
                message: found.message,
            })
    }

    /// Why the agent cannot work, once its lines read so far say so.
    pub fn agent_error(&self) -> Option<&str> {
        self.parser.agent_error()
    }

    /// The statistics of everything read so far.
    pub fn stats(&self) -> &SessionStats {
        self.parser.stats()
    }

    /// Keep every tool call's signature for [`SessionReader::progress`].
    pub fn record_tool_calls(&mut self) {
        self.parser.record_tool_calls();
    }

    /// The session's tool calls and cost as read so far.
    pub fn progress(&mut self) -> Progress {
        let stats = self.parser.stats();
        Progress {
            tool_calls: stats.tool_calls,
            cost_usd: stats.cost_usd,
            new_calls: self.parser.take_tool_calls(),
        }
    }

    /// Bytes read and handed to the reader so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn file(&mut self) -> io::Result<&File> {
        if self.file.is_none() {
            self.file = Some(File::open(&self.path)?);
        }
        match &self.file {
            Some(file) => Ok(file),
            None => Err(io::Error::other("the output file was not opened")),
        }
    }

    /// Reads at most `budget` new bytes (fewer at the end of what is written so
    /// far) and feeds them to the reader; returns how many.
    pub fn feed(&mut self, budget: usize) -> usize {
        if self.failed {
            return 0;
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(READ_BYTES, 0);
        let mut total = 0;
        while total < budget {
            let want = READ_BYTES.min(budget - total);
            let offset = self.offset;
            let read = match self
                .file()
                .and_then(|file| read_at(file, &mut buf[..want], offset))
            {
                Ok(read) => read,
                Err(_) => {
                    self.failed = true;
                    break;
                }
            };
            if read == 0 {
                break;
            }
            let end = self.file_end();
            self.feed_chunk(&buf[..read], end);
            total += read;
            if read < want {
                // A short read of a file is its end (for now): asking again
                // would only read nothing.
                break;
            }
        }
        self.buf = buf;
        total
    }

    /// The file's size now, when display lines are built (they are only for
    /// its last [`TAIL_WINDOW`]); unused otherwise.
    fn file_end(&self) -> u64 {
        match (&self.shown, &self.file) {
            (Some(_), Some(file)) => file.metadata().map_or(0, |m| m.len()),
            _ => 0,
        }
    }

    /// Hands the bytes at the reader's offset to the parser; with display lines
    /// wanted, builds them if the bytes are within [`TAIL_WINDOW`] of `end`.
    fn feed_chunk(&mut self, chunk: &[u8], end: u64) {
        let next = self.offset + chunk.len() as u64;
        match &mut self.shown {
            None => {
                self.parser.feed(chunk);
            }
            Some(shown) => {
                let near_end = next.saturating_add(TAIL_WINDOW) >= end;
                self.parser.set_rendering(near_end);
                let lines = self.parser.feed(chunk);
                if !near_end {
                    shown.skipped += chunk.len() as u64;
                } else {
                    if shown.skipped > 0 {
                        shown.lines.push(skipped_line(shown.skipped));
                        shown.skipped = 0;
                    }
                    shown.lines.extend(lines);
                }
            }
        }
        self.offset = next;
    }

    /// Reads the rest of the file (up to its size now: the analysis is of the
    /// same bytes even if something outside the session still writes) and
    /// returns the analysis. Blocking: call it off the loop's thread.
    pub fn finish(mut self) -> Analysis {
        let end = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        let start = self.offset;
        let file = if self.failed {
            None
        } else {
            match self.file() {
                Ok(_) => self.file.take(),
                Err(_) => None,
            }
        };
        // A read error leaves the statistics with what was read, and the
        // scan saying nothing (as a failed one-pass scan did).
        let failed = match &file {
            Some(file) => {
                self.failed
                    || read_range(file, start, end, |chunk| self.feed_chunk(chunk, end)).is_err()
            }
            None => true,
        };
        let last = self.parser.finish();
        let shown = match self.shown.take() {
            Some(mut shown) => {
                shown.lines.extend(last);
                shown.lines
            }
            None => Vec::new(),
        };
        let mut parser = self.parser;
        let mut scan = parser.take_scan().filter(|_| !failed).unwrap_or_default();
        // An agent clowder cannot read must not loop unseen.
        if scan.fatal_error.is_none() {
            scan.fatal_error = parser.unsupported().map(str::to_owned);
        }
        Analysis {
            output_bytes: end,
            scan,
            promise_kept: parser.final_text_has_watched(),
            acted: parser.acted(),
            stats: parser.stats().clone(),
            new_calls: parser.take_tool_calls(),
            shown,
        }
    }
}

/// `pread`, retried on EINTR.
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, offset) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Hands `file[start..end]` to `sink` in reads of [`READ_BYTES`].
fn read_range(file: &File, start: u64, end: u64, mut sink: impl FnMut(&[u8])) -> io::Result<()> {
    let mut buf = vec![0; READ_BYTES];
    let mut offset = start;
    while offset < end {
        let want = READ_BYTES.min((end - offset) as usize);
        let read = read_at(file, &mut buf[..want], offset)?;
        if read == 0 {
            break;
        }
        sink(&buf[..read]);
        offset += read as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    use crate::agent::{scan_output_with, stream::AgentFormat};

    fn one_pass(path: &Path, det: &Detectors, promise: &str) -> (OutputScan, SessionStats, bool) {
        let mut parser = StreamParser::new(AgentFormat::Auto);
        parser.watch_final_text(promise);
        let scan = scan_output_with(File::open(path).unwrap(), det, |chunk| {
            parser.feed(chunk);
        })
        .unwrap();
        parser.finish();
        let kept = parser.final_text_has_watched();
        (scan, parser.stats().clone(), kept)
    }

    #[test]
    fn fed_while_written_then_finished_equals_one_pass() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let det = Arc::new(Detectors::new(&[], &["Closes #[0-9]+".into()]).unwrap());
        let lines = [
            r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-sonnet-4-5","tools":[],"cwd":"/"}"#,
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":7,"output_tokens":3}}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"rate limit reached","is_error":true}]}}"#,
            "Closes #7",
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"total_cost_usd":0.5,"result":"ALL DONE","session_id":"s"}"#,
        ];
        let mut file = File::create(&path).unwrap();
        let mut reader =
            SessionReader::new(&path, Arc::clone(&det), AgentFormat::Auto, Some("DONE"));
        assert_eq!(reader.feed(1 << 20), 0, "nothing written yet");
        for (i, line) in lines.iter().enumerate() {
            // Cut each line in two writes, and feed small budgets in between.
            let (a, b) = line.split_at(line.len() / 2);
            file.write_all(a.as_bytes()).unwrap();
            reader.feed(3 + i);
            file.write_all(b.as_bytes()).unwrap();
            file.write_all(b"\n").unwrap();
            reader.feed(17);
        }
        file.write_all(b"a last line without newline").unwrap();
        let fed = reader.offset();
        assert!(fed > 0);
        let analysis = reader.finish();
        let (scan, stats, kept) = one_pass(&path, &det, "DONE");
        assert_eq!(analysis.scan, scan);
        assert_eq!(analysis.stats, stats);
        assert_eq!(analysis.promise_kept, kept);
        assert!(kept && scan.commit_pattern_seen && scan.rate_limit.is_none());
        assert_eq!(
            analysis.output_bytes,
            std::fs::metadata(&path).unwrap().len()
        );
    }

    const TRANSCRIPT: [&str; 5] = [
        r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-sonnet-4-5","tools":[],"cwd":"/"}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":7,"output_tokens":3}}}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"two files"}]}}"#,
        "plain text",
        r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"total_cost_usd":0.5,"result":"ALL DONE","session_id":"s"}"#,
    ];

    #[test]
    fn shown_lines_are_the_rendering_parsers_and_the_statistics_do_not_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let det = Arc::new(Detectors::new(&[], &[]).unwrap());
        let mut file = File::create(&path).unwrap();
        let mut showing = SessionReader::new(&path, Arc::clone(&det), AgentFormat::Auto, None);
        showing.show();
        let mut shown = Vec::new();
        for line in TRANSCRIPT {
            let (a, b) = line.split_at(line.len() / 2);
            file.write_all(a.as_bytes()).unwrap();
            showing.feed(1 << 20);
            file.write_all(format!("{b}\n").as_bytes()).unwrap();
            showing.feed(1 << 20);
            shown.extend(showing.take_shown());
        }
        file.write_all(b"unfinished").unwrap();
        let analysis = showing.finish();
        shown.extend(analysis.shown);

        let mut parser = StreamParser::new(AgentFormat::Auto);
        let mut expected = parser.feed(&std::fs::read(&path).unwrap());
        expected.extend(parser.finish());
        assert_eq!(shown, expected);
        assert!(shown.iter().any(|l| l.text.contains("ls")), "{shown:?}");
        assert_eq!(shown.last().map(|l| l.text.as_str()), Some("unfinished"));

        let silent = SessionReader::new(&path, det, AgentFormat::Auto, None).finish();
        assert!(silent.shown.is_empty());
        assert_eq!(analysis.stats, silent.stats);
    }

    #[test]
    fn a_reader_far_behind_the_writer_shows_only_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let call = |i: usize| {
            format!(
                r#"{{"type":"assistant","message":{{"id":"m{i:06}","content":[{{"type":"tool_use","id":"t{i:06}","name":"Bash","input":{{"command":"ls"}}}}]}}}}"#
            ) + "\n"
        };
        let line_len = call(0).len();
        let count = 2 * TAIL_WINDOW as usize / line_len + 1;
        let mut text: String = (0..count).map(call).collect();
        text.push_str("the last line\n");
        std::fs::write(&path, &text).unwrap();
        let det = Arc::new(Detectors::new(&[], &[]).unwrap());
        let mut reader = SessionReader::new(&path, det, AgentFormat::Auto, None);
        reader.show();
        while reader.feed(READ_BYTES) > 0 {}
        let shown = reader.take_shown();
        let analysis = reader.finish();
        assert!(analysis.shown.is_empty(), "all read before the end");
        assert!(
            shown[0].text.contains("of earlier output not shown"),
            "{:?}",
            shown[0]
        );
        assert_eq!(shown.last().map(|l| l.text.as_str()), Some("the last line"));
        // The window's lines, about TAIL_WINDOW of them; not the whole file.
        let window = TAIL_WINDOW as usize / line_len;
        assert!(
            shown.len() > window / 2 && shown.len() < window * 2,
            "{} lines shown of {count}",
            shown.len()
        );
        assert_eq!(analysis.stats.lines, count as u64 + 1);
        assert_eq!(analysis.stats.tool_calls, count as u64);
    }

    #[test]
    fn a_missing_file_finds_nothing() {
        let det = Arc::new(Detectors::new(&[], &[]).unwrap());
        let mut reader = SessionReader::new(
            Path::new("/nonexistent/clowder/out.jsonl"),
            det,
            AgentFormat::Auto,
            None,
        );
        assert_eq!(reader.feed(1024), 0);
        let analysis = reader.finish();
        assert_eq!(analysis.scan, OutputScan::default());
        assert_eq!(analysis.output_bytes, 0);
    }
}

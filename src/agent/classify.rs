//! Classifying a session from its output: rate limits, transient API errors,
//! authentication or billing failures, commit patterns.
//!
//! The rules run inside the stream reader on the events it decodes anyway
//! (`StreamParser::classify_with`: one decode per line), or on their own over a
//! file or reader ([`scan_output`]), with the same result. The output of one session can be hundreds of megabytes, mostly tool results
//! the agent read or produced. Everything here is built so that such a file is
//! read once, in bounded memory, and so that nothing the agent merely *quoted*
//! (source code about rate limits, logs, even a whole stream-json line embedded in
//! a string) can be mistaken for the agent itself being rate-limited: JSON lines
//! are judged only by their parsed top-level structure, and free-text patterns
//! apply only to lines that are not JSON objects.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use chrono::{Local, NaiveDateTime, TimeZone};
use memchr::memmem;
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::decode::{ErrorField, Obj, Scalar, scalar};

use super::lines::LineSplitter;
#[cfg(test)]
use super::lines::MAX_LINE_BYTES;

/// A UTF-8 byte-order mark, which some tools put before a line.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Large reads keep syscall overhead negligible on multi-hundred-MB files.
const READ_BUF_BYTES: usize = 256 * 1024;

/// Longest excerpt of agent text quoted in a [`RateLimit::reason`].
const REASON_EXCERPT_CHARS: usize = 120;

/// Built-in free-text signs of a rate limit, for lines that are not JSON objects.
const DEFAULT_TEXT_PATTERNS: &[&str] = &[
    r"rate.?limit(?:ed)?(?: reached| exceeded)?",
    r"usage limit",
    r"too many requests",
    // A bare 429 is too common (line counts, diffs): only as a status code.
    // ASCII boundaries keep the fast DFA usable on non-ASCII text.
    r"(?:status|error|code|http/[0-9.]+)\W{0,3}429(?-u:\b)",
    r"quota exceeded",
    r"exceeded your current quota",
    r"resource.?exhausted",
    r"hit your (?:\S+ )?limit",
    r"limit reached\s*[∙·•–-]\s*resets",
];

/// Built-in free-text signs of a transient server error (an overloaded or
/// failing API, a dropped connection), for lines that are not JSON objects:
/// the CLIs' own wordings only, as an agent's final words may well discuss an
/// "internal server error" it fixed.
const DEFAULT_TEXT_TRANSIENT: &str = r"overloaded_error|api error:?\s*(?:5[0-9]{2}(?-u:\b)|overloaded|connection error)|http/[0-9.]+\W{0,3}5(?:00|02|03|04|29)(?-u:\b)|experiencing high demand";

/// A retry the agent makes on its own: Codex's `Reconnecting... 2/5 (…)`.
const RECONNECTING: &str = r"(?-u)^\W{0,3}(?:error:\s*)?reconnecting\.\.\.";

/// A free-text match followed by more than this many lines of output is
/// something the agent got past: only the end of a session decides. Blank and
/// indented lines (a stack trace's frames) do not count.
pub const TEXT_VERDICT_TAIL_LINES: u64 = 10;

/// The usage-limit texts Claude Code has put in a `result` line, loosened so that
/// wording changes between versions still match.
const USAGE_LIMIT_FORMS: &str = r"usage limit reached|limit reached\s*[∙·•–-]\s*resets|hit your (?:\S+ )?limit|rate limit reached|request rejected \(429\)|api error:?\s*429|rate_limit_error";

/// What in a Codex `turn.failed` / `error` message means the account is limited.
const CODEX_LIMIT_FORMS: &str = r"rate.?limit|(?-u:\b)429(?-u:\b)|usage.?limit|too many requests|quota|hit your (?:\S+ )?limit|resource.?exhausted";

/// What in a final result or a Codex failure means the agent cannot log in or
/// cannot pay: retrying will not help, a person has to act.
const AUTH_ERROR_FORMS: &str = r"invalid api key|invalid x-api-key|incorrect api key|please run /login|not logged in|oauth token (?:has )?expired|authentication_error|authentication_failed|(?-u:\b)401 unauthorized|credit balance is too low|billing_error|insufficient credit";

/// The billing part of [`AUTH_ERROR_FORMS`].
const BILLING_FORMS: &str = r"credit balance|billing|insufficient credit|payment";

/// A failed result's text that names a transient server-side failure.
const TRANSIENT_FORMS: &str = r"api error:?\s*5[0-9]{2}(?-u:\b)|overloaded_error|overloaded|internal server error|api_error|connection error|econnreset|econnrefused|socket hang up";

/// What in a Codex `turn.failed` / `error` message means the server failed for
/// now (Codex's words for a 500 are "We're currently experiencing high demand",
/// for a 503 `server_is_overloaded` "Selected model is at capacity").
const CODEX_TRANSIENT_FORMS: &str = r"high demand|at capacity|server_is_overloaded|temporar(?:y|ily) (?:error|unavailable)|(?-u:\b)5(?:00|02|03|04|29)(?-u:\b)|internal server error|service unavailable|bad gateway|gateway time-?out|overloaded|stream disconnected|connection (?:error|refused|reset|closed)|error sending request";

/// Claude's `…limit reached|1755806400`: the epoch after the pipe is the reset time.
const EPOCH_AFTER_PIPE: &str = r"(?-u)\|\s*([0-9]{10})(?:[^0-9]|$)";

/// Codex: `… or try again at Apr 28th, 2026 10:03 PM.` (the machine's local time).
const CODEX_TRY_AGAIN_AT: &str = r"(?i)try again at ([a-z]{3})[a-z]*\.? ([0-9]{1,2})(?:st|nd|rd|th)?,? ([0-9]{4}),? ([0-9]{1,2}):([0-9]{2}) ?([ap]m)";

/// What the scanner looks for, built once from config.
#[derive(Debug, Clone)]
pub struct Detectors {
    /// Built-in and user free-text patterns, for non-JSON lines only.
    text_rate_limit: Regex,
    text_transient: Regex,
    reconnecting: Regex,
    codex_transient_forms: Regex,
    /// User commit patterns, for every raw line; `None` when there are none.
    commit: Option<Regex>,
    usage_limit_forms: Regex,
    codex_limit_forms: Regex,
    epoch_after_pipe: Regex,
    codex_try_again_at: Regex,
    auth_error_forms: Regex,
    billing_forms: Regex,
    transient_forms: Regex,
}

impl Detectors {
    /// `extra_rate_limit_patterns`: user regexes, matched case-insensitively against
    /// NON-JSON lines only (in addition to built-in defaults).
    /// `commit_patterns`: regexes (case-sensitive) matched against every line, raw.
    /// Returns Err(message) naming the bad pattern if a regex does not compile.
    pub fn new(
        extra_rate_limit_patterns: &[String],
        commit_patterns: &[String],
    ) -> Result<Self, String> {
        // Each user pattern is compiled alone first so that an error names the
        // pattern the user wrote rather than the combined alternation.
        for p in extra_rate_limit_patterns {
            RegexBuilder::new(p)
                .case_insensitive(true)
                .build()
                .map_err(|e| format!("invalid rate-limit pattern `{p}`: {e}"))?;
        }
        for p in commit_patterns {
            Regex::new(p).map_err(|e| format!("invalid commit pattern `{p}`: {e}"))?;
        }

        let text_sources = DEFAULT_TEXT_PATTERNS
            .iter()
            .copied()
            .chain(extra_rate_limit_patterns.iter().map(String::as_str));
        let text_rate_limit = RegexBuilder::new(&alternation(text_sources))
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("rate-limit patterns do not combine: {e}"))?;

        let commit = if commit_patterns.is_empty() {
            None
        } else {
            let combined = alternation(commit_patterns.iter().map(String::as_str));
            Some(
                Regex::new(&combined)
                    .map_err(|e| format!("commit patterns do not combine: {e}"))?,
            )
        };

        Ok(Self {
            text_rate_limit,
            text_transient: builtin(DEFAULT_TEXT_TRANSIENT, true)?,
            reconnecting: builtin(RECONNECTING, true)?,
            codex_transient_forms: builtin(CODEX_TRANSIENT_FORMS, true)?,
            commit,
            usage_limit_forms: builtin(USAGE_LIMIT_FORMS, true)?,
            codex_limit_forms: builtin(CODEX_LIMIT_FORMS, true)?,
            epoch_after_pipe: builtin(EPOCH_AFTER_PIPE, false)?,
            codex_try_again_at: builtin(CODEX_TRY_AGAIN_AT, false)?,
            auth_error_forms: builtin(AUTH_ERROR_FORMS, true)?,
            billing_forms: builtin(BILLING_FORMS, true)?,
            transient_forms: builtin(TRANSIENT_FORMS, true)?,
        })
    }
}

fn alternation<'a>(patterns: impl Iterator<Item = &'a str>) -> String {
    patterns
        .map(|p| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|")
}

fn builtin(pattern: &str, case_insensitive: bool) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .build()
        .map_err(|e| format!("built-in pattern `{pattern}`: {e}"))
}

/// Why a session is considered rate-limited.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Short human reason, e.g. "result api_error_status 429", "rate_limit_event rejected (five_hour)", "assistant error rate_limit", "usage limit text: Claude AI usage limit reached", "pattern `rate limit` in line 12".
    pub reason: String,
    /// When the agent said the limit resets (unix epoch seconds), if it did.
    pub resets_at_epoch: Option<i64>,
}

/// Whether a session stopped on the account's limit or on a passing failure
/// of the API (an overload, a 5xx, a dropped connection): both are waited
/// out, but each has its own counter and limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    RateLimit,
    Transient,
}

/// The agent is retrying a failed request on its own (Codex's
/// `Reconnecting... n/5`, Claude Code's `api_retry`), as its last lines say.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrying {
    pub kind: StopKind,
    /// The agent's words, shortened.
    pub message: String,
}

/// What one pass over a session's output found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputScan {
    /// The session ended on a rate limit. At most one of this and
    /// `transient_error` is set: whichever the end of the session showed.
    pub rate_limit: Option<RateLimit>,
    /// The session ended on a transient server error (its reason; no reset time).
    pub transient_error: Option<RateLimit>,
    /// The agent cannot work at all (it cannot authenticate, or its account
    /// cannot pay): the whole message for the user, advice included. Read from
    /// the stream's structure only, never from tool results.
    pub fatal_error: Option<String>,
    pub commit_pattern_seen: bool,
    /// Complete lines, plus a final line without a trailing newline.
    pub lines: u64,
    /// Lines that parsed as JSON objects.
    pub json_lines: u64,
    /// `rate_limit_event`s rejected while the account paid for overage: the
    /// agent went on working, so these are not rate limits.
    pub overage_events: u64,
}

/// Streams the file once. Never panics on any bytes; io errors are returned.
pub fn scan_output_file(path: &Path, detectors: &Detectors) -> io::Result<OutputScan> {
    scan_output(File::open(path)?, detectors)
}

/// Same logic on an in-memory reader (used by tests and by scan_output_file).
///
/// A session counts as rate-limited when the last `result` line reports a 429 or
/// a usage-limit text, a `rate_limit_event` is `rejected`, an assistant line
/// carries `"error":"rate_limit"`, a Codex `turn.failed`/`error` message names a
/// limit, the agent's last lines are its own retry after a 429, or a line that
/// is not a JSON object matches a text pattern outside a path, within the last
/// [`TEXT_VERDICT_TAIL_LINES`] lines, and no `result` or Codex turn ending was
/// read. Server-side failures found the same ways are transient errors. Lines are
/// cut at 1 MiB; the kept start of an over-long line is matched against commit
/// patterns, and against text patterns unless it starts like a JSON object
/// (then it is an event with a huge payload, not agent chatter).
pub fn scan_output<R: Read>(reader: R, detectors: &Detectors) -> io::Result<OutputScan> {
    scan_output_with(reader, detectors, |_| {})
}

/// [`scan_output`], handing every chunk read to `also` as well, so that another
/// reader of the same output (the session statistics) needs no second pass.
pub fn scan_output_with<R: Read>(
    reader: R,
    detectors: &Detectors,
    mut also: impl FnMut(&[u8]),
) -> io::Result<OutputScan> {
    let mut reader = BufReader::with_capacity(READ_BUF_BYTES, reader);
    let mut scanner = Scanner::new(detectors);
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        scanner.feed(chunk);
        also(chunk);
        reader.consume(n);
    }
    Ok(scanner.finish())
}

/// The scan of [`scan_output`], fed piece by piece: the supervisor reads a
/// session's output while it is written and so has little left to read when the
/// session ends. Feeding the same bytes in any chunks gives the same
/// [`OutputScan`] as one pass over them.
pub struct OutputScanner {
    inner: Scanner<Arc<Detectors>>,
}

impl OutputScanner {
    pub fn new(detectors: Arc<Detectors>) -> Self {
        Self {
            inner: Scanner::new(detectors),
        }
    }

    /// The next bytes of the output, cut anywhere (a line may span many feeds).
    pub fn feed(&mut self, chunk: &[u8]) {
        self.inner.feed(chunk);
    }

    /// End of the output: a last line without a newline counts too.
    pub fn finish(self) -> OutputScan {
        self.inner.finish()
    }
}

impl std::fmt::Debug for OutputScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputScanner")
            .field("lines", &self.inner.lines)
            .finish_non_exhaustive()
    }
}

/// A rate-limit signal and the line it came from, so that signals found at
/// different times (the last `result` is only known at the end) can be ordered.
#[derive(Debug)]
struct Candidate {
    line: u64,
    kind: StopKind,
    limit: RateLimit,
}

/// Of two signals, keep one that says when the limit lifts, else the later one.
fn prefer(earlier: Candidate, later: Candidate) -> Candidate {
    if later.limit.resets_at_epoch.is_some() || earlier.limit.resets_at_epoch.is_none() {
        later
    } else {
        earlier
    }
}

/// Splits a byte stream into bounded lines and applies the rules to each.
/// `D` is `&Detectors` for a one-shot scan, `Arc<Detectors>` for one that lives
/// as long as a session.
pub(super) struct Scanner<D: Deref<Target = Detectors>> {
    det: D,
    /// The start of a line that continues in a later chunk (at most MAX_LINE_BYTES).
    pending: LineSplitter,
    lines: u64,
    json_lines: u64,
    commit_pattern_seen: bool,
    /// Best signal from everything but `result` lines.
    best: Option<Candidate>,
    /// Only the last `result` line counts: `None` when it was not rate-limited.
    last_result: Option<Candidate>,
    /// The last `result` line's fatal error, if it had one.
    last_result_fatal: Option<String>,
    /// A fatal error from anything but `result` lines (the first one found).
    fatal: Option<String>,
    overage_events: u64,
    /// The last free-text signal: it counts only near the end, and only
    /// without a structured verdict.
    text_best: Option<Candidate>,
    /// Lines that count ([`TEXT_VERDICT_TAIL_LINES`]) since `text_best`.
    lines_after_text: u64,
    /// A `result` line, `turn.completed` or `turn.failed` was read: the
    /// structure decides, free text does not.
    verdict_seen: bool,
    /// The agent's own retry, while no other output followed it.
    retrying: Option<Candidate>,
    /// Codex retried a request in this session (a later failure of the turn
    /// is then one the server caused).
    saw_reconnect: bool,
}

impl<D: Deref<Target = Detectors>> std::fmt::Debug for Scanner<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

impl<D: Deref<Target = Detectors>> Scanner<D> {
    pub(super) fn new(det: D) -> Self {
        Self {
            det,
            pending: LineSplitter::default(),
            lines: 0,
            json_lines: 0,
            commit_pattern_seen: false,
            best: None,
            last_result: None,
            last_result_fatal: None,
            fatal: None,
            overage_events: 0,
            text_best: None,
            lines_after_text: 0,
            verdict_seen: false,
            retrying: None,
            saw_reconnect: false,
        }
    }

    /// Why the agent cannot work, as soon as its output says so (not from
    /// a `result`: the agent is ending then anyway).
    pub(super) fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// The agent's own retry, if its last lines are one.
    pub(super) fn retrying(&self) -> Option<Retrying> {
        self.retrying.as_ref().map(|c| Retrying {
            kind: c.kind,
            message: c.limit.reason.clone(),
        })
    }

    fn feed(&mut self, chunk: &[u8]) {
        let mut lines = std::mem::take(&mut self.pending);
        lines.feed(chunk, |line, cut| self.process_line(line, cut));
        self.pending = lines;
    }

    pub(super) fn finish(mut self) -> OutputScan {
        let mut lines = std::mem::take(&mut self.pending);
        lines.finish(|line, cut| self.process_line(line, cut));
        let text = self
            .text_best
            .filter(|_| !self.verdict_seen && self.lines_after_text <= TEXT_VERDICT_TAIL_LINES);
        let mut candidates: Vec<Candidate> = [self.best, self.last_result, self.retrying, text]
            .into_iter()
            .flatten()
            .collect();
        candidates.sort_by_key(|c| c.line);
        let best = candidates.into_iter().reduce(prefer);
        let (rate_limit, transient_error) = match best {
            Some(c) if c.kind == StopKind::Transient => (None, Some(c.limit)),
            Some(c) => (Some(c.limit), None),
            None => (None, None),
        };
        OutputScan {
            rate_limit,
            transient_error,
            // The result's words say more than an assistant line's error code.
            fatal_error: self.last_result_fatal.or(self.fatal),
            commit_pattern_seen: self.commit_pattern_seen,
            lines: self.lines,
            json_lines: self.json_lines,
            overage_events: self.overage_events,
        }
    }

    fn process_line(&mut self, line: &[u8], truncated: bool) {
        if let Some(body) = self.needs_event(line, truncated) {
            self.on_event(body, serde_json::from_slice(body).as_ref());
        }
    }

    /// The rules for one line that need no decoding (commit patterns, text
    /// patterns, the skipping of lines that cannot signal anything); the line
    /// as the event rules read it when they are needed: hand its decoded
    /// event to [`Scanner::on_event`] then.
    pub(super) fn needs_event<'l>(&mut self, line: &'l [u8], truncated: bool) -> Option<&'l [u8]> {
        self.lines += 1;
        let number = self.lines;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(BOM).unwrap_or(line);

        if !self.commit_pattern_seen
            && let Some(commit) = &self.det.commit
        {
            self.commit_pattern_seen = commit.is_match(line);
        }

        let looks_like_object = line.trim_ascii_start().first() == Some(&b'{');
        if self.text_best.is_some() && line.first().is_some_and(|b| !b.is_ascii_whitespace()) {
            self.lines_after_text += 1;
        }
        if truncated {
            // An over-long line that starts like an object is almost surely a
            // stream-json event with a huge payload (a tool result, a base64
            // image); free-text matching its prefix would read quoted content
            // as a rate limit, which is exactly what must never happen.
            if looks_like_object {
                // Work (a huge tool result) after a retry: it succeeded.
                self.retrying = None;
            } else {
                self.check_text(line, number);
            }
            return None;
        }
        if !looks_like_object {
            self.check_text(line, number);
            return None;
        }
        if !may_signal_rate_limit(line.trim_ascii_start()) && line.trim_ascii_end().ends_with(b"}")
        {
            // Work after a retry: the retry succeeded.
            self.retrying = None;
            // Most lines (assistant text, tool calls and results) cannot carry a
            // rate-limit signal; skipping their parse is what keeps the scan near
            // the speed of reading the file.
            self.json_lines += 1;
            return None;
        }
        Some(line)
    }

    /// The event rules, for the line [`Scanner::needs_event`] returned.
    pub(super) fn on_event(
        &mut self,
        line: &[u8],
        event: Result<&Signals<'_>, &serde_json::Error>,
    ) {
        let number = self.lines;
        match event {
            Ok(event) => {
                self.json_lines += 1;
                self.check_event(event, number);
            }
            // An object cut mid-write (the agent was killed) is an event
            // whose end is missing, not agent chatter: what it quotes
            // must not read as a limit.
            Err(err) if err.is_eof() => {}
            Err(_) => self.check_text(line, number),
        }
    }

    fn signal(&mut self, line: u64, limit: RateLimit) {
        self.signal_kind(line, StopKind::RateLimit, limit);
    }

    fn signal_kind(&mut self, line: u64, kind: StopKind, limit: RateLimit) {
        let new = Candidate { line, kind, limit };
        self.best = Some(match self.best.take() {
            Some(old) => prefer(old, new),
            None => new,
        });
    }

    /// Rule for lines that are not JSON objects: free-text patterns, and the
    /// agent's own retries. A match inside a path is not the agent's word.
    fn check_text(&mut self, line: &[u8], number: u64) {
        if self.det.reconnecting.is_match(line) {
            let text = String::from_utf8_lossy(line);
            self.on_reconnect(&text, number);
        } else if !line.trim_ascii().is_empty() {
            self.retrying = None;
        }
        let (kind, found) = match outside_paths(&self.det.text_rate_limit, line) {
            Some(found) => (StopKind::RateLimit, found),
            None => match outside_paths(&self.det.text_transient, line) {
                Some(found) => (StopKind::Transient, found),
                None => return,
            },
        };
        let matched = excerpt(&String::from_utf8_lossy(found.as_bytes()));
        let limit = RateLimit {
            reason: format!("pattern `{matched}` in line {number}"),
            resets_at_epoch: self.epoch_after_pipe(line),
        };
        self.text_best = Some(Candidate {
            line: number,
            kind,
            limit,
        });
        self.lines_after_text = 0;
    }

    /// Claude Code retries a request on its own (`api_retry`, its `error`
    /// `rate_limit` for a 429, else a server error).
    fn on_api_retry(&mut self, error: &str, number: u64) {
        let kind = if error.contains("rate_limit") {
            StopKind::RateLimit
        } else {
            StopKind::Transient
        };
        self.retrying_on(kind, error, number);
    }

    /// The agent retries a request on its own; what it met decides the kind.
    fn on_reconnect(&mut self, message: &str, number: u64) {
        self.saw_reconnect = true;
        let kind = if self.det.codex_limit_forms.is_match(message.as_bytes()) {
            StopKind::RateLimit
        } else {
            StopKind::Transient
        };
        self.retrying_on(kind, message, number);
    }

    /// The agent's own retry at line `number`, after it met `what`.
    fn retrying_on(&mut self, kind: StopKind, what: &str, number: u64) {
        self.retrying = Some(Candidate {
            line: number,
            kind,
            limit: RateLimit {
                reason: format!("the agent was retrying: {}", excerpt(what)),
                resets_at_epoch: None,
            },
        });
    }

    /// Rules for JSON objects, decided by the top-level `type` only.
    fn check_event(&mut self, event: &Signals<'_>, number: u64) {
        match event.kind.str() {
            Some("result") => {
                self.verdict_seen = true;
                self.retrying = None;
                self.last_result_fatal = self.result_fatal(event);
                self.last_result = self.result_limit(event).map(|(kind, limit)| Candidate {
                    line: number,
                    kind,
                    limit,
                });
                // The agent went on and finished: whatever limit it met
                // before did not stop the session.
                if !result_failed(event)
                    && self.last_result.is_none()
                    && self.last_result_fatal.is_none()
                {
                    self.best = None;
                }
            }
            Some("rate_limit_event") => {
                let Some(info) = Obj::of(event.rate_limit_info) else {
                    return;
                };
                if info.scalar("status").str() != Some("rejected") {
                    return;
                }
                if info.scalar("isUsingOverage").bool() == Some(true) {
                    self.overage_events += 1;
                    return;
                }
                let reason = match info.scalar("rateLimitType").str() {
                    Some(kind) => format!("rate_limit_event rejected ({})", excerpt(kind)),
                    None => "rate_limit_event rejected".to_owned(),
                };
                let resets = info.scalar("resetsAt").i64().and_then(epoch_seconds);
                self.signal(
                    number,
                    RateLimit {
                        reason,
                        resets_at_epoch: resets,
                    },
                );
            }
            Some("assistant") => {
                let ErrorField::Text(error) = &event.error else {
                    return;
                };
                match error.as_ref() {
                    "rate_limit" => {
                        let limit = RateLimit {
                            reason: "assistant error rate_limit".to_owned(),
                            resets_at_epoch: None,
                        };
                        self.signal(number, limit);
                    }
                    "server_error" => {
                        let limit = RateLimit {
                            reason: "transient API error (server_error)".to_owned(),
                            resets_at_epoch: None,
                        };
                        self.signal_kind(number, StopKind::Transient, limit);
                    }
                    "authentication_failed" if self.fatal.is_none() => {
                        self.fatal = Some(fatal_message(
                            false,
                            "assistant error authentication_failed",
                        ));
                    }
                    "billing_error" if self.fatal.is_none() => {
                        self.fatal = Some(fatal_message(true, "assistant error billing_error"));
                    }
                    _ => {}
                }
            }
            Some("turn.completed") => {
                // The turn finished: what the agent met on the way did not stop it.
                self.verdict_seen = true;
                self.best = None;
                self.retrying = None;
            }
            Some("system") if scalar(event.subtype).str() == Some("api_retry") => {
                let ErrorField::Text(error) = &event.error else {
                    return;
                };
                // Claude Code 2.1 retries a rejected key ten times over three
                // minutes: the first refusal is the verdict.
                match error.as_ref() {
                    "authentication_failed" | "billing_error" => {
                        self.retrying = None;
                        if self.fatal.is_none() {
                            let billing = error.as_ref() == "billing_error";
                            let what = format!("api_retry error {}", excerpt(error));
                            self.fatal = Some(fatal_message(billing, &what));
                        }
                    }
                    _ => self.on_api_retry(error, number),
                }
            }
            Some("turn.failed") => {
                self.verdict_seen = true;
                if let ErrorField::Object {
                    message: Some(message),
                } = &event.error
                {
                    self.check_codex_message("turn.failed", message, number);
                }
            }
            Some("error") => {
                if let Some(message) = event.message.str() {
                    self.check_codex_message("error", message, number);
                }
            }
            _ => {}
        }
    }

    /// A `result` line that says the agent cannot log in or cannot pay.
    fn result_fatal(&self, event: &Signals<'_>) -> Option<String> {
        let failed = result_failed(event);
        let result = scalar(event.result);
        let text = result.str().unwrap_or("");
        let status = scalar(event.api_error_status).i64();
        if failed && let Some(status @ 401..=403) = status {
            let detail = match excerpt(text) {
                t if t.is_empty() => format!("API error {status}"),
                t => format!("{t} (API error {status})"),
            };
            let billing = status == 402 || self.det.billing_forms.is_match(text.as_bytes());
            return Some(fatal_message(billing, &detail));
        }
        let found = self.det.auth_error_forms.find(text.as_bytes())?;
        // As with usage limits: a successful result is the agent's own final
        // message, which may discuss API keys; only a short text that opens with
        // the notice is the CLI's own.
        if !failed && (found.start() > 24 || text.len() > 300) {
            return None;
        }
        let billing = self.det.billing_forms.is_match(text.as_bytes());
        Some(fatal_message(billing, &excerpt(text)))
    }

    fn result_limit(&self, event: &Signals<'_>) -> Option<(StopKind, RateLimit)> {
        let failed = result_failed(event);
        let result = scalar(event.result);
        let text = result.str().unwrap_or("");
        let status = scalar(event.api_error_status).i64();
        if failed && status == Some(429) {
            return Some((
                StopKind::RateLimit,
                RateLimit {
                    reason: "result api_error_status 429".to_owned(),
                    resets_at_epoch: self.epoch_after_pipe(text.as_bytes()),
                },
            ));
        }
        let transient = |reason: String| {
            let limit = RateLimit {
                reason,
                resets_at_epoch: None,
            };
            Some((StopKind::Transient, limit))
        };
        if failed && let Some(status @ 500..=599) = status {
            return transient(format!("transient API error ({status})"));
        }
        if failed
            && status.is_none()
            && let Some(found) = self.det.transient_forms.find(text.as_bytes())
            && (found.start() <= 60 || text.len() <= 300)
        {
            let what = String::from_utf8_lossy(found.as_bytes()).to_ascii_lowercase();
            return transient(format!("transient API error ({})", what.trim()));
        }
        let found = self.det.usage_limit_forms.find(text.as_bytes())?;
        // A successful result is the agent's own final message and may well talk
        // about rate limits; only a short text that opens with a limit notice
        // (`Claude AI usage limit reached|…`, `API Error: Rate limit reached`)
        // is the CLI's limit message.
        if !failed && (found.start() > 24 || text.len() > 300) {
            return None;
        }
        Some((
            StopKind::RateLimit,
            RateLimit {
                reason: format!("usage limit text: {}", excerpt(text)),
                resets_at_epoch: self.epoch_after_pipe(text.as_bytes()),
            },
        ))
    }

    fn check_codex_message(&mut self, kind: &str, message: &str, number: u64) {
        // `Reconnecting... 2/5 (…429…)` is Codex retrying inside the session:
        // it stops the session only if nothing follows it.
        if self.det.reconnecting.is_match(message.as_bytes()) {
            self.on_reconnect(message, number);
            return;
        }
        if self.fatal.is_none() && self.det.auth_error_forms.is_match(message.as_bytes()) {
            let billing = self.det.billing_forms.is_match(message.as_bytes());
            self.fatal = Some(fatal_message(billing, &excerpt(message)));
            return;
        }
        if !self.det.codex_limit_forms.is_match(message.as_bytes()) {
            let server = self.det.codex_transient_forms.is_match(message.as_bytes());
            // A turn that failed after Codex's own retries failed on the server.
            if server || (self.saw_reconnect && kind == "turn.failed") {
                let limit = RateLimit {
                    reason: format!("transient API error (codex {kind}: {})", excerpt(message)),
                    resets_at_epoch: None,
                };
                self.signal_kind(number, StopKind::Transient, limit);
            }
            return;
        }
        let resets = self
            .epoch_after_pipe(message.as_bytes())
            .or_else(|| self.codex_try_again_at(message));
        let limit = RateLimit {
            reason: format!("codex {kind}: {}", excerpt(message)),
            resets_at_epoch: resets,
        };
        self.signal(number, limit);
    }

    fn epoch_after_pipe(&self, text: &[u8]) -> Option<i64> {
        let caps = self.det.epoch_after_pipe.captures(text)?;
        let digits = std::str::from_utf8(caps.get(1)?.as_bytes()).ok()?;
        digits.parse().ok()
    }

    fn codex_try_again_at(&self, message: &str) -> Option<i64> {
        let caps = self.det.codex_try_again_at.captures(message.as_bytes())?;
        let part = |i: usize| {
            caps.get(i)
                .and_then(|m| std::str::from_utf8(m.as_bytes()).ok())
        };
        let stamp = format!(
            "{} {} {} {}:{} {}",
            part(1)?,
            part(2)?,
            part(3)?,
            part(4)?,
            part(5)?,
            part(6)?.to_ascii_uppercase()
        );
        let naive = NaiveDateTime::parse_from_str(&stamp, "%b %d %Y %I:%M %p").ok()?;
        Local
            .from_local_datetime(&naive)
            .earliest()
            .map(|t| t.timestamp())
    }
}

/// API failures arrive as subtype "success" with is_error true; some versions
/// leave is_error out and only say so in the subtype.
fn result_failed(event: &Signals<'_>) -> bool {
    scalar(event.is_error).bool() == Some(true)
        || scalar(event.subtype)
            .str()
            .is_some_and(|s| s.starts_with("error"))
}

/// The message that stops the loop, with what the user has to do.
fn fatal_message(billing: bool, detail: &str) -> String {
    if billing {
        format!(
            "the agent's account cannot pay for requests: {detail} — fix the billing and start again"
        )
    } else {
        format!("the agent cannot authenticate: {detail} — fix the credentials and start again")
    }
}

/// The first match of `pattern` in `line` that is not part of a path (a
/// folder named `…-ratelimit` is no rate limit): the word around the match,
/// up to spaces and quotes, holds no `/`.
fn outside_paths<'l>(pattern: &Regex, line: &'l [u8]) -> Option<regex::bytes::Match<'l>> {
    let bound = |b: &u8| b.is_ascii_whitespace() || b"\"'`()[]{},;<>=".contains(b);
    pattern.find_iter(line).find(|found| {
        let start = line[..found.start()]
            .iter()
            .rposition(bound)
            .map_or(0, |i| i + 1);
        let end = line[found.end()..]
            .iter()
            .position(bound)
            .map_or(line.len(), |i| found.end() + i);
        let before = &line[start..found.start()];
        let after = &line[found.end()..end];
        !before.contains(&b'/') && !after.contains(&b'/')
    })
}

/// Reset times are documented in seconds; a millisecond value is accepted too.
fn epoch_seconds(value: i64) -> Option<i64> {
    match value {
        v if v <= 0 => None,
        v if v >= 100_000_000_000 => Some(v / 1000),
        v => Some(v),
    }
}

/// First line of agent text, cut at a `|epoch` suffix and shortened for a reason.
fn excerpt(text: &str) -> String {
    let head = text.split(['\n', '|']).next().unwrap_or("").trim();
    let head = crate::escape::visible(head);
    let mut out: String = head.chars().take(REASON_EXCERPT_CHARS).collect();
    if out.len() < head.len() {
        out.push('…');
    }
    out
}

/// What the rules read of a JSON line: the top-level members, of either
/// format, that can tell a limit, a transient failure or a fatal error. The
/// stream's decoders hand it over from the event they read for the screen and
/// the statistics; a line read for classification alone is decoded as this.
/// Every member accepts any JSON type, so an unexpected type never turns a
/// valid JSON object into "non-JSON" (which would expose it to the free-text
/// patterns).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Signals<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Scalar<'a>,
    #[serde(borrow)]
    pub(super) subtype: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) is_error: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) api_error_status: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) result: Option<&'a RawValue>,
    /// A Codex `error` event's text.
    #[serde(borrow)]
    pub(super) message: Scalar<'a>,
    #[serde(borrow)]
    pub(super) error: ErrorField<'a>,
    #[serde(borrow)]
    pub(super) rate_limit_info: Option<&'a RawValue>,
}

/// Whether a JSON line holds one of the tokens every rate-limit rule needs: the
/// `result` type, a `rate_limit_event`, an `error` key or type, or `turn.failed`.
fn may_signal_rate_limit(line: &[u8]) -> bool {
    // Four searches, not one regex: the regex crate's cache pool is slow to
    // reach from the many threads a session's reading moves between.
    static ERROR_KEY: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"error\""));
    static OTHER_TOKENS: LazyLock<[memmem::Finder<'static>; 4]> = LazyLock::new(|| {
        [
            memmem::Finder::new(b"\"result\""),
            memmem::Finder::new(b"rate_limit_event"),
            memmem::Finder::new(b"turn.failed"),
            memmem::Finder::new(b"turn.completed"),
        ]
    });
    // Claude Code writes `type` first. Its `user` lines (tool results: most
    // of a stream's bytes) meet no rule, and an `assistant` line only through
    // its `error` key: neither need all four searches over their payload.
    if line.starts_with(br#"{"type":"user","#) {
        return false;
    }
    let has_error_key = ERROR_KEY.find(line).is_some();
    if line.starts_with(br#"{"type":"assistant","#) {
        return has_error_key;
    }
    has_error_key || OTHER_TOKENS.iter().any(|token| token.find(line).is_some())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod transcript_tests;

#[cfg(test)]
mod kinds_tests;

//! The human-in-the-loop approval queue: a directory of JSON files.
//!
//! ```text
//! <dir>/pending/<id>.json   a request waiting for a human (written by its producer)
//! <dir>/decided/<id>.json   the human's decision, with the sha256 of the request file;
//!                           created once, never replaced: the first decision wins
//! <dir>/done/<id>.json      request + decision + outcome, moved there by the producer
//! <dir>/waiting/<id>.sock    the waiting producer's doorbell and proof of life
//! ```
//!
//! A waiter looks only at its own files, when its doorbell rings ([`waiter`]) and
//! once every [`RESCAN`] in case a decision came another way. A request whose waiter
//! is gone is *abandoned*: listed as such, refused to deciders, and moved to `done/`
//! (outcome `abandoned`) by `clowder queue --prune`, or by the sweep once it is
//! [`ABANDONED_KEEP`] old. The sweep (run by `clowder queue`, and by the control
//! room at most every [`SWEEP_EVERY`]; never by a producer, which reads no other
//! request) also moves aside decisions whose request has been gone for
//! [`DECISION_KEEP`].
//!
//! Every file is read as untrusted input ([`safe_read`]): no symbolic links, FIFOs,
//! hard links or oversized files; strict JSON; ids matching `^[A-Za-z0-9_-]{1,64}$`.
//! A bad file is logged (`approval_rejected_file`) and moved aside into `done/`.
//! Text taken from the files goes through [`escape`] before reaching a terminal.

pub mod claude_hook;
pub mod codex_hook;
pub mod commands;
pub mod eval;
mod events;
mod formats;
pub mod handed;
pub mod host_rules;
pub mod patch;
pub mod policy;
pub mod presence;
mod queue;
pub mod reviewed;
pub mod reviewer;
mod safe_options;
pub mod safe_read;
mod shell;
pub mod subject;
mod sweep;
mod url_prefix;
mod waiter;

use std::collections::HashSet;
use std::fs::DirBuilder;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use events::ApprovalEvent;
pub use queue::Queue;
use safe_read::DirHandle;
pub use sweep::{Swept, sweep_if_due};
use waiter::Doorbell;
pub use waiter::Liveness;

/// Where requests wait, relative to the working directory.
pub use crate::config::DEFAULT_APPROVALS_DIR as DEFAULT_DIR;

/// How often a waiting producer looks at its own files when its doorbell is quiet
/// (a decision written by another tool does not ring it).
pub const RESCAN: Duration = Duration::from_secs(1);

/// How often a producer without a doorbell looks (its socket could not be bound).
const RESCAN_WITHOUT_BELL: Duration = Duration::from_millis(250);

/// How old an abandoned request gets before the sweep moves it to `done/`.
pub const ABANDONED_KEEP: Duration = Duration::from_secs(3600);

/// How long a decision whose request is gone is kept before the sweep moves it aside.
pub const DECISION_KEEP: Duration = Duration::from_secs(86_400);

/// How often the control room sweeps the queue (`.swept` in the queue folder
/// records when).
const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// The reason a rejection without one reaches the agent with.
pub const NO_REASON: &str = "rejected (no reason given)";

/// The ids of the valid pending requests, oldest first, and whether the queue
/// exists at all. Read-only: moves nothing, logs nothing (the control room polls it).
pub fn list_pending(dir: &Path) -> (bool, Vec<String>) {
    let (exists, requests) = list_pending_requests(dir);
    (exists, requests.into_iter().map(|r| r.id).collect())
}

/// The newest finished requests (at most `limit`), newest first: the history the
/// control room shows. Read-only; files that are not history records are skipped.
pub fn list_done(dir: &Path, limit: usize) -> Vec<DoneRecord> {
    let done_dir = dir.join("done");
    let Ok(done) = DirHandle::open(&done_dir) else {
        return Vec::new();
    };
    let mut names: Vec<(std::time::SystemTime, String)> = scan_names(&done_dir)
        .into_iter()
        .filter(|name| name.strip_suffix(".json").is_some_and(valid_id))
        .filter_map(|name| {
            let modified = std::fs::symlink_metadata(done_dir.join(&name))
                .and_then(|m| m.modified())
                .ok()?;
            Some((modified, name))
        })
        .collect();
    names.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    names
        .into_iter()
        .take(limit)
        .filter_map(|(_, name)| {
            let bytes = done.read(&name).ok().flatten()?;
            formats::DONE.parse(std::str::from_utf8(&bytes).ok()?).ok()
        })
        .collect()
}

/// [`list_pending`] with the whole requests, for the control room's pane.
pub fn list_pending_requests(dir: &Path) -> (bool, Vec<Request>) {
    if !dir.is_dir() {
        return (false, Vec::new());
    }
    let Ok(pending) = DirHandle::open(&dir.join("pending")) else {
        return (true, Vec::new());
    };
    let mut requests: Vec<Request> = scan_names(&dir.join("pending"))
        .into_iter()
        .filter_map(|name| parse_pending(&pending, &name).ok().flatten())
        .map(|(request, _)| request)
        .collect();
    mark_abandoned(dir, &mut requests);
    sort_requests(&mut requests);
    (true, requests)
}

/// Sets [`Request::abandoned`] on the requests whose waiter is gone.
fn mark_abandoned(dir: &Path, requests: &mut [Request]) {
    let Ok(waiting) = DirHandle::open(&dir.join("waiting")) else {
        return;
    };
    for request in requests {
        request.abandoned = waiter::liveness(&waiting, &request.id) == Liveness::Gone;
    }
}

/// Whether `id` is a request id: `^[A-Za-z0-9_-]{1,64}$`.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `text` made safe for a terminal, on one line: the one escaping function,
/// which the control room uses too.
pub use crate::escape::one_line as escape;

/// A character a terminal acts on or does not show.
pub use crate::escape::is_invisible as is_unsafe_char;

/// A request as stored in `pending/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub id: String,
    pub created: DateTime<Utc>,
    pub kind: RequestKind,
    pub title: String,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input: Option<serde_json::Value>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    /// The fleet lane that asked, as the rules its host gave it name it; a
    /// reader takes it only as the fleet's registry confirms it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Not stored: set by listings when the process that asked is gone.
    #[serde(skip)]
    pub abandoned: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A tool call held by `clowder gate`.
    Tool,
    /// A question asked with `clowder ask`.
    Ask,
    /// A session waiting to start (an autonomy level asks first).
    Session,
}

impl Request {
    /// What the request is about in one line, unescaped: the field its tool
    /// really uses (the command of a Bash call, the file of an Edit or Write),
    /// with any other field that could be taken for it; an unknown tool's whole
    /// input as JSON ([`subject::of`], the table the rules read too).
    pub fn subject(&self) -> String {
        if self.tool_input.is_none() {
            return String::new();
        }
        self.subject_of().shown()
    }

    /// The subject as the rules read it.
    pub fn subject_of(&self) -> subject::Subject {
        subject::of(
            self.tool_name.as_deref().unwrap_or_default(),
            self.tool_input.as_ref(),
        )
    }

    /// Seconds since the request was created.
    pub fn age_secs(&self, now: DateTime<Utc>) -> i64 {
        (now - self.created).num_seconds().max(0)
    }
}

/// What a human decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Reject(String),
}

/// A decision as stored in `decided/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    pub id: String,
    pub decision: DecisionKind,
    #[serde(default)]
    pub reason: Option<String>,
    pub decided_at: DateTime<Utc>,
    /// sha256 (hex) of the exact bytes of the request file decided on.
    pub request_hash: String,
    /// Who decided (`clowder approve (user me, pid 42)`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

impl DecisionRecord {
    /// `approved by clowder approve (user me, pid 42) at 17:40:02 UTC`, with a
    /// rejection's reason.
    pub fn describe(&self) -> String {
        let verb = match self.decision {
            DecisionKind::Approve => "approved",
            DecisionKind::Reject => "rejected",
        };
        let by = self.decided_by.as_deref().unwrap_or("someone else");
        let mut text = format!(
            "{verb} by {by} at {}",
            self.decided_at.format("%Y-%m-%d %H:%M:%S UTC")
        );
        if let Some(reason) = self.reason.as_deref().filter(|r| !r.trim().is_empty()) {
            text.push_str(&format!(": {reason}"));
        }
        text
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    Approve,
    Reject,
}

/// A finished request, as stored in `done/<id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoneRecord {
    pub request: Request,
    pub decision: Option<DecisionRecord>,
    /// `approved`, `rejected`, `timed_out`, `cancelled`, `removed` or `abandoned`.
    pub outcome: String,
    pub waited_secs: f64,
    /// What the reviewer made of the call, when one was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<reviewer::Review>,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Approved {
        reason: Option<String>,
    },
    Rejected {
        reason: String,
    },
    TimedOut,
    /// The waiting process was told to stop (the number of the signal).
    Cancelled {
        signal: i32,
    },
    /// The pending file disappeared or changed under the producer.
    Removed,
}

/// A request written by [`Queue::submit`], to wait on. While it lives, the request
/// is known to be waited for (its doorbell is bound).
pub struct Submitted {
    pub request: Request,
    /// sha256 (hex) of the request file.
    pub hash: String,
    /// Device and inode of the request file: a cheap check that it is still there.
    file_id: (u64, u64),
    doorbell: Option<Doorbell>,
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The directory is not safe to use (permissions, owner, a symbolic link).
    #[error("{0}")]
    Unsafe(String),
    #[error("{0}")]
    Io(String),
    /// The request would not fit the queue whole, and a part is never shown.
    #[error(
        "the request is {bytes} bytes as a queue file, more than the approval queue holds ({limit} bytes); it is refused rather than shown to a human in part"
    )]
    TooLarge { bytes: u64, limit: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no pending request with id `{0}` (see `clowder queue`)")]
    UnknownId(String),
    #[error("`{0}` is not a request id (letters, digits, `_` and `-`, at most 64)")]
    BadId(String),
    #[error("pending request `{id}` is unreadable: {reason}")]
    BadRequest { id: String, reason: String },
    #[error(
        "request `{0}` is abandoned: the process that asked for it is gone, so nobody would receive the decision (`clowder queue --prune` moves it to done/)"
    )]
    Abandoned(String),
    /// Another decision came first; this one was not recorded.
    #[error("request `{id}` was already {earlier}; this decision was not recorded")]
    AlreadyDecided { id: String, earlier: String },
    #[error("{0}")]
    Io(String),
}

/// What a decision means for the one who waits: the only place a decision becomes
/// an outcome. A rejection without a reason (or with only blanks) says so.
pub fn outcome_of(record: &DecisionRecord) -> Outcome {
    let reason = record.reason.clone().filter(|r| !r.trim().is_empty());
    match record.decision {
        DecisionKind::Approve => Outcome::Approved { reason },
        DecisionKind::Reject => Outcome::Rejected {
            reason: reason.unwrap_or_else(|| NO_REASON.to_string()),
        },
    }
}

/// The names in `dir` that could be requests (dot files, such as temporaries, are
/// skipped), sorted.
fn scan_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Reads and checks `pending/<name>`. `Ok(None)`: gone.
fn parse_pending(pending: &DirHandle, name: &str) -> Result<Option<(Request, Vec<u8>)>, String> {
    let Some(stem) = name.strip_suffix(".json").filter(|s| valid_id(s)) else {
        return Err("file name is not <id>.json".into());
    };
    let Some(bytes) = pending.read(name)? else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| "not valid UTF-8".to_string())?;
    let request: Request = formats::read(&formats::REQUEST, text, "request")?;
    if !valid_id(&request.id) {
        return Err(format!(
            "request id `{}` is not a valid id",
            escape(&request.id)
        ));
    }
    if request.id != stem {
        return Err(format!(
            "request id `{}` does not match the file name",
            escape(&request.id)
        ));
    }
    Ok(Some((request, bytes)))
}

fn parse_decision(bytes: &[u8]) -> Result<DecisionRecord, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not valid UTF-8".to_string())?;
    formats::read(&formats::DECISION, text, "decision")
}

fn sort_requests(requests: &mut [Request]) {
    requests.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The largest request file [`Queue::submit`] writes: half of what a reader
/// takes, so that its finished record (the request again, indented once more)
/// still fits.
pub const MAX_REQUEST_BYTES: u64 = safe_read::MAX_FILE_BYTES / 2;

/// The longest title kept; a longer one keeps its start, its end and its length.
const MAX_TITLE_CHARS: usize = 1024;

/// Whether a watcher event may mean a queue file came, changed or went. Reading
/// a file raises access events too: treating those as hints would make every
/// rescan (which reads the files) wake the next one, a busy loop.
pub fn is_change_hint(event: &notify::Result<notify::Event>) -> bool {
    match event {
        Ok(event) => !matches!(event.kind, notify::EventKind::Access(_)),
        // An overflow or a watcher error: rescan to be sure.
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::queue::{encode_within_limit, new_id};
    use super::*;

    #[test]
    fn ids_follow_the_rule() {
        assert!(valid_id("abc-DEF_123"));
        assert!(!valid_id(""));
        assert!(!valid_id("../x"));
        assert!(!valid_id("a.json"));
        assert!(!valid_id(&"a".repeat(65)));
        assert!(valid_id(&new_id()));
    }

    #[test]
    fn escapes_control_characters() {
        assert_eq!(escape("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape("a\nb\u{9b}c\u{202e}"), "a\\nb\\u{9b}c\\u{202e}");
        assert_eq!(escape("héllo ▶"), "héllo ▶");
    }

    #[test]
    fn a_tool_call_is_stored_whole_or_refused() {
        let mut request = Request {
            id: "x".into(),
            created: Utc::now(),
            kind: RequestKind::Tool,
            title: "Write".into(),
            tool_name: Some("Write".into()),
            tool_input: Some(serde_json::json!({"file_path": "a", "content": "é".repeat(200_000)})),
            session_id: None,
            cwd: None,
            body: None,
            lane: None,
            abandoned: false,
        };
        let stored = request.tool_input.clone();
        let bytes = encode_within_limit(&mut request).expect("fits");
        assert!(bytes.len() as u64 <= MAX_REQUEST_BYTES);
        assert_eq!(request.tool_input, stored, "nothing of the call is cut");
        assert_eq!(request.subject(), "a");
        request.tool_input = Some(serde_json::json!({"command": "a".repeat(3 << 20)}));
        assert!(matches!(
            encode_within_limit(&mut request),
            Err(QueueError::TooLarge { .. })
        ));
    }
}

//! The queue's lines in the event log (`harness-events.jsonl`): the same shape as the
//! loop's events (`ts`, `event`, fields), appended with one write each.

use std::io::{self, Write};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// `approval_requested`, `approval_decided`, `approval_timeout`,
/// `approval_cancelled`, `approval_rejected_file`, `reviewer_reviewed` or
/// `reviewer_tripped`.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalEvent {
    pub ts: DateTime<Utc>,
    pub event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_secs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Who decided: `rule …`, `reviewer MODEL`, or the person's program and user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decider: Option<String>,
    /// The reviewer's verdict: `allow`, `deny`, `unsure`, `failed`, `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl ApprovalEvent {
    pub fn new(event: &'static str) -> ApprovalEvent {
        ApprovalEvent {
            ts: Utc::now(),
            event,
            id: None,
            kind: None,
            tool: None,
            outcome: None,
            waited_secs: None,
            file: None,
            reason: None,
            lane: None,
            decider: None,
            verdict: None,
            took_ms: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
        }
    }
}

/// Appends `event` as one line. [`crate::store::events::EventLog::open`] creates the
/// log and closes a torn last line first.
pub fn append(path: &Path, event: &ApprovalEvent) -> io::Result<()> {
    drop(crate::store::events::EventLog::open(path)?);
    let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(&line)
}

//! The host's protocol on `.clowder/host.sock`: JSON lines, one message a
//! line, serde over the messages the host and the control room already
//! exchange ([`HostMsg`], [`HostRequest`]). The host speaks first: a
//! [`Hello`], then a [`HostSnapshot`], then every change as it happens.
//! `clowder attach --protocol-schema` prints the JSON Schema of both sides.

use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LaneName;
use super::link::{HostMsg, HostRequest, LaneEntry, LaneReport, PlanSummary};
use crate::agent::stream::{LineKind, Rendered, SessionStats};
use crate::approvals::Request;
use crate::protocol::{ExitReason, Snapshot};

/// Raised when a message changes in a way an older peer cannot read.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest line a client may send: a decision or a request is a few
/// hundred bytes; a line that does not end by here is refused.
pub const MAX_CLIENT_LINE: usize = 1 << 20;

/// `.clowder/host.sock`, beside the fleet's other files.
pub const SOCKET_FILE: &str = "host.sock";

/// `.clowder/web-url`: the web inbox's address (no token) while
/// `clowder serve --http` serves the folder, for the host's notices.
pub const WEB_URL_FILE: &str = "web-url";

/// What the host says.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// The first line on every connection.
    Hello(Hello),
    /// Everything the host knows now: sent after the hello, and again after
    /// an [`ServerMsg::Overflowed`].
    Snapshot(Box<HostSnapshot>),
    /// One change, as it happens.
    Host { msg: HostMsg },
    /// The approval requests waiting now, sent whenever they change.
    Requests { requests: Vec<PendingRequest> },
    /// The answer to a client message that carried `re`.
    Reply { re: u64, ok: bool, text: String },
    /// The client's line was not taken; when `closing`, the host hangs up.
    Refused { reason: String, closing: bool },
    /// The client read too slowly: `dropped` changes were not sent, and a
    /// fresh snapshot follows.
    Overflowed { dropped: u64 },
    /// New lines of the followed output file.
    Output(Box<Output>),
    /// A lane's snapshot where only what moves as its session writes moved,
    /// in place of the whole snapshot; sent only to a client that asked with
    /// [`ClientMsg::Changes`].
    LaneChanged(Box<LaneChange>),
}

/// The fields of a lane's snapshot that move while its session writes: its
/// output, when the output last grew, the run's totals. A host sends this in
/// place of the lane's whole snapshot when nothing else moved; the client
/// applies it to the lane's last snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LaneChange {
    pub lane: LaneName,
    /// Waiting for a session slot.
    pub queued: bool,
    pub output_bytes: u64,
    pub last_output_growth: Option<chrono::DateTime<chrono::Utc>>,
    pub last_update: chrono::DateTime<chrono::Utc>,
    pub totals: crate::protocol::Totals,
}

impl LaneChange {
    /// The change from `old` to `new` (each with whether the lane was
    /// queued), when only the fields it carries moved.
    pub fn between(
        lane: &LaneName,
        (old, was_queued): (&Snapshot, bool),
        (new, queued): (&Snapshot, bool),
    ) -> Option<LaneChange> {
        let change = LaneChange {
            lane: lane.clone(),
            queued,
            output_bytes: new.output_bytes,
            last_output_growth: new.last_output_growth,
            last_update: new.last_update,
            totals: new.totals.clone(),
        };
        let mut probe = old.clone();
        change.apply(&mut probe);
        (was_queued == queued && probe == *new).then_some(change)
    }

    /// Sets this change's fields in `snapshot`.
    pub fn apply(&self, snapshot: &mut Snapshot) {
        snapshot.output_bytes = self.output_bytes;
        snapshot.last_output_growth = self.last_output_growth;
        snapshot.last_update = self.last_update;
        snapshot.totals = self.totals.clone();
    }
}

/// New lines of a followed session output file.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Output {
    pub lane: LaneName,
    pub file: PathBuf,
    pub lines: Vec<OutputLine>,
    /// The session's totals so far.
    pub stats: SessionStats,
    /// Start the view afresh (the first lines of a file).
    pub reset: bool,
}

/// One display line of agent output, already made safe for a terminal.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OutputLine {
    pub kind: LineKind,
    pub text: String,
    /// The full text behind the line (a tool call's input and result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub is_error: bool,
}

impl From<&Rendered> for OutputLine {
    fn from(line: &Rendered) -> OutputLine {
        OutputLine {
            kind: line.kind,
            text: line.text.clone(),
            detail: line.detail.as_ref().map(ToString::to_string),
            tool_use_id: line.tool_use_id.clone(),
            is_error: line.is_error,
        }
    }
}

impl From<OutputLine> for Rendered {
    fn from(line: OutputLine) -> Rendered {
        Rendered {
            kind: line.kind,
            text: line.text,
            detail: line.detail.map(Into::into),
            tool_use_id: line.tool_use_id,
            is_error: line.is_error,
        }
    }
}

/// Who the host is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hello {
    pub protocol: u32,
    /// The clowder version of the host.
    pub clowder: String,
    /// The machine's host name.
    pub host: String,
    /// The fleet's folder on that machine.
    pub folder: String,
    /// The host's process id.
    pub pid: u32,
}

/// What a client says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMsg {
    /// Optional: a client may say which protocol it speaks; another major
    /// version is refused.
    Hello {
        protocol: u32,
        /// What the client is, for the host's log (`clowder attach`, a script).
        #[serde(default)]
        client: String,
    },
    /// What the control room would ask of the host (pause a lane, merge it…).
    /// With `re`, a reply says that the host took it, or why not.
    Request {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        re: Option<u64>,
        request: HostRequest,
        /// With `re`: the reply comes once the work is done, and says how it
        /// went (what a merge, a push or a new lane did, or why not).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        wait: bool,
        /// Who asks, as the host's events say it (`web 127.0.0.1:50412`).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        by: String,
    },
    /// Decide an approval request: the first decision wins, and a later one
    /// is answered with who decided first.
    Decide {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        re: Option<u64>,
        id: String,
        decision: WireDecision,
        /// Who decides, as the request's record will say (`alice's room`).
        #[serde(default)]
        by: String,
    },
    /// Answered with a [`ServerMsg::Reply`]: a client's check that the host
    /// still reads it.
    Ping { re: u64 },
    /// Send [`ServerMsg::LaneChanged`] in place of a lane's whole snapshot
    /// when only what it carries moved. Ask only a host whose snapshot says
    /// `changes`: an older host refuses the line.
    Changes,
    /// Send the lines of one of the lane's session output files (as its
    /// snapshot's `output_file` names it) as they are written, rendered as
    /// the control room shows them, until another `follow`.
    Follow { lane: LaneName, file: PathBuf },
}

/// A decision as the protocol carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum WireDecision {
    Approve {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Reject {
        reason: String,
    },
}

/// A waiting request, and whether the process that asked is gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingRequest {
    pub request: Request,
    pub abandoned: bool,
}

impl PendingRequest {
    pub fn from_listing(request: Request) -> PendingRequest {
        PendingRequest {
            abandoned: request.abandoned,
            request,
        }
    }

    /// The request as a listing gives it (with `abandoned` set).
    pub fn into_request(self) -> Request {
        let mut request = self.request;
        request.abandoned = self.abandoned;
        request
    }
}

/// What the host knows of one lane.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LaneFacts {
    pub lane: LaneName,
    /// Its loop's latest state, if it ever ran.
    #[serde(default)]
    pub snapshot: Option<Arc<Snapshot>>,
    /// Waiting for a session slot.
    #[serde(default)]
    pub queued: bool,
    /// Commits its branch has that its base lacks, once counted (`null` inside:
    /// not a branch).
    #[serde(default)]
    pub ahead: Option<Option<u64>>,
    /// How its loop ended in this host's run, if it has.
    #[serde(default)]
    pub ended: Option<Result<ExitReason, String>>,
}

/// Everything a client needs to draw the fleet as it is now.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct HostSnapshot {
    /// The registry's lanes, in order.
    pub lanes: Vec<LaneEntry>,
    pub facts: Vec<LaneFacts>,
    pub plans: Vec<PlanSummary>,
    /// Whether no lane runs now, and whether the host was told to stop.
    pub idle: Option<(bool, bool)>,
    /// The latest log lines and events, oldest first.
    pub recent: Vec<HostMsg>,
    pub requests: Vec<PendingRequest>,
    /// The host sends [`ServerMsg::LaneChanged`] to a client that asks with
    /// [`ClientMsg::Changes`]; absent (false) from a host that does not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changes: bool,
}

impl HostSnapshot {
    /// The snapshot as the messages that, fed to a control room in order,
    /// bring it to the same state.
    pub fn replay(&self) -> Vec<HostMsg> {
        let mut messages = vec![HostMsg::Lanes(self.lanes.clone())];
        if !self.plans.is_empty() {
            messages.push(HostMsg::Plans(self.plans.clone()));
        }
        for facts in &self.facts {
            let lane = &facts.lane;
            let mut report = |report| {
                messages.push(HostMsg::Lane {
                    lane: lane.clone(),
                    report,
                })
            };
            if let Some(snapshot) = &facts.snapshot {
                report(LaneReport::Snapshot {
                    snapshot: Arc::clone(snapshot),
                    queued: facts.queued,
                });
            }
            if let Some(ahead) = facts.ahead {
                report(LaneReport::Ahead(ahead));
            }
            if let Some(ended) = &facts.ended {
                report(LaneReport::Ended(ended.clone()));
            }
        }
        messages.extend(self.recent.iter().cloned());
        if let Some((idle, signalled)) = self.idle {
            messages.push(HostMsg::Idle { idle, signalled });
        }
        messages
    }
}

/// The JSON Schema of the protocol: what the host says and what a client may.
pub fn schema() -> serde_json::Value {
    let server = schemars::schema_for!(ServerMsg);
    let client = schemars::schema_for!(ClientMsg);
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "clowder host protocol",
        "description": format!(
            "JSON lines on .clowder/host.sock (protocol {PROTOCOL_VERSION}): the host sends `server` messages, a client sends `client` messages."
        ),
        "protocol": PROTOCOL_VERSION,
        "server": server,
        "client": client,
    })
}

/// One message as its line, without the newline.
pub fn line<T: Serialize>(message: &T) -> String {
    // A message of ours always serializes: maps have string keys, floats are finite.
    serde_json::to_string(message).unwrap_or_else(|err| {
        format!(r#"{{"type":"refused","reason":"cannot encode a message: {err}","closing":false}}"#)
    })
}

/// A client's line, read: what it asks, or why it is refused.
pub fn parse_client_line(bytes: &[u8]) -> Result<ClientMsg, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the line is not UTF-8".to_string())?;
    let text = text.trim_end_matches(['\n', '\r']);
    serde_json::from_str(text).map_err(|err| {
        let hint = if serde_json::from_str::<serde_json::Value>(text).is_ok() {
            "a JSON object with \"type\" one of hello, request, decide, ping, follow (see `clowder attach --protocol-schema`)"
        } else {
            "one JSON object per line"
        };
        format!("cannot read the line: {err}; expected {hint}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Command;

    #[test]
    fn a_client_request_reads_back() {
        let lane = LaneName::parse("api").expect("name");
        let message = ClientMsg::Request {
            re: Some(7),
            request: HostRequest::Command {
                lane,
                command: Command::Pause,
            },
            wait: false,
            by: String::new(),
        };
        let text = line(&message);
        assert_eq!(
            text,
            r#"{"type":"request","re":7,"request":{"command":{"lane":"api","command":"pause"}}}"#
        );
        assert_eq!(parse_client_line(text.as_bytes()), Ok(message));
    }

    #[test]
    fn garbage_and_unknown_messages_are_refused_with_a_reason() {
        let garbage = parse_client_line(b"\x00\x01 not json").unwrap_err();
        assert!(garbage.contains("one JSON object per line"), "{garbage}");
        let unknown = parse_client_line(br#"{"type":"format_disk"}"#).unwrap_err();
        assert!(unknown.contains("unknown variant"), "{unknown}");
        let bad_lane =
            parse_client_line(br#"{"type":"request","request":{"diff":"../../etc"}}"#).unwrap_err();
        assert!(bad_lane.contains("invalid lane name"), "{bad_lane}");
    }

    #[test]
    fn the_schema_names_both_sides() {
        let schema = schema();
        let text = schema.to_string();
        for word in ["hello", "snapshot", "overflowed", "decide", "ping"] {
            assert!(text.contains(word), "{word} missing from the schema");
        }
    }
}

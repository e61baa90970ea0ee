//! What the fleet host and the control room say to each other: across their two
//! threads, or as JSON lines on the host's socket (see [`super::wire`]). Every
//! message names its lane; the host never waits on the screen.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LaneName;
use super::new_lane::NewLaneRequest;
use super::registry::{LaneKind, LaneState};
use crate::protocol::{Command, Event, ExitReason, Snapshot};
use crate::supervisor::core::Level;

/// News about one lane.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaneReport {
    /// The loop's latest state; `queued` when it waits for a session slot.
    Snapshot {
        snapshot: Arc<Snapshot>,
        queued: bool,
    },
    Log {
        at: DateTime<Utc>,
        level: Level,
        text: String,
    },
    Event {
        at: DateTime<Utc>,
        event: Box<Event>,
    },
    /// The lane's loop ended (or could not start).
    Ended(Result<ExitReason, String>),
    /// Commits on the lane's branch that its base lacks (`None`: not a branch).
    Ahead(Option<u64>),
    /// `git diff --stat` then the patch against the lane's base, or why not.
    Diff(Result<String, String>),
    /// What `lane rm` did, or why it refused.
    Removed(Result<Vec<String>, String>),
    /// Said by an attached room to itself, never on the wire: the lane's
    /// host cannot be reached since then (`None`: it is reached again).
    #[serde(skip)]
    Unreachable(Option<DateTime<Utc>>),
}

/// One registered lane, in registry order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LaneEntry {
    pub name: LaneName,
    /// What the user asked for (active, paused, stopped).
    pub requested: LaneState,
    pub max_iterations: Option<u64>,
    /// A task lane is stopped through its state.json, not by a signal.
    pub kind: LaneKind,
    /// The branch it merges into (`M`, `clowder lane merge`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

/// From the host to the control room.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostMsg {
    Lane {
        lane: LaneName,
        report: LaneReport,
    },
    /// The registry changed: these are the lanes now.
    Lanes(Vec<LaneEntry>),
    /// A message about the fleet as a whole.
    Log {
        level: Level,
        text: String,
    },
    /// Whether no lane runs now; `signalled` when the fleet was told to stop
    /// by SIGINT/SIGTERM (nobody may be looking).
    Idle {
        idle: bool,
        signalled: bool,
    },
    /// The plans run here, as their state files say now (sent when they change).
    Plans(Vec<PlanSummary>),
    /// How the new-lane dialog's lane went: what to tell, or why it was refused.
    LaneAdded {
        lane: LaneName,
        result: Result<String, String>,
    },
}

/// From the control room to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostRequest {
    /// A command for one lane's loop.
    Command { lane: LaneName, command: Command },
    /// Compute the lane's diff against its base.
    Diff(LaneName),
    /// The lane's commits ahead of its base, its diff by file and its
    /// sessions' costs (`lane_work::LaneWork` as JSON): answered only in the
    /// reply to a request that carries `re`.
    Work(LaneName),
    /// `lane rm` without --force.
    Remove(LaneName),
    /// `M`: merge a step that needs review by hand (`clowder plan merge`).
    MergeStep { plan: String, step: String },
    /// `R`: start the failed plan's failed or blocked steps again (`clowder plan retry`).
    RetryPlan { plan: String },
    /// The new-lane dialog's lane, added as `lane add` does.
    AddLane(NewLaneRequest),
    /// `"status": "stopped"` into a task lane's state.json (a graceful stop).
    StopTask(LaneName),
    /// `M`: `clowder lane merge`.
    MergeLane(LaneName),
    /// `U`: `clowder lane push` to the default remote.
    PushLane(LaneName),
    /// `R`: `clowder lane restart`.
    RestartLane(LaneName),
    /// `t` in an attached room: a note for the lane's next session, left
    /// by the host as `clowder tell --lane` would.
    Tell { lane: LaneName, text: String },
    /// `d`: the room leaves and the lanes go on: the host ends once they (and
    /// a plan's driver) have, as headless.
    Detached,
}

/// One plan, its steps in the plan file's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanSummary {
    pub name: String,
    /// How commands name it: its name, or `PARENT/STEP` for a sub-plan (whose
    /// name a plan run by itself may bear too).
    pub address: String,
    /// The plan's own state: created, running, paused, completed, failed.
    pub status: String,
    /// The branch its steps merge into.
    pub base: String,
    pub steps: Vec<StepSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepSummary {
    pub id: String,
    /// As `plan status` words it: pending, waiting for approval, ready, running,
    /// done, failed, blocked, merged, needs review.
    pub state: String,
    pub depends_on: Vec<String>,
    /// The lane the step runs as.
    pub lane: String,
}

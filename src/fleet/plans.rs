//! What the control room's Plan view is told about each plan: its steps, their
//! states and what each waits for, as the plan's state file says. The plan side
//! reads those files off the screen's thread and sends these.

use tokio::sync::mpsc;

use super::host::Driver;
use super::link::{HostMsg, HostRequest};

/// One plan, its steps in the plan file's order.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSummary {
    pub name: String,
    /// The plan's own state: created, running, paused, completed, failed.
    pub status: String,
    pub steps: Vec<StepSummary>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepSummary {
    pub id: String,
    /// As `plan status` words it: pending, waiting for approval, ready, running,
    /// done, failed, blocked, merged, needs review.
    pub state: String,
    pub depends_on: Vec<String>,
    /// The lane the step runs as.
    pub lane: String,
}

/// Builds a plan's driver on the host's thread, from the channel to the control
/// room and the plan requests (merges) the host forwards from it.
pub type RoomDriver = Box<
    dyn FnOnce(mpsc::UnboundedSender<HostMsg>, mpsc::UnboundedReceiver<HostRequest>) -> Driver
        + Send,
>;

/// What the control room's host runs for the Plan view.
pub enum RoomPlans {
    /// A plan's driver (`plan run`): the host runs until it is done.
    Drive(RoomDriver),
    /// Only shows the plans that ran here before: nothing waits for it.
    View(RoomDriver),
}

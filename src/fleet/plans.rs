//! What the control room's Plan view is told about each plan: its steps, their
//! states and what each waits for, as the plan's state file says. The plan side
//! reads those files off the screen's thread and sends these.

use tokio::sync::mpsc;

use super::link::{HostMsg, HostRequest};
pub use super::link::{PlanSummary, StepSummary};

/// Work run next to the lanes, in the same thread (a plan's driver): it adds
/// lanes to the registry, which the host starts; the host runs until it is done
/// and every lane has ended. A signal drops it.
pub type Driver = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// Builds a plan's driver on the host's thread, from the channel to the control
/// room and the plan requests (merges) the host forwards from it.
pub type RoomDriver = Box<dyn FnOnce(PlanLink) -> Driver + Send>;

/// What a plans' side is given: where to say things, the plan requests the
/// host forwards, and a flag it holds up while a plan it started runs (the
/// host then stays until that plan is done).
pub struct PlanLink {
    pub to_ui: mpsc::UnboundedSender<HostMsg>,
    pub requests: mpsc::UnboundedReceiver<PlanAsk>,
    pub busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// A plan request (a merge, a retry), and who waits to hear how it went.
pub struct PlanAsk {
    pub request: HostRequest,
    pub done: Option<super::serve::WorkDone>,
}

/// What the control room's host runs for the Plan view.
pub enum RoomPlans {
    /// A plan's driver (`plan run`): the host runs until it is done.
    Drive(RoomDriver),
    /// Only shows the plans that ran here before: nothing waits for it.
    View(RoomDriver),
}

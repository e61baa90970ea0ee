//! The supervision engine: runs the agent session after session under a watchdog.
//! It knows nothing about terminals; the console printer and the control room
//! watch it through [`crate::protocol`].

pub mod analysis;
pub mod cgroup;
pub mod core;
pub mod fleet_budget;
pub mod hooks;
pub mod leftovers;
pub mod process;
pub mod prompt;
pub(crate) mod reading;
pub mod reaper;
pub mod runtime;
pub mod shared_limit;

/// The single-threaded async runtime a loop, a fleet or a screen runs on; `None`
/// (said on stderr) when the system refuses one.
pub fn current_thread_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(err) => {
            eprintln!("clowder: error: cannot start the async runtime: {err}");
            None
        }
    }
}

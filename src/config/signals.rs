//! `[signals]` in harness.toml: what a signal from a service manager asks of the loop.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SignalsConfig {
    /// What the first SIGTERM does: `finish` lets the current session finish,
    /// then stops (as the shell loops do); `stop_now` ends the session at once
    /// (TERM to its group, `kill_grace_secs`, KILL), for a service manager that
    /// sends SIGKILL after a grace period. A second SIGTERM always stops now.
    pub sigterm: Sigterm,
}

/// The first SIGTERM's meaning.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Sigterm {
    /// Finish the current session, then stop.
    #[default]
    Finish,
    /// End the current session now (TERM, the grace, KILL), then stop.
    StopNow,
}

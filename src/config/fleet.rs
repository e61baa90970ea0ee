//! `[fleet]` in harness.toml: how the lanes of a fleet share the machine.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PositiveCount;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// At most this many lanes run a session at once; the others wait their turn, in order.
    pub max_parallel: PositiveCount,
    /// Lanes that run the same agent command share one account: a rate limit in
    /// one holds session starts in all until its backoff or reset time has passed.
    pub shared_rate_limit: bool,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            max_parallel: PositiveCount(4),
            shared_rate_limit: false,
        }
    }
}

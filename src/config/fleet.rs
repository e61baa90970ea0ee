//! `[fleet]` in harness.toml: how the lanes of a fleet share the machine.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{OptionalDuration, PositiveCount};

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// At most this many lanes run a session at once; the others wait their turn, in order.
    pub max_parallel: PositiveCount,
    /// Lanes that run the same agent command share one account: a rate limit in
    /// one holds session starts in all until its backoff or reset time has passed.
    pub shared_rate_limit: bool,
    /// `clowder lane merge` runs this shell command on the merged result, as a
    /// plan's `verify`; base moves only when it exits 0 (`""`: no check).
    pub verify: String,
    /// How long `verify` may run: `90s`, `30m`, `2h` (`""`: 30m).
    pub verify_timeout: OptionalDuration,
    /// The remote `clowder lane push` pushes to (`""`: `origin`).
    pub push: String,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            max_parallel: PositiveCount(4),
            shared_rate_limit: false,
            verify: String::new(),
            verify_timeout: OptionalDuration::default(),
            push: String::new(),
        }
    }
}

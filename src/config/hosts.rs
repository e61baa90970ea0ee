//! `[[hosts]]` in harness.toml: the hosts `clowder attach` (given no target)
//! opens one room over, each with the name its lanes go by in that room.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// The host's lanes show as `NAME/lane` in the room.
    pub name: String,
    /// A folder (its `.clowder/host.sock`), or `ssh://[user@]host[:port]/path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Instead of `target`: a command whose stdin and stdout reach the host, e.g.
    /// `kubectl exec -i clowder-host-0 -- clowder attach --stdio /work/repo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

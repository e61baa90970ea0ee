//! A fleet repository's files as the tests read them: each lane's status and
//! the lanes registered in `.clowder/fleet.json`.

use std::path::Path;

use serde_json::Value;

use super::{DEADLINE, wait_until};

/// The lane's `harness.status`, once it is there and whole.
pub fn lane_status(root: &Path, lane: &str) -> Option<Value> {
    let path = root.join(format!(".clowder/lanes/{lane}/harness.status"));
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The process group of the lane's running session, once there is one.
pub fn lane_session_group(root: &Path, lane: &str) -> i32 {
    let mut pgid = None;
    let running = wait_until(DEADLINE, || {
        pgid = lane_status(root, lane)
            .filter(|status| status["state"] == "session_running")
            .and_then(|status| status["pgid"].as_i64());
        pgid.is_some()
    });
    assert!(running, "lane {lane} started no session");
    pgid.expect("checked above") as i32
}

/// The names of the lanes in `.clowder/fleet.json`, in its order.
pub fn registered_lanes(root: &Path) -> Vec<String> {
    let registry: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join(".clowder/fleet.json")).expect("fleet.json"),
    )
    .expect("fleet.json is JSON");
    registry["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .filter_map(|lane| lane["name"].as_str().map(str::to_string))
        .collect()
}

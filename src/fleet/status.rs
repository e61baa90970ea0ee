//! `clowder --status` in a folder with lanes: one line per lane, from its
//! status file (where [`super::lane_files`] says it is).

use std::path::Path;

use super::registry;
use crate::store::status;

/// Prints each lane's state (`--json`: one object, lane name to status); 2 if
/// the registry cannot be read, like any configuration error.
pub fn print(root: &Path, json: bool) -> i32 {
    let registry = match registry::load(root) {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("clowder: {err}");
            return 2;
        }
    };
    let mut all = serde_json::Map::new();
    let config = crate::config::Config::of_folder(root);
    for lane in &registry.lanes {
        let files = config.lane_files(root, lane.name.as_str());
        let read = status::read(&files.status);
        if json {
            let value = read
                .as_ref()
                .ok()
                .and_then(|(_, raw)| serde_json::from_str(raw).ok())
                .unwrap_or(serde_json::Value::Null);
            all.insert(lane.name.to_string(), value);
            continue;
        }
        match read {
            Ok((snapshot, _)) => {
                let queued = files.mark(crate::supervisor::runtime::QUEUED_MARK).exists();
                let note = super::task_lane::status_note(root, lane, chrono::Utc::now());
                println!("{}{note}", line(&lane.name, &snapshot, queued));
            }
            // As `clowder lanes`: no file is a lane not started, a file
            // that cannot be read is one whose state is unknown.
            Err(err) if std::fs::symlink_metadata(&files.status).is_ok() => println!(
                "lane={} state={} requested={} ({})",
                lane.name,
                crate::lane_status::LaneStatus::Unknown.word(),
                lane.state.as_str(),
                crate::escape::one_line(&err)
            ),
            Err(_) => println!(
                "lane={} state={} requested={}",
                lane.name,
                crate::lane_status::LaneStatus::NotStarted.word(),
                lane.state.as_str()
            ),
        }
    }
    if json {
        let all = serde_json::Value::Object(all).to_string();
        println!("{}", crate::escape::json_visible(&all));
    }
    0
}

/// One lane on one line: its state (in the one vocabulary), iteration,
/// global number, and how it ended.
fn line(name: &super::LaneName, snapshot: &crate::protocol::Snapshot, queued: bool) -> String {
    let alive = status::writer_alive(snapshot);
    let facts = crate::lane_status::Facts {
        queued,
        ..Default::default()
    };
    let state = crate::lane_status::LaneStatus::of_status_file(snapshot, alive, facts);
    let exit = state
        .detail(Some(snapshot))
        .filter(|_| state == crate::lane_status::LaneStatus::Failed)
        .map(|detail| format!(" ({detail})"))
        .unwrap_or_default();
    let ended = snapshot
        .exit_reason
        .as_ref()
        .filter(|_| !alive)
        .map(|reason| format!(" ended={}", reason.label()))
        .unwrap_or_default();
    let ungated = snapshot
        .ungated
        .as_ref()
        .map(|why| format!(" approvals=UNGATED — {why}"))
        .unwrap_or_default();
    format!(
        "lane={name} state={}{exit} iteration={}/{} global={}{ended}{ungated}",
        state.word(),
        snapshot.iteration,
        snapshot.max_iterations,
        snapshot
            .global_iteration
            .map_or_else(|| "-".to_string(), |g| g.to_string()),
    )
}

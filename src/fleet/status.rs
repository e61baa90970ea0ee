//! `clowder --status` in a folder with lanes: one line per lane, from its
//! `.clowder/lanes/NAME/harness.status`.

use std::path::Path;

use super::registry;
use crate::store::status;

/// Prints each lane's state (`--json`: one object, lane name to status); 1 if
/// the registry cannot be read.
pub fn print(root: &Path, json: bool) -> i32 {
    let registry = match registry::load(root) {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("clowder: {err}");
            return 1;
        }
    };
    let now = chrono::Utc::now();
    let mut all = serde_json::Map::new();
    for lane in &registry.lanes {
        let path = super::lanes::status_path(root, &lane.name);
        let read = status::read(&path);
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
                let alive = status::writer_alive(snapshot.pid);
                let size = snapshot
                    .output_file
                    .as_ref()
                    .and_then(|file| std::fs::metadata(file).ok())
                    .map(|m| m.len());
                let line = status::render(&snapshot, alive, now, size);
                println!("lane={} {}", lane.name, line.replace('\n', " "));
            }
            Err(_) => println!("lane={} not run yet ({})", lane.name, lane.state.as_str()),
        }
    }
    if json {
        println!("{}", serde_json::Value::Object(all));
    }
    0
}

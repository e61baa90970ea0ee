//! `clowder tasks`: each task's status, iteration, heartbeat age and last action.

use std::path::{Path, PathBuf};

use chrono::Utc;
use serde::Serialize;

use super::context::cut;
use super::task::{self, ActionRecord};

/// How far back from the end of `actions.jsonl` the last line is looked for.
const TAIL_BYTES: u64 = 256 * 1024;

#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub dir: String,
    pub task_id: Option<String>,
    /// `running`, `stopped`, `completed`, `failed`; `new` before the first run;
    /// `corrupt` when state.json cannot be read, `invalid` when task.json cannot.
    pub status: String,
    pub iteration: u64,
    pub max_iterations: Option<u64>,
    pub termination_reason: Option<String>,
    pub heartbeat_age_secs: Option<i64>,
    pub heartbeat_status: Option<String>,
    pub last_action: Option<String>,
}

/// The task directories in `dir`: itself if it holds a task.json, and every
/// subfolder that does, sorted by name.
pub(crate) fn find_tasks(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if dir.join(task::TASK_FILE).is_file() {
        found.push(dir.to_path_buf());
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| match dir == Path::new(".") {
            true => PathBuf::from(entry.file_name()),
            false => entry.path(),
        })
        .filter(|path| path.join(task::TASK_FILE).is_file())
        .collect();
    subs.sort();
    found.extend(subs);
    found
}

pub(crate) fn row(dir: &Path) -> Row {
    let task = task::read_task(dir);
    let (status, iteration, reason) = match &task {
        Err(err) => ("invalid".to_string(), 0, Some(err.to_string())),
        Ok(_) => status_of(task::read_state(dir)),
    };
    let task = task.ok();
    let heartbeat = task::read_heartbeat(dir);
    Row {
        dir: dir.display().to_string(),
        task_id: task.as_ref().map(|t| t.task_id.clone()),
        status,
        iteration,
        max_iterations: task.as_ref().map(|t| t.constraints.max_iterations),
        termination_reason: reason,
        heartbeat_age_secs: heartbeat
            .as_ref()
            .map(|h| (Utc::now() - h.timestamp).num_seconds().max(0)),
        heartbeat_status: heartbeat.map(|h| h.status),
        last_action: last_record(dir).map(|r| summary(&r)),
    }
}

fn status_of(state: Result<Option<task::State>, task::FileError>) -> (String, u64, Option<String>) {
    match state {
        Ok(Some(state)) => (
            state.status.as_str().to_string(),
            state.iteration,
            state.termination_reason,
        ),
        Ok(None) => ("new".to_string(), 0, None),
        Err(err) if crate::store::versioned::is_newer(&err.message) => {
            ("newer".to_string(), 0, Some(err.to_string()))
        }
        Err(err) => ("corrupt".to_string(), 0, Some(err.to_string())),
    }
}

fn last_record(dir: &Path) -> Option<ActionRecord> {
    // A regular file only: a FIFO there must not hang `clowder tasks`.
    let text = crate::store::small_file::tail(&dir.join(task::ACTIONS_FILE), TAIL_BYTES).ok()?;
    let line = text.lines().rev().find(|line| !line.trim().is_empty())?;
    task::parse_action_line(line)
}

fn summary(record: &ActionRecord) -> String {
    if let Some(error) = &record.error {
        return format!("#{} refused: {}", record.iteration, cut(error, 80));
    }
    if record.results.is_empty() {
        return format!("#{} no action", record.iteration);
    }
    let parts: Vec<String> = record
        .results
        .iter()
        .map(|result| {
            let subject = ["path", "start_path"]
                .iter()
                .find_map(|key| result.args.get(*key).and_then(|v| v.as_str()))
                .unwrap_or("");
            let verdict = if result.ok {
                "ok"
            } else if result.security_violation {
                "forbidden"
            } else if result.skipped {
                "skipped"
            } else {
                "error"
            };
            format!("{} {} {verdict}", result.tool, cut(subject, 60))
        })
        .collect();
    format!("#{} {}", record.iteration, parts.join(", "))
}

pub(crate) fn render(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<24} {:<10} {:>9}  {:<22} {}\n",
        "TASK", "STATUS", "ITER", "HEARTBEAT", "LAST ACTION"
    );
    for row in rows {
        let iteration = match row.max_iterations {
            Some(max) => format!("{}/{max}", row.iteration),
            None => row.iteration.to_string(),
        };
        let heartbeat = match (&row.heartbeat_age_secs, &row.heartbeat_status) {
            (Some(age), Some(phase)) => format!("{} ago ({phase})", crate::fmt::duration(*age)),
            _ => "-".to_string(),
        };
        let line = format!(
            "{:<24} {:<10} {:>9}  {:<22} {}",
            row.dir,
            row.status,
            iteration,
            heartbeat,
            row.last_action.as_deref().unwrap_or("-")
        );
        out.push_str(&crate::escape::one_line(&line));
        out.push('\n');
    }
    out
}

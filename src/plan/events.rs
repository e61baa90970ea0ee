//! The plan's event log, `.clowder/plans/NAME-events.jsonl` (a sub-plan's in
//! its own folder, see [`super::home`]): one JSON object a line, appended, for
//! every event the scheduler reports.

use std::io::Write;
use std::path::PathBuf;

use chrono::Utc;
use serde::Serialize;

use super::home::Home;
use super::scheduler::EventKind;

pub struct EventLog {
    path: PathBuf,
    plan: String,
}

#[derive(Serialize)]
struct Line<'a> {
    ts: String,
    plan: &'a str,
    event: EventKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    detail: &'a str,
}

impl EventLog {
    pub fn new(home: &Home) -> EventLog {
        EventLog {
            path: home.events().to_path_buf(),
            plan: home.name().to_string(),
        }
    }

    /// Appends the event; returns it as a console line (`plan=… event=… step=…`).
    /// A log that cannot be written is said on that line, never fatal.
    pub fn append(&self, event: EventKind, step: Option<&str>, detail: &str) -> String {
        let line = Line {
            ts: Utc::now().to_rfc3339(),
            plan: &self.plan,
            event,
            step,
            detail,
        };
        let json = serde_json::to_string(&line)
            .expect("an event serialises because every field is plain data");
        let name = serde_json::to_value(event)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let mut text = format!("plan={} event={name}", self.plan);
        if let Some(step) = step {
            text.push_str(&format!(" step={step}"));
        }
        if !detail.is_empty() {
            text.push_str(&format!(" {}", crate::escape::one_line(detail)));
        }
        if let Err(err) = self.write(&json) {
            text.push_str(&format!(
                " (cannot append to {}: {err})",
                self.path.display()
            ));
        }
        text
    }

    fn write(&self, json: &str) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(format!("{json}\n").as_bytes())
    }
}

//! Headless runs say when an approval request starts waiting: one log line per
//! request, with the commands that answer it (the control room shows a pane instead).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::approvals::{Request, RequestKind};
use crate::console::{format_line, say};
use crate::supervisor::core::Level;

/// How often the queue is read: a request waits for a human, who is slower.
const POLL: Duration = Duration::from_millis(500);

/// The longest subject quoted in the line; the whole one is in `clowder queue`.
const SUBJECT_CHARS: usize = 80;

/// Prints the notices until dropped.
pub struct WaitingNotices {
    stop: Arc<AtomicBool>,
}

impl Drop for WaitingNotices {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Watches the queue in `queue_dir` (lanes named from the fleet in `root`).
pub fn start(root: &Path, queue_dir: PathBuf) -> WaitingNotices {
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, root) = (Arc::clone(&stop), root.to_path_buf());
    let spawned = std::thread::Builder::new()
        .name("approval-notices".into())
        .spawn(move || watch(&root, &queue_dir, &flag));
    if let Err(err) = spawned {
        tracing::warn!("cannot watch the approval queue: {err}");
    }
    WaitingNotices { stop }
}

fn watch(root: &Path, queue_dir: &Path, stop: &AtomicBool) {
    let mut told: HashSet<String> = HashSet::new();
    while !stop.load(Ordering::Relaxed) {
        let (_, mut pending) = crate::approvals::list_pending_requests(queue_dir);
        crate::fleet::request_lane::attribute(root, &mut pending);
        for request in pending.iter().filter(|r| !r.abandoned) {
            if told.insert(request.id.clone()) && !stop.load(Ordering::Relaxed) {
                say(&format_line(
                    chrono::Utc::now(),
                    Level::Warn,
                    &line(request),
                ));
            }
        }
        // Forget what was answered, so that the set stays as small as the queue.
        told.retain(|id| pending.iter().any(|r| &r.id == id));
        std::thread::sleep(POLL);
    }
}

/// `approval waiting: Bash `rm -rf build` (id ID) — clowder approve ID / clowder reject ID --reason …`
pub fn line(request: &Request) -> String {
    let what = match request.kind {
        RequestKind::Tool => {
            let tool = request.tool_name.as_deref().unwrap_or("tool");
            format!("{tool} `{}`", shorten(&request.subject()))
        }
        RequestKind::Ask | RequestKind::Session => shorten(&request.title),
    };
    let lane = request
        .lane
        .as_ref()
        .map(|lane| format!("lane {lane}: "))
        .unwrap_or_default();
    let id = &request.id;
    format!(
        "{lane}approval waiting: {what} (id {id}) — clowder approve {id} / clowder reject {id} --reason …"
    )
}

fn shorten(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= SUBJECT_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(SUBJECT_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: RequestKind, tool: Option<&str>, input: serde_json::Value) -> Request {
        Request {
            id: "k3m9q2xv7a".into(),
            created: chrono::Utc::now(),
            kind,
            title: "May session 3 start?".into(),
            tool_name: tool.map(str::to_string),
            tool_input: Some(input),
            session_id: None,
            cwd: None,
            body: None,
            lane: None,
            abandoned: false,
        }
    }

    #[test]
    fn a_tool_call_is_named_with_its_subject_and_the_commands_that_answer_it() {
        let bash = request(
            RequestKind::Tool,
            Some("Bash"),
            serde_json::json!({"command": "rm -rf build"}),
        );
        assert_eq!(
            line(&bash),
            "approval waiting: Bash `rm -rf build` (id k3m9q2xv7a) — clowder approve k3m9q2xv7a / clowder reject k3m9q2xv7a --reason …"
        );
        let mut session = request(RequestKind::Session, None, serde_json::json!({}));
        session.lane = Some("docs".into());
        assert!(
            line(&session).starts_with("lane docs: approval waiting: May session 3 start? (id")
        );
    }

    #[test]
    fn a_long_subject_is_cut_on_one_line() {
        let long = "x\n".repeat(200);
        let bash = request(
            RequestKind::Tool,
            Some("Bash"),
            serde_json::json!({"command": long}),
        );
        let shown = line(&bash);
        assert!(shown.contains("x x x"), "{shown}");
        assert!(shown.contains("…`"), "{shown}");
    }
}

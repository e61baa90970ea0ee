//! The worker's iterations as readable lines (`#3 write_file src/x.rs ✓ 120 bytes`),
//! for its own stdout and for a lane that follows a task's `actions.jsonl`.
//! `actions.jsonl` stays the record; these lines are only for reading.

use serde_json::Value;

use super::task::ActionRecord;
use super::tools::ActionResult;

/// Longest piece of agent text (a reason, a path, an error) put on a line.
const MAX_PIECE_CHARS: usize = 160;
/// The mark of an action or answer that failed.
pub(crate) const FAILED: &str = "✗";
const DONE: &str = "✓";

/// The lines of one iteration: what became of the answer, then one per action.
pub(crate) fn record_lines(record: &ActionRecord) -> Vec<String> {
    let n = record.iteration;
    if let Some(error) = &record.error {
        return vec![format!("#{n} {FAILED} answer refused: {}", piece(error))];
    }
    let mut lines = vec![format!(
        "#{n} answer: {} action(s){}",
        record.results.len(),
        record
            .reasoning()
            .map(|r| format!(" — {}", piece(&r)))
            .unwrap_or_default()
    )];
    if let Some(note) = &record.resumed {
        lines.push(format!("#{n} {}", crate::escape::visible(note)));
    }
    lines.extend(record.results.iter().map(|result| action_line(n, result)));
    lines
}

/// `#3 write_file src/x.rs ✓ 120 bytes`, or the error after `✗`.
pub(crate) fn action_line(iteration: u64, result: &ActionResult) -> String {
    let target = target(result);
    let target = if target.is_empty() {
        String::new()
    } else {
        format!(" {}", piece(&target))
    };
    let outcome = match (&result.error, result.ok) {
        (Some(error), _) => format!("{FAILED} {}", piece(error)),
        (None, false) => format!("{FAILED} failed"),
        (None, true) => format!("{DONE} {}", summary(result)),
    };
    format!("#{iteration} {}{target} {outcome}", piece(&result.tool))
}

/// What the action was about: its path, or a search's pattern and start.
fn target(result: &ActionResult) -> String {
    let text = |key: &str| result.args.get(key).and_then(Value::as_str);
    match (text("path"), text("pattern"), text("start_path")) {
        (Some(path), _, _) => path.to_string(),
        (None, Some(pattern), Some(start)) => format!("{pattern} in {start}"),
        (None, Some(pattern), None) => pattern.to_string(),
        _ => String::new(),
    }
}

/// A short account of a tool's output: sizes and counts, never the content.
fn summary(result: &ActionResult) -> String {
    let output = result.output.as_deref().unwrap_or_default();
    match result.tool.as_str() {
        "read_file" => format!("{} bytes", output.len()),
        "list_directory" | "find_files" => {
            format!(
                "{} entries",
                output.lines().filter(|l| !l.is_empty()).count()
            )
        }
        "write_file" | "create_file" => result
            .args
            .get("content")
            .and_then(Value::as_str)
            .map_or_else(|| piece(output), |c| format!("{} bytes", c.len())),
        _ => piece(output),
    }
}

/// Agent text made safe for one terminal line and capped.
pub(crate) fn piece(text: &str) -> String {
    let safe = crate::escape::visible(text);
    let mut chars = safe.chars();
    let mut out: String = chars.by_ref().take(MAX_PIECE_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn result(tool: &str, args: Value, ok: bool, error: Option<&str>) -> ActionResult {
        ActionResult {
            tool: tool.into(),
            args: args.as_object().cloned().unwrap_or_default(),
            ok,
            output: ok.then(|| "wrote x.rs (5 bytes)".to_string()),
            error: error.map(str::to_string),
            security_violation: false,
            skipped: false,
            interrupted: false,
        }
    }

    #[test]
    fn actions_read_as_one_line_each_with_errors_marked() {
        let record = ActionRecord {
            iteration: 3,
            timestamp: Utc::now(),
            llm_response: json!({"reasoning": "write it\nthen \u{1b}[31mlook", "actions": []})
                .to_string(),
            error: None,
            resumed: None,
            results: vec![
                result(
                    "write_file",
                    json!({"path": "src/x.rs", "content": "hello"}),
                    true,
                    None,
                ),
                result(
                    "read_file",
                    json!({"path": "../etc/passwd"}),
                    false,
                    Some("security violation: ../etc/passwd is outside"),
                ),
            ],
        };
        let lines = record_lines(&record);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("#3 answer: 2 action(s) — write it"));
        assert!(!lines[0].contains('\u{1b}') && !lines[0].contains('\n'));
        assert_eq!(lines[1], "#3 write_file src/x.rs ✓ 5 bytes");
        assert_eq!(
            lines[2],
            "#3 read_file ../etc/passwd ✗ security violation: ../etc/passwd is outside"
        );
    }

    #[test]
    fn a_refused_answer_is_one_marked_line_and_long_text_is_cut() {
        let record = ActionRecord {
            iteration: 1,
            timestamp: Utc::now(),
            llm_response: String::new(),
            error: Some("x".repeat(1000)),
            results: Vec::new(),
            resumed: None,
        };
        let lines = record_lines(&record);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("#1 ✗ answer refused: xxx"));
        assert!(lines[0].ends_with('…') && lines[0].chars().count() < 200);
    }
}

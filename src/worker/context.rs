//! What the LLM is sent each iteration: the task and its constraints, the tools and
//! the exact answer format, the last iterations' actions and results (bounded), and
//! a listing of the allowed paths.

use std::fmt::Write;

use super::task::{ActionRecord, Task};
use super::tools::{self, LIST_CAP, MAX_FIND_DEPTH, READ_CAP};

/// Each past result shows at most this much of its output or error.
const RESULT_CAP: usize = 2000;
/// A past answer that was refused shows at most this much of itself.
const ANSWER_CAP: usize = 1000;

pub(crate) struct Context<'a> {
    pub task: &'a Task,
    pub iteration: u64,
    pub seconds_left: i64,
    pub recent: &'a [ActionRecord],
    /// One listing per allowed path: (path, find_files output).
    pub listings: Vec<(String, String)>,
}

pub(crate) fn build(c: &Context) -> String {
    let mut out = String::new();
    let limits = &c.task.constraints;
    let _ = write!(
        out,
        "You are one step of an automated worker. Each answer you give is run, and you are \
called again with the results, for iteration after iteration until the worker stops you.\n\n\
# Task\n{}\n\n# Constraints\n- this is iteration {} of at most {}\n- about {} seconds left\n\
- you may touch only these paths (relative to the task directory): {}\n\n",
        c.task.prompt.trim(),
        c.iteration,
        limits.max_iterations,
        c.seconds_left.max(0),
        limits.allowed_paths.join(", "),
    );
    out.push_str(&tools_section());
    out.push_str(&history(c.recent));
    out.push_str("# Files\n");
    for (path, listing) in &c.listings {
        let _ = writeln!(
            out,
            "{path}/ (depth {MAX_FIND_DEPTH}, at most {LIST_CAP} shown):\n{listing}"
        );
    }
    out
}

fn tools_section() -> String {
    format!(
        "# Tools (only these; no shell, no network)\n\
- read_file {{\"path\"}}: the first {READ_CAP} bytes of a file\n\
- write_file {{\"path\", \"content\"}}: create or replace a file (parent folders are made)\n\
- create_file {{\"path\", \"content\"}}: create a file; fails if it exists\n\
- list_directory {{\"path\"}}: up to {LIST_CAP} entries\n\
- find_files {{\"pattern\", \"start_path\", \"max_depth\"}}: glob on names (on paths if the \
pattern has a /), max_depth 1 to {MAX_FIND_DEPTH} (default {MAX_FIND_DEPTH}), up to {LIST_CAP} results\n\
Known tools: {}.\n\n\
# Answer format\nAnswer with exactly one JSON object and nothing else (no code fence, no text \
around it, no other field):\n\
{{\"reasoning\": \"why, briefly (optional)\", \"actions\": [{{\"tool\": \"write_file\", \"args\": \
{{\"path\": \"artifacts/notes.md\", \"content\": \"...\"}}}}]}}\n\
\"actions\" may be empty, and holds at most {} actions. Errors come back to you next iteration.\n\n",
        tools::TOOL_NAMES.join(", "),
        super::answer::MAX_ACTIONS
    )
}

fn history(recent: &[ActionRecord]) -> String {
    if recent.is_empty() {
        return "# Previous iterations\n(none yet)\n\n".into();
    }
    let mut out = format!("# Previous iterations (the last {})\n", recent.len());
    for record in recent {
        let _ = writeln!(out, "## iteration {}", record.iteration);
        if let Some(error) = &record.error {
            let _ = writeln!(
                out,
                "your answer was refused: {error}\nit was: {}",
                cut(&record.llm_response, ANSWER_CAP)
            );
        }
        for result in &record.results {
            let args = serde_json::Value::Object(result.args.clone()).to_string();
            let (label, text) = match (&result.output, &result.error) {
                (_, Some(error)) => ("error", error.as_str()),
                (Some(output), None) => ("ok", output.as_str()),
                (None, None) => ("ok", ""),
            };
            let _ = writeln!(
                out,
                "- {} {} -> {label}: {}",
                result.tool,
                cut(&args, RESULT_CAP),
                cut(text, RESULT_CAP)
            );
        }
    }
    out.push('\n');
    out
}

/// At most `cap` bytes of `text`, cut on a character boundary, saying so.
pub(crate) fn cut(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut: {} of {} bytes]", &text[..end], end, text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_characters_whole_and_says_so() {
        assert_eq!(cut("short", 10), "short");
        let text = "éééé";
        let out = cut(text, 3);
        assert!(
            out.starts_with("é…") && out.contains("[cut: 2 of 8 bytes]"),
            "{out}"
        );
    }

    #[test]
    fn a_past_result_is_bounded() {
        let record = ActionRecord {
            iteration: 4,
            timestamp: chrono::Utc::now(),
            llm_response: "x".repeat(50_000),
            error: Some("invalid answer".into()),
            resumed: None,
            results: vec![tools::ActionResult {
                tool: "read_file".into(),
                args: serde_json::Map::new(),
                ok: true,
                output: Some("y".repeat(50_000)),
                error: None,
                security_violation: false,
                skipped: false,
                interrupted: false,
            }],
        };
        let text = history(&[record]);
        assert!(text.contains("## iteration 4") && text.len() < RESULT_CAP + ANSWER_CAP + 500);
    }
}

//! Parallel tool calls: each result is shown under its own call.

use super::*;
use crate::agent::stream::{AgentFormat, StreamParser};

fn shown(name: &str) -> VecDeque<Rendered> {
    let path = format!(
        "{}/tests/fixtures/transcripts/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let mut lines = parser.feed(&std::fs::read(path).unwrap());
    lines.extend(parser.finish());
    let mut view = OutputView::default();
    for line in lines {
        view.push(line);
    }
    view.lines
}

/// Every result's nearest call above it is its own call.
fn assert_paired(lines: &VecDeque<Rendered>) {
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let mut results = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.kind != LineKind::ToolResult {
            continue;
        }
        results += 1;
        let call = lines
            .range(..i)
            .rev()
            .find(|l| l.kind == LineKind::ToolCall)
            .unwrap();
        assert_eq!(call.tool_use_id, line.tool_use_id, "{texts:#?}");
    }
    assert_eq!(results, 2, "{texts:#?}");
}

#[test]
fn claude_results_follow_their_own_calls() {
    assert_paired(&shown("claude_parallel_tools.jsonl"));
}

#[test]
fn codex_results_follow_their_own_calls() {
    assert_paired(&shown("codex_parallel_tools.jsonl"));
}

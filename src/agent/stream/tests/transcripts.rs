//! Real transcript shapes that were once misread: statistics and display.

use super::*;

fn transcript(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/transcripts/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).unwrap()
}

#[test]
fn a_later_empty_error_result_does_not_erase_the_success() {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    parser.watch_final_text("TASK_COMPLETE");
    parser.feed(&transcript("claude_two_results.jsonl"));
    parser.finish();
    let stats = parser.stats();
    assert_eq!(stats.cost_usd, Some(0.7474));
    assert_eq!(stats.turns, 44);
    assert_eq!(stats.result_subtype.as_deref(), Some("success"));
    assert_eq!(stats.result_is_error, Some(false));
    assert_eq!((stats.input_tokens, stats.output_tokens), (1200, 3400));
    assert!(parser.final_text_has_watched());
}

#[test]
fn overage_is_shown_as_a_warning_and_counted() {
    let (out, parser) = run(
        AgentFormat::Auto,
        &transcript("claude_overage_then_success.jsonl"),
    );
    let limit = out.iter().find(|l| l.kind == LineKind::RateLimit).unwrap();
    assert!(!limit.is_error, "{limit:?}");
    assert!(limit.text.contains("overage"), "{}", limit.text);
    assert_eq!(parser.stats().overage_events, 1);
}

#[test]
fn subagent_tokens_count_and_never_drop() {
    let data = transcript("claude_subagent_tokens.jsonl");
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let mut shown = (0, 0);
    for line in data.split_inclusive(|&b| b == b'\n') {
        parser.feed(line);
        let stats = parser.stats();
        let now = (stats.input_tokens, stats.output_tokens);
        assert!(
            now.0 >= shown.0 && now.1 >= shown.1,
            "{shown:?} then {now:?}"
        );
        shown = now;
    }
    parser.finish();
    let stats = parser.stats();
    assert_eq!((stats.input_tokens, stats.output_tokens), (800, 300));
    let haiku = stats.tokens_by_model["claude-haiku-4-5-20251001"];
    assert_eq!((haiku.input, haiku.output), (600, 200));
    let sonnet = stats.tokens_by_model["claude-sonnet-4-5-20250929"];
    assert_eq!((sonnet.input, sonnet.output), (200, 100));
}

#[test]
fn codex_commands_show_their_quotes_and_reconnects_are_not_failures() {
    let (out, _) = run(AgentFormat::Auto, &transcript("codex_parallel_tools.jsonl"));
    let calls: Vec<&str> = out
        .iter()
        .filter(|l| l.kind == LineKind::ToolCall)
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(
        calls,
        ["▶ exec  cat a.txt", r#"▶ exec  grep -n "TODO" src/main.rs"#]
    );
    let notice = out
        .iter()
        .find(|l| l.text.contains("Reconnecting"))
        .unwrap();
    assert!(!notice.is_error, "{notice:?}");
    assert_eq!(notice.kind, LineKind::System);
    assert!(!notice.text.contains('✗'), "{}", notice.text);
}

#[test]
fn an_agent_prompt_keeps_its_line_breaks_when_expanded() {
    let (out, _) = run(
        AgentFormat::Auto,
        &transcript("claude_subagent_tokens.jsonl"),
    );
    let call = out.iter().find(|l| l.kind == LineKind::ToolCall).unwrap();
    let detail = call.detail.as_deref().unwrap();
    assert!(
        detail.contains("prompt:\nList the test files.\nReport their names."),
        "{detail}"
    );
    assert!(!detail.contains("\\n"), "{detail}");
}

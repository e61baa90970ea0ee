//! Shapes that outside testing found misread on real transcripts and real
//! CLIs (issue 21): model variants, several invocations in one file, Codex
//! endings and cost, formats not recognised, and how commands are shown.

use super::*;

fn transcript(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/transcripts/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).unwrap()
}

#[test]
fn a_model_and_its_bracketed_variant_are_one_model() {
    let (out, parser) = run(AgentFormat::Auto, &transcript("claude_1m_context.jsonl"));
    let stats = parser.stats();
    assert_eq!(
        stats.tokens_by_model.keys().collect::<Vec<_>>(),
        ["claude-opus-4-6"],
        "{:?}",
        stats.tokens_by_model
    );
    assert_eq!(
        (
            stats.input_tokens,
            stats.output_tokens,
            stats.cache_read_tokens,
            stats.cache_write_tokens
        ),
        (8, 150, 2200, 200)
    );
    assert_eq!(stats.turns, 2);
    // The model as the init line names it.
    assert_eq!(stats.model.as_deref(), Some("claude-opus-4-6[1m]"));
    // The result's detail lists no model twice.
    let result = out.iter().find(|l| l.kind == LineKind::Result).unwrap();
    let detail = result.detail.as_deref().unwrap_or_default();
    assert!(!detail.contains("claude-opus-4-6"), "{detail}");
    assert!(detail.contains("input tokens: 8\n"), "{detail}");
}

#[test]
fn a_result_line_of_claude_code_2_1_328_is_read() {
    // Keys in another order (`type` late), `terminal_reason`, `result_index`,
    // `model_usage_since_last_result` and `api_error_status: null`.
    let (out, parser) = run(AgentFormat::Auto, &transcript("claude_1m_context.jsonl"));
    assert_eq!(parser.format(), AgentFormat::ClaudeStreamJson);
    let stats = parser.stats();
    assert!(stats.ended);
    assert_eq!(stats.cost_usd, Some(0.25));
    assert_eq!(stats.duration_ms, Some(9000));
    assert_eq!(stats.result_subtype.as_deref(), Some("success"));
    assert_eq!(stats.result_is_error, Some(false));
    assert_eq!(stats.result_text.as_deref(), Some("Tests pass."));
    let result = out.iter().find(|l| l.kind == LineKind::Result).unwrap();
    assert!(!result.is_error, "{result:?}");
    assert!(
        result
            .text
            .starts_with("■ result: success · 2 turns · $0.2500"),
        "{}",
        result.text
    );
}

#[test]
fn invocations_add_up_and_reports_within_one_take_the_largest() {
    let bytes = transcript("claude_two_invocations.jsonl");
    let (_, parser) = run(AgentFormat::Auto, &bytes);
    let stats = parser.stats();
    // aaaa…: two results of one session_id, the larger (2 turns, $0.15,
    // 15 in, 150 out, 2.5 s); bbbb…: 2 turns, $0.30, 21 in, 210 out, 4 s.
    assert_eq!(stats.turns, 4);
    assert!((stats.cost_usd.unwrap() - 0.45).abs() < 1e-9, "{stats:?}");
    assert_eq!((stats.input_tokens, stats.output_tokens), (36, 360));
    assert_eq!(stats.duration_ms, Some(6500));
    let sonnet = stats.tokens_by_model["claude-sonnet-4-5-20250929"];
    assert_eq!((sonnet.input, sonnet.output), (36, 360));
    assert!(stats.ended);
    // Whatever the chunking.
    let mut parser = StreamParser::statistics_only(AgentFormat::Auto);
    for chunk in bytes.chunks(7) {
        parser.feed(chunk);
    }
    parser.finish();
    assert_eq!(parser.stats().turns, 4);
    assert_eq!(parser.stats().input_tokens, 36);
}

#[test]
fn a_later_invocation_without_its_result_leaves_the_figures_unknown() {
    let bytes = transcript("claude_two_invocations.jsonl");
    let text = String::from_utf8(bytes).unwrap();
    // Cut before the second session's result.
    let cut: String = text.lines().take(9).map(|l| format!("{l}\n")).collect();
    let (_, parser) = run_auto(&cut);
    let stats = parser.stats();
    assert!(!stats.ended, "{stats:?}");
    // What is known so far: the first session's result and the second's messages.
    assert_eq!(stats.input_tokens, 15 + 21);
    assert_eq!(stats.cost_usd, Some(0.15));
}

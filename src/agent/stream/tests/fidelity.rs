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
    // aaaa…: two runs of one session_id, cost and tokens running totals (the
    // larger: $0.15, 15 in, 150 out), turns and duration each run's own
    // (1 + 2 turns, 1 + 2.5 s); bbbb…: 2 turns, $0.30, 21 in, 210 out, 4 s.
    assert_eq!(stats.turns, 5);
    assert!((stats.cost_usd.unwrap() - 0.45).abs() < 1e-9, "{stats:?}");
    assert_eq!((stats.input_tokens, stats.output_tokens), (36, 360));
    assert_eq!(stats.duration_ms, Some(7500));
    let sonnet = stats.tokens_by_model["claude-sonnet-4-5-20250929"];
    assert_eq!((sonnet.input, sonnet.output), (36, 360));
    assert!(stats.ended);
    // Whatever the chunking.
    let mut parser = StreamParser::statistics_only(AgentFormat::Auto);
    for chunk in bytes.chunks(7) {
        parser.feed(chunk);
    }
    parser.finish();
    assert_eq!(parser.stats().turns, 5);
    assert_eq!(parser.stats().input_tokens, 36);
}

#[test]
fn a_resumed_sessions_turns_and_duration_add_up_and_its_cost_is_the_running_total() {
    let bytes = transcript("claude_resumed.jsonl");
    let (_, parser) = run(AgentFormat::Auto, &bytes);
    let stats = parser.stats();
    // Two runs of one session_id, 2 turns each (4 distinct messages).
    assert_eq!(stats.turns, 4);
    assert_eq!(stats.duration_ms, Some(2500));
    assert_eq!(stats.cost_usd, Some(0.25));
    assert_eq!((stats.input_tokens, stats.output_tokens), (40, 200));
    assert_eq!(stats.tool_calls, 2);
    assert!(stats.ended);
    assert_eq!(stats.result_subtype.as_deref(), Some("success"));
}

#[test]
fn the_last_run_decides_when_it_was_cut_short() {
    let text = String::from_utf8(transcript("claude_resumed.jsonl")).unwrap();
    // The second run's init and first message, no result.
    let cut: String = text.lines().take(7).map(|l| format!("{l}\n")).collect();
    let mut parser = StreamParser::statistics_only(AgentFormat::Auto);
    parser.watch_final_text("Tests pass");
    parser.feed(cut.as_bytes());
    parser.finish();
    let stats = parser.stats();
    assert!(!stats.ended, "{stats:?}");
    assert_eq!(stats.result_subtype, None, "{stats:?}");
    assert_eq!(stats.result_is_error, None, "{stats:?}");
    assert_eq!(stats.cost_usd, None, "{stats:?}");
    assert!(!parser.final_text_has_watched());
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
    // What is known so far: the first session's result and the second's
    // messages; the cost of a run cut short is not known.
    assert_eq!(stats.input_tokens, 15 + 21);
    assert_eq!(stats.cost_usd, None);
    assert_eq!(stats.result_subtype, None);
}

#[test]
fn a_completed_codex_run_reads_success_and_its_cost_stays_unknown() {
    for name in ["codex_0169_run.jsonl", "codex_0101_run.jsonl"] {
        let (_, parser) = run(AgentFormat::Auto, &transcript(name));
        let stats = parser.stats();
        assert_eq!(stats.result_subtype.as_deref(), Some("success"), "{name}");
        assert_eq!(stats.result_is_error, Some(false), "{name}");
        assert_eq!(stats.cost_usd, None, "{name}");
        assert!(stats.ended, "{name}");
        assert_eq!(stats.turns, 1, "{name}");
        assert_eq!(
            (
                stats.input_tokens,
                stats.cache_read_tokens,
                stats.output_tokens
            ),
            (12040, 9984, 230),
            "{name}"
        );
    }
    // 0.169 reports the cache writes; 0.101 has no such field.
    let (_, current) = run(AgentFormat::Auto, &transcript("codex_0169_run.jsonl"));
    assert_eq!(current.stats().cache_write_tokens, 512);
    let (_, older) = run(AgentFormat::Auto, &transcript("codex_0101_run.jsonl"));
    assert_eq!(older.stats().cache_write_tokens, 0);
}

#[test]
fn a_codex_run_ending_in_a_failed_turn_reads_error() {
    let (_, parser) = run_auto(
        "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n\
         {\"type\":\"turn.started\"}\n\
         {\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}\n\
         {\"type\":\"turn.started\"}\n\
         {\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}\n",
    );
    let stats = parser.stats();
    assert_eq!(stats.result_subtype.as_deref(), Some("error"));
    assert_eq!(stats.result_is_error, Some(true));
    assert_eq!(stats.result_text.as_deref(), Some("stream disconnected"));
    assert_eq!(stats.cost_usd, None);
}

#[test]
fn codex_warnings_are_notices_and_commands_read_as_the_shell_runs_them() {
    let (out, _) = run(AgentFormat::Auto, &transcript("codex_0169_run.jsonl"));
    let notices: Vec<&Rendered> = out
        .iter()
        .filter(|l| l.text.contains("Model metadata") || l.text.contains("Skill descriptions"))
        .collect();
    assert_eq!(notices.len(), 2, "{:?}", texts(&out));
    for notice in notices {
        assert!(!notice.is_error, "{notice:?}");
        assert_eq!(notice.kind, LineKind::System);
        assert!(!notice.text.contains('✗'), "{}", notice.text);
        assert!(notice.text.starts_with("⚠ "), "{}", notice.text);
    }
    let calls: Vec<&str> = out
        .iter()
        .filter(|l| l.kind == LineKind::ToolCall)
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(
        calls,
        [
            r#"▶ exec  grep -rn "TODO" src | wc -l && echo `date +%F` $HOME"#,
            "▶ exec  cargo test --quiet",
        ]
    );
}

#[test]
fn a_codex_command_given_as_an_argument_list_reads_as_its_script() {
    let (out, _) = run_auto(
        r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":["/bin/zsh","-lc","echo \"$HOME\""],"status":"in_progress"}}"#,
    );
    assert_eq!(texts(&out), [r#"▶ exec  echo "$HOME""#]);
}

#[test]
fn a_one_line_tool_input_expands_as_text() {
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"grep -n \"TODO\" src/main.rs","description":"Find the TODOs","timeout":5000}}]}}"#,
    );
    let call = only(&out);
    assert_eq!(
        call.detail.as_deref(),
        Some("command: grep -n \"TODO\" src/main.rs\ndescription: Find the TODOs\ntimeout: 5000")
    );
    // An empty input, and one with nested values, stay JSON.
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"ExitPlanMode","input":{}}]}}"#,
    );
    assert_eq!(only(&out).detail.as_deref(), Some("{}"));
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"x","input":{"a":{"b":1}}}]}}"#,
    );
    assert_eq!(
        only(&out).detail.as_deref(),
        Some("{\n  \"a\": {\n    \"b\": 1\n  }\n}")
    );
}

#[test]
fn an_unrecognised_format_is_said_once_and_counts_nothing() {
    let bytes = transcript("codex_legacy_0_40.jsonl");
    for format in [AgentFormat::Auto, AgentFormat::CodexJson] {
        let (out, parser) = run(format, &bytes);
        let notices: Vec<&Rendered> = out
            .iter()
            .filter(|l| l.text == UNRECOGNISED_FORMAT_NOTICE)
            .collect();
        assert_eq!(notices.len(), 1, "{format:?}: {:?}", texts(&out));
        assert!(parser.stats().unrecognised_format, "{format:?}");
        assert!(!parser.stats().ended, "{format:?}");
    }
    // Said as soon as enough lines show it, before the end.
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let mut early = parser.feed(&bytes);
    assert!(early.iter().any(|l| l.text == UNRECOGNISED_FORMAT_NOTICE));
    early = parser.finish();
    assert!(early.is_empty(), "{:?}", texts(&early));
    // A known stream with an odd line or two is not.
    for name in ["codex_0169_run.jsonl", "claude_1m_context.jsonl"] {
        let mut input = b"{\"id\":\"0\",\"msg\":{\"type\":\"x\"}}\n".to_vec();
        input.extend(transcript(name));
        let (out, parser) = run(AgentFormat::Auto, &input);
        assert!(!parser.stats().unrecognised_format, "{name}");
        assert!(!out.iter().any(|l| l.text == UNRECOGNISED_FORMAT_NOTICE));
    }
}

#[test]
fn real_claude_code_2_1_332_output_counts_the_1m_model_once() {
    let (_, older) = run(
        AgentFormat::Auto,
        &transcript("claude_2.0.77_opus_1m.jsonl"),
    );
    let stats = older.stats();
    assert_eq!(
        stats.tokens_by_model.len(),
        1,
        "{:?}",
        stats.tokens_by_model
    );
    assert_eq!((stats.input_tokens, stats.cache_read_tokens), (7, 100));
    let (out, parser) = run(
        AgentFormat::Auto,
        &transcript("claude_2.1.332_opus_1m.jsonl"),
    );
    let stats = parser.stats();
    assert_eq!(
        stats.tokens_by_model.len(),
        1,
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
        (7, 3, 100, 20)
    );
    assert_eq!(stats.turns, 1);
    assert_eq!(stats.cost_usd, Some(0.000285));
    assert_eq!(stats.result_subtype.as_deref(), Some("success"));
    assert!(stats.ended);
    let result = out.iter().find(|l| l.kind == LineKind::Result).unwrap();
    assert!(!result.is_error, "{result:?}");

    let (out, parser) = run(
        AgentFormat::Auto,
        &transcript("claude_2.1.332_api_error_400.jsonl"),
    );
    let stats = parser.stats();
    assert_eq!(stats.result_is_error, Some(true));
    assert!(stats.ended);
    let result = out.iter().find(|l| l.kind == LineKind::Result).unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(
        result.text.starts_with("■ result: error (400)"),
        "{}",
        result.text
    );
}

#[test]
fn real_codex_runs_read_success_with_their_commands_as_the_shell_runs_them() {
    for (name, cache_write) in [
        ("codex_0.169_real_run.jsonl", 0),
        ("codex_0.101_real_run.jsonl", 0),
    ] {
        let (out, parser) = run(AgentFormat::Auto, &transcript(name));
        let stats = parser.stats();
        assert_eq!(stats.result_subtype.as_deref(), Some("success"), "{name}");
        assert_eq!(stats.cost_usd, None, "{name}");
        assert_eq!(
            (
                stats.input_tokens,
                stats.cache_read_tokens,
                stats.output_tokens
            ),
            (2000, 400, 100),
            "{name}"
        );
        assert_eq!(stats.cache_write_tokens, cache_write, "{name}");
        let calls: Vec<&str> = out
            .iter()
            .filter(|l| l.kind == LineKind::ToolCall)
            .map(|l| l.text.as_str())
            .collect();
        assert_eq!(calls, [r#"▶ exec  echo "$HOME" `date +%Y`"#], "{name}");
        assert!(!out.iter().any(|l| l.is_error), "{name}: {:?}", texts(&out));
    }
}

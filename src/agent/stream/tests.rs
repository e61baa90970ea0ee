//! Tests of the stream reader: fixtures, Claude events, details.

use super::*;
use proptest::prelude::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/public");

const CLAUDE_FIXTURE: &str = "claude/gleam-2.1.7-basic_query.ndjson";
const CODEX_FIXTURES: &[&str] = &[
    "codex/agentcmd-0.46-stream-output-2.jsonl",
    "codex/agentcmd-0.46-stream-output-3.jsonl",
    "codex/agentcmd-0.46-stream-output-4.jsonl",
];

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).unwrap()
}

/// Whole input at once, then finish.
fn run(format: AgentFormat, input: &[u8]) -> (Vec<Rendered>, StreamParser) {
    let mut parser = StreamParser::new(format);
    let mut out = parser.feed(input);
    out.extend(parser.finish());
    (out, parser)
}

fn run_auto(input: &str) -> (Vec<Rendered>, StreamParser) {
    run(AgentFormat::Auto, input.as_bytes())
}

fn watched(input: &str) -> bool {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    parser.watch_final_text("TASK_COMPLETE");
    parser.feed(input.as_bytes());
    parser.finish();
    parser.final_text_has_watched()
}

#[test]
fn the_watched_text_counts_only_in_the_final_message() {
    let result = |text: &str| {
        format!(
            r#"{{"type":"result","subtype":"success","is_error":false,"result":{}}}"#,
            serde_json::to_string(text).unwrap()
        )
    };
    assert!(watched(&result("Done.\n\nTASK_COMPLETE")));
    // Past the 4 KiB kept in the stats: the whole text is searched.
    assert!(watched(&result(&format!(
        "{}TASK_COMPLETE",
        "x".repeat(10_000)
    ))));
    assert!(!watched(&result("Done, more to do.")));
    // Only the last result counts.
    assert!(!watched(&format!(
        "{}\n{}\n",
        result("TASK_COMPLETE"),
        result("Not yet.")
    )));
    // The prompt echo, a tool input, a tool result, assistant prose: never.
    assert!(!watched(&[
        r#"{"type":"user","message":{"role":"user","content":"End with TASK_COMPLETE."}}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"I will write TASK_COMPLETE at the end."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"echo TASK_COMPLETE"}}]}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"TASK_COMPLETE"}]}}"#,
        &result("Halfway."),
    ].join("\n")));
    // Codex: the last agent_message.
    let codex = |text: &str| {
        format!(
            r#"{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":{}}}}}"#,
            serde_json::to_string(text).unwrap()
        )
    };
    assert!(watched(&format!("{}\n", codex("All done. TASK_COMPLETE"))));
    assert!(!watched(&format!(
        "{}\n{}\n",
        codex("TASK_COMPLETE"),
        codex("Wait, one more thing.")
    )));
    // Nothing watched: never.
    let mut parser = StreamParser::new(AgentFormat::Auto);
    parser.feed(result("TASK_COMPLETE").as_bytes());
    parser.finish();
    assert!(!parser.final_text_has_watched());
}

fn texts(lines: &[Rendered]) -> Vec<&str> {
    lines.iter().map(|l| l.text.as_str()).collect()
}

fn kinds(lines: &[Rendered]) -> Vec<LineKind> {
    lines.iter().map(|l| l.kind).collect()
}

fn only(lines: &[Rendered]) -> &Rendered {
    assert_eq!(lines.len(), 1, "{lines:#?}");
    &lines[0]
}

/// What the sanitiser must have removed besides control characters.
fn is_hidden(c: char) -> bool {
    matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// No control characters at all in a display string (Plain lines may keep SGR).
fn assert_clean(line: &Rendered) {
    let mut text = line.text.clone();
    if line.kind == LineKind::Plain {
        let sgr = regex::Regex::new(r"\x1b\[[0-9;:]*m").unwrap();
        text = sgr.replace_all(&text, "").into_owned();
    }
    assert!(
        !text.chars().any(|c| c.is_control() || is_hidden(c)),
        "control char in {line:?}"
    );
    assert!(line.text.chars().count() <= MAX_TEXT_CHARS + 2, "{line:?}");
    if let Some(detail) = &line.detail {
        assert!(detail.len() <= MAX_DETAIL_BYTES, "detail {}", detail.len());
        assert!(
            !detail
                .chars()
                .any(|c| (c.is_control() && c != '\n') || is_hidden(c)),
            "control char in detail of {line:?}"
        );
    }
}

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"sess-1","tools":["Bash","Read"],"mcp_servers":[],"model":"claude-sonnet-4-5","permissionMode":"bypassPermissions","claude_code_version":"2.1.7"}"#;

// ---- fixtures ----

#[test]
fn claude_fixture() {
    let (out, parser) = run(AgentFormat::Auto, &fixture(CLAUDE_FIXTURE));
    assert_eq!(parser.format(), AgentFormat::ClaudeStreamJson);
    assert_eq!(
        texts(&out),
        [
            "● session started · model claude-opus-4-5-20251101 · 7 tools",
            "4",
            "■ result: success · 1 turn · $0.1355 · 2.4s",
            "4",
        ]
    );
    assert_eq!(
        kinds(&out),
        [
            LineKind::System,
            LineKind::Text,
            LineKind::Result,
            LineKind::Text
        ]
    );
    assert!(out.iter().all(|l| !l.is_error));
    let detail = out[0].detail.as_deref().unwrap();
    assert!(
        detail.contains("cwd: /home/cyou/claude-agent-sdk-gleam"),
        "{detail}"
    );
    assert!(detail.contains("version: 2.1.7"), "{detail}");

    let s = parser.stats();
    assert_eq!(s.cost_usd, Some(0.1354875));
    assert_eq!(s.turns, 1);
    assert_eq!(s.model.as_deref(), Some("claude-opus-4-5-20251101"));
    assert_eq!(
        s.agent_session_id.as_deref(),
        Some("1d1e46f9-35c7-4834-b529-846d5bb82288")
    );
    // The result's usage is the session total (25 output tokens, not the 5
    // of the single assistant line).
    assert_eq!(
        (
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens,
            s.cache_write_tokens
        ),
        (10, 25, 0, 21570)
    );
    assert_eq!(s.duration_ms, Some(2360));
    assert_eq!(s.result_subtype.as_deref(), Some("success"));
    assert_eq!(s.result_is_error, Some(false));
    assert_eq!(s.result_text.as_deref(), Some("4"));
    assert_eq!((s.lines, s.json_lines), (3, 3));
    assert_eq!(s.tool_calls, 0);
}

#[test]
fn codex_fixture_with_command() {
    let (out, parser) = run(AgentFormat::Auto, &fixture(CODEX_FIXTURES[0]));
    assert_eq!(parser.format(), AgentFormat::CodexJson);
    assert_eq!(
        texts(&out),
        [
            "● session started · thread 019a2d7a-6455-7170-a661-c6d8b94c630a",
            "✻ thinking (43 chars)",
            "▶ exec  ls",
            "  ↳ stream-output-1.jsonl (+2 lines)",
            "Files here: `stream-output-1.jsonl`, `stream-output-2.jsonl`, `test.js`.",
            "● turn completed · 6,040 in (4,992 cached) · 129 out",
        ]
    );
    assert_eq!(
        kinds(&out),
        [
            LineKind::System,
            LineKind::Thinking,
            LineKind::ToolCall,
            LineKind::ToolResult,
            LineKind::Text,
            LineKind::System
        ]
    );
    assert_eq!(
        out[1].detail.as_deref(),
        Some("**Preparing to list files with bash shell**")
    );
    assert_eq!(out[2].tool_use_id.as_deref(), Some("item_1"));
    assert_eq!(out[3].tool_use_id.as_deref(), Some("item_1"));
    assert_eq!(out[2].detail.as_deref(), Some("bash -lc ls"));
    assert_eq!(
        out[3].detail.as_deref(),
        Some("stream-output-1.jsonl\nstream-output-2.jsonl\ntest.js")
    );
    let s = parser.stats();
    assert_eq!(s.turns, 1);
    assert_eq!(
        (
            s.input_tokens,
            s.cache_read_tokens,
            s.output_tokens,
            s.cache_write_tokens
        ),
        (6040, 4992, 129, 0)
    );
    assert_eq!(s.tool_calls, 1);
    assert_eq!(s.tool_calls_by_name.get("exec"), Some(&1));
    assert_eq!(s.tool_errors, 0);
    assert_eq!(
        s.agent_session_id.as_deref(),
        Some("019a2d7a-6455-7170-a661-c6d8b94c630a")
    );
    assert_eq!(
        s.last_agent_message.as_deref(),
        Some("Files here: `stream-output-1.jsonl`, `stream-output-2.jsonl`, `test.js`.")
    );
    assert_eq!(s.cost_usd, None);
    assert_eq!((s.lines, s.json_lines), (7, 7));
}

#[test]
fn codex_fixture_with_file_change() {
    let (out, parser) = run(AgentFormat::Auto, &fixture(CODEX_FIXTURES[1]));
    assert_eq!(parser.format(), AgentFormat::CodexJson);
    let patch = out.iter().find(|l| l.kind == LineKind::ToolCall).unwrap();
    assert_eq!(
        patch.text,
        "▶ patch  /private/tmp/codex-research-test/hello.txt"
    );
    assert_eq!(
        patch.detail.as_deref(),
        Some("add /private/tmp/codex-research-test/hello.txt")
    );
    let s = parser.stats();
    assert_eq!(s.tool_calls_by_name.get("patch"), Some(&1));
    assert_eq!(
        (s.input_tokens, s.cache_read_tokens, s.output_tokens),
        (6008, 4096, 51)
    );
    assert_eq!(s.turns, 1);
}

#[test]
fn codex_fixture_with_reasoning_items() {
    let (out, parser) = run(AgentFormat::Auto, &fixture(CODEX_FIXTURES[2]));
    assert_eq!(
        texts(&out)[1..5],
        [
            "✻ thinking (42 chars)",
            "▶ exec  cat test.js",
            "  ↳ console.log('Hello World');",
            "✻ thinking (34 chars)",
        ]
    );
    assert!(out[5].text.starts_with("`test.js` simply contains"));
    let s = parser.stats();
    assert_eq!(
        (s.input_tokens, s.cache_read_tokens, s.output_tokens),
        (6087, 5120, 204)
    );
    assert_eq!(s.tool_calls, 1);
}

#[test]
fn fixtures_render_clean_lines() {
    for name in std::iter::once(&CLAUDE_FIXTURE).chain(CODEX_FIXTURES) {
        let (out, _) = run(AgentFormat::Auto, &fixture(name));
        assert!(!out.is_empty(), "{name}");
        out.iter().for_each(assert_clean);
    }
}

// ---- Claude details ----

#[test]
fn message_id_dedupe_keeps_the_last_usage_per_message() {
    let line = |id: &str, block: &str, output: u64| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"{id}","model":"claude-sonnet-4-5","role":"assistant","content":[{block}],"usage":{{"input_tokens":100,"cache_creation_input_tokens":50,"cache_read_input_tokens":1000,"output_tokens":{output}}}}},"parent_tool_use_id":null,"session_id":"s"}}"#
        )
    };
    let text = r#"{"type":"text","text":"Let me look."}"#;
    let tool = r#"{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/src/main.rs"}}"#;
    let input = [
        INIT.to_owned(),
        line("msg_a", text, 8),
        line("msg_a", tool, 8),
        // Claude Code repeats the usage; a later line may carry the final count.
        line("msg_a", tool.replace("toolu_1", "toolu_2").as_str(), 40),
        line("msg_b", text, 7),
    ]
    .join("\n");
    let (out, parser) = run_auto(&input);
    let s = parser.stats();
    assert_eq!(s.turns, 2);
    assert_eq!(
        (
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens,
            s.cache_write_tokens
        ),
        (200, 47, 2000, 100)
    );
    assert_eq!(s.tool_calls, 2);
    assert_eq!(s.tool_calls_by_name.get("Read"), Some(&2));
    assert_eq!(
        texts(&out)[1..3],
        ["Let me look.", "▶ Read  /w/src/main.rs"]
    );

    // A result with usage replaces the per-message sum; num_turns wins too.
    let result = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":65000,"num_turns":6,"result":"Done.\nAll good.","total_cost_usd":0.0123,"usage":{"input_tokens":300,"cache_creation_input_tokens":10,"cache_read_input_tokens":5000,"output_tokens":99}}"#;
    let (out, parser) = run_auto(&format!("{input}\n{result}\n"));
    let s = parser.stats();
    assert_eq!(s.turns, 6);
    assert_eq!(
        (
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens,
            s.cache_write_tokens
        ),
        (300, 99, 5000, 10)
    );
    let n = out.len();
    assert_eq!(
        out[n - 2].text,
        "■ result: success · 6 turns · $0.0123 · 1m 5s"
    );
    assert_eq!(out[n - 1].text, "Done. (+1 line)");
    assert_eq!(out[n - 1].detail.as_deref(), Some("Done.\nAll good."));
    assert_eq!(s.result_text.as_deref(), Some("Done.\nAll good."));
}

#[test]
fn repeated_tool_use_block_is_shown_and_counted_once() {
    let tool = r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_9","name":"Bash","input":{"command":"npm test"}}]}}"#;
    let (out, parser) = run_auto(&format!("{tool}\n{tool}\n"));
    assert_eq!(texts(&out), ["▶ Bash  npm test"]);
    assert_eq!(parser.stats().tool_calls, 1);
}

#[test]
fn tool_use_summaries_and_details() {
    let cases = [
        (
            r#""name":"Bash","input":{"command":"npm test","description":"Run tests"}"#,
            "▶ Bash  npm test",
        ),
        (
            r#""name":"Bash","input":{"command":"cat > f <<'EOF'\nhello\nEOF"}"#,
            "▶ Bash  cat > f <<'EOF' …",
        ),
        (
            r#""name":"Edit","input":{"file_path":"/w/a.rs","old_string":"a","new_string":"b"}"#,
            "▶ Edit  /w/a.rs",
        ),
        (
            r#""name":"Write","input":{"file_path":"/w/b.rs","content":"fn main() {}\n"}"#,
            "▶ Write  /w/b.rs",
        ),
        (
            r#""name":"Read","input":{"file_path":"/w/c.rs","offset":10}"#,
            "▶ Read  /w/c.rs",
        ),
        (
            r#""name":"Grep","input":{"pattern":"fn \\w+","path":"src"}"#,
            "▶ Grep  fn \\w+",
        ),
        (
            r#""name":"Glob","input":{"pattern":"**/*.rs"}"#,
            "▶ Glob  **/*.rs",
        ),
        (
            r#""name":"WebFetch","input":{"url":"https://example.com","prompt":"x"}"#,
            "▶ WebFetch  https://example.com",
        ),
        (
            r#""name":"Task","input":{"description":"Explore the repo","prompt":"…","subagent_type":"Explore"}"#,
            "▶ Task  Explore the repo",
        ),
        (
            r#""name":"mcp__gh__issue","input":{"number":12,"labels":["bug"]}"#,
            r#"▶ mcp__gh__issue  {"number":12,"labels":["bug"]}"#,
        ),
        (r#""name":"ExitPlanMode","input":{}"#, "▶ ExitPlanMode"),
        (
            r#""name":"TodoWrite","input":{"todos":[{"content":"A","status":"completed","activeForm":"Doing A"},{"content":"B","status":"in_progress","activeForm":"Doing B"},{"content":"C","status":"pending","activeForm":"Doing C"}]}"#,
            "▶ TodoWrite  3 todos · 1 done · now: Doing B",
        ),
    ];
    for (i, (fields, expected)) in cases.iter().enumerate() {
        let input = format!(
            r#"{{"type":"assistant","message":{{"id":"m{i}","content":[{{"type":"tool_use","id":"t{i}",{fields}}}]}}}}"#
        );
        let (out, _) = run_auto(&input);
        let call = only(&out);
        assert_eq!(call.kind, LineKind::ToolCall);
        assert_eq!(call.text, *expected);
        assert_eq!(call.tool_use_id.as_deref(), Some(format!("t{i}").as_str()));
        assert_clean(call);
    }
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls -la","timeout":5000}}]}}"#,
    );
    assert_eq!(
        only(&out).detail.as_deref(),
        Some("command: ls -la\ntimeout: 5000")
    );
}

#[test]
fn thinking_is_collapsed() {
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"First, read the tests.\nThen fix the bug — carefully.","signature":"abc"}]}}"#,
    );
    let line = only(&out);
    assert_eq!(line.kind, LineKind::Thinking);
    assert_eq!(line.text, "✻ thinking (52 chars)");
    assert_eq!(
        line.detail.as_deref(),
        Some("First, read the tests.\nThen fix the bug — carefully.")
    );
    // Signature-only thinking (redacted display) has nothing to expand.
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"","signature":"abc"}]}}"#,
    );
    assert_eq!(only(&out).text, "✻ thinking");
    assert_eq!(only(&out).detail, None);
}

#[test]
fn multi_line_assistant_text_is_one_line_each() {
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"\n\nHere is the plan:\n\n\n1. Read\n\t2. Fix\n\n"}]}}"#,
    );
    assert_eq!(
        texts(&out),
        ["Here is the plan:", "", "1. Read", "        2. Fix"]
    );
    assert!(
        out.iter()
            .all(|l| l.kind == LineKind::Text && l.detail.is_none())
    );
}

#[test]
fn very_long_text_blocks_are_capped() {
    let body: Vec<String> = (0..MAX_LINES_PER_BLOCK + 50)
        .map(|i| format!("line {i}"))
        .collect();
    let event = serde_json::json!({"type":"assistant","message":{"id":"m","content":[{"type":"text","text": body.join("\n")}]}});
    let (out, _) = run_auto(&event.to_string());
    assert_eq!(out.len(), MAX_LINES_PER_BLOCK + 1);
    assert_eq!(out[MAX_LINES_PER_BLOCK].text, "… (+50 lines)");
    assert!(
        out[MAX_LINES_PER_BLOCK]
            .detail
            .as_deref()
            .unwrap()
            .starts_with("line 1000\nline 1001")
    );
}

#[test]
fn tool_result_string_and_error() {
    let input = [
        r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"PASS src/a.test.js\nPASS src/b.test.js\nTests: 2 passed\n","is_error":false}]},"session_id":"s"}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>","is_error":true,"tool_use_id":"toolu_2"}]}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Exit code 1\nnpm ERR! Test failed.","is_error":true,"tool_use_id":"toolu_3"}]}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"","tool_use_id":"toolu_4"}]}}"#,
    ]
    .join("\n");
    let (out, parser) = run(AgentFormat::ClaudeStreamJson, input.as_bytes());
    assert_eq!(
        texts(&out),
        [
            "  ↳ PASS src/a.test.js (+2 lines)",
            "  ✗ File has not been read yet. Read it first before writing to it.",
            "  ✗ Exit code 1 (+1 line)",
            "  ↳ (no output)",
        ]
    );
    assert!(out.iter().all(|l| l.kind == LineKind::ToolResult));
    assert_eq!(
        out.iter().map(|l| l.is_error).collect::<Vec<_>>(),
        [false, true, true, false]
    );
    assert_eq!(out[0].tool_use_id.as_deref(), Some("toolu_1"));
    assert_eq!(
        out[0].detail.as_deref(),
        Some("PASS src/a.test.js\nPASS src/b.test.js\nTests: 2 passed")
    );
    assert_eq!(out[3].detail, None);
    assert_eq!(parser.stats().tool_errors, 2);
}

#[test]
fn tool_result_content_blocks() {
    let (out, _) = run_auto(
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_5","content":[{"type":"text","text":"Agent report:\nfound 3 issues"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"done"}]}]}}"#,
    );
    let line = only(&out);
    assert_eq!(line.text, "  ↳ Agent report: (+3 lines)");
    assert_eq!(
        line.detail.as_deref(),
        Some("Agent report:\nfound 3 issues\n[image]\ndone")
    );
    let (out, _) = run_auto(
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{}}]}]}}"#,
    );
    assert_eq!(only(&out).text, "  ↳ [image]");
}

#[test]
fn a_200_kib_tool_result() {
    let content: String = (0..4000)
        .map(|i| format!("{i:>6}\tfn item_{i}() {{ println!(\"value {{}}\", {i}); }}\n"))
        .collect();
    assert!(content.len() > 200 * 1024);
    let event = serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_big","content": content, "is_error": false}]}});
    let input = format!("{INIT}\n{event}\n{INIT}\n");
    let (out, parser) = run(AgentFormat::Auto, input.as_bytes());
    assert_eq!(out.len(), 3);
    let result = &out[1];
    // "     0\t": the tab stop after the trimmed "0" is 7 columns on.
    assert_eq!(
        result.text,
        "  ↳ 0       fn item_0() { println!(\"value {}\", 0); } (+3,999 lines)"
    );
    let detail = result.detail.as_deref().unwrap();
    assert!(detail.len() <= MAX_DETAIL_BYTES);
    assert!(detail.len() > MAX_DETAIL_BYTES - 100);
    assert!(detail.ends_with(TRUNCATED_MARK));
    assert_clean(result);
    assert_eq!((parser.stats().lines, parser.stats().json_lines), (3, 3));
}

#[test]
fn tool_result_beyond_the_line_cap_keeps_its_id() {
    // Key order as Claude Code writes it (json! would sort the keys).
    let content = serde_json::to_string(&"x".repeat(3 * MAX_PENDING_BYTES)).unwrap();
    let event = format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_huge","type":"tool_result","content":{content},"is_error":true}}]}}}}"#
    );
    let input = format!(
        "{INIT}\n{event}\n{}\n",
        r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"ok"}"#
    );
    for step in [input.len(), 65536, 4093] {
        let mut parser = StreamParser::new(AgentFormat::Auto);
        let mut out = Vec::new();
        for chunk in input.as_bytes().chunks(step) {
            out.extend(parser.feed(chunk));
            assert!(parser.pending.capacity() <= MAX_PENDING_BYTES);
        }
        out.extend(parser.finish());
        assert_eq!(
            kinds(&out),
            [
                LineKind::System,
                LineKind::ToolResult,
                LineKind::Result,
                LineKind::Text
            ]
        );
        let big = &out[1];
        assert_eq!(big.tool_use_id.as_deref(), Some("toolu_huge"));
        assert!(big.text.starts_with("  ↳ xxxx"), "{}", big.text);
        assert!(big.text.ends_with('…'));
        // is_error came after the cut: unknown, so not an error.
        assert!(!big.is_error);
        assert!(big.detail.as_deref().unwrap().ends_with(TRUNCATED_MARK));
        let s = parser.stats();
        assert_eq!((s.lines, s.json_lines, s.turns), (3, 3, 2));
    }
}

#[test]
fn subagent_lines_are_marked() {
    let input = [
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_task","name":"Task","input":{"description":"Find callers","prompt":"Find all callers of parse()","subagent_type":"Explore"}}]},"parent_tool_use_id":null}"#,
        r#"{"type":"system","subtype":"task_started","task_id":"task_1","tool_use_id":"toolu_task","description":"Find callers","task_type":"local_agent","session_id":"s","uuid":"u1"}"#,
        r#"{"type":"system","subtype":"task_progress","task_id":"task_1","tool_use_id":"toolu_task","usage":{"total_tokens":1200,"tool_uses":1},"session_id":"s"}"#,
        r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"toolu_sub","name":"Grep","input":{"pattern":"parse\\("}}]},"parent_tool_use_id":"toolu_task"}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_sub","content":"src/a.rs:10: parse(x)"}]},"parent_tool_use_id":"toolu_task"}"#,
        r#"{"type":"system","subtype":"task_notification","task_id":"task_1","tool_use_id":"toolu_task","status":"completed","output_file":"/tmp/t.out","summary":"Found 1 caller\nin src/a.rs","usage":{"total_tokens":5000,"tool_uses":1,"duration_ms":15000},"session_id":"s"}"#,
        r#"{"type":"system","subtype":"task_notification","task_id":"task_2","status":"failed","summary":"Agent crashed"}"#,
    ]
    .join("\n");
    let (out, parser) = run_auto(&input);
    assert_eq!(
        texts(&out),
        [
            "▶ Task  Find callers",
            "◆ task started: Find callers",
            "┆ ▶ Grep  parse\\(",
            "┆   ↳ src/a.rs:10: parse(x)",
            "◆ task completed: Found 1 caller …",
            "◆ task failed: Agent crashed",
        ]
    );
    assert_eq!(out[1].tool_use_id.as_deref(), Some("toolu_task"));
    assert_eq!(
        out[4].detail.as_deref(),
        Some("Found 1 caller\nin src/a.rs")
    );
    assert!(out[5].is_error && !out[4].is_error);
    assert_eq!(parser.stats().tool_calls, 2);
}

#[test]
fn api_retry_hooks_and_compaction() {
    let input = [
        r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":5000,"error_status":529,"error":"server_error","session_id":"s","uuid":"u"}"#,
        r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1234,"error_status":null,"error":"unknown"}"#,
        r#"{"type":"system","subtype":"hook_started","hook_id":"h1","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","session_id":"s"}"#,
        r#"{"type":"system","subtype":"hook_response","hook_id":"h1","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","output":"","stdout":"","stderr":"","exit_code":0,"outcome":"success"}"#,
        r#"{"type":"system","subtype":"hook_response","hook_id":"h2","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","output":"","stdout":"","stderr":"blocked: rm -rf is not allowed\nsee policy","exit_code":2,"outcome":"error"}"#,
        r#"{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":155000},"session_id":"s"}"#,
        r#"{"type":"system","subtype":"status","status":"compacting"}"#,
        r#"{"type":"system","subtype":"something_new","x":[1,2,{"y":null}]}"#,
    ]
    .join("\n");
    let (out, _) = run(AgentFormat::ClaudeStreamJson, input.as_bytes());
    assert_eq!(
        texts(&out),
        [
            "⟳ API retry 2/10 in 5.0s (529)",
            "⟳ API retry 1/10 in 1.2s (unknown)",
            "⚑ hook PreToolUse PreToolUse:Bash error (exit 2): blocked: rm -rf is not allowed …",
            "⋯ context compacted (auto, 155,000 tokens before)",
        ]
    );
    assert!(out.iter().all(|l| l.kind == LineKind::System));
    assert!(out[2].is_error);
}

#[test]
fn rate_limit_events() {
    let input = [
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1755806400,"rateLimitType":"five_hour"},"session_id":"s"}"#,
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1755806400,"rateLimitType":"five_hour","utilization":0.91},"session_id":"s"}"#,
        r#"{"type":"rate_limit_event","rate_limit_info":{"rateLimitType":"seven_day","status":"rejected","resetsAt":1755806400000}}"#,
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected"}}"#,
        r#"{"type":"rate_limit_event","rate_limit_info":"rejected"}"#,
    ]
    .join("\n");
    let (out, _) = run_auto(&input);
    assert_eq!(
        texts(&out),
        [
            "⚠ rate limit allowed_warning (five_hour) resets 20:00 UTC",
            "⚠ rate limit rejected (seven_day) resets Aug 21 20:00 UTC",
            "⚠ rate limit rejected",
        ]
    );
    assert!(out.iter().all(|l| l.kind == LineKind::RateLimit));
    assert_eq!(
        out.iter().map(|l| l.is_error).collect::<Vec<_>>(),
        [false, true, true]
    );
    assert!(
        out[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("\"utilization\": 0.91")
    );
}

#[test]
fn synthetic_assistant_errors() {
    let input = [
        INIT,
        r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: Rate limit reached"}],"usage":{"input_tokens":0,"output_tokens":0}},"error":"rate_limit","session_id":"sess-1"}"#,
        r#"{"type":"assistant","message":{"id":"e2","model":"<synthetic>","content":[{"type":"text","text":"Invalid API key · Please run /login"}]},"error":"authentication_failed"}"#,
        r#"{"type":"assistant","message":{"content":[]},"error":"billing_error"}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":393,"num_turns":1,"result":"API Error: Rate limit reached","total_cost_usd":0}"#,
    ]
    .join("\n");
    let (out, parser) = run_auto(&input);
    assert_eq!(
        texts(&out)[1..],
        [
            "✗ rate_limit: API Error: Rate limit reached",
            "✗ authentication_failed: Invalid API key · Please run /login",
            "✗ billing_error",
            "■ result: error (429) · 1 turn · $0.0000 · 0.4s",
            "API Error: Rate limit reached",
        ]
    );
    assert_eq!(
        kinds(&out)[1..],
        [
            LineKind::Error,
            LineKind::Error,
            LineKind::Error,
            LineKind::Result,
            LineKind::Text
        ]
    );
    assert!(out[1..].iter().all(|l| l.is_error));
    let s = parser.stats();
    assert_eq!(s.result_subtype.as_deref(), Some("success"));
    assert_eq!(s.result_is_error, Some(true));
    assert_eq!(s.cost_usd, Some(0.0));
    assert_eq!(s.model.as_deref(), Some("claude-sonnet-4-5"));
}

#[test]
fn synthetic_messages_are_not_turns() {
    let input = [
        r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}]},"error":"server_error"}"#,
        r#"{"type":"assistant","message":{"id":"m1","model":"claude-haiku-4-5","content":[{"type":"text","text":"ok"}]}}"#,
    ]
    .join("\n");
    let (_, parser) = run_auto(&input);
    assert_eq!(parser.stats().turns, 1);
    assert_eq!(parser.stats().model.as_deref(), Some("claude-haiku-4-5"));
}

#[test]
fn result_with_is_error_and_success_subtype() {
    let (out, parser) = run_auto(
        r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":9000,"num_turns":6,"result":"API Error: 401 {\"type\":\"error\"}","total_cost_usd":0.0123,"session_id":"s2"}"#,
    );
    assert_eq!(
        texts(&out),
        [
            "■ result: error · 6 turns · $0.0123 · 9.0s",
            "API Error: 401 {\"type\":\"error\"}"
        ]
    );
    assert!(out.iter().all(|l| l.is_error));
    let s = parser.stats();
    assert_eq!(s.result_is_error, Some(true));
    assert_eq!(s.result_subtype.as_deref(), Some("success"));
    assert_eq!(s.agent_session_id.as_deref(), Some("s2"));

    let (out, parser) = run_auto(
        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":50,"cost_usd":1.5}"#,
    );
    assert_eq!(
        texts(&out),
        ["■ result: error_max_turns · 50 turns · $1.5000"]
    );
    assert!(out[0].is_error);
    assert_eq!(parser.stats().cost_usd, Some(1.5));
    assert_eq!(parser.stats().result_text, None);
}

#[test]
fn result_text_in_stats_is_capped() {
    let text = "é".repeat(10_000);
    let event = serde_json::json!({"type":"result","subtype":"success","result": text});
    let (_, parser) = run_auto(&event.to_string());
    let kept = parser.stats().result_text.as_deref().unwrap();
    assert!(kept.len() <= MAX_STATS_TEXT_BYTES);
    assert!(kept.ends_with('…'));
}

#[test]
fn unknown_types_and_odd_field_types_are_skipped() {
    let input = [
        INIT,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","delta":{"text":"he"}}}"#,
        r#"{"type":"keep_alive"}"#,
        r#"{"type":"assistant","message":"not an object"}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":7,"input":"x"}]}}"#,
        r#"{"type":"user","message":{"content":"the prompt"}}"#,
        r#"{"type":"result","num_turns":"x","total_cost_usd":"0.5","usage":[1]}"#,
        r#"{"no_type":true}"#,
        r#"{"type":42}"#,
    ]
    .join("\n");
    let (out, parser) = run_auto(&input);
    assert_eq!(
        texts(&out)[1..],
        ["▶ tool  \"x\"", "■ result: success · $0.5000"]
    );
    assert_eq!(parser.stats().json_lines, 9);
}

#[test]
fn non_json_lines_in_a_json_stream_are_plain() {
    let input = format!(
        "{INIT}\nWarning: \x1b[33mdeprecated\x1b[0m flag\n{{\"type\":\"assistant\" broken\n[1,2]\n\n{}\n",
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"hi"}]}}"#
    );
    let (out, parser) = run_auto(&input);
    assert_eq!(
        texts(&out)[1..],
        [
            "Warning: \x1b[33mdeprecated\x1b[0m flag",
            "{\"type\":\"assistant\" broken",
            "[1,2]",
            "hi",
        ]
    );
    assert_eq!(kinds(&out)[1..4], [LineKind::Plain; 3]);
    assert_eq!((parser.stats().lines, parser.stats().json_lines), (6, 2));
}

mod decoder_choice;
mod fidelity;
mod lazy;
mod more;
mod one_pass;
mod transcripts;

/// A note told to a running Claude Code, echoed by `--replay-user-messages`
/// (as 2.1.332 writes it), is shown where it entered; the echoed prompt is not.
#[test]
fn an_echoed_note_is_shown_and_the_echoed_prompt_is_not() {
    let input = [
        INIT,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Fix the failing test.\n"}]},"session_id":"s","parent_tool_use_id":null,"uuid":"u1","isReplay":true}"#,
        r###"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"## Note from your human operator\nstop editing the migrations;\nfix the test first"}]},"session_id":"s","parent_tool_use_id":null,"uuid":"u2","isReplay":true}"###,
        r###"{"type":"user","message":{"content":"## Note from your human operator\nas a string"}}"###,
    ]
    .join("\n");
    let (out, _) = run_auto(&input);
    assert_eq!(
        texts(&out)[1..],
        [
            "✉ your note: stop editing the migrations; fix the test first",
            "✉ your note: as a string"
        ]
    );
}

//! Tests of the stream reader: Codex, chunking properties, fuzzing and throughput.

use super::*;

// ---- Codex details ----

#[test]
fn codex_items_without_duplicates() {
    let input = [
        r#"{"type":"thread.started","thread_id":"th"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
        r#"{"type":"item.updated","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"Compiling","exit_code":null,"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"error[E0425]: cannot find value `x`\n  --> src/lib.rs:3:5\n","exit_code":101,"status":"failed"}}"#,
        // Completed without a started event: call and result together.
        r#"{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \"git status --short\"","aggregated_output":"","exit_code":0,"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_d","type":"command_execution","command":"bash -lc 'rm -rf /'","aggregated_output":"","exit_code":null,"status":"declined"}}"#,
        r#"{"type":"item.started","item":{"id":"item_3","type":"todo_list","items":[{"text":"Read code","completed":false}]}}"#,
        r#"{"type":"item.updated","item":{"id":"item_3","type":"todo_list","items":[{"text":"Read code","completed":true},{"text":"Fix bug","completed":false}]}}"#,
        r#"{"type":"item.completed","item":{"id":"item_3","type":"todo_list","items":[{"text":"Read code","completed":true},{"text":"Fix bug","completed":false},{"text":"Test","completed":false}]}}"#,
        r#"{"type":"item.started","item":{"id":"item_4","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":null,"error":null,"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_4","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":{"content":[{"type":"text","text":"serde 1.0\nA framework"}],"structured_content":null},"error":null,"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_5","type":"mcp_tool_call","server":"docs","tool":"fetch","arguments":{},"result":null,"error":{"message":"timeout after 30s"},"status":"failed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_6","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"},{"path":"src/b.rs","kind":"add"},{"path":"old.rs","kind":"delete"}],"status":"failed"}}"#,
        r#"{"type":"item.started","item":{"id":"item_7","type":"web_search","query":""}}"#,
        r#"{"type":"item.completed","item":{"id":"item_7","type":"web_search","query":"rust memchr"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_8","type":"error","message":"command timed out"}}"#,
        r#"{"type":"item.updated","item":{"id":"item_9","type":"agent_message","text":"partial"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_9","type":"agent_message","text":"All done.\n\nSee `src/a.rs`."}}"#,
        r#"{"type":"error","message":"Reconnecting... 1/5"}"#,
        r#"{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":5}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":50,"cached_input_tokens":25,"output_tokens":10}}"#,
        r#"{"type":"turn.completed"}"#,
    ]
    .join("\n");
    let (out, parser) = run_auto(&input);
    assert_eq!(
        texts(&out),
        [
            "● session started · thread th",
            "▶ exec  cargo test",
            "  ✗ exit 101 · error[E0425]: cannot find value `x` (+1 line)",
            "▶ exec  git status --short",
            "  ↳ (no output)",
            "▶ exec  rm -rf /",
            "  ✗ declined",
            "☑ plan 1/3 done · next: Fix bug",
            "▶ mcp__docs__search  {\"q\":\"serde\"}",
            "  ↳ serde 1.0 (+1 line)",
            "▶ mcp__docs__fetch",
            "  ✗ timeout after 30s",
            "▶ patch  src/a.rs (+2 more)",
            "  ✗ patch failed",
            "▶ web_search  rust memchr",
            "⚠ command timed out",
            "All done.",
            "",
            "See `src/a.rs`.",
            "⟳ Reconnecting... 1/5",
            "✗ turn failed: stream disconnected before completion",
            "● turn completed · 100 in · 5 out",
            "● turn completed · 50 in (25 cached) · 10 out",
            "● turn completed",
        ]
    );
    assert_eq!(out[1].tool_use_id, out[2].tool_use_id);
    assert!(out[2].is_error && out[6].is_error && out[11].is_error && out[13].is_error);
    assert_eq!(
        out[7].detail.as_deref(),
        Some("[x] Read code\n[ ] Fix bug\n[ ] Test")
    );
    assert_eq!(
        out[12].detail.as_deref(),
        Some("update src/a.rs\nadd src/b.rs\ndelete old.rs")
    );
    let s = parser.stats();
    assert_eq!(s.turns, 3);
    assert_eq!(
        (s.input_tokens, s.cache_read_tokens, s.output_tokens),
        (150, 25, 15)
    );
    assert_eq!(s.tool_calls, 7);
    assert_eq!(s.tool_calls_by_name.get("exec"), Some(&3));
    assert_eq!(s.tool_errors, 4);
    assert_eq!(
        s.last_agent_message.as_deref(),
        Some("All done.\n\nSee `src/a.rs`.")
    );
}

// ---- text mode and sanitising ----

#[test]
fn text_mode_sanitising() {
    let input = concat!(
        "\x1b[1;32m✓\x1b[0m compiled \x1b]0;window title\x07ok\n",
        "Downloading  10%\rDownloading  50%\rDownloading 100%\n",
        "\x1b[2K\x1b[1Aredrawn\x1b[?25l line\x07\x1b[5G!\n",
        "a\tb\x00c\x08d\x7f\u{9b}e\u{202e}f\n",
        "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ text\x1b(B\x1b=\n",
        "\x1b[31mred\rblue\n",
        "crlf line\r\n",
        "\n",
        "\x1b[38;2;255;0;0mtruecolor\x1b[0m \x1b[38:5:208morange\n",
    );
    let (out, parser) = run(AgentFormat::Text, input.as_bytes());
    assert_eq!(
        texts(&out),
        [
            "\x1b[1;32m✓\x1b[0m compiled ok",
            "Downloading 100%",
            "redrawn line\\u{7}!",
            "a       b\\u{0}c\\u{8}d\\u{7f}\\u{9b}e\\u{202e}f",
            "link text",
            "\x1b[31mblue",
            "crlf line",
            "",
            "\x1b[38;2;255;0;0mtruecolor\x1b[0m \x1b[38:5:208morange",
        ]
    );
    assert!(out.iter().all(|l| l.kind == LineKind::Plain));
    out.iter().for_each(assert_clean);
    assert_eq!((parser.stats().lines, parser.stats().json_lines), (9, 0));
}

#[test]
fn json_text_never_keeps_escapes() {
    let (out, _) = run_auto(
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"\u001b[31mred\u001b[0m and \u0007bell\u001b]0;t\u0007 ok"}]}}"#,
    );
    assert_eq!(only(&out).text, "red and \\u{7}bell ok");
}

#[test]
fn long_lines_are_cut_with_an_ellipsis() {
    let long = "ab".repeat(600);
    let (out, _) = run(AgentFormat::Text, long.as_bytes());
    let text = &only(&out).text;
    assert_eq!(text.chars().count(), MAX_TEXT_CHARS);
    assert!(text.ends_with("ab…") || text.ends_with("ba…"));
    let colored = format!("\x1b[32m{}\x1b[0m", "é".repeat(700));
    let (out, _) = run(AgentFormat::Text, colored.as_bytes());
    let text = &only(&out).text;
    assert!(text.starts_with("\x1b[32m"));
    assert_eq!(
        text.chars().filter(|c| *c == 'é').count(),
        MAX_TEXT_CHARS - 1
    );
    assert!(text.ends_with('…'));
    // Exactly at the cap: untouched.
    let exact = "x".repeat(MAX_TEXT_CHARS);
    assert_eq!(
        only(&run(AgentFormat::Text, exact.as_bytes()).0).text,
        exact
    );
    // SGR floods do not escape the cap.
    let flood = "\x1b[1m".repeat(100_000);
    let (out, _) = run(AgentFormat::Text, flood.as_bytes());
    assert!(only(&out).text.len() <= MAX_SGR_BYTES_PER_LINE);
}

#[test]
fn invalid_utf8_is_replaced() {
    let (out, _) = run(AgentFormat::Text, b"ok \xff\xfe bytes\n");
    assert_eq!(only(&out).text, "ok \u{fffd}\u{fffd} bytes");
}

#[test]
fn auto_falls_back_to_text_after_twenty_lines() {
    let mut input = String::new();
    for i in 0..25 {
        input.push_str(&format!("log line {i}\n\n"));
    }
    // Once Text, JSON lines are text too.
    input.push_str(INIT);
    let (out, parser) = run_auto(&input);
    assert_eq!(parser.format(), AgentFormat::Text);
    // Blank lines are shown once the stream is known to be text.
    assert_eq!(out.len(), 20 + 1 + 5 * 2 + 1);
    assert_eq!(out.last().unwrap().kind, LineKind::Plain);

    // Noise before the first event does not stop detection.
    let (out, parser) = run_auto(&format!("npm warn something\n\n{INIT}\n"));
    assert_eq!(parser.format(), AgentFormat::ClaudeStreamJson);
    assert_eq!(kinds(&out), [LineKind::Plain, LineKind::System]);

    // An object of neither format neither resolves nor is shown: the
    // stream is said to be in a format clowder does not read.
    let (out, parser) = run_auto("{\"level\":\"info\",\"msg\":\"hi\"}\n");
    assert_eq!(parser.format(), AgentFormat::Auto);
    assert_eq!(texts(&out), [UNRECOGNISED_FORMAT_NOTICE]);
    assert!(parser.stats().unrecognised_format);
    assert_eq!(parser.stats().json_lines, 1);
    // Among more lines of text, it is a text agent's odd line.
    let (out, parser) = run_auto("starting\n{\"level\":\"info\"}\ndone\n");
    assert!(!parser.stats().unrecognised_format);
    assert_eq!(texts(&out), ["starting", "done"]);
}

#[test]
fn explicit_format_is_kept() {
    // Read as Codex, Claude's events are of no format clowder reads.
    let (out, parser) = run(AgentFormat::CodexJson, &fixture(CLAUDE_FIXTURE));
    assert_eq!(parser.format(), AgentFormat::CodexJson);
    assert_eq!(texts(&out), [UNRECOGNISED_FORMAT_NOTICE]);
    let (out, _) = run(AgentFormat::Text, &fixture(CODEX_FIXTURES[0]));
    assert_eq!(out.len(), 7);
    assert!(out.iter().all(|l| l.kind == LineKind::Plain));
}

#[test]
fn partial_last_line_is_flushed_by_finish() {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let data = fixture(CLAUDE_FIXTURE);
    let text = String::from_utf8(data).unwrap();
    let without_newline = text.trim_end();
    let out = parser.feed(without_newline.as_bytes());
    assert_eq!(out.len(), 2);
    let out = parser.finish();
    assert_eq!(
        texts(&out),
        ["■ result: success · 1 turn · $0.1355 · 2.4s", "4"]
    );
    assert!(parser.finish().is_empty());
    assert_eq!(parser.stats().lines, 3);
    // A last line cut mid-object is plain text.
    let mut parser = StreamParser::new(AgentFormat::ClaudeStreamJson);
    parser.feed(br#"{"type":"assistant","message":{"content":[{"type":"text","te"#);
    assert_eq!(kinds(&parser.finish()), [LineKind::Plain]);
}

#[test]
fn agent_format_serde_names() {
    for (format, name) in [
        (AgentFormat::Auto, "\"auto\""),
        (AgentFormat::ClaudeStreamJson, "\"claude-stream-json\""),
        (AgentFormat::CodexJson, "\"codex-json\""),
        (AgentFormat::Text, "\"text\""),
    ] {
        assert_eq!(serde_json::to_string(&format).unwrap(), name);
        assert_eq!(serde_json::from_str::<AgentFormat>(name).unwrap(), format);
    }
}

// ---- lines cut at the cap ----

fn closed_type_and_n(prefix: &str) -> Option<(Option<String>, Option<u64>)> {
    let closed = decode::close_cut(prefix)?;
    let value: serde_json::Value =
        serde_json::from_str(&closed).unwrap_or_else(|e| panic!("{closed}: {e}"));
    Some((
        value["type"].as_str().map(str::to_owned),
        value["n"].as_u64(),
    ))
}

#[test]
fn cut_lines_are_closed() {
    let full = r#"{"type":"user","n":12345,"message":{"content":[{"tool_use_id":"t","type":"tool_result","content":"abc\ndef\u00e9","is_error":true}]}}"#;
    for cut in 1..full.len() {
        let prefix = &full[..cut];
        let read = closed_type_and_n(prefix).unwrap_or_else(|| panic!("{prefix}"));
        if cut >= r#"{"type":"user""#.len() {
            assert_eq!(read.0.as_deref(), Some("user"), "{prefix}");
            // A number is only kept once it is known to be complete.
            if let Some(n) = read.1 {
                assert_eq!(n, 12345, "{prefix}");
            }
        }
    }
    let read = |prefix: &str| -> serde_json::Value {
        serde_json::from_str(&decode::close_cut(prefix).unwrap()).unwrap()
    };
    assert_eq!(read(r#"{"a":"xy\"#)["a"], "xy");
    assert_eq!(read(r#"{"a":"xy\u00"#)["a"], "xy");
    assert_eq!(read(r#"{"a":["x","y"#)["a"], serde_json::json!(["x", "y"]));
    assert!(decode::close_cut(r#"{"a":"x"}}"#).is_none());
    assert!(decode::close_cut("[1,").is_none());
}

#[test]
fn helpers() {
    assert_eq!(group(0), "0");
    assert_eq!(group(999), "999");
    assert_eq!(group(1000), "1,000");
    assert_eq!(group(1_234_567), "1,234,567");
    assert_eq!(unwrap_shell("bash -lc ls"), "ls");
    assert_eq!(unwrap_shell("bash -lc 'cat test.js'"), "cat test.js");
    // As the shell runs it: quoting undone, `$` and backticks kept.
    assert_eq!(unwrap_shell("bash -lc 'echo '\\''x'\\'''"), "echo 'x'");
    assert_eq!(unwrap_shell("/bin/bash -lc \"echo $HOME\""), "echo $HOME");
    assert_eq!(
        unwrap_shell(r#"/bin/zsh -lc "grep -n \"TODO\" src && echo `date` \$HOME""#),
        r#"grep -n "TODO" src && echo `date` $HOME"#
    );
    // Not a shell's script, or not shell words: as written.
    assert_eq!(unwrap_shell("bash -x -c ls"), "bash -x -c ls");
    assert_eq!(unwrap_shell("bash -lc \"unclosed"), "bash -lc \"unclosed");
    assert_eq!(unwrap_shell("python3 x.py"), "python3 x.py");
    assert_eq!(first_line("\n\n  a  \nb\n"), ("a", 3));
}

// ---- properties ----

/// Realistic lines of both formats, plus noise, for the properties.
fn sample_lines() -> Vec<String> {
    let mut lines: Vec<String> = std::iter::once(&CLAUDE_FIXTURE)
        .chain(CODEX_FIXTURES)
        .flat_map(|name| {
            String::from_utf8(fixture(name))
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    lines.extend(
        [
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"é—😀 line\n\tsecond \u001b[31m"}],"usage":{"input_tokens":3,"output_tokens":4}}}"#,
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls\r\nx"}}],"usage":{"input_tokens":3,"output_tokens":9}}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a\nb"},{"type":"image"}],"is_error":true}]}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1755806400,"rateLimitType":"five_hour"}}"#,
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"retry_delay_ms":500,"error_status":429}"#,
            r#"{"type":"result","subtype":"success","is_error":true,"num_turns":2,"result":"x\ny","total_cost_usd":0.5}"#,
            "plain \x1b[1mbold\x1b[0m\r progress",
            "",
            "  ",
            "{not json",
        ]
        .map(str::to_owned),
    );
    lines
}

fn feed_in_chunks(
    format: AgentFormat,
    data: &[u8],
    cuts: &[usize],
) -> (Vec<Rendered>, SessionStats) {
    let mut parser = StreamParser::new(format);
    let mut out = Vec::new();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut start = 0;
    for cut in cuts {
        out.extend(parser.feed(&data[start..cut]));
        start = cut;
    }
    out.extend(parser.feed(&data[start..]));
    out.extend(parser.finish());
    (out, parser.stats().clone())
}

proptest! {
    #[test]
    fn chunking_does_not_matter(
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..30),
        format in prop_oneof![Just(AgentFormat::Auto), Just(AgentFormat::ClaudeStreamJson), Just(AgentFormat::CodexJson), Just(AgentFormat::Text)],
        trailing_newline in any::<bool>(),
    ) {
        let lines = sample_lines();
        let mut data = picks.iter().map(|i| lines[i.index(lines.len())].as_str()).collect::<Vec<_>>().join("\n");
        if trailing_newline {
            data.push('\n');
        }
        let data = data.as_bytes();
        let whole = feed_in_chunks(format, data, &[]);
        let chunked = feed_in_chunks(format, data, &cuts);
        prop_assert_eq!(&whole, &chunked);
        // Byte by byte, too.
        let mut parser = StreamParser::new(format);
        let mut out = Vec::new();
        for b in data {
            out.extend(parser.feed(std::slice::from_ref(b)));
        }
        out.extend(parser.finish());
        prop_assert_eq!(&whole.0, &out);
        prop_assert_eq!(&whole.1, parser.stats());
        for line in &whole.0 {
            assert_clean(line);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        for format in [AgentFormat::Auto, AgentFormat::ClaudeStreamJson, AgentFormat::CodexJson, AgentFormat::Text] {
            let (out, stats) = feed_in_chunks(format, &bytes, &cuts);
            prop_assert!(stats.json_lines <= stats.lines);
            for line in &out {
                assert_clean(line);
            }
        }
    }

    #[test]
    fn mangled_events_never_panic(
        pick in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        noise in proptest::collection::vec(any::<u8>(), 0..16),
        at in any::<prop::sample::Index>(),
    ) {
        let lines = sample_lines();
        let mut line = lines[pick.index(lines.len())].clone().into_bytes();
        let pos = at.index(line.len() + 1);
        line.splice(pos..pos, noise);
        line.truncate(cut.index(line.len() + 1).max(1));
        for format in [AgentFormat::Auto, AgentFormat::ClaudeStreamJson, AgentFormat::CodexJson] {
            let (out, _) = feed_in_chunks(format, &line, &[]);
            for r in &out {
                assert_clean(r);
            }
            // As the kept start of an over-long line, too.
            let mut parser = StreamParser::new(format);
            let mut out = Vec::new();
            parser.process_line(&line, true, &mut out);
            for r in &out {
                assert_clean(r);
            }
        }
    }
}

// ---- throughput ----

/// xorshift64*: deterministic, dependency-free randomness for generated data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const CODE_WORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "self",
    "return",
    "match",
    "impl",
    "pub",
    "struct",
    "=>",
    "{",
    "}",
    "(x)",
    "&str",
    "Vec<u8>",
    "Option<String>",
    "\"quoted\"",
    "// why",
    "0x1f",
    "'c'",
    "path\\to",
    "é",
    "→",
    "->",
    "==",
    "+=",
    "?;",
    "unwrap_or(0)",
    "config.timeout",
    "println!(\"{}\", v);",
    "if",
    "else",
    "for",
    "in",
    "while",
    "async",
    "await",
    "Ok(())",
];
const PROSE_WORDS: &[&str] = &[
    "the",
    "test",
    "fails",
    "because",
    "parser",
    "reads",
    "a",
    "line",
    "I'll",
    "check",
    "file",
    "and",
    "then",
    "fix",
    "it",
    "—",
    "`src/lib.rs`",
    "function",
    "returns",
    "error",
    "when",
    "input",
    "is",
    "empty",
    "so",
    "we",
    "should",
    "handle",
    "that",
    "case",
    "first",
];

fn words(rng: &mut Rng, vocabulary: &[&str], n: u64) -> String {
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(vocabulary[rng.below(vocabulary.len() as u64) as usize]);
    }
    out
}

/// Source code as Claude Code's Read tool shows it ("     1→…").
fn code(rng: &mut Rng, lines: u64, numbered: bool) -> String {
    let mut out = String::new();
    for n in 1..=lines {
        if numbered {
            out.push_str(&format!("{n:>6}→"));
        }
        out.push_str(&"    ".repeat(rng.below(4) as usize));
        let count = rng.range(2, 12);
        out.push_str(&words(rng, CODE_WORDS, count));
        out.push('\n');
    }
    out
}

fn prose(rng: &mut Rng, sentences: u64) -> String {
    (0..sentences)
        .map(|_| {
            let count = rng.range(6, 25);
            format!("{}.", words(rng, PROSE_WORDS, count))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A Claude Code stream-json session of about `target` bytes, shaped like
/// real ones: most bytes are tool results (file reads, command output),
/// then tool inputs (edits, writes), thinking and text.
pub(super) fn bench_stream(target: usize) -> Vec<u8> {
    use serde_json::json;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let session = "5f1c2a9e-1b7d-4e0a-9c3f-2d8e6b4a1f00";
    let mut out = Vec::with_capacity(target + (1 << 20));
    let push = |out: &mut Vec<u8>, value: serde_json::Value| {
        serde_json::to_writer(&mut *out, &value).unwrap();
        out.push(b'\n');
    };
    push(
        &mut out,
        json!({"type":"system","subtype":"init","cwd":"/home/dev/project","session_id":session,"tools":["Task","Bash","Glob","Grep","Read","Edit","Write","WebFetch","TodoWrite"],"mcp_servers":[],"model":"claude-sonnet-4-5-20250929","permissionMode":"bypassPermissions","claude_code_version":"2.1.7","uuid":"u0"}),
    );
    let mut turn = 0u64;
    while out.len() < target {
        turn += 1;
        let id = format!("msg_{turn:020}");
        let usage = json!({"input_tokens": rng.range(1, 50), "cache_creation_input_tokens": rng.range(0, 5000), "cache_read_input_tokens": rng.range(10_000, 150_000), "output_tokens": rng.range(20, 2000), "service_tier":"standard"});
        let assistant = |content: serde_json::Value| json!({"type":"assistant","message":{"model":"claude-sonnet-4-5-20250929","id":id,"type":"message","role":"assistant","content":[content],"stop_reason":null,"stop_sequence":null,"usage":usage},"parent_tool_use_id":null,"session_id":session,"uuid":format!("a{turn}")});
        if rng.chance(30) {
            let sentences = rng.range(5, 30);
            push(
                &mut out,
                assistant(
                    json!({"type":"thinking","thinking": prose(&mut rng, sentences),"signature":"EqQBCkYIBxgCKkDx".repeat(8)}),
                ),
            );
        }
        if rng.chance(40) {
            let sentences = rng.range(1, 8);
            push(
                &mut out,
                assistant(json!({"type":"text","text": prose(&mut rng, sentences)})),
            );
        }
        let tool_id = format!("toolu_{turn:024}");
        let (name, input, result) = match rng.below(10) {
            0..=3 => {
                let lines = rng.range(20, 600);
                (
                    "Read",
                    json!({"file_path": format!("/home/dev/project/src/module_{}.rs", rng.below(50))}),
                    code(&mut rng, lines, true),
                )
            }
            4..=5 => {
                let lines = rng.range(0, 200);
                (
                    "Bash",
                    json!({"command":"cargo test --all 2>&1 | tail -50","description":"Run tests"}),
                    code(&mut rng, lines, false),
                )
            }
            6..=7 => {
                let old_lines = rng.range(1, 30);
                let new_lines = rng.range(1, 40);
                let snippet = rng.range(5, 20);
                (
                    "Edit",
                    json!({"file_path":"/home/dev/project/src/lib.rs","old_string": code(&mut rng, old_lines, false),"new_string": code(&mut rng, new_lines, false)}),
                    format!(
                        "The file /home/dev/project/src/lib.rs has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                        code(&mut rng, snippet, true)
                    ),
                )
            }
            8 => {
                let lines = rng.range(1, 60);
                (
                    "Grep",
                    json!({"pattern":"fn parse_\\w+","path":"src","output_mode":"content"}),
                    code(&mut rng, lines, false),
                )
            }
            _ => {
                let lines = rng.range(30, 400);
                (
                    "Write",
                    json!({"file_path":"/home/dev/project/src/new_module.rs","content": code(&mut rng, lines, false)}),
                    "File created successfully at: /home/dev/project/src/new_module.rs".to_owned(),
                )
            }
        };
        push(
            &mut out,
            assistant(json!({"type":"tool_use","id":tool_id,"name":name,"input":input})),
        );
        let is_error = rng.chance(5);
        push(
            &mut out,
            json!({"type":"user","message":{"role":"user","content":[{"tool_use_id":tool_id,"type":"tool_result","content":result,"is_error":is_error}]},"parent_tool_use_id":null,"session_id":session,"uuid":format!("r{turn}")}),
        );
        if turn.is_multiple_of(300) {
            push(
                &mut out,
                json!({"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1_755_806_400,"rateLimitType":"five_hour"},"session_id":session}),
            );
        }
    }
    push(
        &mut out,
        json!({"type":"result","subtype":"success","is_error":false,"duration_ms":3_600_000,"num_turns":turn,"result":"Done.","session_id":session,"total_cost_usd":42.5,"usage":{"input_tokens":1000,"cache_creation_input_tokens":100_000,"cache_read_input_tokens":9_000_000,"output_tokens":400_000}}),
    );
    out
}

#[test]
#[ignore = "benchmark: cargo test --release --lib agent::stream -- --ignored --nocapture"]
fn throughput_report() {
    use std::time::Instant;
    let data = bench_stream(100 << 20);
    let path = std::env::temp_dir().join("clowder_stream_bench.jsonl");
    std::fs::write(&path, &data).unwrap();
    let mb = data.len() as f64 / 1e6;
    let lines = data.iter().filter(|b| **b == b'\n').count();
    println!("input: {} ({mb:.1} MB, {lines} lines)", path.display());

    let best = |label: &str, f: &dyn Fn() -> usize| {
        let mut times = Vec::new();
        let mut produced = 0;
        for _ in 0..3 {
            let start = Instant::now();
            produced = f();
            times.push(start.elapsed().as_secs_f64());
        }
        let t = times.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "{label}: best of 3 {t:.3} s = {:.0} MB/s ({produced} out)",
            mb / t
        );
    };
    best("StreamParser, 256 KiB chunks", &|| {
        let mut parser = StreamParser::new(AgentFormat::Auto);
        let mut rendered = 0;
        for chunk in data.chunks(256 * 1024) {
            rendered += parser.feed(chunk).len();
        }
        rendered += parser.finish().len();
        assert_eq!(parser.stats().json_lines as usize, lines);
        rendered
    });
    best("StreamParser, 4 KiB chunks", &|| {
        let mut parser = StreamParser::new(AgentFormat::Auto);
        let mut rendered = 0;
        for chunk in data.chunks(4096) {
            rendered += parser.feed(chunk).len();
        }
        rendered + parser.finish().len()
    });
    best("StreamParser, statistics only, 256 KiB chunks", &|| {
        let mut parser = StreamParser::statistics_only(AgentFormat::Auto);
        for chunk in data.chunks(256 * 1024) {
            parser.feed(chunk);
        }
        parser.finish();
        parser.stats().json_lines as usize
    });
    let detectors = std::sync::Arc::new(crate::agent::Detectors::new(&[], &[]).unwrap());
    best("classification (OutputScanner), 256 KiB chunks", &|| {
        let mut scanner = crate::agent::OutputScanner::new(std::sync::Arc::clone(&detectors));
        for chunk in data.chunks(256 * 1024) {
            scanner.feed(chunk);
        }
        scanner.finish().json_lines as usize
    });
    best(
        "classification + statistics (the session reader: one pass), 256 KiB chunks",
        &|| {
            let mut parser = StreamParser::statistics_only(AgentFormat::Auto);
            parser.classify_with(std::sync::Arc::clone(&detectors));
            for chunk in data.chunks(256 * 1024) {
                parser.feed(chunk);
            }
            parser.finish();
            parser.take_scan().map_or(0, |s| s.json_lines as usize)
        },
    );
    best(
        "decoder choice: typed event, serde_json + RawValue",
        &|| super::decoder_choice::serde_json_typed(&data),
    );
    best("decoder choice: typed event, sonic-rs + LazyValue", &|| {
        super::decoder_choice::sonic_typed(&data)
    });
    best("sonic_rs::Value per line (baseline)", &|| {
        super::decoder_choice::sonic_value(&data)
    });
    best("serde_json::Value per line (baseline)", &|| {
        data.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice::<serde_json::Value>(l).map_or(0, |_| 1))
            .sum()
    });
    let mut parser = StreamParser::new(AgentFormat::Auto);
    parser.feed(&data);
    parser.finish();
    let s = parser.stats();
    println!(
        "stats: turns {} tool calls {} errors {} cost {:?} lines {}",
        s.turns, s.tool_calls, s.tool_errors, s.cost_usd, s.lines
    );
}

/// A quoted flag never counts; a real one, spaced or not, always does.
#[test]
fn statistics_only_counts_tool_errors_however_written() {
    let lines = concat!(
        r#"{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[]}"#,
        "\n",
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"said \"is_error\":true"}]}}"#,
        "\n",
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","content":"x","is_error" : true}]}}"#,
        "\n",
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"c","content":"y","is_error":false}]}}"#,
        "\n",
    );
    let mut parser = StreamParser::statistics_only(AgentFormat::ClaudeStreamJson);
    parser.feed(lines.as_bytes());
    assert_eq!(parser.stats().tool_errors, 1);
    assert_eq!(parser.stats().json_lines, 4);
}

//! The one reader: classification from the stream's decoded events equals the
//! classifier's own pass, and the statistics read with the cheap pre-checks
//! equal those of full decoding, on every fixture.

use std::sync::Arc;

use super::*;
use crate::agent::scan_output;

/// Every fixture, the generated corpus, and lines made to tell the readers apart.
fn inputs() -> Vec<Vec<u8>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut inputs = vec![more::bench_stream(1 << 20)];
    for dir in [
        "agent",
        "commit",
        "ratelimit",
        "transcripts",
        "public/claude",
        "public/codex",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e != "md") {
                inputs.push(std::fs::read(path).unwrap());
            }
        }
    }
    let tricky = [
        // A byte-order mark before a tool result that quotes a limit.
        "\u{feff}{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":\"rate limit reached\",\"is_error\":true}]}}",
        // Codex events in a Claude stream, and the other way round.
        r#"{"type":"error","message":"You've hit your usage limit. Try again later."}"#,
        r#"{"type":"turn.failed","error":{"message":"429 Too Many Requests"}}"#,
        r#"{"type":"result","subtype":"error_during_execution","is_error":true,"api_error_status":"429","result":"Claude AI usage limit reached|1755806400"}"#,
        // Odd types, repeated keys, not quite JSON, text.
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":"1755806400","rateLimitType":"five_hour"}}"#,
        r#"{"type":"assistant","error":{"code":"rate_limit"},"message":{"content":"x"}}"#,
        r#"{"type":"result","result":"ok","result":"rate limit reached","is_error":true}"#,
        r#"{"type":"result" "is_error":true}"#,
        "plain text: too many requests",
        "Closes #12",
        // Cut mid-write, the end of the file.
        r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"Too Many Requests"#,
    ];
    inputs.push(tricky.join("\n").into_bytes());
    let mut invalid =
        b"{\"type\":\"result\",\"is_error\":true,\"result\":\"usage limit reached \xff\"}\n"
            .to_vec();
    invalid.extend_from_slice(b"rate limit \xfe exceeded\n");
    inputs.push(invalid);
    inputs
}

#[test]
fn classification_from_the_streams_events_equals_its_own_pass() {
    let det = Arc::new(Detectors::new(&[], &["Closes #[0-9]+".into()]).unwrap());
    for data in inputs() {
        let expected = scan_output(&data[..], &det).unwrap();
        for format in [
            AgentFormat::Auto,
            AgentFormat::ClaudeStreamJson,
            AgentFormat::CodexJson,
            AgentFormat::Text,
        ] {
            for mut parser in [
                StreamParser::new(format),
                StreamParser::statistics_only(format),
            ] {
                parser.classify_with(Arc::clone(&det));
                for chunk in data.chunks(977) {
                    parser.feed(chunk);
                }
                parser.finish();
                let scan = parser.take_scan().unwrap();
                assert_eq!(
                    scan,
                    expected,
                    "{format:?}: {}",
                    String::from_utf8_lossy(&data[..data.len().min(300)])
                );
            }
        }
    }
}

/// The statistics-only reader (the supervisor's) skips decoding lines that
/// cannot change a count; what it counts is what full decoding (the screen's)
/// counts, whatever the format and however the bytes arrive.
#[test]
fn the_pre_checks_keep_the_statistics_exact() {
    for data in inputs() {
        for (format, chunk_size) in [
            (AgentFormat::Auto, 977),
            (AgentFormat::Auto, 4093),
            (AgentFormat::ClaudeStreamJson, 4093),
        ] {
            let run = |mut parser: StreamParser| {
                parser.watch_final_text("Done");
                parser.record_tool_calls();
                for chunk in data.chunks(chunk_size) {
                    parser.feed(chunk);
                }
                parser.finish();
                let calls = parser.take_tool_calls();
                (
                    parser.stats().clone(),
                    parser.final_text_has_watched(),
                    calls,
                )
            };
            assert_eq!(
                run(StreamParser::statistics_only(format)),
                run(StreamParser::new(format))
            );
        }
    }
}

//! Tests of the kinds of stop: a rate limit, a transient server error, an
//! agent retrying on its own; and of free text that must not decide.

use super::*;

const LIMITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/limits");

fn scan(input: &[u8]) -> OutputScan {
    let det = Detectors::new(&[], &[]).expect("detectors");
    scan_output(input, &det).expect("scan")
}

fn real(name: &str) -> Vec<u8> {
    std::fs::read(format!("{LIMITS}/{name}")).expect("fixture")
}

#[test]
fn a_claude_500_is_a_transient_error_not_a_rate_limit() {
    for line in [
        r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":9,"num_turns":1,"result":"API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}","session_id":"s","total_cost_usd":0}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: 500 Internal server error","session_id":"s"}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: Connection error.","session_id":"s"}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"API Error: 529 Overloaded","session_id":"s"}"#,
    ] {
        let out = scan(line.as_bytes());
        assert_eq!(out.rate_limit, None, "{line}");
        let found = out.transient_error.expect(line);
        assert!(found.reason.starts_with("transient API error"), "{found:?}");
    }
}

#[test]
fn a_claude_401_stops_the_loop() {
    let out = scan(br#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key \u00b7 Please run /login"}"#);
    assert!(
        out.fatal_error
            .is_some_and(|m| m.contains("cannot authenticate"))
    );
}

#[test]
fn codex_500_after_its_own_retries_is_a_transient_error() {
    for name in ["codex_0.169_500.jsonl", "codex_0.101_500.jsonl"] {
        let out = scan(&real(name));
        assert_eq!(out.rate_limit, None, "{name}");
        let found = out.transient_error.expect(name);
        assert!(found.reason.contains("high demand"), "{name}: {found:?}");
    }
}

#[test]
fn codex_killed_while_reconnecting_after_a_429_is_rate_limited() {
    let out = scan(&real("codex_0.169_429_retrying.jsonl"));
    assert_eq!(out.transient_error, None);
    let found = out.rate_limit.expect("rate limit");
    assert!(found.reason.contains("the agent was retrying"), "{found:?}");
    assert!(found.reason.contains("429"), "{found:?}");
    let out = scan(&real("codex_0.101_429.jsonl"));
    assert!(out.rate_limit.is_some(), "{out:?}");
}

#[test]
fn the_scanner_tells_while_the_agent_retries() {
    let det = Arc::new(Detectors::new(&[], &[]).expect("detectors"));
    let mut scanner = Scanner::new(det);
    scanner.feed(&real("codex_0.169_429_retrying.jsonl"));
    let retrying = scanner.retrying().expect("retrying");
    assert_eq!(retrying.kind, StopKind::RateLimit);
    // The retry worked: the agent goes on.
    scanner.feed(b"{\"type\":\"item.started\",\"item\":{\"id\":\"i\",\"type\":\"command_execution\",\"command\":\"ls\"}}\n");
    assert_eq!(scanner.retrying(), None);
    let plain =
        b"ERROR: Reconnecting... 2/5 (unexpected status 429 Too Many Requests: slow down)\n";
    let out = scan(plain);
    assert!(out.rate_limit.is_some(), "{out:?}");
    let out = scan(b"ERROR: Reconnecting... 1/5\n");
    assert!(out.transient_error.is_some(), "{out:?}");
}

#[test]
fn a_path_is_not_a_rate_limit() {
    // The real WARNING line, then a session killed before any verdict.
    let warning = "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir \"/tmp\" (codex_home: AbsolutePathBuf(\"/home/u/.codex-ratelimit\"))\n";
    let out = scan(format!("{warning}{{\"type\":\"turn.started\"}}\n").as_bytes());
    assert_eq!(out.rate_limit, None);
    let out = scan(b"loading /srv/rate-limit/config.toml\nrate limit exceeded\n");
    assert_eq!(
        out.rate_limit.map(|l| l.reason),
        Some("pattern `rate limit exceeded` in line 2".to_owned())
    );
    assert!(
        scan(b"HTTP/1.1 429 Too Many Requests\n")
            .rate_limit
            .is_some()
    );
}

#[test]
fn a_structured_verdict_wins_over_text() {
    let codex_ok = "Error: rate limit exceeded\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\n";
    assert_eq!(scan(codex_ok.as_bytes()).rate_limit, None);
    let codex_err =
        "{\"type\":\"error\",\"message\":\"rate limit reached\"}\n{\"type\":\"turn.completed\"}\n";
    assert_eq!(scan(codex_err.as_bytes()).rate_limit, None);
}

#[test]
fn a_plain_text_agent_that_recovered_is_not_rate_limited() {
    let mut text = String::from("aider v0.80\nError: rate limit exceeded, retrying in 30s\n");
    for i in 0..=TEXT_VERDICT_TAIL_LINES {
        text.push_str(&format!("Edited src/file{i}.rs\n"));
    }
    let out = scan(text.as_bytes());
    assert_eq!((out.rate_limit, out.transient_error), (None, None));
    // At the end, with a stack trace after it (indented lines do not count).
    let mut text = String::from("aider v0.80\nEdited a.rs\nError: rate limit exceeded\n");
    for _ in 0..30 {
        text.push_str("    at retry (client.js:1:1)\n");
    }
    text.push_str("\nGiving up.\n");
    assert!(scan(text.as_bytes()).rate_limit.is_some());
}

#[test]
fn plain_text_server_errors_are_transient() {
    let out = scan(b"aider v0.80\nanthropic.APIStatusError: {'type': 'overloaded_error'}\n");
    assert_eq!(out.rate_limit, None);
    assert!(out.transient_error.is_some());
}

#[test]
fn codex_401_after_its_own_retries_stops_the_loop() {
    let out = scan(&real("codex_0.169_401.jsonl"));
    let message = out.fatal_error.expect("fatal");
    assert!(message.contains("cannot authenticate"), "{message}");
    assert!(message.contains("401 Unauthorized"), "{message}");
}

#[test]
fn an_agent_talking_about_server_errors_is_not_one() {
    let out = scan(b"aider v0.80\nFixed the internal server error: the overloaded handler returned status 500.\n");
    assert_eq!((out.rate_limit, out.transient_error), (None, None));
    let out = scan(b"ERROR: We\xe2\x80\x99re currently experiencing high demand, which may cause temporary errors.\n");
    assert!(out.transient_error.is_some(), "{out:?}");
}

#[test]
fn claude_killed_while_retrying_a_500_is_a_transient_error() {
    let bytes = real("claude_2.1.332_500_retrying.jsonl");
    let det = Arc::new(Detectors::new(&[], &[]).expect("detectors"));
    let mut scanner = Scanner::new(det);
    scanner.feed(&bytes);
    let retrying = scanner.retrying().expect("retrying");
    assert_eq!(retrying.kind, StopKind::Transient);
    let out = scan(&bytes);
    assert_eq!(out.rate_limit, None);
    assert!(out.transient_error.is_some(), "{out:?}");
}

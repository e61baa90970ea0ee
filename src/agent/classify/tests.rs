//! Tests of classification: rate limits, fatal errors, commit patterns.

use super::*;
use proptest::prelude::*;
use std::io::Write;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/public");

/// Shared because compiling the regexes dominates small property cases.
fn detectors() -> &'static Detectors {
    static DETECTORS: std::sync::OnceLock<Detectors> = std::sync::OnceLock::new();
    DETECTORS.get_or_init(|| Detectors::new(&[], &[]).unwrap())
}

fn scan_with(input: &[u8], det: &Detectors) -> OutputScan {
    scan_output(input, det).unwrap()
}

fn scan(input: &str) -> OutputScan {
    scan_with(input.as_bytes(), detectors())
}

fn limit(input: &str) -> RateLimit {
    let out = scan(input);
    match out.rate_limit {
        Some(limit) => limit,
        None => panic!("expected a rate limit in {input:?}, got {out:?}"),
    }
}

fn assert_not_limited(input: &str) {
    let out = scan(input);
    assert_eq!(out.rate_limit, None, "input: {input}");
    assert_eq!(out.transient_error, None, "input: {input}");
}

/// The transient error found, which must not read as a rate limit.
fn transient(input: &str) -> RateLimit {
    let out = scan(input);
    assert_eq!(out.rate_limit, None, "input: {input}");
    match out.transient_error {
        Some(found) => found,
        None => panic!("expected a transient error in {input:?}, got {out:?}"),
    }
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).unwrap()
}

const FIXTURE_FILES: &[(&str, u64)] = &[
    ("claude/gleam-2.1.7-basic_query.ndjson", 3),
    ("codex/agentcmd-0.46-stream-output-2.jsonl", 7),
    ("codex/agentcmd-0.46-stream-output-3.jsonl", 6),
    ("codex/agentcmd-0.46-stream-output-4.jsonl", 8),
];

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s","tools":["Bash"],"model":"claude-opus-4-5","claude_code_version":"2.1.7"}"#;
const OK_RESULT: &str = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"Done.","total_cost_usd":0.1}"#;

// ---- rule 1: the last result line ----

#[test]
fn result_with_api_error_status_429_number() {
    let l = limit(&format!(
        "{INIT}\n{}\n",
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · This request would exceed your organization rate limit."}"#
    ));
    assert_eq!(l.reason, "result api_error_status 429");
    assert_eq!(l.resets_at_epoch, None);
}

#[test]
fn result_with_api_error_status_429_string() {
    let l = limit(r#"{"type":"result","is_error":true,"api_error_status":"429","result":"x"}"#);
    assert_eq!(l.reason, "result api_error_status 429");
}

#[test]
fn result_429_with_usage_text_takes_epoch() {
    let l = limit(
        r#"{"type":"result","is_error":true,"api_error_status":429,"result":"Claude AI usage limit reached|1755806400"}"#,
    );
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn result_429_status_without_error_flag_is_not_a_limit() {
    assert_not_limited(
        r#"{"type":"result","subtype":"success","is_error":false,"api_error_status":429,"result":"4"}"#,
    );
}

#[test]
fn result_usage_limit_text_forms() {
    let forms = [
        "Claude AI usage limit reached|1755806400",
        "5-hour limit reached ∙ resets 2am",
        "You've hit your limit · resets 1pm (Europe/Lisbon)",
        "API Error: Rate limit reached",
        "API Error: Request rejected (429) · This request would exceed your rate limit",
        "claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
        "You've hit your session limit · resets 1:30pm",
        r#"API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}"#,
    ];
    for text in forms {
        let line =
            format!(r#"{{"type":"result","subtype":"success","is_error":true,"result":"{text}"}}"#);
        let l = limit(&line);
        assert!(l.reason.starts_with("usage limit text: "), "{l:?}");
    }
}

#[test]
fn result_usage_limit_reason_and_epoch() {
    let l = limit(
        r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":393,"num_turns":1,"result":"Claude AI usage limit reached|1755806400","total_cost_usd":0}"#,
    );
    assert_eq!(l.reason, "usage limit text: Claude AI usage limit reached");
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn result_usage_limit_via_error_subtype_without_is_error() {
    let l = limit(
        r#"{"type":"result","subtype":"error_during_execution","result":"Claude AI usage limit reached|1754500000"}"#,
    );
    assert_eq!(l.resets_at_epoch, Some(1_754_500_000));
}

#[test]
fn result_usage_limit_text_even_if_not_flagged_as_error() {
    let l = limit(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"Claude AI usage limit reached|1755806400"}"#,
    );
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn successful_result_talking_about_rate_limits_is_not_a_limit() {
    assert_not_limited(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"I added a retry for when the API says 'Rate limit reached' or 'usage limit reached', plus tests for HTTP 429."}"#,
    );
    assert_not_limited(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"tick done; noted the usage limit policy in section 13"}"#,
    );
}

#[test]
fn only_the_last_result_counts() {
    let limited = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"Claude AI usage limit reached|1755806400"}"#;
    let out = scan(&format!("{INIT}\n{limited}\n{OK_RESULT}\n"));
    assert_eq!(out.rate_limit, None);
    assert_eq!(out.json_lines, 3);
    // And the other way round.
    let l = limit(&format!("{OK_RESULT}\n{limited}\n"));
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn failed_result_for_other_reasons_is_not_a_limit() {
    assert_not_limited(
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key · Please run /login"}"#,
    );
    assert_not_limited(
        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"result":"Reached the maximum number of turns."}"#,
    );
}

// ---- rule 2: rate_limit_event ----

#[test]
fn rejected_rate_limit_event() {
    let l = limit(&format!(
        "{INIT}\n{}\n",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1755806400,"rateLimitType":"five_hour","utilization":1.0},"session_id":"s"}"#
    ));
    assert_eq!(l.reason, "rate_limit_event rejected (five_hour)");
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn rejected_rate_limit_event_key_order_and_ms_reset() {
    let l = limit(
        r#"{"rate_limit_info":{"rateLimitType":"seven_day","resetsAt":1755806400000,"status":"rejected"},"type":"rate_limit_event"}"#,
    );
    assert_eq!(l.reason, "rate_limit_event rejected (seven_day)");
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn allowed_rate_limit_events_are_not_limits() {
    assert_not_limited(
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1755806400,"rateLimitType":"five_hour"}}"#,
    );
    assert_not_limited(
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1755806400,"rateLimitType":"seven_day","utilization":0.9}}"#,
    );
    assert_not_limited(r#"{"type":"rate_limit_event","rate_limit_info":{}}"#);
    assert_not_limited(r#"{"type":"rate_limit_event","rate_limit_info":"rejected"}"#);
}

// ---- rule 3: assistant error ----

#[test]
fn assistant_rate_limit_error() {
    let l = limit(
        r#"{"type":"assistant","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"API Error: Rate limit reached"}]},"error":"rate_limit","session_id":"s"}"#,
    );
    assert_eq!(l.reason, "assistant error rate_limit");
    assert_eq!(l.resets_at_epoch, None);
}

#[test]
fn assistant_other_errors_are_not_limits() {
    assert_not_limited(
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Invalid API key"}]},"error":"authentication_failed"}"#,
    );
    assert_not_limited(r#"{"type":"user","error":"rate_limit"}"#);
}

// ---- rule 4: Codex ----

#[test]
fn codex_turn_failed_usage_limit() {
    let l = limit(&format!(
        "{}\n{}\n{}\n",
        r#"{"type":"thread.started","thread_id":"t"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), or try again later."}}"#
    ));
    assert!(
        l.reason
            .starts_with("codex turn.failed: You've hit your usage limit"),
        "{l:?}"
    );
    assert_eq!(l.resets_at_epoch, None);
}

#[test]
fn codex_error_rate_limit() {
    let l = limit(
        r#"{"type":"error","message":"stream error: exceeded retry limit, last status: 429 Too Many Requests"}"#,
    );
    assert!(l.reason.starts_with("codex error: "), "{l:?}");
    let l = limit(r#"{"type":"error","message":"Rate limit exceeded for gpt-5-codex"}"#);
    assert!(l.reason.contains("Rate limit exceeded"), "{l:?}");
}

#[test]
fn codex_try_again_at_gives_local_reset_time() {
    let l = limit(
        r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Apr 28th, 2026 10:03 PM."}}"#,
    );
    let naive = NaiveDateTime::parse_from_str("2026-04-28 22:03", "%Y-%m-%d %H:%M").unwrap();
    let expected = Local
        .from_local_datetime(&naive)
        .earliest()
        .unwrap()
        .timestamp();
    assert_eq!(l.resets_at_epoch, Some(expected));
}

#[test]
fn codex_reconnecting_and_other_failures_are_not_limits() {
    // A retry that work followed succeeded.
    let work = r#"{"type":"item.started","item":{"id":"i","type":"command_execution","command":"ls","status":"in_progress"}}"#;
    assert_not_limited(&format!(
        "{}\n{work}\n",
        r#"{"type":"error","message":"Reconnecting... 2/5 (unexpected status 429 Too Many Requests)"}"#
    ));
    assert_not_limited(r#"{"type":"turn.failed","error":{"message":"context window exceeded"}}"#);
    // An error *item* is the model's tool trouble, not the session's.
    assert_not_limited(
        r#"{"type":"item.completed","item":{"id":"i","type":"error","message":"rate limit 429"}}"#,
    );
}

// ---- rule 5: non-JSON lines ----

#[test]
fn text_lines_default_patterns() {
    let lines = [
        ("litellm.RateLimitError: rate limit exceeded", "RateLimit"),
        (
            "Error: rate limit exceeded, retry later",
            "rate limit exceeded",
        ),
        ("Error: usage limit for this month", "usage limit"),
        ("HTTP/1.1 429 Too Many Requests", "HTTP/1.1 429"),
        ("request failed with status 429", "status 429"),
        ("too many requests, slow down", "too many requests"),
        ("quota exceeded for project", "quota exceeded"),
        (
            "You exceeded your current quota, please check your plan",
            "exceeded your current quota",
        ),
        ("Claude AI usage limit reached|1755806400", "usage limit"),
        ("RESOURCE_EXHAUSTED: quota", "RESOURCE_EXHAUSTED"),
    ];
    for (line, matched) in lines {
        let input = format!("aider v0.80\n{line}\n");
        let l = limit(&input);
        assert_eq!(
            l.reason,
            format!("pattern `{matched}` in line 2"),
            "line: {line}"
        );
    }
}

#[test]
fn text_line_epoch_after_pipe() {
    let l = limit("Claude AI usage limit reached|1755806400\n");
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
    // Eleven digits are not a seconds epoch.
    let l = limit("Claude AI usage limit reached|17558064001\n");
    assert_eq!(l.resets_at_epoch, None);
}

#[test]
fn text_lines_that_are_not_limits() {
    assert_not_limited("Compiling clowder v0.1.0\nerror[E0425]: cannot find value `x4290`\n");
    assert_not_limited("");
    assert_not_limited("\n\n\n");
}

#[test]
fn user_text_patterns_are_case_insensitive_and_for_text_lines_only() {
    let det = Detectors::new(&["out of credits".to_owned()], &[]).unwrap();
    let out = scan_with(b"warning\nOUT OF CREDITS, bye\n", &det);
    let l = out.rate_limit.unwrap();
    assert_eq!(l.reason, "pattern `OUT OF CREDITS` in line 2");
    let out = scan_with(
        br#"{"type":"assistant","message":{"content":[{"type":"text","text":"out of credits"}]}}"#,
        &det,
    );
    assert_eq!(out.rate_limit, None);
}

#[test]
fn malformed_json_is_a_text_line() {
    let l = limit("{\"type\":\"result\" rate limit exceeded\n");
    assert!(
        l.reason.starts_with("pattern `rate limit exceeded`"),
        "{l:?}"
    );
    // JSON that is not an object is text too.
    let l = limit("\"status 429\"\n");
    assert_eq!(l.reason, "pattern `status 429` in line 1");
    // A bare number is not a status code.
    assert_not_limited("\"429\"\n");
}

// ---- never triggered by quoted content ----

#[test]
fn user_tool_result_content_never_triggers() {
    let embedded = serde_json::to_string(
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1755806400,"rateLimitType":"five_hour"}}"#,
    )
    .unwrap();
    let embedded_result = serde_json::to_string(
        r#"{"type":"result","is_error":true,"api_error_status":429,"result":"Claude AI usage limit reached|1755806400"}"#,
    )
    .unwrap();
    let input = format!(
        "{INIT}\n{}\n{}\n{}\n{}\n{OK_RESULT}\n",
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"fn retry() { // rate limit: back off on 429 Too Many Requests\n  if status == 429 { sleep(); } } // usage limit reached","is_error":false}]}}"#,
        format_args!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t2","content":{embedded}}}]}}}}"#
        ),
        format_args!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t3","content":[{{"type":"text","text":{embedded_result}}}]}}]}}}}"#
        ),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t4","content":"{\"type\":\"assistant\",\"error\":\"rate_limit\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"rate limit\"}}","is_error":true}]}}"#,
    );
    let out = scan(&input);
    assert_eq!(out.rate_limit, None);
    assert_eq!(out.json_lines, 6);
}

#[test]
fn assistant_text_and_tool_use_never_trigger() {
    assert_not_limited(&format!(
        "{}\n{}\n{}\n",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"The API says: rate limit exceeded (429). Claude AI usage limit reached|1755806400"}]}}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Write","input":{"file_path":"a.rs","content":"{\"type\":\"rate_limit_event\",\"rate_limit_info\":{\"status\":\"rejected\"}}","error":"rate_limit"}}]}}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"too many requests; quota exceeded"}]}}"#,
    ));
}

#[test]
fn system_lines_never_trigger() {
    assert_not_limited(&format!(
        "{}\n{}\n{}\n{}\n",
        r#"{"type":"system","subtype":"init","cwd":"/src/rate-limit-429","tools":["mcp__ratelimit__check"],"model":"m","error":"rate_limit"}"#,
        r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":2000,"error_status":429,"error":"rate_limit","message":"rate limit exceeded"}"#,
        r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":4000,"error_status":529,"error":"overloaded_error"}"#,
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"Back."}]}}"#,
    ));
    // Ended while Claude Code retried on its own: it was stopped there.
    let out = scan(
        r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":4000,"error_status":529,"error":"overloaded_error"}"#,
    );
    assert!(out.transient_error.is_some() && out.rate_limit.is_none());
}

// ---- several signals ----

#[test]
fn signal_with_reset_time_wins() {
    let input = format!(
        "{}\n{}\n{}\n",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1755806400,"rateLimitType":"five_hour"}}"#,
        r#"{"type":"assistant","message":{"content":[]},"error":"rate_limit"}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Rate limit reached"}"#,
    );
    let l = limit(&input);
    assert_eq!(l.reason, "rate_limit_event rejected (five_hour)");
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn without_reset_times_the_last_signal_wins() {
    let input = format!(
        "stderr: 429 Too Many Requests\n{}\n{}\n",
        r#"{"type":"assistant","message":{"content":[]},"error":"rate_limit"}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Rate limit reached"}"#,
    );
    assert_eq!(limit(&input).reason, "result api_error_status 429");
    let input = format!(
        "{}\n{}\n",
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Rate limit reached"}"#,
        "later on stderr: rate limited",
    );
    // The stream's verdict wins over text.
    assert_eq!(limit(&input).reason, "result api_error_status 429");
}

#[test]
fn result_reset_time_beats_a_later_signal_without_one() {
    let input = format!(
        "{}\n{}\n",
        r#"{"type":"result","is_error":true,"result":"Claude AI usage limit reached|1755806400"}"#,
        "rate limit",
    );
    assert_eq!(limit(&input).resets_at_epoch, Some(1_755_806_400));
}

// ---- commit patterns ----

#[test]
fn commit_patterns_match_raw_lines() {
    let det = Detectors::new(
        &[],
        &[r"\[main [0-9a-f]{7}\]".to_owned(), "^COMMITTED$".to_owned()],
    )
    .unwrap();
    let json = br#"{"type":"user","message":{"content":[{"type":"tool_result","content":"[main 1a2b3c4] feat: x\n 1 file changed"}]}}"#;
    assert!(scan_with(json, &det).commit_pattern_seen);
    assert!(scan_with(b"noise\r\nCOMMITTED\r\nmore\r\n", &det).commit_pattern_seen);
    assert!(!scan_with(b"committed\n[MAIN 1a2b3c4]\n", &det).commit_pattern_seen);
    assert!(!scan_with(b"COMMITTED", detectors()).commit_pattern_seen);
}

#[test]
fn commit_pattern_on_invalid_utf8_line() {
    let det = Detectors::new(&[], &["git commit".to_owned()]).unwrap();
    assert!(scan_with(b"\xff\xfe\x00 git commit -m x\xc3\n", &det).commit_pattern_seen);
}

#[test]
fn bad_patterns_are_named() {
    let err = Detectors::new(&["ok".to_owned(), "rate(limit".to_owned()], &[]).unwrap_err();
    assert!(err.contains("rate-limit pattern `rate(limit`"), "{err}");
    let err = Detectors::new(&[], &["[unclosed".to_owned()]).unwrap_err();
    assert!(err.contains("commit pattern `[unclosed`"), "{err}");
}

// ---- fixtures and counting ----

#[test]
fn fixtures_are_not_rate_limited() {
    for (name, lines) in FIXTURE_FILES {
        let out = scan_with(&fixture(name), detectors());
        assert_eq!(out.rate_limit, None, "{name}");
        assert_eq!(out.json_lines, *lines, "{name}");
        assert_eq!(out.lines, *lines, "{name}");
    }
}

#[test]
fn scan_output_file_reads_a_file() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&fixture("claude/gleam-2.1.7-basic_query.ndjson"))
        .unwrap();
    file.write_all(b"Claude AI usage limit reached|1755806400")
        .unwrap();
    file.flush().unwrap();
    let out = scan_output_file(file.path(), detectors()).unwrap();
    assert_eq!(out.lines, 4);
    assert_eq!(out.json_lines, 3);
    // The successful result decides, not a text line after it.
    assert_eq!(out.rate_limit, None);
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"aider v0.80\nClaude AI usage limit reached|1755806400")
        .unwrap();
    file.flush().unwrap();
    let out = scan_output_file(file.path(), detectors()).unwrap();
    let l = out.rate_limit.unwrap();
    assert_eq!(l.reason, "pattern `usage limit` in line 2");
    assert_eq!(l.resets_at_epoch, Some(1_755_806_400));
}

#[test]
fn missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(scan_output_file(&dir.path().join("nope.log"), detectors()).is_err());
}

#[test]
fn line_endings_and_partial_last_line() {
    let out = scan(&format!("{INIT}\r\n\r\n{OK_RESULT}"));
    assert_eq!(out.lines, 3);
    assert_eq!(out.json_lines, 2);
    let out = scan(&format!("{INIT}\n{OK_RESULT}\n"));
    assert_eq!(out.lines, 2);
    // A last line cut off mid-object is just text.
    let cut = &OK_RESULT[..40];
    let out = scan(&format!("{INIT}\n{cut}"));
    assert_eq!((out.lines, out.json_lines), (2, 1));
}

#[test]
fn invalid_utf8_and_nul_bytes() {
    let mut input = Vec::new();
    input.extend_from_slice(b"\x00\x00\xff\xfe binary \xc3\x28 noise\n");
    input.extend_from_slice(br#"{"type":"result","result":"#);
    input.extend_from_slice(b"\"\xff\"}\n");
    input.extend_from_slice(b"\x00rate limit\x00\n");
    let out = scan_with(&input, detectors());
    assert_eq!(out.lines, 3);
    assert_eq!(out.json_lines, 0);
    assert_eq!(
        out.rate_limit.unwrap().reason,
        "pattern `rate limit` in line 3"
    );
}

/// Gives out its data a few bytes at a time, to exercise line reassembly.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
    calls: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "again"));
        }
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn io_errors_are_returned() {
    struct Broken;
    impl Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("disk gone"))
        }
    }
    assert!(scan_output(Broken, detectors()).is_err());
}

// ---- huge lines ----

/// `len` bytes of `fill`, then `tail`, produced lazily so the test itself
/// does not hold the data.
struct Generated {
    fill: u8,
    left: usize,
    tail: &'static [u8],
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left > 0 {
            let n = self.left.min(buf.len());
            buf[..n].fill(self.fill);
            self.left -= n;
            return Ok(n);
        }
        let n = self.tail.len().min(buf.len());
        buf[..n].copy_from_slice(&self.tail[..n]);
        self.tail = &self.tail[n..];
        Ok(n)
    }
}

#[test]
fn ten_megabyte_line_without_newline_is_bounded() {
    let det = Detectors::new(&[], &["xx".to_owned(), "COMMIT-AFTER-CAP".to_owned()]).unwrap();
    let mut scanner = Scanner::new(&det);
    let chunk = vec![b'x'; READ_BUF_BYTES];
    for _ in 0..40 {
        scanner.feed(&chunk);
        assert!(scanner.pending.capacity() <= MAX_LINE_BYTES);
    }
    assert_eq!(scanner.pending.len(), MAX_LINE_BYTES);
    assert!(scanner.pending.is_truncated());
    scanner.feed(b"COMMIT-AFTER-CAP");
    let out = scanner.finish();
    assert_eq!((out.lines, out.json_lines), (1, 0));
    assert!(out.commit_pattern_seen);

    // Through the reader path, ending in a limit notice past the cap (dropped).
    let reader = Generated {
        fill: b'y',
        left: 10 << 20,
        tail: b" rate limit",
    };
    let out = scan_output(reader, detectors()).unwrap();
    assert_eq!(
        out,
        OutputScan {
            lines: 1,
            ..OutputScan::default()
        }
    );
}

#[test]
fn text_in_the_kept_prefix_of_a_long_text_line_still_counts() {
    let mut input = b"429 Too Many Requests ".to_vec();
    input.resize(3 * MAX_LINE_BYTES, b'.');
    input.extend_from_slice(b"\nnext\n");
    let out = scan_with(&input, detectors());
    assert_eq!(out.lines, 2);
    assert_eq!(
        out.rate_limit.unwrap().reason,
        "pattern `Too Many Requests` in line 1"
    );
}

#[test]
fn over_long_json_line_is_not_text_matched_and_next_lines_parse() {
    let mut big =
        br#"{"type":"user","message":{"content":[{"type":"tool_result","content":"rate limit 429 "#
            .to_vec();
    big.resize(MAX_LINE_BYTES + 5000, b'a');
    big.extend_from_slice(b"\"}]}}\n");
    let mut input = big.clone();
    input.extend_from_slice(OK_RESULT.as_bytes());
    input.push(b'\n');
    let out = scan_with(&input, detectors());
    assert_eq!((out.lines, out.json_lines), (2, 1));
    assert_eq!(out.rate_limit, None);
    // Same when the reader hands it over in small pieces.
    let out2 = scan_output(
        Trickle {
            data: &input,
            step: 4093,
            calls: 0,
        },
        detectors(),
    )
    .unwrap();
    assert_eq!(out, out2);
}

#[test]
fn json_line_just_under_the_cap_is_parsed() {
    let head = br#"{"type":"result","is_error":true,"api_error_status":429,"result":""#;
    let mut line = head.to_vec();
    line.resize(MAX_LINE_BYTES - 2, b'a');
    line.extend_from_slice(b"\"}");
    assert_eq!(line.len(), MAX_LINE_BYTES);
    let out = scan_output(
        Trickle {
            data: &line,
            step: 100_000,
            calls: 0,
        },
        detectors(),
    )
    .unwrap();
    assert_eq!(out.json_lines, 1);
    assert_eq!(
        out.rate_limit.unwrap().reason,
        "result api_error_status 429"
    );
}

// ---- fatal errors: the agent cannot authenticate or cannot pay ----

fn fatal(input: &str) -> String {
    let out = scan(input);
    match out.fatal_error {
        Some(message) => message,
        None => panic!("expected a fatal error in {input:?}, got {out:?}"),
    }
}

fn assert_not_fatal(input: &str) {
    let out = scan(input);
    assert_eq!(out.fatal_error, None, "input: {input}");
}

#[test]
fn result_invalid_api_key_is_fatal() {
    let message = fatal(&format!(
        "{INIT}\n{}\n",
        r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":310,"num_turns":1,"result":"Invalid API key · Please run /login","session_id":"s","total_cost_usd":0}"#
    ));
    assert_eq!(
        message,
        "the agent cannot authenticate: Invalid API key · Please run /login — fix the credentials and start again"
    );
    assert_eq!(
        scan(&format!(
            "{INIT}\n{}\n",
            r#"{"type":"result","is_error":true,"result":"Invalid API key · Please run /login"}"#
        ))
        .rate_limit,
        None
    );
}

#[test]
fn result_api_error_status_401_402_403_is_fatal() {
    let message = fatal(
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Request failed."}"#,
    );
    assert_eq!(
        message,
        "the agent cannot authenticate: Request failed. (API error 401) — fix the credentials and start again"
    );
    let message = fatal(r#"{"type":"result","is_error":true,"api_error_status":"403"}"#);
    assert!(message.contains("API error 403"), "{message}");
    let message = fatal(
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":402,"result":"Payment required"}"#,
    );
    assert!(
        message.starts_with("the agent's account cannot pay for requests: Payment required"),
        "{message}"
    );
    // The same status on a result that did not fail is not an error at all.
    assert_not_fatal(
        r#"{"type":"result","subtype":"success","is_error":false,"api_error_status":401,"result":"Done."}"#,
    );
}

#[test]
fn result_billing_texts_are_fatal() {
    let message = fatal(
        r#"{"type":"result","subtype":"success","is_error":true,"result":"Credit balance is too low"}"#,
    );
    assert_eq!(
        message,
        "the agent's account cannot pay for requests: Credit balance is too low — fix the billing and start again"
    );
    // Short CLI notices count even when the result is not flagged.
    fatal(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"Not logged in · Please run /login"}"#,
    );
    fatal(
        r#"{"type":"result","subtype":"success","result":"OAuth token has expired. Please run /login"}"#,
    );
}

#[test]
fn assistant_auth_and_billing_errors_are_fatal() {
    let message = fatal(
        r#"{"type":"assistant","message":{"id":"m","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"Invalid API key · Please run /login"}]},"error":"authentication_failed","session_id":"s"}"#,
    );
    assert!(message.contains("authentication_failed"), "{message}");
    assert!(message.contains("fix the credentials"), "{message}");
    let message = fatal(
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Credit balance is too low"}]},"error":"billing_error"}"#,
    );
    assert!(message.contains("fix the billing"), "{message}");
}

#[test]
fn the_results_words_beat_the_assistant_error_code() {
    let message = fatal(&format!(
        "{INIT}\n{}\n{}\n",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Invalid API key · Please run /login"}]},"error":"authentication_failed"}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login"}"#
    ));
    assert!(
        message.contains(": Invalid API key · Please run /login —"),
        "{message}"
    );
}

#[test]
fn codex_auth_failure_is_fatal_but_reconnecting_is_not() {
    let message = fatal(
        r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided"}}"#,
    );
    assert!(
        message.starts_with("the agent cannot authenticate: unexpected status 401 Unauthorized"),
        "{message}"
    );
    assert_not_fatal(
        r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized)"}"#,
    );
}

#[test]
fn auth_words_in_quoted_content_are_never_fatal() {
    // Tool results, tool inputs, assistant prose, the prompt and a long
    // successful result may all discuss API keys and logins.
    assert_not_fatal(&format!(
        "{INIT}\n{}\n{}\n{}\n{}\n{}\n",
        r#"{"type":"user","message":{"role":"user","content":"Check why we get Invalid API key · Please run /login"}}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"grep -r 'Invalid API key' src"}}]}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{\"type\":\"result\",\"is_error\":true,\"api_error_status\":401,\"result\":\"Invalid API key · Please run /login\"}\nCredit balance is too low","is_error":true}]}}"#,
        r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"The message 'Invalid API key' comes from the auth module."}]}}"#,
        r#"{"type":"result","subtype":"success","is_error":false,"result":"Fixed the handler so that a request with an Invalid API key gets a 401 and the CLI says Please run /login.","total_cost_usd":0.1}"#
    ));
    // Plain text lines are not judged for auth errors at all.
    assert_not_fatal("Error: Invalid API key\n");
}

// ---- transient API errors: backed off like a rate limit ----

#[test]
fn result_5xx_is_a_transient_backoff() {
    let limit = transient;
    let l = limit(
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}"#,
    );
    assert_eq!(l.reason, "transient API error (529)");
    assert_eq!(l.resets_at_epoch, None);
    let l = limit(
        r#"{"type":"result","is_error":true,"api_error_status":500,"result":"Request failed."}"#,
    );
    assert_eq!(l.reason, "transient API error (500)");
    let l = limit(
        r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 Overloaded"}"#,
    );
    assert!(
        l.reason.starts_with("transient API error ("),
        "{}",
        l.reason
    );
    assert_eq!(
        scan(r#"{"type":"result","is_error":true,"api_error_status":529}"#).fatal_error,
        None
    );
}

#[test]
fn assistant_server_error_is_a_transient_backoff() {
    let l = transient(
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: 500"}]},"error":"server_error"}"#,
    );
    assert_eq!(l.reason, "transient API error (server_error)");
}

#[test]
fn successful_results_about_overload_are_not_transient() {
    assert_not_limited(
        r#"{"type":"result","subtype":"success","is_error":false,"api_error_status":529,"result":"Handled the overloaded_error case."}"#,
    );
    assert_not_limited(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"API Error: 529 handling added"}"#,
    );
}

// ---- properties ----

fn valid_json_line() -> impl Strategy<Value = String> {
    let fixture_lines: Vec<String> = FIXTURE_FILES
        .iter()
        .flat_map(|(name, _)| {
            String::from_utf8(fixture(name))
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    prop_oneof![
        proptest::sample::select(fixture_lines),
        (any::<String>(), any::<String>(), any::<i64>()).prop_map(|(t, s, n)| {
            serde_json::json!({"type": t, "result": s, "n": n, "error": {"message": s}})
                .to_string()
        }),
        (any::<String>(), any::<bool>()).prop_map(|(s, b)| {
            serde_json::json!({"type":"user","message":{"content":[{"type":"tool_result","content": s, "is_error": b}]}})
                .to_string()
        }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let out = scan_with(&bytes, detectors());
        prop_assert!(out.json_lines <= out.lines);
    }

    #[test]
    fn truncated_fixtures_never_panic(which in 0..FIXTURE_FILES.len(), cut in any::<prop::sample::Index>(), noise in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut data = fixture(FIXTURE_FILES[which].0);
        data.truncate(cut.index(data.len() + 1));
        data.extend_from_slice(&noise);
        let out = scan_with(&data, detectors());
        prop_assert!(out.json_lines <= FIXTURE_FILES[which].1 + 1);
        prop_assert!(out.lines >= out.json_lines);
    }

    #[test]
    fn complete_json_lines_are_counted(
        lines in proptest::collection::vec(valid_json_line(), 0..12),
        garbage in proptest::collection::vec(any::<u8>(), 0..256),
        step in 1usize..300,
    ) {
        let mut data = Vec::new();
        for line in &lines {
            data.extend_from_slice(line.as_bytes());
            data.push(b'\n');
        }
        data.extend_from_slice(&garbage);
        let out = scan_with(&data, detectors());
        prop_assert!(out.json_lines >= lines.len() as u64);
        // How the bytes are split into reads must not matter.
        let trickled = scan_output(Trickle { data: &data, step, calls: 0 }, detectors()).unwrap();
        prop_assert_eq!(out, trickled);
    }
}

proptest! {
    // Few cases: some hold a line over the 1 MiB cap.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn feeding_in_any_chunks_equals_one_pass(
        lines in proptest::collection::vec(prop_oneof![
            6 => valid_json_line(),
            2 => Just("rate limit reached|1755806400".to_owned()),
            2 => Just(r#"{"type":"result","is_error":true,"api_error_status":429,"result":"Claude AI usage limit reached|1755806400"}"#.to_owned()),
            2 => Just(r#"{"type":"assistant","error":"authentication_failed","message":{"content":[]}}"#.to_owned()),
            1 => Just(format!("{{\"type\":\"user\",\"x\":\"{}\"}}", "y".repeat(MAX_LINE_BYTES))),
            1 => Just(format!("rate limit {}", "x".repeat(MAX_LINE_BYTES))),
            2 => Just("Closes #12".to_owned()),
            4 => any::<String>(),
        ], 0..10),
        tail in proptest::collection::vec(any::<u8>(), 0..64),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut data = Vec::new();
        for line in &lines {
            data.extend_from_slice(line.as_bytes());
            data.push(b'\n');
        }
        data.extend_from_slice(&tail);
        static DET: std::sync::OnceLock<Arc<Detectors>> = std::sync::OnceLock::new();
        let det = DET.get_or_init(|| {
            Arc::new(Detectors::new(&[], &["Closes #[0-9]+".to_owned()]).unwrap())
        });
        let one_pass = scan_output(&data[..], det).unwrap();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
        points.sort_unstable();
        let mut scanner = OutputScanner::new(Arc::clone(det));
        let mut from = 0;
        for point in points.into_iter().chain([data.len()]) {
            scanner.feed(&data[from..point]);
            from = point;
        }
        prop_assert_eq!(scanner.finish(), one_pass);
    }
}

#[test]
fn claude_retrying_a_rejected_key_is_fatal_not_a_server_error() {
    let line = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":574,"error_status":401,"error":"authentication_failed","session_id":"s"}"#;
    let message = fatal(&format!("{INIT}\n{line}\n"));
    assert!(
        message.starts_with("the agent cannot authenticate: api_retry error authentication_failed"),
        "{message}"
    );
    let out = scan(&format!("{INIT}\n{line}\n"));
    assert_eq!(out.transient_error, None, "{out:?}");
    assert_eq!(out.rate_limit, None, "{out:?}");
}

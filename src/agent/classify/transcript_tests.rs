//! Classification of real transcript shapes that were once misread.

use super::*;

fn scan_fixture(name: &str) -> OutputScan {
    let path = format!(
        "{}/tests/fixtures/transcripts/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let detectors = Detectors::new(&[], &[]).unwrap();
    scan_output_file(Path::new(&path), &detectors).unwrap()
}

#[test]
fn overage_followed_by_success_is_not_a_rate_limit() {
    let out = scan_fixture("claude_overage_then_success.jsonl");
    assert_eq!(out.rate_limit, None);
    assert_eq!(out.overage_events, 1);
}

#[test]
fn a_final_successful_result_clears_earlier_signals() {
    let input = concat!(
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","rateLimitType":"five_hour"}}"#,
        "\n",
        r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"Done."}"#,
        "\n"
    );
    let detectors = Detectors::new(&[], &[]).unwrap();
    let out = scan_output(input.as_bytes(), &detectors).unwrap();
    assert_eq!(out.rate_limit, None);
}

#[test]
fn a_line_cut_mid_object_is_never_read_as_text() {
    let out = scan_fixture("claude_cut_mid_line.jsonl");
    assert_eq!(out.rate_limit, None);
    assert_eq!((out.lines, out.json_lines), (3, 2));
}

#[test]
fn a_byte_order_mark_does_not_turn_an_event_into_text() {
    let out = scan_fixture("claude_bom_tool_result.jsonl");
    assert_eq!(out.rate_limit, None);
    assert_eq!(out.json_lines, 3);
}

#[test]
fn a_tool_result_that_fails_to_decode_is_not_read_as_text() {
    // A repeated key makes the object unreadable; it is still a tool result,
    // and what it quotes signals nothing.
    let input = concat!(
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"API Error: Rate limit reached"}]},"error":null,"error":null}"#,
        "\n",
        r#"{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1}"#,
        "\n"
    );
    let detectors = Detectors::new(&[], &[]).unwrap();
    let out = scan_output(input.as_bytes(), &detectors).unwrap();
    assert_eq!(out.rate_limit, None);
}

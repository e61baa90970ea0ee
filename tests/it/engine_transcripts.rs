//! Real transcript shapes run through the binary: what the loop decides from them.

use crate::common;

use std::path::Path;

use common::*;

fn transcript_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn a_later_empty_error_result_keeps_cost_turns_and_promise() {
    let project = Project::new(&fast_config(
        &["replay", &transcript_fixture("claude_two_results.jsonl")],
        "[completion]\npromise = \"TASK_COMPLETE\"\n\n[guard]\nmax_cost_usd = 0.5\n",
    ));
    let output = project.run(&["--headless", "5"]);
    let context = stdout_of(&output);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{completes:?}\n{context}");
    let event = &completes[0];
    assert!(
        event["cost_usd"]
            .as_f64()
            .is_some_and(|c| (c - 0.7474).abs() < 1e-9),
        "{event}"
    );
    assert_eq!(event["turns"], 44, "{event}");
    // The $0.75 counts against the run's budget.
    let exceeded = project.events_named("budget_exceeded");
    assert_eq!(exceeded.len(), 1, "{exceeded:?}\n{context}");
    assert_eq!(exceeded[0]["budget"], "max_cost_usd");
}

#[test]
fn overage_then_success_is_not_rate_limited() {
    let project = Project::new(&fast_config(
        &[
            "replay",
            &transcript_fixture("claude_overage_then_success.jsonl"),
        ],
        "",
    ));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(project.events_named("rate_limited").is_empty());
    let completes = project.events_named("session_complete");
    assert_eq!(completes[0]["rate_limited"], false, "{completes:?}");
}

#[test]
fn a_line_cut_mid_object_is_not_a_rate_limit() {
    let project = Project::new(&fast_config(
        &["replay", &transcript_fixture("claude_cut_mid_line.jsonl")],
        "",
    ));
    project.run(&["--headless", "1"]);
    assert!(project.events_named("rate_limited").is_empty());
    let completes = project.events_named("session_complete");
    assert_eq!(completes[0]["rate_limited"], false, "{completes:?}");
}

#[test]
fn a_budget_broken_by_output_read_after_the_exit_is_recorded() {
    // The whole transcript is written at once and the agent exits at once:
    // the loop reads most or all of it after the exit.
    let project = Project::new(&fast_config(
        &["replay", &transcript("six_reads.jsonl")],
        "[guard]\nmax_tool_calls_per_session = 4\n",
    ));
    let output = project.run(&["--headless", "1"]);
    let exceeded = project.events_named("budget_exceeded");
    assert_eq!(exceeded.len(), 1, "{exceeded:?}\n{}", stdout_of(&output));
    assert_eq!(exceeded[0]["budget"], "max_tool_calls_per_session");
    // Judged call by call: the fifth call broke the budget of four.
    assert_eq!(exceeded[0]["value"], 5.0);
    let complete = &project.events_named("session_complete")[0];
    assert_eq!(
        complete["budget"]["budget"], "max_tool_calls_per_session",
        "{complete}"
    );
}

#[test]
fn a_quoted_codex_failure_reaches_the_console_escaped() {
    let project = Project::new(&fast_config(
        &[
            "replay",
            &transcript_fixture("codex_turn_failed_escapes.jsonl"),
        ],
        "",
    ));
    let output = project.run(&["--headless", "1"]);
    let stdout = stdout_of(&output);
    let limited = project.events_named("rate_limited");
    assert!(!limited.is_empty(), "{stdout}");
    let reason = limited[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("usage limit"), "{reason}");
    for text in [stdout.as_str(), reason] {
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{202e}', '\u{2066}', '\u{2069}']),
            "{text:?}"
        );
    }
}

//! What outside testing found on real transcripts and real CLIs, through the
//! binary: model variants, several invocations in one output file, Codex
//! endings and cost, unrecognised formats, and output file names.

mod common;

use std::path::Path;

use common::*;

fn transcript_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

fn replay(name: &str, extra: &str) -> Project {
    Project::new(&fast_config(&["replay", &transcript_fixture(name)], extra))
}

fn run_ok(project: &Project, args: &[&str]) -> String {
    let output = project.run(args);
    let context = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout_of(&output),
        stderr_of(&output)
    );
    assert_eq!(output.status.code(), Some(0), "{context}");
    context
}

#[test]
fn the_1m_context_model_is_counted_once() {
    let project = replay("claude_1m_context.jsonl", "");
    let context = run_ok(&project, &["--headless", "1"]);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{context}");
    assert_eq!(completes[0]["input_tokens"], 8, "{}", completes[0]);
    assert_eq!(completes[0]["output_tokens"], 150, "{}", completes[0]);
    let last = &project.status()["last_session"];
    assert_eq!(last["cache_read_tokens"], 2200, "{last}");
    assert_eq!(last["cache_write_tokens"], 200, "{last}");
    assert_eq!(last["result_subtype"], "success", "{last}");
}

#[test]
fn invocations_of_different_session_ids_add_up_in_one_output_file() {
    let project = replay("claude_two_invocations.jsonl", "");
    let context = run_ok(&project, &["--headless", "1"]);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{context}");
    let event = &completes[0];
    assert_eq!(event["turns"], 4, "{event}");
    assert_eq!(event["input_tokens"], 36, "{event}");
    assert_eq!(event["output_tokens"], 360, "{event}");
    let cost = event["cost_usd"].as_f64().unwrap_or_default();
    assert!((cost - 0.45).abs() < 1e-9, "{event}");
    let totals = &project.status()["totals"];
    assert_eq!(totals["turns"], 4, "{totals}");
}

#[test]
fn a_codex_run_reads_success_and_its_cost_is_unknown_not_zero() {
    let project = replay("codex_0169_run.jsonl", "");
    let context = run_ok(&project, &["--headless", "2"]);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 2, "{context}");
    for event in &completes {
        assert_eq!(event["result"], "success", "{event}");
        assert!(event["cost_usd"].is_null(), "{event}");
        assert_eq!(event["turns"], 1, "{event}");
    }
    let status = project.status();
    assert!(status["totals"]["cost_usd"].is_null(), "{status}");
    assert_eq!(status["totals"]["turns"], 2, "{status}");
    assert_eq!(status["last_session"]["result_subtype"], "success");
    let report = stdout_of(&project.run(&["--status"]));
    assert!(
        report
            .lines()
            .any(|l| l == "Cost: unknown total, last session cost unknown · 1 turn · 2 tool calls"),
        "{report}"
    );
}

#[test]
fn an_unrecognised_output_format_is_said_once_in_the_events() {
    let project = replay("codex_legacy_0_40.jsonl", "");
    let context = run_ok(&project, &["--headless", "2"]);
    let said = project.events_named("unrecognised_output_format");
    assert_eq!(said.len(), 1, "{said:?}\n{context}");
    assert_eq!(said[0]["global"], 1, "{}", said[0]);
    assert!(
        context.contains("status=unrecognised_output_format"),
        "{context}"
    );
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 2, "{context}");
    for event in &completes {
        assert!(event["turns"].is_null(), "{event}");
        assert!(event["input_tokens"].is_null(), "{event}");
    }
}

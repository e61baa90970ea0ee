//! What the loop learns from the agent's own stream, end to end with the real
//! binary and replayed transcripts (`tests/fixtures/agent/`): session statistics
//! in the event log, the status file, hook variables and `--status`; the
//! completion promise; auth and billing errors that stop the loop; transient API
//! errors that are backed off.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use serde_json::Value;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Replays `name` every session, with fast timings and `extra` tables.
fn replay_config(name: &str, extra: &str) -> String {
    fast_config(&["replay", &transcript(name)], extra)
}

/// Shell words, single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// An agent script whose Nth run replays `transcripts[N-1]` (the last one again
/// past the end); the run count is kept in a file of the project.
fn sequence_agent(project: &Project, transcripts: &[&str]) -> PathBuf {
    let script = project.path("agent.sh");
    let state = project.path("agent-runs.txt");
    let mut text = format!(
        "#!/bin/sh\nstate={}\nn=$(cat \"$state\" 2>/dev/null || echo 0)\nn=$((n + 1))\necho \"$n\" > \"$state\"\ncase \"$n\" in\n",
        quote(&state.display().to_string())
    );
    for (i, name) in transcripts.iter().enumerate() {
        let label = if i + 1 < transcripts.len() {
            (i + 1).to_string()
        } else {
            "*".to_string()
        };
        text.push_str(&format!(
            "  {label}) exec {} replay {} ;;\n",
            quote(&fake_agent().display().to_string()),
            quote(&transcript(name))
        ));
    }
    text.push_str("esac\n");
    std::fs::write(&script, text).expect("write agent.sh");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

fn context(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout_of(output),
        stderr_of(output)
    )
}

fn run_expect(project: &Project, args: &[&str], code: i32) -> Output {
    let output = project.run(args);
    assert_eq!(output.status.code(), Some(code), "{}", context(&output));
    output
}

/// `KEY=VALUE` lines (as `env` prints them) into a map.
fn env_dump(project: &Project, rel: &str) -> BTreeMap<String, String> {
    project
        .read(rel)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn f64_of(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() < 1e-9,
        "{what}: {actual} != {expected}"
    );
}

const POST_HOOK_ENV: &str =
    "[hooks]\npost_session = [\"env > post-env-$HARNESS_GLOBAL_ITERATION.txt\"]\n";

// ---------------------------------------------------------------------------
// 1. Session statistics everywhere
// ---------------------------------------------------------------------------

#[test]
fn session_stats_reach_the_event_the_status_the_hooks_and_the_log() {
    let project = Project::new(&replay_config("session_stats.jsonl", POST_HOOK_ENV));
    let output = run_expect(&project, &["--headless", "1"], 0);
    let ctx = context(&output);

    // The event.
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{ctx}");
    let event = &completes[0];
    assert_close(f64_of(&event["cost_usd"]), 0.0412, "cost_usd");
    assert_eq!(event["turns"], 6, "{event}");
    assert_eq!(event["tool_calls"], 4, "{event}");
    // The result line's usage is the session total.
    assert_eq!(event["input_tokens"], 31, "{event}");
    assert_eq!(event["output_tokens"], 2210, "{event}");
    assert_eq!(event["result"], "success", "{event}");
    assert_eq!(event["productive"], true, "{event}");

    // The status file: the last session and the run totals.
    let status = project.status();
    let last = &status["last_session"];
    assert_eq!(last["global"], 1, "{status}");
    assert_eq!(last["turns"], 6, "{last}");
    assert_eq!(last["tool_calls"], 4, "{last}");
    assert_eq!(last["tool_errors"], 1, "{last}");
    assert_eq!(last["input_tokens"], 31, "{last}");
    assert_eq!(last["output_tokens"], 2210, "{last}");
    assert_eq!(last["cache_read_tokens"], 90412, "{last}");
    assert_eq!(last["cache_write_tokens"], 6120, "{last}");
    assert_close(f64_of(&last["cost_usd"]), 0.0412, "last_session.cost_usd");
    assert_eq!(last["result_subtype"], "success", "{last}");
    assert_eq!(last["result_is_error"], false, "{last}");
    assert_eq!(last["model"], "claude-sonnet-4-5-20250929", "{last}");
    assert_eq!(
        last["agent_session_id"], "0d7c9a4e-5b1f-4c3a-9e2d-8f6a1b2c3d4e",
        "{last}"
    );
    assert_eq!(last["duration_ms"], 48211, "{last}");
    let totals = &status["totals"];
    assert_close(f64_of(&totals["cost_usd"]), 0.0412, "totals.cost_usd");
    assert_eq!(totals["turns"], 6, "{totals}");
    assert_eq!(totals["tool_calls"], 4, "{totals}");
    assert_eq!(totals["input_tokens"], 31, "{totals}");
    assert_eq!(totals["output_tokens"], 2210, "{totals}");

    // The post-session hook's environment.
    let env = env_dump(&project, "post-env-1.txt");
    assert_eq!(env["HARNESS_COST_USD"], "0.0412", "{env:?}");
    assert_eq!(env["HARNESS_TURNS"], "6", "{env:?}");
    assert_eq!(env["HARNESS_TOOL_CALLS"], "4", "{env:?}");
    assert_eq!(env["HARNESS_RESULT"], "success", "{env:?}");

    // The console line.
    let stdout = stdout_of(&output);
    let line = stdout
        .lines()
        .find(|l| l.contains("status=session_complete"))
        .unwrap_or_else(|| panic!("no session_complete line\n{ctx}"));
    assert!(line.ends_with(" cost=$0.0412 turns=6"), "{line}");

    // `--status`.
    let output = run_expect(&project, &["--status"], 0);
    let report = stdout_of(&output);
    assert!(
        report
            .lines()
            .any(|l| l == "Cost: $0.0412 total, last session $0.0412 · 6 turns · 4 tool calls"),
        "{report}"
    );
}

#[test]
fn run_totals_add_up_over_sessions() {
    let project = Project::new(&replay_config("session_stats.jsonl", ""));
    run_expect(&project, &["--headless", "2"], 0);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 2);
    let status = project.status();
    let totals = &status["totals"];
    assert_close(f64_of(&totals["cost_usd"]), 0.0824, "totals.cost_usd");
    assert_eq!(totals["turns"], 12, "{totals}");
    assert_eq!(totals["tool_calls"], 8, "{totals}");
    assert_eq!(totals["input_tokens"], 62, "{totals}");
    assert_eq!(totals["output_tokens"], 4420, "{totals}");
    assert_eq!(status["last_session"]["global"], 2, "{status}");

    let output = run_expect(&project, &["--status"], 0);
    let report = stdout_of(&output);
    assert!(
        report.contains("Cost: $0.0824 total, last session $0.0412 · 6 turns · 4 tool calls"),
        "{report}"
    );
}

#[test]
fn a_plain_text_agent_has_empty_stats_and_empty_hook_values() {
    let project = Project::new(&fast_config(
        &[
            "replay",
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/ratelimit/text_agent_ok.txt")
                .display()
                .to_string(),
        ],
        POST_HOOK_ENV,
    ));
    run_expect(&project, &["--headless", "1"], 0);
    let event = &project.events_named("session_complete")[0];
    assert!(event["cost_usd"].is_null(), "{event}");
    // A plain-text agent's turns are unknown, not zero.
    assert!(event["turns"].is_null(), "{event}");
    assert!(event["result"].is_null(), "{event}");
    let env = env_dump(&project, "post-env-1.txt");
    assert_eq!(env["HARNESS_COST_USD"], "", "{env:?}");
    assert_eq!(env["HARNESS_TURNS"], "", "{env:?}");
    assert_eq!(env["HARNESS_TOOL_CALLS"], "0", "{env:?}");
    assert_eq!(env["HARNESS_RESULT"], "", "{env:?}");
}

// ---------------------------------------------------------------------------
// 2. The completion promise
// ---------------------------------------------------------------------------

const PROMISE: &str = "[completion]\npromise = \"TASK_COMPLETE\"\n";

#[test]
fn the_promise_in_the_final_result_ends_the_loop() {
    let project = Project::new(&replay_config(
        "promise_in_result.jsonl",
        &format!("{PROMISE}\n{POST_HOOK_ENV}"),
    ));
    let output = run_expect(&project, &["--headless", "5"], 0);
    let ctx = context(&output);
    assert_eq!(project.events_named("session_start").len(), 1, "{ctx}");
    assert_eq!(project.output_files().len(), 1, "{ctx}");
    // The post-session hooks still ran.
    assert!(project.path("post-env-1.txt").exists(), "{ctx}");
    let end = project.events_named("loop_end");
    assert_eq!(end.len(), 1, "{ctx}");
    assert_eq!(end[0]["reason"], "completed", "{ctx}");
    assert_eq!(end[0]["iterations"], 1, "{ctx}");
    assert_eq!(project.status()["exit_reason"], "completed");
    let stdout = stdout_of(&output);
    assert!(
        stdout
            .lines()
            .last()
            .unwrap_or_default()
            .contains("stopped (completed)"),
        "{ctx}"
    );
    let output = run_expect(&project, &["--status"], 0);
    assert!(
        stdout_of(&output).contains("(completed)"),
        "{}",
        context(&output)
    );
}

#[test]
fn the_promise_only_in_tool_results_inputs_and_the_prompt_does_not_end_the_loop() {
    let project = Project::new(&replay_config("promise_in_tool_result_only.jsonl", PROMISE));
    let output = run_expect(&project, &["--headless", "2"], 0);
    let ctx = context(&output);
    assert_eq!(project.events_named("session_start").len(), 2, "{ctx}");
    let end = project.events_named("loop_end");
    assert_eq!(end[0]["reason"], "max_iterations", "{ctx}");
}

#[test]
fn without_a_promise_configured_the_loop_runs_on() {
    let project = Project::new(&replay_config("promise_in_result.jsonl", ""));
    let output = run_expect(&project, &["--headless", "2"], 0);
    assert_eq!(
        project.events_named("session_start").len(),
        2,
        "{}",
        context(&output)
    );
}

#[test]
fn codex_last_agent_message_keeps_the_promise() {
    let project = Project::new(&replay_config(
        "codex_promise.jsonl",
        &format!("{PROMISE}\n[session]\nmax_iterations = 4\n"),
    ));
    let output = run_expect(&project, &["--headless"], 0);
    let ctx = context(&output);
    assert_eq!(project.events_named("session_start").len(), 1, "{ctx}");
    assert_eq!(project.events_named("loop_end")[0]["reason"], "completed");
    let event = &project.events_named("session_complete")[0];
    assert_eq!(event["output_tokens"], 129, "{event}");
}

#[test]
fn codex_promise_in_command_output_or_an_earlier_message_does_not_count() {
    let project = Project::new(&replay_config(
        "codex_promise_in_command_output.jsonl",
        &format!("{PROMISE}\n[session]\nmax_iterations = 2\n"),
    ));
    let output = run_expect(&project, &["--headless"], 0);
    assert_eq!(
        project.events_named("session_start").len(),
        2,
        "{}",
        context(&output)
    );
}

// ---------------------------------------------------------------------------
// 3. Auth and billing errors stop the loop; transient API errors are backed off
// ---------------------------------------------------------------------------

#[test]
fn an_invalid_api_key_stops_the_loop_with_exit_1_and_says_why() {
    let project = Project::new(&replay_config("auth_invalid_api_key.jsonl", POST_HOOK_ENV));
    let output = run_expect(&project, &["--headless", "5"], 1);
    let ctx = context(&output);
    let expected = "the agent cannot authenticate: Invalid API key · Please run /login — fix the credentials and start again";

    assert_eq!(project.events_named("session_start").len(), 1, "{ctx}");
    let errors = project.events_named("agent_error");
    assert_eq!(errors.len(), 1, "{ctx}");
    assert_eq!(errors[0]["reason"], expected, "{ctx}");
    assert_eq!(errors[0]["global"], 1, "{ctx}");
    // Neither a rate limit nor an empty retry, nor productive.
    assert!(project.events_named("rate_limited").is_empty(), "{ctx}");
    assert!(project.events_named("empty_retry").is_empty(), "{ctx}");
    let complete = &project.events_named("session_complete")[0];
    assert_eq!(complete["productive"], false, "{complete}");
    assert_eq!(complete["rate_limited"], false, "{complete}");
    assert_eq!(complete["result"], "error", "{complete}");
    assert!(!project.path("post-env-1.txt").exists(), "{ctx}");

    let end = &project.events_named("loop_end")[0];
    assert_eq!(end["reason"]["fatal"]["message"], expected, "{end}");
    let stdout = stdout_of(&output);
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("[ERROR]") && l.contains(expected)),
        "{ctx}"
    );
    assert!(
        stdout.lines().last().unwrap_or_default().contains(expected),
        "{ctx}"
    );
    assert_eq!(project.status()["counters"]["productive"], 0);
}

#[test]
fn a_529_overloaded_session_is_backed_off_then_the_loop_goes_on() {
    let project = Project::new("");
    let agent = sequence_agent(&project, &["transient_529.jsonl", "session_stats.jsonl"]);
    project.write(
        "harness.toml",
        &format!(
            "[agent]\ncommand = {:?}\nargs = []\n\n[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.5\n",
            agent.display().to_string()
        ),
    );
    let output = run_expect(&project, &["--headless", "1"], 0);
    let ctx = context(&output);
    // A transient error, never a rate limit.
    assert!(project.events_named("rate_limited").is_empty(), "{ctx}");
    let errors = project.events_named("transient_error");
    assert_eq!(errors.len(), 1, "{ctx}");
    assert_eq!(errors[0]["reason"], "transient API error (529)", "{ctx}");
    assert_eq!(errors[0]["consecutive"], 1, "{ctx}");
    assert!(project.events_named("agent_error").is_empty(), "{ctx}");

    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 2, "{ctx}");
    assert_eq!(completes[0]["rate_limited"], false, "{ctx}");
    assert_eq!(completes[0]["transient_error"], true, "{ctx}");
    assert_eq!(completes[0]["result"], "error", "{ctx}");
    assert_eq!(completes[1]["productive"], true, "{ctx}");
    assert_eq!(
        project.events_named("loop_end")[0]["reason"],
        "max_iterations"
    );
    // The failed session's cost counts in the run's total.
    assert_close(
        f64_of(&project.status()["totals"]["cost_usd"]),
        0.0433,
        "totals.cost_usd",
    );
}

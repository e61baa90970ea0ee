//! What a session counts as, through the binary: productive only when the
//! agent did something, a resumed session's runs added up, the last run
//! deciding, server errors counted (and in `--status`), and the agents that
//! cannot work stopped at once.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

fn context(project: &Project, output: &std::process::Output) -> String {
    let mut text = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}\nevents:\n",
        output.status.code(),
        stdout_of(output),
        stderr_of(output)
    );
    for event in project.events() {
        text.push_str(&format!("  {event}\n"));
    }
    text
}

fn counter(project: &Project, name: &str) -> u64 {
    project.status()["counters"][name].as_u64().unwrap_or(0)
}

const QUICK_WATCHDOG: &str =
    "[watchdog]\nstale_timeout_mins = 0.02\ncheck_interval_secs = 0.2\nkill_grace_secs = 0.5\n";

/// Claude Code's init line alone is longer than `min_output_bytes`: a session
/// the watchdog killed after it did nothing, and is retried as empty.
#[test]
fn a_session_killed_after_its_init_line_alone_is_not_productive() {
    let project = Project::new(&fast_config(&["hang"], QUICK_WATCHDOG));
    let output = project.run(&["--headless", "1", "--retries", "1"]);
    let ctx = context(&project, &output);
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 2, "{ctx}");
    for session in &sessions {
        assert!(session["output_bytes"].as_u64().unwrap_or(0) > 100, "{ctx}");
        assert_eq!(session["killed"], "watchdog", "{ctx}");
        assert_eq!(session["productive"], false, "{ctx}");
    }
    assert_eq!(project.events_named("empty_retry").len(), 1, "{ctx}");
    assert_eq!(counter(&project, "productive"), 0, "{ctx}");
    assert!(
        stdout_of(&output).contains("nothing past the agent's start-up lines"),
        "{ctx}"
    );
    let status = stdout_of(&project.run(&["--status"]));
    assert!(status.contains("0 productive"), "{status}");
    assert!(!status.contains("✓ done"), "{status}");
}

/// A session that did work and then hung is productive: the watchdog's kill
/// does not take back what the agent did.
#[test]
fn a_session_killed_after_a_tool_call_is_productive() {
    let project = Project::new(&fast_config(
        &["burst", &fixture("agent/six_reads.jsonl"), "600"],
        QUICK_WATCHDOG,
    ));
    let output = project.run(&["--headless", "1"]);
    let ctx = context(&project, &output);
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 1, "{ctx}");
    assert_eq!(sessions[0]["killed"], "watchdog", "{ctx}");
    assert_eq!(sessions[0]["productive"], true, "{ctx}");
}

/// `claude -p --resume` run again on one session id: each run's turns and
/// duration are its own and add up; cost and tokens are running totals.
#[test]
fn a_resumed_session_counts_the_turns_of_every_run() {
    let project = Project::new(&fast_config(
        &["replay", &fixture("transcripts/claude_resumed.jsonl")],
        "",
    ));
    let output = project.run(&["--headless", "1"]);
    let ctx = context(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{ctx}");
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 1, "{ctx}");
    assert_eq!(sessions[0]["turns"], 4, "{ctx}");
    assert_eq!(sessions[0]["cost_usd"], 0.25, "{ctx}");
    assert_eq!(sessions[0]["input_tokens"], 40, "{ctx}");
    let last = &project.status()["last_session"];
    assert_eq!(last["duration_ms"], 2500, "{last}");
    assert_eq!(last["turns"], 4, "{last}");
}

/// The first run kept the promise and reported its cost; the second run was
/// cut off. The last run decides: no result, no cost, no promise, and the
/// loop goes on instead of ending as completed.
#[test]
fn a_last_run_cut_off_does_not_inherit_an_earlier_runs_result_or_promise() {
    let project = Project::new(&fast_config(
        &["replay", &fixture("transcripts/claude_resumed_cut.jsonl")],
        "[completion]\npromise = \"TASK_COMPLETE\"\n",
    ));
    let output = project.run(&["--headless", "2"]);
    let ctx = context(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{ctx}");
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 2, "{ctx}");
    for session in &sessions {
        assert_eq!(session["productive"], true, "{ctx}");
        assert!(session["result"].is_null(), "{ctx}");
        assert!(session["cost_usd"].is_null(), "{ctx}");
        assert!(session["turns"].is_null(), "{ctx}");
    }
    let end = &project.events_named("loop_end")[0];
    assert_eq!(end["reason"], "max_iterations", "{ctx}");
}

/// `harness.toml` for the fake agent in `mode`, with `backoff` keys added to
/// the fast `[backoff]` table and `extra` whole tables after it.
fn config_with_backoff(mode_args: &[&str], backoff: &str, extra: &str) -> String {
    let args: Vec<String> = mode_args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[agent]\ncommand = {:?}\nargs = [{}]\n\n[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.5\n{backoff}\n[retry]\nretry_delay_secs = 0.05\n\n{extra}\n",
        fake_agent().display().to_string(),
        args.join(", ")
    )
}

/// A server error (here Claude's 529) is counted, backed off, and shown by
/// `--status` in its counters line, next to the rate limits.
#[test]
fn status_counts_server_errors() {
    let project = Project::new(&config_with_backoff(
        &["replay", &fixture("agent/transient_529.jsonl")],
        "max_consecutive_errors = 2\n",
        "",
    ));
    let output = project.run(&["--headless", "3"]);
    let ctx = context(&project, &output);
    assert_eq!(output.status.code(), Some(5), "{ctx}");
    assert_eq!(counter(&project, "transient_errors"), 2, "{ctx}");
    let status = stdout_of(&project.run(&["--status"]));
    assert!(
        status.contains("0 rate limits (0 in a row), 2 server errors (2 in a row)"),
        "{status}"
    );
}

/// Codex 0.169 and 0.101 answer a 503 `server_is_overloaded` with
/// `turn.failed` "Selected model is at capacity…": a server error, not a
/// productive session.
#[test]
fn codex_at_capacity_is_a_server_error() {
    let project = Project::new(&config_with_backoff(
        &[
            "replay",
            &fixture("limits/codex_0.169_503_overloaded.jsonl"),
        ],
        "max_consecutive_errors = 1\n",
        "",
    ));
    let output = project.run(&["--headless", "3"]);
    let ctx = context(&project, &output);
    assert_eq!(output.status.code(), Some(5), "{ctx}");
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 1, "{ctx}");
    assert_eq!(sessions[0]["transient_error"], true, "{ctx}");
    assert_eq!(sessions[0]["productive"], false, "{ctx}");
    assert_eq!(counter(&project, "productive"), 0, "{ctx}");
}

/// Codex before 0.44 writes `{"id":…,"msg":{…}}` lines, whose errors clowder
/// cannot read: the loop says so and stops after the first session (exit 1),
/// without waiting for the agent.
#[test]
fn a_codex_older_than_0_44_is_not_supported_and_stops_the_loop() {
    let project = Project::new(&fast_config(
        &[
            "burst",
            &fixture("transcripts/codex_legacy_0_40.jsonl"),
            "600",
        ],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let started = Instant::now();
    let output = project.run(&["--headless", "3"]);
    let ctx = context(&project, &output);
    assert!(started.elapsed() < Duration::from_secs(60), "{ctx}");
    assert_eq!(output.status.code(), Some(1), "{ctx}");
    assert_eq!(project.events_named("session_start").len(), 1, "{ctx}");
    let errors = project.events_named("agent_error");
    assert_eq!(errors.len(), 1, "{ctx}");
    let reason = errors[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("Codex before 0.44"), "{ctx}");
    assert!(stdout_of(&output).contains("Codex 0.44 or later"), "{ctx}");
}

/// A Codex call the PreToolUse gate blocked is written only to Codex's own
/// log (stderr, in the same file): it is still a tool call, and a failed one.
#[test]
fn a_codex_call_blocked_by_the_gate_is_a_tool_call() {
    let project = Project::new(&fast_config(
        &[
            "replay",
            &fixture("transcripts/codex_0.169_gate_blocked.jsonl"),
        ],
        "",
    ));
    let output = project.run(&["--headless", "1"]);
    let ctx = context(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{ctx}");
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 1, "{ctx}");
    // Two commands ran; the third was blocked.
    assert_eq!(sessions[0]["tool_calls"], 3, "{ctx}");
    let last = &project.status()["last_session"];
    assert_eq!(last["tool_errors"], 1, "{last}");
}

/// Claude Code 2.1 retries a 401 ten times over three minutes; its first
/// `api_retry` with `authentication_failed` ends the session and the loop at
/// once (exit 1), and it is never shown as a server error.
#[test]
fn a_rejected_key_stops_at_the_agents_first_retry() {
    let project = Project::new(&fast_config(
        &[
            "burst",
            &fixture("limits/claude_2.1.332_401_retrying.jsonl"),
            "600",
        ],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let started = Instant::now();
    let output = project.run(&["--headless", "3"]);
    let ctx = context(&project, &output);
    assert!(started.elapsed() < Duration::from_secs(60), "{ctx}");
    assert_eq!(output.status.code(), Some(1), "{ctx}");
    assert_eq!(project.events_named("session_start").len(), 1, "{ctx}");
    let killed = project.events_named("session_killed");
    assert_eq!(killed.len(), 1, "{ctx}");
    assert_eq!(killed[0]["reason"], "agent_error", "{ctx}");
    let errors = project.events_named("agent_error");
    assert_eq!(errors.len(), 1, "{ctx}");
    let reason = errors[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("authentication_failed"), "{ctx}");
    assert!(project.events_named("transient_error").is_empty(), "{ctx}");
    let status = stdout_of(&project.run(&["--status"]));
    assert!(status.contains("0 server errors"), "{status}");
    assert!(status.contains("failed (exit"), "{status}");
}

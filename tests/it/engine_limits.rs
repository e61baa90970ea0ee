//! Rate limits and transient server errors told apart, end to end through the
//! binary with real output shapes (`tests/fixtures/limits/`): a 500 has its own
//! counter, event, limit and exit code; Codex waiting out a 429 on its own is
//! shown and then counted as a rate limit; free text decides only at the end of
//! a session, and never from a path.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;

fn limits_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/limits")
        .join(name)
        .display()
        .to_string()
}

/// The fake agent in `mode` on `fixture`, with fast backoff and `extra` tables.
fn project(mode: &[&str], fixture: &str, extra: &str) -> Project {
    let file = limits_fixture(fixture);
    let mut args: Vec<&str> = vec![mode[0], &file];
    args.extend_from_slice(&mode[1..]);
    let config = fast_config(&args, extra).replace(
        "max_delay_secs = 0.5\n",
        "max_delay_secs = 0.5\nmax_consecutive_errors = 2\nmax_consecutive_rate_limits = 1\n",
    );
    Project::new(&config)
}

fn context(output: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout_of(output),
        stderr_of(output)
    )
}

/// Every session of `project` ended in a transient error: exit 5 after two.
fn assert_gives_up_on_transient_errors(project: &Project, reason_has: &str) {
    let output = project.run(&["--headless", "5"]);
    let ctx = context(&output);
    assert_eq!(output.status.code(), Some(5), "{ctx}");
    assert!(project.events_named("rate_limited").is_empty(), "{ctx}");
    let errors = project.events_named("transient_error");
    assert_eq!(errors.len(), 2, "{ctx}");
    assert_eq!(errors[1]["consecutive"], 2, "{ctx}");
    let reason = errors[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(reason_has), "{reason}\n{ctx}");
    let complete = &project.events_named("session_complete")[0];
    assert_eq!(complete["rate_limited"], false, "{complete}");
    assert_eq!(complete["transient_error"], true, "{complete}");
    assert_eq!(complete["productive"], false, "{complete}");
    let status = project.status();
    assert_eq!(status["counters"]["rate_limits"], 0, "{status}");
    assert_eq!(status["counters"]["transient_errors"], 2, "{status}");
    assert_eq!(status["consecutive_rate_limits"], 0, "{status}");
    let end = &project.events_named("loop_end")[0];
    assert_eq!(end["reason"]["transient_errors"]["consecutive"], 2, "{end}");
    let last = stdout_of(&output)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(last.contains("transient_errors (2 in a row)"), "{ctx}");
    assert!(last.contains("0 rate limits, 2 server errors"), "{ctx}");
    assert!(!ctx.contains("rate-limited sessions in a row"), "{ctx}");
    assert!(ctx.contains("ended in a transient server error"), "{ctx}");
}

#[test]
fn a_claude_api_error_500_is_a_transient_error_not_a_rate_limit() {
    let project = project(&["replay"], "claude_api_error_500.jsonl", "");
    assert_gives_up_on_transient_errors(&project, "transient API error (500)");
}

#[test]
fn codex_failing_its_turn_after_a_500_is_a_transient_error() {
    let project = project(&["replay"], "codex_0.169_500.jsonl", "");
    assert_gives_up_on_transient_errors(&project, "high demand");
}

#[test]
fn codex_waiting_out_a_429_is_shown_then_counted_as_a_rate_limit() {
    let project = project(
        &["burst", "600"],
        "codex_0.169_429_retrying.jsonl",
        "[watchdog]\nstale_timeout_mins = 0.1\ncheck_interval_secs = 0.1\n",
    );
    let child = project.spawn(&["--headless", "5"]);
    // While it runs: the status says the agent is retrying, not that it hangs.
    let shown = wait_until(Duration::from_secs(20), || {
        let status = std::fs::read_to_string(project.path("harness.status")).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&status)
            .is_ok_and(|s| s["agent_retrying"]["rate_limit"] == true)
    });
    let said = stdout_of(&project.run(&["--status"]));
    let output = wait_with_deadline(child, Duration::from_secs(60));
    let ctx = context(&output);
    assert!(shown, "the status never said the agent was retrying\n{ctx}");
    assert!(
        said.contains("rate limited (the agent is retrying)"),
        "--status said:\n{said}"
    );
    assert_eq!(output.status.code(), Some(3), "{ctx}");
    let limited = project.events_named("rate_limited");
    assert_eq!(limited.len(), 1, "{ctx}");
    let reason = limited[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the agent was retrying") && reason.contains("429"),
        "{reason}"
    );
    let complete = &project.events_named("session_complete")[0];
    assert_eq!(complete["killed"], "watchdog", "{complete}");
    assert_eq!(complete["productive"], false, "{complete}");
    assert!(
        ctx.contains("rate limited (the agent is retrying), killing"),
        "{ctx}"
    );
    let stale = &project.events_named("watchdog_stale")[0];
    assert_eq!(stale["agent_retrying"]["rate_limit"], true, "{stale}");
}

#[test]
fn a_plain_text_agent_that_recovered_from_a_rate_limit_is_productive() {
    let project = project(&["replay"], "text_agent_recovered.txt", "");
    let output = project.run(&["--headless", "1"]);
    let ctx = context(&output);
    assert_eq!(output.status.code(), Some(0), "{ctx}");
    assert!(project.events_named("rate_limited").is_empty(), "{ctx}");
    assert_eq!(
        project.events_named("session_complete")[0]["productive"],
        true
    );
}

#[test]
fn a_codex_home_named_ratelimit_is_not_a_rate_limit() {
    let project = project(&["replay"], "codex_home_ratelimit_no_end.jsonl", "");
    let output = project.run(&["--headless", "1"]);
    let ctx = context(&output);
    assert_eq!(output.status.code(), Some(0), "{ctx}");
    assert!(project.events_named("rate_limited").is_empty(), "{ctx}");
    assert!(project.events_named("transient_error").is_empty(), "{ctx}");
    assert_eq!(
        project.events_named("session_complete")[0]["productive"],
        true
    );
}

//! Claude Code itself, each pinned version, meeting a failing or silent model
//! server under the `clowder` binary: a 429 is a rate limit, a 529 or 500 a
//! transient error, a 401 stops the loop; a model that never answers, or stalls
//! mid-stream, is the watchdog's, which kills the agent and all it started.

use crate::common;
use crate::model_server;
use crate::real_agents;

use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use model_server::{Failure, ModelServer, Reply, ToolCall, anthropic};
use real_agents::{CLAUDE_VERSIONS, Cli};
use serde_json::Value;

/// Only a broken run takes this long.
const RUN_DEADLINE: Duration = Duration::from_secs(180);

/// Fast backoff, so that a loop of failing sessions takes seconds.
const FAST_BACKOFF: &str = "initial_delay_secs = 0.05\nmax_delay_secs = 0.5\n";

real_agents::per_version!(
    Claude, CLAUDE_VERSIONS:
    rate_limit_429,
    overloaded_529,
    server_error_500,
    unauthorized_401,
    hang_after_a_tool_call,
    stall_mid_stream
);

/// Runs `clowder --headless MAX` in a new project with `tables` after the agent's
/// own table. Claude Code's own retries are off: each of them only repeats the
/// failure (see the note in the README), and the loop is what is under test.
fn run_claude(cli: Cli, server: &ModelServer, tables: &str, max: &str) -> (Project, Output) {
    let project = Project::new(&format!("{}\n{tables}", cli.agent_table()));
    let mut command = real_agents::clowder(cli, server, &project, &["--headless", max]);
    command.env("CLAUDE_CODE_MAX_RETRIES", "0");
    let output = wait_with_deadline(command.spawn().expect("spawn clowder"), RUN_DEADLINE);
    (project, output)
}

fn dump(project: &Project, server: &ModelServer, output: &Output) -> String {
    let mut text = format!(
        "exit: {:?}\nstdout:\n{}\nstderr:\n{}\nevents:\n",
        output.status,
        stdout_of(output),
        stderr_of(output)
    );
    for event in project.events() {
        text.push_str(&format!("  {event}\n"));
    }
    for file in project.output_files() {
        let body = std::fs::read_to_string(&file).unwrap_or_default();
        text.push_str(&format!("{}:\n{body}\n", file.display()));
    }
    let status = std::fs::read_to_string(project.path("harness.status")).unwrap_or_default();
    text.push_str(&format!("status: {status}\n"));
    for request in server.requests() {
        let stream = request.body["stream"].as_bool().unwrap_or(false);
        let (path, scripted) = (&request.path, request.scripted);
        text.push_str(&format!(
            "request {path} scripted={scripted} stream={stream}\n"
        ));
    }
    text
}

/// clowder's last words on stdout: `clowder: stopped (REASON) after …`, then
/// the run's counters.
fn exit_line(output: &Output) -> String {
    stdout_of(output)
        .lines()
        .rev()
        .find(|line| line.starts_with("clowder: "))
        .unwrap_or_default()
        .to_string()
}

/// The REASON of [`exit_line`].
fn exit_reason(line: &str) -> &str {
    let reason = line.split_once(" (").map_or("", |(_, rest)| rest);
    reason
        .rsplit_once(") after ")
        .map_or(reason, |(reason, _)| reason)
}

fn counter(status: &Value, name: &str) -> u64 {
    // A counter that a version of the status file does not have yet is zero.
    status["counters"][name].as_u64().unwrap_or(0)
}

/// An RFC 3339 time as epoch seconds; 0 for one that does not parse.
fn epoch_of(time: &Value) -> Option<i64> {
    let parse = |at: &str| chrono::DateTime::parse_from_rfc3339(at).map_or(0, |at| at.timestamp());
    time.as_str().map(parse)
}

fn now_epoch() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_secs() as i64
}

fn rate_limit_429(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let reset = now_epoch() + 3600;
    let server = anthropic::start();
    server.script([Reply::FailAlways(anthropic::rate_limited(1, reset))]);
    let tables = format!("[backoff]\n{FAST_BACKOFF}max_consecutive_rate_limits = 2\n");
    let (project, output) = run_claude(cli, &server, &tables, "3");
    let dump = dump(&project, &server, &output);

    assert_eq!(output.status.code(), Some(3), "{dump}");
    let last = exit_line(&output);
    assert_eq!(
        exit_reason(&last),
        "rate_limited (2 in a row)",
        "{last}\n{dump}"
    );
    assert!(last.contains(" 2 rate limits"), "{last}\n{dump}");
    let limits = project.events_named("rate_limited");
    assert_eq!(limits.len(), 2, "{dump}");
    // The reset time is the limit's when the agent's stream carries it; with an
    // API key neither version prints the unified headers, and a reset time made
    // up from nothing would be worse than none.
    let carried = project
        .output_files()
        .iter()
        .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(&reset.to_string())));
    for (n, event) in limits.iter().enumerate() {
        assert_eq!(event["consecutive"], n as u64 + 1, "{event}\n{dump}");
        let expected = carried.then_some(reset);
        assert_eq!(epoch_of(&event["resets_at"]), expected, "{event}\n{dump}");
    }
    for session in project.events_named("session_complete") {
        assert_eq!(session["rate_limited"], true, "{session}\n{dump}");
        assert_eq!(session["productive"], false, "{session}\n{dump}");
    }
    assert!(project.events_named("transient_error").is_empty(), "{dump}");
    assert!(project.events_named("agent_error").is_empty(), "{dump}");
    let status = project.status();
    assert_eq!(counter(&status, "rate_limits"), 2, "{dump}");
    assert_eq!(counter(&status, "transient_errors"), 0, "{dump}");
    assert_eq!(counter(&status, "productive"), 0, "{dump}");
    assert_eq!(status["consecutive_rate_limits"], 2, "{dump}");
    let resets_at = epoch_of(&status["rate_limit_resets_at"]);
    assert_eq!(resets_at, carried.then_some(reset), "{dump}");
}

fn overloaded_529(cli: Cli) {
    transient(cli, anthropic::overloaded());
}

fn server_error_500(cli: Cli) {
    transient(cli, anthropic::server_error());
}

/// A server-side failure is a transient error: its own event, counter and limit
/// (`[backoff] max_consecutive_errors`), never a rate limit. One rate limit
/// would stop this loop at once, so a 5xx read as a rate limit shows.
fn transient(cli: Cli, failure: Failure) {
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    server.script([Reply::FailAlways(failure)]);
    // NOT YET on this branch: `max_consecutive_errors` (issue 21) is unknown
    // here, so clowder rejects the table (exit 2) and the first assertion fails.
    // Without the key, the next ones fail instead: both versions' 500 and 529
    // end the loop as `rate_limited (1 in a row)`, exit 3.
    let tables = format!(
        "[backoff]\n{FAST_BACKOFF}max_consecutive_rate_limits = 1\nmax_consecutive_errors = 2\n"
    );
    let (project, output) = run_claude(cli, &server, &tables, "3");
    let dump = dump(&project, &server, &output);

    assert_eq!(output.status.code(), Some(5), "{dump}");
    let last = exit_line(&output);
    assert_eq!(
        exit_reason(&last),
        "transient_errors (2 in a row)",
        "{last}\n{dump}"
    );
    assert!(last.contains(" 0 rate limits"), "{last}\n{dump}");
    assert!(project.events_named("rate_limited").is_empty(), "{dump}");
    assert!(project.events_named("agent_error").is_empty(), "{dump}");
    assert_eq!(project.events_named("transient_error").len(), 2, "{dump}");
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 2, "{dump}");
    for session in sessions {
        assert_eq!(session["rate_limited"], false, "{session}\n{dump}");
        assert_eq!(session["transient_error"], true, "{session}\n{dump}");
        assert_eq!(session["productive"], false, "{session}\n{dump}");
    }
    let status = project.status();
    assert_eq!(counter(&status, "rate_limits"), 0, "{dump}");
    assert_eq!(counter(&status, "transient_errors"), 2, "{dump}");
    assert_eq!(counter(&status, "productive"), 0, "{dump}");
}

/// A rejected key is the one failure that retrying cannot fix: the loop stops
/// after the first session, with exit 1 and the reason.
fn unauthorized_401(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    server.script([Reply::FailAlways(anthropic::unauthorized())]);
    let tables = format!("[backoff]\n{FAST_BACKOFF}max_consecutive_rate_limits = 1\n");
    let (project, output) = run_claude(cli, &server, &tables, "3");
    let dump = dump(&project, &server, &output);

    assert_eq!(output.status.code(), Some(1), "{dump}");
    assert_eq!(project.events_named("session_start").len(), 1, "{dump}");
    let errors = project.events_named("agent_error");
    assert_eq!(errors.len(), 1, "{dump}");
    let reason = errors[0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        reason.contains("api key") || reason.contains("authentication"),
        "{reason}\n{dump}"
    );
    let last = exit_line(&output);
    let reason = exit_reason(&last);
    assert!(reason.starts_with("error: "), "{last}\n{dump}");
    assert!(reason.contains("authenticate"), "{last}\n{dump}");
    assert!(last.contains(" 0 rate limits"), "{last}\n{dump}");
    assert!(project.events_named("rate_limited").is_empty(), "{dump}");
    assert!(project.events_named("transient_error").is_empty(), "{dump}");
    let ends = project.events_named("loop_end");
    assert_eq!(ends.len(), 1, "{dump}");
    assert!(
        ends[0]["reason"]["fatal"].is_object(),
        "{}\n{dump}",
        ends[0]
    );
    let status = project.status();
    assert_eq!(counter(&status, "rate_limits"), 0, "{dump}");
    assert_eq!(counter(&status, "transient_errors"), 0, "{dump}");
}

fn hang_after_a_tool_call(cli: Cli) {
    watchdog_kills_everything(cli, Reply::Hang);
}

/// A stream that stops mid-answer. A version that gives up on the stream and asks
/// again meets a model that never answers.
fn stall_mid_stream(cli: Cli) {
    watchdog_kills_everything(cli, Reply::Stall);
}

/// A short watchdog; Claude Code's own timeouts (`API_TIMEOUT_MS`, ten minutes,
/// and 2.1's stream idle timeout, at least five) are far longer, so the watchdog
/// is what acts.
const FAST_WATCHDOG: &str =
    "[watchdog]\nstale_timeout_mins = 0.15\ncheck_interval_secs = 0.2\nkill_grace_secs = 1\n";

/// The model asks for a Bash call that leaves a `sleep` running in the background,
/// then goes silent. The watchdog kills the session, and the Bash tool's child
/// with it: nothing carrying the marker is left in `/proc`.
fn watchdog_kills_everything(cli: Cli, silence: Reply) {
    if !cli.installed() {
        return;
    }
    // Unique among the tests running side by side in this process, and beyond.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let mark = format!(
        "CLOWDER_FAULT_MARK={}-{}-{run}",
        std::process::id(),
        now_epoch()
    );
    let server = anthropic::start();
    let command = format!("{mark} nohup sleep 1000 >/dev/null 2>&1 &\necho started");
    server.script([
        Reply::Tools("Starting it.".into(), vec![ToolCall::shell(&command)]),
        silence,
        Reply::Hang,
        Reply::Hang,
        Reply::Hang,
    ]);
    let project = Project::new(&format!("{}\n{FAST_WATCHDOG}", cli.agent_table()));
    let mut clowder = real_agents::clowder(cli, &server, &project, &["--headless", "1"]);
    clowder.env("API_TIMEOUT_MS", "600000");
    let child = clowder.spawn().expect("spawn clowder");
    let started = wait_until(RUN_DEADLINE, || !processes_with_env(&mark).is_empty());
    let output = wait_with_deadline(child, RUN_DEADLINE);
    let dump = dump(&project, &server, &output);
    assert!(started, "the Bash tool's `sleep` never ran\n{dump}");

    assert_eq!(output.status.code(), Some(0), "{dump}");
    let results = anthropic::tool_results(&server);
    assert_eq!(results.len(), 1, "{results:?}\n{dump}");
    assert!(results[0].output.contains("started"), "{results:?}\n{dump}");
    assert!(server.scripted_requests() >= 2, "{dump}");
    assert_eq!(project.events_named("watchdog_stale").len(), 1, "{dump}");
    assert_eq!(project.events_named("watchdog_kill").len(), 1, "{dump}");
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions.len(), 1, "{dump}");
    assert_eq!(sessions[0]["exit_code"], 124, "{dump}");
    assert_eq!(sessions[0]["killed"], "watchdog", "{dump}");
    assert_eq!(counter(&project.status(), "watchdog_kills"), 1, "{dump}");
    // Claude Code starts the Bash tool's commands in a process group of their
    // own: clowder finds what outlived the session by its cgroup or its parentage.
    for leaked in project.events_named("leaked_pid") {
        assert_eq!(leaked["killed"], true, "{leaked}\n{dump}");
    }

    let start = &project.events_named("session_start")[0];
    let pid = start["pid"].as_i64().unwrap_or_default() as i32;
    let pgid = start["pgid"].as_i64().unwrap_or_default() as i32;
    assert!(pid > 0 && pgid > 0, "{start}");
    let gone = wait_until(Duration::from_secs(10), || {
        processes_with_env(&mark).is_empty()
            && !pid_alive(pid)
            && live_group_members(pgid).is_empty()
    });
    assert!(
        gone,
        "left behind: marked {:?}, agent alive {}, group {:?}\n{dump}",
        processes_with_env(&mark),
        pid_alive(pid),
        live_group_members(pgid)
    );
}

/// A 429 with `retry-after: 60`: Claude Code 2.1 sleeps it out inside the
/// session (it honours up to about a minute, and gives up at once on two), the
/// stream goes quiet and the watchdog kills the session. 2.1 says why before it
/// sleeps, in a `system`/`api_retry` line with `error_status: 429`; so a session
/// that ended this way is a rate-limited session (issue 21, item 5, as for
/// Codex), not a productive one that the loop repeats without a pause every
/// stale period. 2.0 honours any `retry-after` but prints nothing while it
/// waits: for clowder that is an ordinary stale session, so it has no test here.
#[test]
fn rate_limit_waited_out_inside_the_agent() {
    let cli = Cli::Claude(CLAUDE_VERSIONS[0]);
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    server.script([Reply::FailAlways(anthropic::rate_limited(
        60,
        now_epoch() + 3600,
    ))]);
    let tables =
        format!("{FAST_WATCHDOG}\n[backoff]\n{FAST_BACKOFF}max_consecutive_rate_limits = 1\n");
    let project = Project::new(&format!("{}\n{tables}", cli.agent_table()));
    let mut command = real_agents::clowder(cli, &server, &project, &["--headless", "3"]);
    command.env("CLAUDE_CODE_MAX_RETRIES", "1");
    let output = wait_with_deadline(command.spawn().expect("spawn clowder"), RUN_DEADLINE);
    let dump = dump(&project, &server, &output);

    let output_text: String = project
        .output_files()
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    assert!(
        output_text.contains("\"subtype\":\"api_retry\""),
        "the agent did not say it was retrying\n{dump}"
    );
    let sessions = project.events_named("session_complete");
    assert_eq!(sessions[0]["killed"], "watchdog", "{dump}");
    // NOT YET on this branch: the killed session counts as productive, with no
    // backoff; the next session starts at once and meets the same fate, three
    // "productive" sessions in 30 s, exit 0.
    assert_eq!(sessions.len(), 1, "{dump}");
    assert_eq!(sessions[0]["rate_limited"], true, "{dump}");
    assert_eq!(sessions[0]["productive"], false, "{dump}");
    assert_eq!(project.events_named("rate_limited").len(), 1, "{dump}");
    assert_eq!(output.status.code(), Some(3), "{dump}");
    let last = exit_line(&output);
    assert_eq!(
        exit_reason(&last),
        "rate_limited (1 in a row)",
        "{last}\n{dump}"
    );
    assert_eq!(counter(&project.status(), "rate_limits"), 1, "{dump}");
    assert_eq!(counter(&project.status(), "productive"), 0, "{dump}");
}

/// Claude Code 2.1 retries a 401 on its own, ten times over about three
/// minutes, saying so in `api_retry` lines with `"error":"authentication_failed"`.
/// Retrying cannot fix a rejected key: clowder ends the session at the first
/// such line and stops the loop (exit 1), and `--status` never calls it a
/// server error.
#[test]
fn unauthorized_401_stops_at_the_first_authentication_failure() {
    let cli = Cli::Claude(CLAUDE_VERSIONS[0]);
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    server.script([Reply::FailAlways(anthropic::unauthorized())]);
    let tables = format!("[backoff]\n{FAST_BACKOFF}");
    let project = Project::new(&format!("{}\n{tables}", cli.agent_table()));
    let command = real_agents::clowder(cli, &server, &project, &["--headless", "3"]);
    let started = std::time::Instant::now();
    let mut command = command;
    let output = wait_with_deadline(command.spawn().expect("spawn clowder"), RUN_DEADLINE);
    let took = started.elapsed();
    let dump = dump(&project, &server, &output);

    assert_eq!(output.status.code(), Some(1), "{dump}");
    assert!(took < Duration::from_secs(60), "took {took:?}\n{dump}");
    assert_eq!(project.events_named("session_start").len(), 1, "{dump}");
    let errors = project.events_named("agent_error");
    assert_eq!(errors.len(), 1, "{dump}");
    let last = exit_line(&output);
    assert!(
        exit_reason(&last).contains("authenticate"),
        "{last}\n{dump}"
    );
    assert!(project.events_named("transient_error").is_empty(), "{dump}");
    assert!(project.events_named("rate_limited").is_empty(), "{dump}");
    let status = stdout_of(&project.run(&["--status"]));
    assert!(!status.contains("server error (the agent"), "{status}");
    assert!(status.contains("0 server errors"), "{status}");
}

//! Codex itself, each pinned version, run by the `clowder` binary against a local
//! OpenAI Responses server: three normal sessions and their counters, the API's
//! errors (429, 500, 401), a model that never answers, and the gate as Codex's
//! PreToolUse hook.
//!
//! What the pinned versions do (measured against the local server, with the
//! provider's `request_max_retries = 0`, `stream_max_retries = 5`):
//! - 429 with `retry-after`: 0.169 prints `Reconnecting... 1/5 (exceeded retry
//!   limit, last status: 429 Too Many Requests)` and sleeps `retry-after` before
//!   trying again (with 3600 it sleeps past any stale limit); 0.101 does not retry,
//!   it prints the error and `turn.failed` and exits 1.
//! - 500: both print `Reconnecting... n/5 (We're currently experiencing high
//!   demand…)` five times (about 6 s of backoff), then `turn.failed`, exit 1.
//! - 503 `server_is_overloaded`: neither retries; both print `turn.failed`
//!   "Selected model is at capacity. Please try a different model.", exit 1.
//! - 401: both retry five times too (`Reconnecting... n/5 (unexpected status 401
//!   Unauthorized…)`), then `turn.failed`, exit 1.
//! - With Codex's default `request_max_retries` (4) a 500 is also retried inside
//!   each attempt: 30 requests and about 25 s before the turn fails; a 429 is not
//!   (0.101 still gives up at once).
//! - Both kill a command's process group when `exec_command` returns: a `&` or
//!   `nohup` child does not outlive its command; a `setsid` one does.
//! - A command the PreToolUse hook denies (0.169) leaves no item in the JSON
//!   stream, only a plain-text `ERROR codex_core::tools::router: error=Command
//!   blocked by PreToolUse hook: REASON. Command: …` line; the model gets
//!   `Command blocked by PreToolUse hook: REASON. Command: …`.

use crate::common;
use crate::model_server;
use crate::real_agents;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use common::*;
use model_server::{Reply, ToolCall, openai};
use real_agents::Cli;
use serde_json::Value;

/// Fast pauses between sessions; a long stale limit unless a test sets its own.
const BACKOFF: &str = "[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.2\n\n[retry]\nretry_delay_secs = 0.05\n";

/// A watchdog that calls a session stale after 3 s of silence and kills at once.
const QUICK_WATCHDOG: &str =
    "[watchdog]\nstale_timeout_mins = 0.05\ncheck_interval_secs = 0.2\nkill_grace_secs = 0.5\n";

/// `harness.toml` for `cli`, plus whole extra tables.
fn config(cli: Cli, extra: &str) -> String {
    format!("{}\n{BACKOFF}\n{extra}", cli.agent_table())
}

/// Whether this Codex retries a 429 on its own (and sleeps for `retry-after`).
fn retries_rate_limits(cli: Cli) -> bool {
    cli != Cli::Codex("0.101.0")
}

/// Whether this Codex calls PreToolUse hooks (0.124 and later).
fn has_hooks(cli: Cli) -> bool {
    cli != Cli::Codex("0.101.0")
}

/// The session files of the run, in order, from its `session_start` events (the
/// file names are the loop's business, not this test's).
fn session_files(project: &Project) -> Vec<PathBuf> {
    project
        .events_named("session_start")
        .iter()
        .filter_map(|e| e["output_file"].as_str().map(PathBuf::from))
        .collect()
}

/// The JSON lines of a session file (Codex also writes plain-text warnings).
fn json_lines(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// What Codex's own lines say about a session: turns, shell commands run, and
/// the usage of its `turn.completed` lines summed.
#[derive(Debug, Default, PartialEq)]
struct Said {
    turns: u64,
    commands: u64,
    input: u64,
    cached: u64,
    output: u64,
}

fn said(path: &PathBuf) -> Said {
    let mut said = Said::default();
    for line in json_lines(path) {
        match line["type"].as_str() {
            Some("turn.completed") => {
                let usage = &line["usage"];
                said.turns += 1;
                said.input += usage["input_tokens"].as_u64().unwrap_or(0);
                said.cached += usage["cached_input_tokens"].as_u64().unwrap_or(0);
                said.output += usage["output_tokens"].as_u64().unwrap_or(0);
            }
            Some("item.completed") if line["item"]["type"] == "command_execution" => {
                said.commands += 1;
            }
            _ => {}
        }
    }
    said
}

fn everything(project: &Project, output: &Output) -> String {
    let files: Vec<String> = session_files(project)
        .iter()
        .map(|f| {
            format!(
                "{}:\n{}",
                f.display(),
                std::fs::read_to_string(f).unwrap_or_default()
            )
        })
        .collect();
    format!(
        "stdout:\n{}\nstderr:\n{}\nevents:\n{}\nsessions:\n{}",
        stdout_of(output),
        stderr_of(output),
        std::fs::read_to_string(project.path("harness-events.jsonl")).unwrap_or_default(),
        files.join("\n")
    )
}

fn session_completes(project: &Project) -> Vec<Value> {
    project.events_named("session_complete")
}

/// A counter of the loop's final status, 0 when absent.
fn counter(project: &Project, name: &str) -> u64 {
    project.status()["counters"][name].as_u64().unwrap_or(0)
}

/// Expectations checked all together, so that a failure lists every one that
/// does not hold, not just the first.
#[derive(Default)]
struct Checks(Vec<String>);

impl Checks {
    fn eq(&mut self, what: &str, got: &Value, want: impl Into<Value>) {
        let want = want.into();
        if *got != want {
            self.0.push(format!("{what}: got {got}, want {want}"));
        }
    }

    fn done(self, context: &str) {
        assert!(
            self.0.is_empty(),
            "{}

{context}",
            self.0.join("\n")
        );
    }
}

real_agents::per_version!(
    Codex, CODEX_VERSIONS:
    three_sessions,
    rate_limit_waited_out,
    rate_limit_past_the_stale_limit,
    server_error,
    overloaded_503,
    unauthorized,
    hang_is_killed_with_its_children,
    stall_is_killed_with_its_children,
    gate,
    gate_in_the_room,
    a_home_named_ratelimit_is_no_rate_limit,
);

/// Scenario 1 and the normal run of 6: three sessions, each running a shell
/// command; the third keeps the completion promise, which ends a loop of five.
/// Counters equal Codex's own lines, totals add up, the commands' output reached
/// the model.
fn three_sessions(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    for n in 1..=3 {
        let done = if n == 3 {
            "All tests pass. TASK_COMPLETE"
        } else {
            "Progress made."
        };
        server.script([
            Reply::Tools(
                format!("Session {n}: checking."),
                vec![ToolCall::shell(&format!("echo session-{n}-output"))],
            ),
            Reply::Text(done.into()),
        ]);
    }
    let project = Project::new(&config(cli, "[completion]\npromise = \"TASK_COMPLETE\"\n"));
    let output = real_agents::run(cli, &server, &project, &["--headless", "5"]);
    let all = everything(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{all}");

    let files = session_files(&project);
    let ends = session_completes(&project);
    assert_eq!((files.len(), ends.len()), (3, 3), "three sessions: {all}");
    let mut sums = Said::default();
    for (file, end) in files.iter().zip(&ends) {
        let said = said(file);
        assert_eq!(
            (said.turns, said.commands),
            (1, 1),
            "{}: {all}",
            file.display()
        );
        assert_eq!(end["turns"], said.turns, "turns: {end}");
        assert_eq!(end["tool_calls"], said.commands, "tool calls: {end}");
        assert_eq!(end["input_tokens"], said.input, "input tokens: {end}");
        assert_eq!(end["output_tokens"], said.output, "output tokens: {end}");
        assert_eq!(end["productive"], true, "{end}");
        assert_eq!(end["rate_limited"], false, "{end}");
        sums.turns += said.turns;
        sums.commands += said.commands;
        sums.input += said.input;
        sums.output += said.output;
        sums.cached = said.cached;
    }

    let status = project.status();
    let totals = &status["totals"];
    assert_eq!(totals["turns"], sums.turns, "{status:#}");
    assert_eq!(totals["tool_calls"], sums.commands, "{status:#}");
    assert_eq!(totals["input_tokens"], sums.input, "{status:#}");
    assert_eq!(totals["output_tokens"], sums.output, "{status:#}");
    let last = &status["last_session"];
    assert_eq!(last["input_tokens"], ends[2]["input_tokens"], "{status:#}");
    assert_eq!(last["cache_read_tokens"], sums.cached, "{status:#}");

    // The promise ended the loop at three of five, with nothing asked after it.
    let end = project.events_named("loop_end");
    assert_eq!(end[0]["reason"], "completed", "{all}");
    assert_eq!(counter(&project, "sessions"), 3);
    assert_eq!(counter(&project, "productive"), 3);
    assert_eq!(server.scripted_requests(), 6, "{all}");

    let results = openai::tool_results(&server);
    for n in 1..=3 {
        let wanted = format!("session-{n}-output");
        assert!(
            results.iter().any(|r| r.output.contains(&wanted)),
            "{wanted} never reached the model: {results:?}"
        );
    }

    // What fix/stream brings: a completed turn reads success, and Codex reports no
    // cost, so the run's cost is unknown rather than $0.
    let mut checks = Checks::default();
    for end in &ends {
        checks.eq("session_complete cost_usd", &end["cost_usd"], Value::Null);
        checks.eq("session_complete result", &end["result"], "success");
    }
    checks.eq(
        "status last_session.result_subtype",
        &last["result_subtype"],
        "success",
    );
    checks.eq(
        "status totals.cost_usd (unknown, not 0)",
        &totals["cost_usd"],
        Value::Null,
    );
    checks.done(&all);
}

/// A 429 with a short `retry-after`: 0.169 waits it out inside the session and
/// carries on, a productive session that is not rate-limited; 0.101 gives up at
/// once, and the loop counts a rate limit, backs off and runs the next session.
fn rate_limit_waited_out(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    server.script([
        Reply::Fail(openai::rate_limited(1)),
        Reply::Tools(
            "Now it works.".into(),
            vec![ToolCall::shell("echo after-the-429")],
        ),
        Reply::Text("Done.".into()),
    ]);
    let project = Project::new(&config(cli, ""));
    let output = real_agents::run(cli, &server, &project, &["--headless", "1"]);
    let all = everything(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{all}");
    let files = session_files(&project);
    let first = std::fs::read_to_string(&files[0]).unwrap_or_default();
    assert!(first.contains("429 Too Many Requests"), "{all}");
    let ends = session_completes(&project);
    if retries_rate_limits(cli) {
        assert!(first.contains("Reconnecting... 1/5"), "{all}");
        assert_eq!(ends.len(), 1, "{all}");
        assert_eq!(ends[0]["productive"], true, "{all}");
        assert_eq!(ends[0]["rate_limited"], false, "{all}");
        assert_eq!(counter(&project, "rate_limits"), 0, "{all}");
    } else {
        assert_eq!(ends.len(), 2, "{all}");
        assert_eq!(ends[0]["rate_limited"], true, "{all}");
        assert_eq!(ends[0]["productive"], false, "{all}");
        assert_eq!(ends[1]["productive"], true, "{all}");
        assert_eq!(counter(&project, "rate_limits"), 1, "{all}");
        assert_eq!(project.events_named("rate_limited").len(), 1, "{all}");
    }
    assert_eq!(counter(&project, "productive"), 1, "{all}");
    let results = openai::tool_results(&server);
    assert!(
        results.iter().any(|r| r.output.contains("after-the-429")),
        "{results:?}"
    );
}

/// A 429 whose `retry-after` (an hour) lies past the stale limit: 0.169 sleeps in
/// silence, the watchdog kills it, and that session is a rate-limited one (backoff,
/// counter, event), not a productive one. The next session then succeeds.
fn rate_limit_past_the_stale_limit(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    server.script([
        Reply::Fail(openai::rate_limited(3600)),
        Reply::Text("Done.".into()),
    ]);
    // Six seconds of silence before the kill: time to read the status meanwhile.
    let watchdog = QUICK_WATCHDOG.replace("0.05", "0.1");
    let project = Project::new(&config(cli, &watchdog));
    let clowder = Running(Some(
        real_agents::clowder(cli, &server, &project, &["--headless", "1"])
            .spawn()
            .expect("spawn clowder"),
    ));
    let mut said_retrying = false;
    wait_until(Duration::from_secs(60), || {
        let status = stdout_of(&project.run(&["--status"])).to_lowercase();
        said_retrying = status.contains("rate limited (the agent is retrying)");
        said_retrying || !session_completes(&project).is_empty()
    });
    let output = clowder.finish();
    let all = everything(&project, &output);
    let ends = session_completes(&project);
    let mut checks = Checks::default();
    if retries_rate_limits(cli) {
        let first = std::fs::read_to_string(&session_files(&project)[0]).unwrap_or_default();
        assert!(first.contains("Reconnecting... 1/5"), "{all}");
        assert_eq!(counter(&project, "watchdog_kills"), 1, "{all}");
        checks.eq(
            "--status said \"rate limited (the agent is retrying)\" during the wait",
            &said_retrying.into(),
            true,
        );
    }
    assert!(!ends.is_empty(), "{all}");
    checks.eq("first session productive", &ends[0]["productive"], false);
    checks.eq("first session rate_limited", &ends[0]["rate_limited"], true);
    checks.eq(
        "counters.rate_limits",
        &counter(&project, "rate_limits").into(),
        1,
    );
    let events = project.events_named("rate_limited");
    checks.eq("rate_limited events", &events.len().into(), 1);
    let backoff = events
        .first()
        .map_or(Value::Null, |e| e["backoff_secs"].clone());
    checks.eq(
        "rate_limited backoff > 0",
        &backoff.as_f64().is_some_and(|b| b > 0.0).into(),
        true,
    );
    checks.eq(
        "sessions (a second one after the backoff)",
        &ends.len().into(),
        2,
    );
    let second = ends.get(1).map_or(Value::Null, |e| e["productive"].clone());
    checks.eq("second session productive", &second, true);
    checks.eq("exit code", &output.status.code().into(), 0);
    checks.done(&all);
}

/// A 500: Codex retries five times, then fails the turn. A transient error with
/// its own counter and event, not a rate limit and not a productive session; the
/// loop backs off and the next session succeeds.
fn server_error(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    server.script(std::iter::repeat_n(Reply::Fail(openai::server_error()), 6));
    server.script([Reply::Text("Done.".into())]);
    let project = Project::new(&config(cli, ""));
    let output = real_agents::run(cli, &server, &project, &["--headless", "1"]);
    let all = everything(&project, &output);
    let first = std::fs::read_to_string(&session_files(&project)[0]).unwrap_or_default();
    assert!(first.contains("Reconnecting... 5/5"), "{all}");
    assert!(first.contains("turn.failed"), "{all}");
    let ends = session_completes(&project);
    assert!(!ends.is_empty(), "{all}");
    assert_eq!(ends[0]["exit_code"], 1, "{all}");
    assert_eq!(
        ends[0]["rate_limited"], false,
        "a 500 is no rate limit: {all}"
    );
    assert_eq!(counter(&project, "rate_limits"), 0, "{all}");
    let mut checks = Checks::default();
    checks.eq("first session result", &ends[0]["result"], "error");
    checks.eq("first session productive", &ends[0]["productive"], false);
    checks.eq(
        "first session transient_error",
        &ends[0]["transient_error"],
        true,
    );
    let counted = counter(&project, "transient_errors");
    checks.eq("counters.transient_errors", &counted.into(), 1);
    let events = project.events_named("transient_error").len();
    checks.eq("transient_error events", &events.into(), 1);
    checks.eq(
        "sessions (a second one after the backoff)",
        &ends.len().into(),
        2,
    );
    let second = ends.get(1).map_or(Value::Null, |e| e["productive"].clone());
    checks.eq("second session productive", &second, true);
    checks.done(&all);
}

/// A 401: Codex retries five times, fails the turn; the loop stops at once with
/// exit code 1 and `agent_error`, and counts no rate limit.
/// A 503 `server_is_overloaded`: Codex does not retry it and ends the turn
/// with `turn.failed` "Selected model is at capacity…". A server error, backed
/// off and counted as one (`--status` says so), never a productive session.
fn overloaded_503(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    server.script([Reply::FailAlways(openai::error(
        503,
        "server_is_overloaded",
        "Our servers are currently overloaded. Please try again later.",
        &[],
    ))]);
    let tables =
        "[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.2\nmax_consecutive_errors = 2\n";
    let project = Project::new(&format!("{}\n{tables}", cli.agent_table()));
    let output = real_agents::run(cli, &server, &project, &["--headless", "3"]);
    let all = everything(&project, &output);
    let first = std::fs::read_to_string(&session_files(&project)[0]).unwrap_or_default();
    assert!(first.contains("turn.failed"), "{all}");
    let ends = session_completes(&project);
    let mut checks = Checks::default();
    checks.eq("exit code", &output.status.code().into(), 5);
    checks.eq("sessions", &ends.len().into(), 2);
    for end in &ends {
        checks.eq("session productive", &end["productive"], false);
        checks.eq("session transient_error", &end["transient_error"], true);
        checks.eq("session rate_limited", &end["rate_limited"], false);
    }
    let counted = counter(&project, "transient_errors");
    checks.eq("counters.transient_errors", &counted.into(), 2);
    checks.eq(
        "counters.productive",
        &counter(&project, "productive").into(),
        0,
    );
    let status = stdout_of(&project.run(&["--status"]));
    checks.eq(
        "--status counts the server errors",
        &status.contains("2 server errors (2 in a row)").into(),
        true,
    );
    checks.done(&all);
}

fn unauthorized(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    server.script([Reply::FailAlways(openai::unauthorized())]);
    let project = Project::new(&config(cli, ""));
    let output = real_agents::run(cli, &server, &project, &["--headless", "3"]);
    let all = everything(&project, &output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(stdout_of(&output).contains("cannot authenticate"), "{all}");
    assert_eq!(project.events_named("agent_error").len(), 1, "{all}");
    assert_eq!(counter(&project, "sessions"), 1, "{all}");
    assert_eq!(counter(&project, "productive"), 0, "{all}");
    assert_eq!(counter(&project, "rate_limits"), 0, "{all}");
    let first = std::fs::read_to_string(&session_files(&project)[0]).unwrap_or_default();
    assert!(first.contains("401 Unauthorized"), "{all}");
}

/// Scenario 4: the model accepts a request and never answers, or stalls in the
/// middle of its stream. The watchdog kills Codex and everything it started, a
/// `sleep` an earlier command left running in the background included: nothing
/// of the run is left in `/proc`. The `sleep` leaves its process group
/// (`setsid`): both versions kill a command's group when the command returns,
/// so a plain `&` or `nohup` child never outlives its command, and only one
/// that left the group is still there for the watchdog to find.
fn hang_is_killed_with_its_children(cli: Cli) {
    killed_when_silent(cli, Reply::Hang);
}

fn stall_is_killed_with_its_children(cli: Cli) {
    killed_when_silent(cli, Reply::Stall);
}

fn killed_when_silent(cli: Cli, silence: Reply) {
    if !cli.installed() {
        return;
    }
    let mark = format!(
        "CLOWDER_REAL_CODEX_{}_{}_{}",
        std::process::id(),
        cli.version().replace('.', "_"),
        matches!(silence, Reply::Hang)
    );
    let child_entry = format!("{mark}=child");
    let run_entry = format!("{mark}=run");
    let server = openai::start();
    server.script([
        Reply::Tools(
            "Starting a server.".into(),
            vec![ToolCall::shell(&format!(
                "setsid env {child_entry} sleep 1000 >/dev/null 2>&1 & echo started"
            ))],
        ),
        silence,
    ]);
    let project = Project::new(&config(cli, QUICK_WATCHDOG));
    let clowder = real_agents::clowder(cli, &server, &project, &["--headless", "1"])
        .env(&mark, "run")
        .spawn()
        .expect("spawn clowder");
    let started = wait_until(Duration::from_secs(60), || {
        !processes_with_env(&child_entry).is_empty()
    });
    let output = wait_with_deadline(clowder, Duration::from_secs(120));
    let all = everything(&project, &output);
    assert!(started, "the background sleep never ran: {all}");
    assert!(
        server.scripted_requests() >= 2,
        "the hanging request was made: {all}"
    );
    assert_eq!(counter(&project, "watchdog_kills"), 1, "{all}");
    assert_eq!(project.events_named("watchdog_kill").len(), 1, "{all}");
    let left = processes_with_env(&child_entry);
    assert!(
        left.is_empty(),
        "the background sleep outlived the run: {left:?}"
    );
    let left = processes_with_env(&run_entry);
    assert!(
        left.is_empty(),
        "processes of the run are left: {left:?}\n{all}"
    );
}

/// A `clowder` loop running in the background; SIGTERM on drop, so that a failed
/// assertion does not leave it (and Codex waiting at the gate) behind.
struct Running(Option<std::process::Child>);

impl Running {
    fn finish(mut self) -> Output {
        let child = self.0.take().expect("running");
        wait_with_deadline(child, Duration::from_secs(120))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            send_signal(child.id(), libc::SIGTERM);
            let _ = child.wait();
        }
    }
}

/// `[agent]` for a gated Codex: hooks run only once trusted, so an unattended loop
/// passes `--dangerously-bypass-hook-trust`.
fn gated_agent_table(cli: Cli) -> String {
    let table = cli.agent_table();
    if has_hooks(cli) {
        table.replacen(
            "\"exec\", ",
            "\"exec\", \"--dangerously-bypass-hook-trust\", ",
            1,
        )
    } else {
        table
    }
}

/// A project whose Codex asks `clowder gate` before its commands (when it has
/// hooks), with `echo` allowed by a rule.
fn gated_project(cli: Cli) -> Project {
    let project = Project::new("");
    let harness = format!(
        "{}\n{BACKOFF}\n[approvals]\ntimeout = \"90s\"\nallow = [{{ tool = \"Bash\", prefix = \"echo\" }}]\n",
        gated_agent_table(cli)
    );
    project.write("harness.toml", &harness);
    write_codex_hook(&project);
    project
}

/// The hook as a user registers it: `clowder init --codex-hook --write`.
fn write_codex_hook(project: &Project) {
    let init = project.run(&["init", "--codex-hook", "--write"]);
    assert!(init.status.success(), "{}", stderr_of(&init));
}

/// Codex reads a project's `.codex/config.toml` only in a trusted project; the
/// user's trust lives in `$CODEX_HOME/config.toml`, written by `environment`.
fn trust_project(project: &Project) {
    let path = project.path("home/.codex/config.toml");
    let mut text = std::fs::read_to_string(&path).expect("Codex config written");
    let root = project.root().canonicalize().expect("project root");
    text.push_str(&format!(
        "\n[projects.{:?}]\ntrust_level = \"trusted\"\n",
        root.display().to_string()
    ));
    std::fs::write(&path, text).expect("write Codex config");
}

/// `clowder queue --json`, parsed.
fn queue(project: &Project) -> Vec<Value> {
    let output = project.run(&["queue", "--json"]);
    serde_json::from_slice(&output.stdout).unwrap_or_default()
}

/// Waits for the one pending request whose command mentions `word`; its id.
fn pending_with(project: &Project, word: &str) -> Option<String> {
    let mut id = None;
    wait_until(Duration::from_secs(60), || {
        let listed = queue(project);
        id = listed
            .iter()
            .find(|r| r["subject"].as_str().is_some_and(|s| s.contains(word)))
            .and_then(|r| r["id"].as_str().map(str::to_string));
        id.is_some()
    });
    id
}

/// The gate scenario's model: an allowed command, then two chains, one for
/// approval and one for rejection.
fn script_the_gate(server: &model_server::ModelServer) {
    server.script([
        Reply::Tools("First.".into(), vec![ToolCall::shell("echo allowed-one")]),
        Reply::Tools(
            "Second.".into(),
            vec![ToolCall::shell("echo chained && touch approved-marker")],
        ),
        Reply::Tools(
            "Third.".into(),
            vec![ToolCall::shell("echo again && touch rejected-marker")],
        ),
        Reply::Text("Done.".into()),
    ]);
}

/// Scenario 7: `clowder gate` as Codex's PreToolUse hook. An allowed command runs
/// with nobody asked; a chained one waits in the queue until `clowder approve`;
/// `clowder reject --reason` gives Codex the reason. A Codex without hooks
/// runs the same commands ungated.
fn gate(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    script_the_gate(&server);
    let project = gated_project(cli);
    let mut command = real_agents::clowder(cli, &server, &project, &["--headless", "1"]);
    trust_project(&project);
    let clowder = Running(Some(command.spawn().expect("spawn clowder")));

    if !has_hooks(cli) {
        let output = clowder.finish();
        let all = everything(&project, &output);
        assert!(project.path("approved-marker").exists(), "ungated: {all}");
        assert!(project.path("rejected-marker").exists(), "ungated: {all}");
        assert!(queue(&project).is_empty(), "nothing was asked: {all}");
        assert_eq!(openai::tool_results(&server).len(), 3, "{all}");
        let mut checks = Checks::default();
        let status = stdout_of(&project.run(&["--status"]));
        checks.eq(
            "--status says UNGATED",
            &status.contains("UNGATED").into(),
            true,
        );
        checks.done(&all);
        return;
    }

    let approved = pending_with(&project, "approved-marker");
    let asked: Vec<String> = queue(&project)
        .iter()
        .filter_map(|r| r["subject"].as_str().map(str::to_string))
        .collect();
    assert!(
        !project.path("approved-marker").exists(),
        "ran before approval"
    );
    let results = openai::tool_results(&server);
    let Some(approved) = approved else {
        let output = clowder.finish();
        panic!(
            "the chained command never reached the queue\n{}",
            everything(&project, &output)
        );
    };
    assert_eq!(
        asked.len(),
        1,
        "only the chained command is asked: {asked:?}"
    );
    assert!(
        results.iter().any(|r| r.output.contains("allowed-one")),
        "the allowed command ran with nobody asked: {results:?}"
    );
    let approve = project.run(&["approve", &approved]);
    assert_eq!(approve.status.code(), Some(0), "{}", stderr_of(&approve));

    let rejected = pending_with(&project, "rejected-marker");
    assert!(project.path("approved-marker").exists(), "approved, it ran");
    if let Some(rejected) = rejected {
        let reject = project.run(&["reject", &rejected, "--reason", "not-in-this-test"]);
        assert_eq!(reject.status.code(), Some(0), "{}", stderr_of(&reject));
    }
    let output = clowder.finish();
    let all = everything(&project, &output);
    assert!(
        !project.path("rejected-marker").exists(),
        "rejected, it ran: {all}"
    );
    let results = openai::tool_results(&server);
    assert!(
        results
            .iter()
            .any(|r| r.output.contains("not-in-this-test")),
        "the reason never reached the model: {results:?}\n{all}"
    );
    assert_eq!(output.status.code(), Some(0), "{all}");
    let status = stdout_of(&project.run(&["--status"]));
    assert!(
        !status.contains("UNGATED"),
        "gated, yet said ungated: {status}"
    );
    // The rejected call is in Codex's log only, yet it is a call, and a
    // failed one: three calls, as the model asked for.
    let ends = session_completes(&project);
    assert_eq!(ends.len(), 1, "{all}");
    assert_eq!(ends[0]["tool_calls"], 3, "{all}");
    let last = &project.status()["last_session"];
    assert_eq!(last["tool_errors"], 1, "{last}\n{all}");
}

/// Scenario 7 in the control room: the chained command shows in the Approvals
/// pane, `a` lets Codex run it, `r` with a reason makes Codex get the reason.
fn gate_in_the_room(cli: Cli) {
    if !has_hooks(cli) || !cli.installed() {
        // Without hooks nothing is asked: `gate` shows that it runs ungated.
        return;
    }
    let server = openai::start();
    script_the_gate(&server);
    let project = gated_project(cli);
    let env: Vec<String> = cli
        .environment(&project, &server)
        .iter()
        .map(|(key, value)| format!("{key}='{value}'"))
        .collect();
    trust_project(&project);
    let command = format!(
        "env {} {} 1; echo CLOWDER_EXIT=$?; sleep 600",
        env.join(" "),
        clowder_bin().display()
    );
    let tmux = tmux::Tmux::start(project.root(), &command, 140, 40);

    tmux.wait_for("▶ Bash  echo chained");
    assert!(
        !project.path("approved-marker").exists(),
        "ran before approval"
    );
    tmux.wait_for("(1 waiting)");
    // Not "until the request is gone": the next request may come within one
    // look at the screen, and a second `a` would approve that one too.
    real_agents::press_until(&tmux, "a", decided_in_the_room);
    assert!(
        wait_until(Duration::from_secs(60), || project
            .path("approved-marker")
            .exists()),
        "approved, it never ran; screen:\n{}",
        tmux.screen()
    );

    tmux.wait_for("▶ Bash  echo again");
    tmux.wait_for("(1 waiting)");
    real_agents::press_until(&tmux, "r", |screen| screen.contains("Enter rejects"));
    tmux.keys(&["-l", "not from the room"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("✓ done: max_iterations");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
    assert!(
        !project.path("rejected-marker").exists(),
        "rejected, it ran"
    );
    let results = openai::tool_results(&server);
    assert!(
        results
            .iter()
            .any(|r| r.output.contains("not from the room")),
        "the reason never reached the model: {results:?}"
    );
    assert!(
        results.iter().any(|r| r.output.contains("allowed-one")),
        "{results:?}"
    );
}

/// Whether the Events pane says a request was approved (its line ends so).
fn decided_in_the_room(screen: &str) -> bool {
    screen.lines().any(|line| {
        line.split(['│', '┃'])
            .any(|cell| cell.contains(" request ") && cell.trim_end().ends_with(" approved"))
    })
}

/// Codex prints its home folder in a plain-text `WARNING:` line (under /tmp it
/// refuses to make helper binaries there). A folder named `…-ratelimit` is a
/// path, not the agent saying it is rate-limited: a normal session stays
/// productive, and no rate limit is counted.
fn a_home_named_ratelimit_is_no_rate_limit(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = openai::start();
    server.script([
        Reply::Tools("Checking.".into(), vec![ToolCall::shell("echo fine")]),
        Reply::Text("All good.".into()),
    ]);
    let project = Project::new(&config(cli, ""));
    let mut command = real_agents::clowder(cli, &server, &project, &["--headless", "1"]);
    let home = project.path("home/codex-ratelimit");
    std::fs::create_dir_all(&home).expect("mkdir");
    std::fs::copy(
        project.path("home/.codex/config.toml"),
        home.join("config.toml"),
    )
    .expect("copy Codex config");
    command.env("CODEX_HOME", &home);
    let output = wait_with_deadline(command.spawn().expect("spawn"), Duration::from_secs(120));
    let all = everything(&project, &output);
    let first = std::fs::read_to_string(&session_files(&project)[0]).unwrap_or_default();
    assert!(
        first.contains("codex-ratelimit"),
        "Codex printed its home: {all}"
    );
    let ends = session_completes(&project);
    let mut checks = Checks::default();
    checks.eq("sessions", &ends.len().into(), 1);
    checks.eq("rate_limited", &ends[0]["rate_limited"], false);
    checks.eq("productive", &ends[0]["productive"], true);
    checks.eq(
        "counters.rate_limits",
        &counter(&project, "rate_limits").into(),
        0,
    );
    checks.done(&all);
}

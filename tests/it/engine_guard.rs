//! `[guard]` and the prompt's continuation and handoff, end to end with the real
//! binary and fake agents that drip real-format stream-json: doom loops (kill,
//! warn, gate approved and rejected), each budget, `[prompt] continuation` and
//! `[prompt] handoff_file`.

use crate::common;

use std::process::Output;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The fake agent prints `name` a line every 0.2 s, then sleeps `hang` seconds.
fn drip_config(name: &str, hang: u32, extra: &str) -> String {
    fast_config(&["drip", &transcript(name), &hang.to_string()], extra)
}

fn context(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout_of(output),
        stderr_of(output)
    )
}

fn only(project: &Project, event: &str) -> Value {
    let events = project.events_named(event);
    assert_eq!(events.len(), 1, "{event}: {events:?}");
    events[0].clone()
}

/// The agent groups the event log saw start, all of which must be gone.
fn assert_no_session_left(project: &Project) {
    for start in project.events_named("session_start") {
        let pgid = start["pgid"].as_i64().expect("pgid") as i32;
        assert!(
            wait_until(Duration::from_secs(10), || live_group_members(pgid)
                .is_empty()),
            "group {pgid} still has {:?}",
            live_group_members(pgid)
        );
    }
}

/// Pending `ask` requests, as `clowder queue --json` lists them.
fn wait_for_ask_request(project: &Project) -> Value {
    let mut found = Vec::new();
    assert!(
        wait_until(DEADLINE, || {
            let output = project.run(&["queue", "--json"]);
            let listed: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
            found = listed
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r["kind"] == "ask")
                .collect();
            !found.is_empty()
        }),
        "no request appeared; events: {:?}",
        project.events()
    );
    found.remove(0)
}

// ---------------------------------------------------------------------------
// Doom loops
// ---------------------------------------------------------------------------

#[test]
fn the_same_call_three_times_in_a_row_kills_the_session_and_the_loop_goes_on() {
    // The agent would sleep 60 s after its five identical calls.
    let project = Project::new(&drip_config("doom_loop.jsonl", 60, ""));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    let doom = only(&project, "doom_loop");
    assert_eq!(doom["tool"], "Bash");
    assert_eq!(doom["repeats"], 3);
    assert_eq!(doom["action"], "kill");
    assert!(
        doom["input"]
            .as_str()
            .is_some_and(|i| i.contains("cargo test parser::tests::rejects_empty")),
        "{doom}"
    );
    assert_eq!(only(&project, "session_killed")["reason"], "doom_loop");
    let complete = only(&project, "session_complete");
    assert_eq!(complete["killed"], "doom_loop");
    // Killed at the third call, not after the other two.
    assert!(
        complete["tool_calls"].as_u64().is_some_and(|n| n < 5),
        "{complete}"
    );
    assert!(stdout_of(&output).contains("status=doom_loop tool=Bash repeats=3"));
    assert_no_session_left(&project);
}

#[test]
fn warn_only_records_the_doom_loop_once_per_streak() {
    let project = Project::new(&drip_config(
        "doom_loop.jsonl",
        0,
        "[guard]\non_doom_loop = \"warn\"\n",
    ));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    assert_eq!(only(&project, "doom_loop")["action"], "warn");
    assert!(project.events_named("session_killed").is_empty());
    let complete = only(&project, "session_complete");
    assert_eq!(complete["tool_calls"], 5);
    assert!(complete.get("killed").is_none(), "{complete}");
}

#[test]
fn a_threshold_of_zero_turns_detection_off() {
    let project = Project::new(&drip_config(
        "doom_loop.jsonl",
        0,
        "[guard]\ndoom_loop_threshold = 0\n",
    ));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    assert!(project.events_named("doom_loop").is_empty());
    assert_eq!(only(&project, "session_complete")["tool_calls"], 5);
}

#[test]
fn gate_pauses_the_session_and_an_approval_lets_it_finish() {
    let project = Project::new(&drip_config(
        "doom_loop.jsonl",
        1,
        "[guard]\non_doom_loop = \"gate\"\n",
    ));
    let clowder = project.spawn(&["--headless", "1"]);
    let request = wait_for_ask_request(&project);
    assert!(
        request["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("doom loop: Bash ×3 with the same input")),
        "{request}"
    );
    // While the human decides, the whole group is stopped.
    let pgid = only(&project, "session_start")["pgid"]
        .as_i64()
        .expect("pgid") as i32;
    assert!(
        wait_until(DEADLINE, || {
            let states = group_states(pgid);
            !states.is_empty() && states.iter().all(|s| *s == 'T')
        }),
        "group {pgid} not stopped: {:?}",
        group_states(pgid)
    );
    assert_eq!(project.status()["paused"], true);
    let id = request["id"].as_str().expect("id").to_string();
    assert_eq!(project.run(&["approve", &id]).status.code(), Some(0));
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    assert_eq!(only(&project, "doom_loop_gate")["approved"], true);
    assert!(project.events_named("session_killed").is_empty());
    // The streak started again after the approval: two more calls do not reach 3.
    assert_eq!(project.events_named("doom_loop").len(), 1);
    assert_eq!(only(&project, "session_complete")["tool_calls"], 5);
    assert_no_session_left(&project);
}

#[test]
fn gate_rejected_kills_the_session() {
    let project = Project::new(&drip_config(
        "doom_loop.jsonl",
        60,
        "[guard]\non_doom_loop = \"gate\"\n",
    ));
    let clowder = project.spawn(&["--headless", "1"]);
    let request = wait_for_ask_request(&project);
    let id = request["id"].as_str().expect("id").to_string();
    let rejected = project.run(&["reject", &id, "--reason", "it is stuck"]);
    assert_eq!(rejected.status.code(), Some(0));
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    let gate = only(&project, "doom_loop_gate");
    assert_eq!(gate["approved"], false);
    assert_eq!(gate["reason"], "it is stuck");
    assert_eq!(only(&project, "session_killed")["reason"], "doom_loop");
    assert_no_session_left(&project);
}

// ---------------------------------------------------------------------------
// Budgets
// ---------------------------------------------------------------------------

#[test]
fn a_session_over_its_tool_call_budget_is_stopped_and_the_loop_goes_on() {
    let project = Project::new(&drip_config(
        "six_reads.jsonl",
        60,
        "[guard]\nmax_tool_calls_per_session = 4\n",
    ));
    let output = project.run(&["--headless", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    let exceeded = project.events_named("budget_exceeded");
    assert_eq!(exceeded.len(), 2, "{exceeded:?}");
    for event in &exceeded {
        assert_eq!(event["budget"], "max_tool_calls_per_session");
        assert_eq!(event["limit"], 4.0);
        assert!(event["value"].as_f64().is_some_and(|v| v > 4.0), "{event}");
    }
    let killed = project.events_named("session_killed");
    assert_eq!(killed.len(), 2);
    assert!(killed.iter().all(|k| k["reason"] == "budget"));
    for complete in project.events_named("session_complete") {
        assert_eq!(complete["budget"]["budget"], "max_tool_calls_per_session");
    }
    // The count is the one seen at the poll that noticed (5 or 6 of the six calls).
    let stdout = stdout_of(&output);
    assert!(
        ["5", "6"].iter().any(|n| stdout.contains(&format!(
            "status=budget_exceeded max_tool_calls_per_session: {n} of 4"
        ))),
        "{stdout}"
    );
    assert_no_session_left(&project);
}

#[test]
fn a_session_over_its_cost_budget_is_stopped() {
    let project = Project::new(&drip_config(
        "cost_090.jsonl",
        60,
        "[guard]\nmax_cost_per_session_usd = 0.5\n",
    ));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    let exceeded = only(&project, "budget_exceeded");
    assert_eq!(exceeded["budget"], "max_cost_per_session_usd");
    assert_eq!(exceeded["value"], 0.9);
    assert_eq!(only(&project, "session_killed")["reason"], "budget");
    assert!(stdout_of(&output).contains("max_cost_per_session_usd: $0.90 of $0.50"));
    assert_no_session_left(&project);
}

#[test]
fn the_run_stops_with_exit_4_when_its_cost_budget_is_reached() {
    let project = Project::new(&fast_config(
        &["replay", &transcript("cost_040.jsonl")],
        "[guard]\nmax_cost_usd = 1.0\n",
    ));
    let output = project.run(&["--headless", "10"]);
    assert_eq!(output.status.code(), Some(4), "{}", context(&output));
    // 0.4 + 0.4 + 0.4 reaches 1.0 in the third session.
    assert_eq!(project.events_named("session_complete").len(), 3);
    let end = only(&project, "loop_end");
    assert_eq!(end["reason"]["budget_exceeded"]["budget"], "max_cost_usd");
    let exceeded = only(&project, "budget_exceeded");
    assert_eq!(exceeded["budget"], "max_cost_usd");
    assert!(
        exceeded["value"]
            .as_f64()
            .is_some_and(|v| (v - 1.2).abs() < 1e-9)
    );
    assert!(
        stdout_of(&output).contains("max_cost_usd: $1.20 of $1.00"),
        "{}",
        stdout_of(&output)
    );
    assert_eq!(project.status()["state"], "stopped");
}

#[test]
fn the_run_stops_with_exit_4_at_its_runtime_budget() {
    let project = Project::new(&fast_config(&["hang"], "[guard]\nmax_runtime = \"2s\"\n"));
    let output = project.run(&["--headless", "5"]);
    assert_eq!(output.status.code(), Some(4), "{}", context(&output));
    let exceeded = only(&project, "budget_exceeded");
    assert_eq!(exceeded["budget"], "max_runtime");
    assert_eq!(exceeded["limit"], 2.0);
    assert_eq!(only(&project, "session_killed")["reason"], "budget");
    assert_eq!(
        only(&project, "loop_end")["reason"]["budget_exceeded"]["budget"],
        "max_runtime"
    );
    assert_no_session_left(&project);
}

#[test]
fn the_runtime_budget_also_ends_a_wait_between_sessions() {
    // A long pause between sessions: the budget ends the loop during it.
    let project = Project::new(&format!(
        "[agent]\ncommand = {:?}\nargs = [\"normal\"]\n\n[backoff]\ninitial_delay_secs = 600\n\n[guard]\nmax_runtime = \"2s\"\n",
        fake_agent().display().to_string()
    ));
    let output = project.run(&["--headless", "5"]);
    assert_eq!(output.status.code(), Some(4), "{}", context(&output));
    assert_eq!(project.events_named("session_complete").len(), 1);
    assert!(project.events_named("session_killed").is_empty());
    assert_eq!(only(&project, "budget_exceeded")["budget"], "max_runtime");
}

// ---------------------------------------------------------------------------
// Continuation and handoff
// ---------------------------------------------------------------------------

fn prompt_config(extra: &str) -> String {
    fast_config(&["prompt", "{prompt}"], extra)
}

fn session_output(project: &Project, index: usize) -> String {
    let files = project.output_files();
    std::fs::read_to_string(&files[index]).expect("read output")
}

#[test]
fn the_continuation_goes_before_the_prompt_from_the_second_session_on() {
    let project = Project::new(&prompt_config(
        "[prompt]\ncontinuation = \"Keep going from where the last session stopped.\"\n",
    ));
    let output = project.run(&["--headless", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    let first = session_output(&project, 0);
    assert!(first.starts_with("Fix the failing test.\n"), "{first}");
    assert!(!first.contains("Keep going"));
    let second = session_output(&project, 1);
    assert!(
        second.starts_with(
            "Keep going from where the last session stopped.\n---\nFix the failing test.\n"
        ),
        "{second}"
    );
}

#[test]
fn a_continuation_in_replace_mode_is_sent_instead_of_the_prompt() {
    let project = Project::new(&prompt_config(
        "[prompt]\ncontinuation = \"Keep going.\"\ncontinuation_mode = \"replace\"\n",
    ));
    let output = project.run(&["--headless", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    assert!(session_output(&project, 0).starts_with("Fix the failing test.\n"));
    let second = session_output(&project, 1);
    assert!(second.starts_with("Keep going.\n{"), "{second}");
    assert!(!second.contains("Fix the failing test."));
}

#[test]
fn the_handoff_is_put_before_the_prompt_in_the_documented_layout() {
    let project = Project::new(&prompt_config(
        "[prompt]\nhandoff_file = \"state/handoff.json\"\n",
    ));
    std::fs::create_dir(project.path("state")).expect("mkdir");
    project.write(
        "state/handoff.json",
        r#"{"phase": "implementation", "completed": ["parser", "tests"], "next_step": "wire the CLI",
           "critical_files": ["src/cli.rs"], "memory_notes": "run cargo fmt first", "agent_private": {"x": 1}}"#,
    );
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    let text = session_output(&project, 0);
    assert!(
        text.starts_with(
            "## Handoff from the previous session\nPhase: implementation\nCompleted:\n- parser\n- tests\nNext step: wire the CLI\nCritical files:\n- src/cli.rs\nMemory notes:\n- run cargo fmt first\n---\nFix the failing test.\n"
        ),
        "{text}"
    );
    assert!(project.events_named("handoff_invalid").is_empty());
}

#[test]
fn a_malformed_handoff_is_reported_and_skipped_never_fatal() {
    let project = Project::new(&prompt_config(
        "[prompt]\nhandoff_file = \"handoff.json\"\n",
    ));
    project.write("handoff.json", "{\"phase\": \"tests\", \"completed\": 3}");
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", context(&output));
    assert!(session_output(&project, 0).starts_with("Fix the failing test.\n"));
    let invalid = only(&project, "handoff_invalid");
    assert!(
        invalid["error"]
            .as_str()
            .is_some_and(|e| e.contains("key `completed`: expected a list of strings")),
        "{invalid}"
    );
    assert!(stdout_of(&output).contains("the session starts without it"));
    // The agent's file is left as it was.
    assert_eq!(
        project.read("handoff.json"),
        "{\"phase\": \"tests\", \"completed\": 3}"
    );
}

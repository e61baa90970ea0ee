//! `[guard]` on output written all at once: budgets and doom loops are judged one
//! tool call at a time, whether the output is read while the agent runs or after
//! it exited.

use crate::common;

use common::*;
use serde_json::Value;

const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5","tools":["Bash","Read"],"cwd":"/tmp"}"#;

/// `count` tool calls, each in its own assistant message; `same` makes them all
/// the same call.
fn calls(count: usize, same: bool) -> String {
    let mut out = format!("{INIT}\n");
    for i in 1..=count {
        let path = if same { 0 } else { i };
        out.push_str(&format!(
            r#"{{"type":"assistant","message":{{"id":"msg_{i}","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"toolu_{i}","name":"Read","input":{{"file_path":"/src/f{path}.rs"}}}}],"usage":{{"input_tokens":4,"output_tokens":6}}}},"session_id":"s1"}}"#
        ));
        out.push('\n');
    }
    out
}

/// A project whose agent writes `transcript` in one write, then sleeps `hang` s.
fn burst_project(transcript: &str, hang: u32, guard: &str) -> Project {
    let project = Project::new("");
    let file = project.path("burst.jsonl");
    std::fs::write(&file, transcript).expect("write the transcript");
    let config = fast_config(
        &["burst", &file.to_string_lossy(), &hang.to_string()],
        &format!("[guard]\n{guard}\n"),
    );
    std::fs::write(project.path("harness.toml"), config).expect("write harness.toml");
    project
}

fn only(project: &Project, event: &str) -> Value {
    let events = project.events_named(event);
    assert_eq!(events.len(), 1, "{event}: {events:?}");
    events[0].clone()
}

#[test]
fn forty_calls_written_at_once_stop_a_running_session_at_the_31st() {
    let project = burst_project(&calls(40, false), 60, "max_tool_calls_per_session = 30");
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let exceeded = only(&project, "budget_exceeded");
    assert_eq!(exceeded["budget"], "max_tool_calls_per_session");
    assert_eq!(exceeded["value"], 31.0, "{exceeded}");
    assert_eq!(only(&project, "session_killed")["reason"], "budget");
}

#[test]
fn forty_calls_read_after_the_exit_break_the_budget_at_the_31st() {
    let project = burst_project(&calls(40, false), 0, "max_tool_calls_per_session = 30");
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let exceeded = only(&project, "budget_exceeded");
    assert_eq!(exceeded["value"], 31.0, "{exceeded}");
    let complete = only(&project, "session_complete");
    assert_eq!(complete["budget"]["budget"], "max_tool_calls_per_session");
}

#[test]
fn a_doom_loop_read_after_the_exit_is_recorded() {
    let project = burst_project(&calls(5, true), 0, "doom_loop_threshold = 3");
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let doom = only(&project, "doom_loop");
    assert_eq!(doom["tool"], "Read");
    assert_eq!(doom["repeats"], 3);
    assert!(
        stdout_of(&output).contains("status=doom_loop tool=Read repeats=3"),
        "{}",
        stdout_of(&output)
    );
}

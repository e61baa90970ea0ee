//! Each session's output is read on a thread of its own, `clowder-reader`, that
//! lives as long as its session: one while a session runs, none left behind when
//! it ended, however it ended.

use crate::common;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::*;

const THREAD_NAME: &str = "clowder-reader";

/// Counts clowder's reader threads every few milliseconds until it exits; returns
/// the most seen at once, and its output.
fn watch_reader_threads(mut child: Child, deadline: Duration) -> (usize, Output) {
    let pid = child.id();
    let start = Instant::now();
    let mut most = 0;
    while child.try_wait().expect("try_wait").is_none() && start.elapsed() < deadline {
        most = most.max(threads_named(pid, THREAD_NAME));
        std::thread::sleep(Duration::from_millis(5));
    }
    (most, wait_with_deadline(child, Duration::from_secs(30)))
}

#[test]
fn one_reader_thread_per_session_and_none_left_after_it() {
    let project = Project::new(&fast_config(&["slow", "1"], ""));
    let child = project.spawn(&["--headless", "3"]);
    let (most, output) = watch_reader_threads(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(project.events_named("session_complete").len(), 3);
    assert_eq!(most, 1, "reader threads at once, over three sessions");
}

#[test]
fn a_killed_sessions_reader_thread_ends_with_it() {
    let project = Project::new(&fast_config(
        &["hang"],
        "[watchdog]\nstale_timeout_mins = 0.02\ncheck_interval_secs = 0.1\n",
    ));
    // Each hung session did nothing: no retries, two sessions.
    let child = project.spawn(&["--headless", "2", "--retries", "0"]);
    let (most, output) = watch_reader_threads(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(project.events_named("watchdog_kill").len(), 2);
    assert_eq!(most, 1, "reader threads at once, over two killed sessions");
}

/// `filler_mb` MB of assistant text, then `calls` tool calls (each a new call),
/// as one stream-json transcript.
fn flood_then_calls(filler_mb: usize, calls: usize) -> String {
    let text = r#"{"type":"assistant","message":{"id":"msg_0","content":[{"type":"text","text":"0123456789012345678901234567890123456789012345678901234567890123456789"}]}}"#;
    let mut out = String::with_capacity(filler_mb * 1_000_000 + calls * 200);
    while out.len() < filler_mb * 1_000_000 {
        out.push_str(text);
        out.push('\n');
    }
    for i in 1..=calls {
        out.push_str(&format!(
            r#"{{"type":"assistant","message":{{"id":"msg_{i}","content":[{{"type":"tool_use","id":"toolu_{i}","name":"Read","input":{{"file_path":"/src/f{i}.rs"}}}}]}}}}"#
        ));
        out.push('\n');
    }
    out
}

#[test]
fn calls_after_a_flood_are_judged_while_the_agent_runs() {
    // Far more than was once read per look, written at once: all of it is read
    // before the agent's pause ends, so the session is stopped, not judged late.
    let project = Project::new("");
    let file = project.path("flood.jsonl");
    std::fs::write(&file, flood_then_calls(32, 40)).expect("write the transcript");
    let config = fast_config(
        &["burst", &file.to_string_lossy(), "20"],
        "[guard]\nmax_tool_calls_per_session = 30\n",
    );
    std::fs::write(project.path("harness.toml"), config).expect("write harness.toml");
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let exceeded = project.events_named("budget_exceeded");
    assert_eq!(exceeded.len(), 1, "{exceeded:?}");
    assert_eq!(exceeded[0]["value"], 31.0);
    let killed = project.events_named("session_killed");
    assert_eq!(killed.len(), 1, "stopped while it ran: {killed:?}");
    assert_eq!(killed[0]["reason"], "budget");
}

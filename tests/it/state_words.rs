//! One vocabulary for a loop's state: `clowder lanes --json`, `clowder lanes`
//! and `clowder --status` (with lanes and without) give each state the same
//! word, from status files written by hand.

use crate::common;

use std::path::Path;

use common::git::{clowder_command, clowder_in, init_with_one_commit};
use common::{Project, fast_config, stdout_of};
use serde_json::Value;

/// A status file: a loop at iteration 3 of 10 in `state`, written by clowder `pid`;
/// `extra` overrides fields.
fn status(pid: u32, state: &str, extra: &[(&str, Value)]) -> String {
    let mut value = serde_json::json!({
        "lane": 0, "pid": pid, "state": state, "agent_command": "claude",
        "stale_timeout_secs": 1200.0, "paused": false, "paused_at": null,
        "stop_pending": false, "iteration": 3, "max_iterations": 10,
        "global_iteration": 17, "output_file": null, "output_bytes": 0,
        "loop_start": "2026-01-01T00:00:00Z", "session_start": null,
        "last_output_growth": null, "last_update": "2026-01-01T01:00:00Z",
        "last_completed_iteration": 3, "last_completed_global": 17,
        "last_committed": true, "last_exit_code": 0, "consecutive_rate_limits": 0,
        "pgid": null, "agent_pid": null, "next_session_at": null,
        "rate_limit_resets_at": null,
        "counters": {"sessions": 3, "productive": 3, "empty_retries": 0,
            "empty_iterations": 0, "rate_limits": 0, "watchdog_kills": 0,
            "user_kills": 0, "hook_failures": 0, "commits": 2},
        "exit_reason": null, "totals": {"cost_usd": 0.5}
    });
    for (key, field) in extra {
        value[*key] = field.clone();
    }
    value.to_string()
}

/// This test's own process: alive, so a status "written" by it is a live loop's.
fn alive() -> u32 {
    std::process::id()
}

/// A PID no process has (above the kernel's largest).
const GONE: u32 = 4_194_305;

fn ended(reason: &str) -> Vec<(&'static str, Value)> {
    vec![("exit_reason", Value::from(reason))]
}

fn failed() -> Vec<(&'static str, Value)> {
    let mut fields = ended("max_iterations");
    fields.push(("last_exit_code", Value::from(1)));
    fields.push((
        "counters",
        serde_json::json!({"sessions": 3, "productive": 0, "empty_retries": 0,
            "empty_iterations": 0, "rate_limits": 0, "watchdog_kills": 0,
            "user_kills": 0, "hook_failures": 0, "commits": 0, "failed_exits": 3}),
    ));
    fields
}

/// A repository with one lane per `(name, status file)`; `None`: never run.
fn fleet(lanes: &[(&str, Option<String>)]) -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    std::fs::write(root.join("harness.toml"), fast_config(&["normal"], "")).expect("write");
    for (name, status) in lanes {
        clowder_in(root, &["lane", "add", name]);
        if let Some(status) = status {
            let dir = root.join(".clowder/lanes").join(name);
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("harness.status"), status).expect("write");
        }
    }
    repo
}

fn run(root: &Path, args: &[&str]) -> String {
    let output = clowder_command(root, args).output().expect("run clowder");
    assert!(output.status.success(), "clowder {args:?}: {output:?}");
    stdout_of(&output)
}

#[test]
fn lanes_json_and_status_give_every_state_its_one_word() {
    let backoff = [("next_session_at", Value::from("2026-01-01T02:00:00Z"))];
    let paused = [("paused", Value::from(true))];
    let lanes = [
        ("run", Some(status(alive(), "session_running", &[]))),
        ("ask", Some(status(alive(), "awaiting_approval", &[]))),
        ("rest", Some(status(alive(), "session_running", &paused))),
        ("wait", Some(status(alive(), "session_running", &[]))),
        (
            "later",
            Some(status(alive(), "rate_limited_backoff", &backoff)),
        ),
        (
            "fine",
            Some(status(GONE, "stopped", &ended("max_iterations"))),
        ),
        ("bad", Some(status(GONE, "stopped", &failed()))),
        ("halt", Some(status(GONE, "stopped", &ended("user_stop")))),
        ("gone", Some(status(GONE, "session_running", &[]))),
        ("new", None),
    ];
    let repo = fleet(&lanes);
    let root = repo.path();
    std::fs::write(root.join(".clowder/lanes/wait/queued"), "").expect("write");

    let rows: Vec<Value> =
        serde_json::from_str(&run(root, &["lanes", "--json"])).expect("lanes --json");
    let states: Vec<&str> = rows
        .iter()
        .map(|r| r["state"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        states,
        [
            "running",
            "waiting",
            "paused",
            "queued",
            "backing off",
            "done",
            "failed",
            "stopped",
            "stopped",
            "not started"
        ]
    );
    // The loop's own state stays readable, for scripts that used it.
    assert_eq!(rows[0]["loop_state"], "session_running");
    assert_eq!(rows[8]["loop_state"], "session_running");
    assert_eq!(rows[8]["running"], false);
    assert_eq!(rows[9]["loop_state"], Value::Null);

    let table = run(root, &["lanes"]);
    let words: Vec<String> = table
        .lines()
        .skip(1)
        .take(lanes.len())
        .map(|line| line.split_whitespace().nth(1).unwrap_or("?").to_string())
        .collect();
    assert_eq!(
        words,
        [
            "running", "waiting", "paused", "queued", "backing", "done", "failed", "stopped",
            "stopped", "not"
        ],
        "{table}"
    );

    let text = run(root, &["--status"]);
    for line in [
        "lane=run state=running ",
        "lane=wait state=queued ",
        "lane=later state=backing off ",
        "lane=fine state=done ",
        "lane=bad state=failed (exit 1) ",
        "lane=halt state=stopped ",
        "lane=gone state=stopped ",
        "lane=new state=not started requested=active",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
}

#[test]
fn status_of_one_loop_says_done_or_failed_with_its_exit_code() {
    let project = Project::new(&fast_config(&["normal"], ""));
    project.write(
        "harness.status",
        &status(GONE, "stopped", &ended("max_iterations")),
    );
    let text = stdout_of(&project.run(&["--status"]));
    assert!(text.contains("State: ✓ done [stopped]"), "{text}");

    project.write("harness.status", &status(GONE, "stopped", &failed()));
    let text = stdout_of(&project.run(&["--status"]));
    assert!(
        text.contains("State: ✗ failed (exit 1) [stopped]"),
        "{text}"
    );

    project.write("harness.status", &status(alive(), "session_running", &[]));
    let text = stdout_of(&project.run(&["--status"]));
    assert!(
        text.contains("State: ● running [session_running]"),
        "{text}"
    );
}

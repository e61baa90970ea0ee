//! `[approvals] allow` and `deny` rules decide a tool call without a human; what
//! no rule covers is asked; a broken config denies.

use crate::common;

use std::io::Write;
use std::process::Stdio;

use common::*;

fn gate(
    project: &Project,
    tool: &str,
    input: serde_json::Value,
    extra: &[&str],
) -> std::process::Output {
    let hook = serde_json::json!({
        "session_id": "s-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": project.root().display().to_string(),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_1",
    });
    let mut args = vec!["gate"];
    args.extend_from_slice(extra);
    let mut command = project.command(&args);
    command.stdin(Stdio::piped());
    let mut child = command.spawn().expect("spawn gate");
    // A gate that refuses early (a broken config) may not read its input.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(hook.to_string().as_bytes());
    wait_with_deadline(child, DEADLINE)
}

const RULES: &str = r#"
[approvals]
allow = [{ tool = "Bash", prefix = "cargo test" }, { tool = "Read" }, { tool = "Bash", pattern = "^git (status|diff)" }]
deny = [{ tool = "Bash", pattern = "rm -rf" }, { tool = "Edit|Write", pattern = "\\.env$" }]
"#;

#[test]
fn rules_decide_without_a_human_deny_first() {
    let project = Project::new(RULES);
    let cases = [
        (
            "Bash",
            serde_json::json!({"command": "cargo test --all"}),
            "allow",
            "allowed by the rule tool `Bash` starting with \"cargo test\" in [approvals] allow",
        ),
        (
            "Read",
            serde_json::json!({"file_path": "src/main.rs"}),
            "allow",
            "allowed by the rule tool `Read` in [approvals] allow",
        ),
        (
            "Bash",
            serde_json::json!({"command": "git status"}),
            "allow",
            "allowed by the rule tool `Bash` matching /^git (status|diff)/ in [approvals] allow",
        ),
        // Allowed by prefix, but a deny rule matches too: deny wins.
        (
            "Bash",
            serde_json::json!({"command": "cargo test && rm -rf /"}),
            "deny",
            "denied by the rule tool `Bash` matching /rm -rf/ in [approvals] deny",
        ),
        (
            "Write",
            serde_json::json!({"file_path": "config/.env", "content": "x"}),
            "deny",
            "denied by the rule tool `Edit|Write` matching /\\.env$/ in [approvals] deny",
        ),
    ];
    for (tool, input, expected, reason) in cases {
        let output = gate(&project, tool, input.clone(), &[]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert_eq!(
            gate_answer(&output),
            (expected.to_string(), reason.to_string()),
            "{tool} {input}"
        );
    }
    // Nothing was queued for a human.
    let listed = project.run(&["queue", "--json"]);
    let pending: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("queue json");
    assert_eq!(pending.as_array().map(Vec::len), Some(0), "{pending}");
}

#[test]
fn a_call_no_rule_covers_is_asked_and_times_out_as_a_denial() {
    let project = Project::new(RULES);
    let output = gate(
        &project,
        "Bash",
        serde_json::json!({"command": "make deploy"}),
        &["--timeout", "1s"],
    );
    assert_eq!(output.status.code(), Some(0));
    let (decision, reason) = gate_answer(&output);
    assert_eq!(decision, "deny");
    assert!(reason.starts_with("timed out after 1s"), "{reason}");
}

#[test]
fn the_configured_timeout_applies_when_no_flag_is_given() {
    let project = Project::new("[approvals]\ntimeout = \"1s\"\n");
    let output = gate(
        &project,
        "Bash",
        serde_json::json!({"command": "make deploy"}),
        &[],
    );
    let (decision, reason) = gate_answer(&output);
    assert_eq!(decision, "deny");
    assert!(reason.starts_with("timed out after 1s"), "{reason}");
}

#[test]
fn a_broken_config_denies_with_exit_2() {
    let project = Project::new("[approvals]\nallow = [{ tool = \"(\" }]\n");
    let output = gate(&project, "Bash", serde_json::json!({"command": "ls"}), &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = stderr_of(&output);
    assert!(stderr.contains("harness.toml:2:"), "{stderr}");
    assert!(stderr.contains("approvals.allow[0].tool"), "{stderr}");
    assert!(stderr.contains("the tool call is denied"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn the_queue_folder_comes_from_the_config() {
    let project = Project::new("[approvals]\ndir = \"queue\"\ntimeout = \"1s\"\n");
    let output = gate(
        &project,
        "Bash",
        serde_json::json!({"command": "make"}),
        &[],
    );
    assert_eq!(gate_answer(&output).0, "deny");
    assert!(project.path("queue/done").is_dir());
    assert!(!project.path(".clowder/approvals").exists());
}

#[test]
fn the_gate_denies_at_its_timeout_even_when_the_loop_dies_mid_wait() {
    let project = Project::new(&fast_config(
        &["hang"],
        "[watchdog]\nstale_timeout_mins = 10\n\n[approvals]\ntimeout = \"2s\"\n",
    ));
    let mut clowder = project.spawn(&["--headless", "1"]);
    assert!(wait_until(DEADLINE, || !project
        .events_named("session_start")
        .is_empty()));
    let gate_started = std::time::Instant::now();
    let hook = serde_json::json!({"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "hook_event_name": "PreToolUse"});
    let mut command = project.command(&["gate"]);
    command.stdin(Stdio::piped());
    let mut gate = command.spawn().expect("spawn gate");
    let _ = gate
        .stdin
        .take()
        .expect("stdin")
        .write_all(hook.to_string().as_bytes());
    // The loop (and with it any control room) dies while the gate waits.
    clowder.kill().expect("kill clowder");
    let _ = clowder.wait();
    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(0));
    let (decision, reason) = gate_answer(&output);
    assert_eq!(decision, "deny");
    assert!(reason.starts_with("timed out after 2s"), "{reason}");
    assert!(gate_started.elapsed() >= std::time::Duration::from_secs(2));
}

//! `A` in the control room (approve and always allow), end to end in a real
//! terminal: it writes one rule per simple command of the call and says what the
//! rules cover; for a call a rule can never allow it approves once and says why.

use crate::common;

use common::tmux::Tmux;
use common::*;

fn hook(command: &str) -> String {
    serde_json::json!({
        "session_id": "s-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/work/project",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command },
        "tool_use_id": "toolu_1",
    })
    .to_string()
}

fn decision(project: &Project, file: &str) -> Option<(String, String)> {
    let text = std::fs::read_to_string(project.path(file)).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let out = &value["hookSpecificOutput"];
    let field = |key: &str| out[key].as_str().map(str::to_string);
    Some((
        field("permissionDecision")?,
        field("permissionDecisionReason")?,
    ))
}

#[test]
fn a_writes_a_rule_per_simple_command_and_says_what_it_covers() {
    let project = Project::new(
        "[agent]\ncommand = \"./agent.sh\"\nargs = []\n\n[watchdog]\nstale_timeout_mins = 10\n",
    );
    let calls = [
        "cargo build && cargo test --lib",
        "cargo test --lib -q; cargo build --release",
        "cargo test $(id)",
    ];
    let mut script = format!("#!/usr/bin/env bash\n{} normal 1\n", fake_agent().display());
    for (n, call) in calls.iter().enumerate() {
        project.write(&format!("hook-{n}.json"), &hook(call));
        script.push_str(&format!(
            "{} gate --timeout 60s < hook-{n}.json > answer-{n}.json 2>/dev/null\n",
            clowder_bin().display()
        ));
    }
    project.write("agent.sh", &script);
    let mut permissions = std::fs::metadata(project.path("agent.sh"))
        .expect("agent.sh")
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(project.path("agent.sh"), permissions).expect("chmod");
    let command = format!(
        "{} 1; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(project.root(), &command, 220, 50);

    tmux.wait_for("▶ Bash  cargo build && cargo test --lib");
    tmux.keys(&["A"]);
    // The events pane, zoomed, shows the whole confirmation.
    tmux.wait_for("always allowed: Bash");
    tmux.keys(&["Tab", "Tab", "Tab", "Tab", "z"]);
    tmux.wait_for(
        "always allowed: Bash commands whose words start with `cargo build` or `cargo test --lib`; each part of a chain is checked on its own",
    );
    tmux.keys(&["z"]);
    assert!(wait_until(DEADLINE, || decision(&project, "answer-0.json")
        .is_some_and(|d| d.0 == "allow")));
    let config = project.read("harness.toml");
    assert!(
        config.contains("{ tool = \"Bash\", prefix = \"cargo build\" }"),
        "{config}"
    );
    assert!(
        config.contains("{ tool = \"Bash\", prefix = \"cargo test --lib\" }"),
        "{config}"
    );

    // The next chain is covered part by part: nobody is asked.
    assert!(wait_until(DEADLINE, || decision(&project, "answer-1.json").is_some()));
    let (verdict, reason) = decision(&project, "answer-1.json").expect("answer");
    assert_eq!(verdict, "allow");
    assert!(reason.starts_with("allowed by the rules "), "{reason}");

    // A command substitution: approved this once, no rule written.
    tmux.wait_for("▶ Bash  cargo test $(id)");
    tmux.keys(&["A"]);
    tmux.wait_for("approved once; no rule");
    tmux.keys(&["z"]);
    tmux.wait_for(
        "approved once; no rule written: a rule can never allow command substitution `$(…)`",
    );
    tmux.keys(&["z"]);
    assert!(wait_until(DEADLINE, || decision(&project, "answer-2.json")
        .is_some_and(|d| d.0 == "allow")));
    assert_eq!(project.read("harness.toml"), config);
    tmux.wait_for("✓ done: max_iterations");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
}

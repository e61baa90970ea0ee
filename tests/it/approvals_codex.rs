//! The approval gate for Codex through the real binary: `clowder init
//! --codex-hook [--write]` and the project's `.codex/config.toml`; `clowder gate`
//! fed Codex's PreToolUse JSON for `Bash` and for `apply_patch` (each file the
//! patch touches judged by the path rules); the gate a loop hands its Codex on
//! the command line; and a Codex that cannot run it said to be ungated.

use crate::common;

use std::io::Write;
use std::process::{Child, Output, Stdio};

use common::*;

/// A PreToolUse input as Codex 0.124+ sends it.
fn codex_input(cwd: &str, tool: &str, command: &str) -> String {
    serde_json::json!({
        "session_id": "019a0000-0000-7000-8000-000000000000",
        "turn_id": "1",
        "transcript_path": null,
        "cwd": cwd,
        "hook_event_name": "PreToolUse",
        "model": "gpt-5.1-codex",
        "permission_mode": "bypassPermissions",
        "tool_name": tool,
        "tool_input": {"command": command},
        "tool_use_id": "call_7Xw2"
    })
    .to_string()
}

fn spawn_gate(project: &Project, tool: &str, command: &str) -> Child {
    let cwd = project.root().display().to_string();
    let mut child = project
        .command(&["gate"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(codex_input(&cwd, tool, command).as_bytes())
        .expect("write stdin");
    drop(pipe);
    child
}

fn gate(project: &Project, tool: &str, command: &str) -> Output {
    wait_with_deadline(spawn_gate(project, tool, command), DEADLINE)
}

fn pending(project: &Project) -> Vec<serde_json::Value> {
    let output = project.run(&["queue", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    serde_json::from_str(&stdout_of(&output)).expect("queue --json")
}

const RULES: &str = r#"
[approvals]
timeout = "1m"
allow = [
  { tool = "Bash", prefix = "cargo test" },
  { tool = "Write", prefix = "src" },
  { tool = "Edit", prefix = "docs" },
]
deny = [{ tool = "Edit|Write", pattern = "\\.env$" }]
"#;

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

#[test]
fn the_gate_judges_codex_shell_commands_and_each_file_of_a_patch() {
    let project = Project::new(RULES);
    let output = gate(&project, "Bash", "cargo test --lib");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let (decision, reason) = gate_answer(&output);
    assert_eq!(decision, "allow", "{reason}");

    // Every file covered (one by a Write rule, one by an Edit rule): allowed.
    let both = patch(
        "*** Add File: src/new.rs\n+fn main() {}\n*** Update File: docs/guide.md\n@@\n-old\n+new\n",
    );
    let output = gate(&project, "apply_patch", &both);
    let (decision, reason) = gate_answer(&output);
    assert_eq!(decision, "allow", "{reason}");
    assert!(
        reason.contains("tool `Write`") && reason.contains("tool `Edit`"),
        "{reason}"
    );

    // One denied file denies the whole patch, however covered the rest is.
    let secret = patch("*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Delete File: src/.env\n");
    let output = gate(&project, "apply_patch", &secret);
    let (decision, reason) = gate_answer(&output);
    assert_eq!(decision, "deny", "{reason}");
    assert!(reason.contains("delete `src/.env`"), "{reason}");
    assert!(pending(&project).is_empty());
}

#[test]
fn a_patch_no_rule_covers_waits_showing_its_files_and_a_rejection_reaches_codex() {
    let project = Project::new(RULES);
    let moved = patch("*** Update File: src/a.rs\n*** Move to: lib/a.rs\n@@\n-x\n+y\n");
    let child = spawn_gate(&project, "apply_patch", &moved);
    let mut listed = Vec::new();
    assert!(
        wait_until(DEADLINE, || {
            listed = pending(&project);
            listed.len() == 1
        }),
        "the patch was not queued"
    );
    assert_eq!(listed[0]["tool_name"], "apply_patch");
    assert_eq!(listed[0]["subject"], "update src/a.rs → lib/a.rs");
    assert_eq!(listed[0]["tool_input"]["command"], moved.as_str());
    let table = project.run(&["queue"]);
    assert!(
        stdout_of(&table).contains("apply_patch update src/a.rs → lib/a.rs"),
        "{}",
        stdout_of(&table)
    );

    let id = listed[0]["id"].as_str().expect("id").to_string();
    let reject = project.run(&["reject", &id, "--reason", "keep src/a.rs where it is"]);
    assert_eq!(reject.status.code(), Some(0), "{}", stderr_of(&reject));
    let output = wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(
        gate_answer(&output),
        ("deny".to_string(), "keep src/a.rs where it is".to_string())
    );
}

#[test]
fn an_unreadable_patch_is_asked_never_allowed_by_a_rule() {
    let project = Project::new(
        "[approvals]\ntimeout = \"1m\"\nallow = [{ tool = \"apply_patch\", pattern = \".\" }]\n",
    );
    for bad in [
        "rm -rf /",
        "*** Begin Patch\n*** Frobnicate File: src/a.rs\n*** End Patch",
        "*** Begin Patch\n*** Add File: src/a.rs\n+x\n",
    ] {
        let child = spawn_gate(&project, "apply_patch", bad);
        let mut listed = Vec::new();
        assert!(
            wait_until(DEADLINE, || {
                listed = pending(&project);
                listed.len() == 1
            }),
            "{bad:?} was not asked"
        );
        let subject = listed[0]["subject"].as_str().unwrap_or_default();
        assert!(subject.starts_with("unreadable patch ("), "{subject}");
        let id = listed[0]["id"].as_str().expect("id").to_string();
        let approve = project.run(&["approve", &id]);
        assert_eq!(approve.status.code(), Some(0), "{}", stderr_of(&approve));
        let output = wait_with_deadline(child, DEADLINE);
        assert_eq!(gate_answer(&output).0, "allow");
    }
}

#[test]
fn init_prints_the_codex_hook_with_clowder_s_absolute_path_and_the_trust_it_needs() {
    let project = Project::new("");
    let output = project.run(&["init", "--codex-hook"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let text = stdout_of(&output);
    let parsed: toml::Table = toml::from_str(&text).expect("the snippet is TOML");
    let group = &parsed["hooks"]["PreToolUse"][0];
    assert_eq!(group["matcher"].as_str(), Some("Bash|apply_patch"));
    let handler = &group["hooks"][0];
    assert_eq!(handler["type"].as_str(), Some("command"));
    assert_eq!(
        handler["command"].as_str(),
        Some(format!("{} gate", clowder_bin().display()).as_str())
    );
    assert_eq!(handler["timeout"].as_integer(), Some(600));
    assert!(text.contains("--dangerously-bypass-hook-trust"), "{text}");
    assert!(text.contains("/hooks"), "{text}");
    assert!(!project.path(".codex").exists());
}

const USER_CONFIG: &str = r#"# Codex settings for this project
model = "gpt-5.1-codex"   # the model we pay for

[features]
hooks = true

# Log every finished turn.
[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "./scripts/log-turn.sh"

[profiles.fast]
model_reasoning_effort = "low"
"#;

#[test]
fn write_merges_the_hook_keeping_every_comment_and_setting() {
    let project = Project::new("");
    std::fs::create_dir_all(project.path(".codex")).expect("mkdir");
    project.write(".codex/config.toml", USER_CONFIG);
    let output = project.run(&["init", "--codex-hook", "--write"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("--dangerously-bypass-hook-trust"),
        "{}",
        stdout_of(&output)
    );
    let written = project.read(".codex/config.toml");
    // Every line of the user's, comments included, is still there, in order.
    let mut lines = written.lines();
    for line in USER_CONFIG.lines() {
        assert!(lines.any(|l| l == line), "lost {line:?}:\n{written}");
    }
    let parsed: toml::Table = toml::from_str(&written).expect("still TOML");
    assert_eq!(parsed["model"].as_str(), Some("gpt-5.1-codex"));
    assert_eq!(
        parsed["hooks"]["Stop"][0]["hooks"][0]["command"].as_str(),
        Some("./scripts/log-turn.sh")
    );
    assert_eq!(
        parsed["profiles"]["fast"]["model_reasoning_effort"].as_str(),
        Some("low")
    );
    let command = format!("{} gate", clowder_bin().display());
    assert_eq!(
        parsed["hooks"]["PreToolUse"][0]["hooks"][0]["command"].as_str(),
        Some(command.as_str())
    );

    // Twice: nothing changes.
    let output = project.run(&["init", "--codex-hook", "--write"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("nothing changed"));
    assert_eq!(project.read(".codex/config.toml"), written);
}

#[test]
fn write_refuses_a_malformed_config_naming_file_and_line_and_leaves_it() {
    let project = Project::new("");
    std::fs::create_dir_all(project.path(".codex")).expect("mkdir");
    let broken = "model = \"o3\"\n\n[hooks\nx = 1\n";
    project.write(".codex/config.toml", broken);
    let output = project.run(&["init", "--codex-hook", "--write"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = stderr_of(&output);
    assert!(stderr.contains(".codex/config.toml:3:"), "{stderr}");
    assert!(stderr.contains("it was not changed"), "{stderr}");
    assert_eq!(project.read(".codex/config.toml"), broken);

    let not_a_table = "hooks = \"none\"\n";
    project.write(".codex/config.toml", not_a_table);
    let output = project.run(&["init", "--codex-hook", "--write"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("`hooks` is not a table"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(project.read(".codex/config.toml"), not_a_table);
}

/// A project whose agent is a program named `codex` (the fake agent) given
/// `args` (`exec` first, as a loop runs Codex), with an empty Codex home so that
/// no user-wide hook or trust counts.
fn codex_project(args: &[&str]) -> (Project, tempfile::TempDir) {
    let project = Project::new("");
    std::os::unix::fs::symlink(fake_agent(), project.path("codex")).expect("symlink");
    set_codex_args(&project, args);
    (project, tempfile::tempdir().expect("codex home"))
}

fn set_codex_args(project: &Project, args: &[&str]) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["normal", "2"]);
    let config = fast_config(&all, "").replace(
        &format!("{:?}", fake_agent().display().to_string()),
        &format!("{:?}", project.path("codex").display().to_string()),
    );
    project.write("harness.toml", &config);
}

fn run_in(project: &Project, home: &tempfile::TempDir, args: &[&str]) -> Output {
    let child = project
        .command(args)
        .env("CODEX_HOME", home.path())
        .env("HOME", home.path())
        .spawn()
        .expect("spawn clowder");
    wait_with_deadline(child, DEADLINE)
}

/// Runs one session; returns why the loop said it was ungated (`None`: it did
/// not), checking that the start warning, the status file and `--status` agree.
fn ungated(project: &Project, home: &tempfile::TempDir) -> Option<String> {
    let output = run_in(project, home, &["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let why = project.status()["ungated"].as_str().map(str::to_string);
    let warned = stderr_of(&output).contains("warning: ungated");
    assert_eq!(warned, why.is_some(), "{}", stderr_of(&output));
    let status = stdout_of(&run_in(project, home, &["--status"]));
    assert_eq!(
        status.contains("Approvals: UNGATED"),
        why.is_some(),
        "{status}"
    );
    why
}

/// The arguments each session of `project` was given, and its
/// CLOWDER_GATE_HANDED, as the fake agent recorded them (not the `--version`
/// clowder asks a Codex for).
fn sessions_args(project: &Project) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(project.path("args.txt")).unwrap_or_default();
    text.split("\n\n")
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|args| args[0] != "--version")
        .collect()
}

#[test]
fn a_codex_loop_whose_project_asks_for_the_gate_is_handed_it() {
    // No hook anywhere: the project did not ask for the gate, and is told so.
    let (project, home) = codex_project(&["exec"]);
    let why = ungated(&project, &home).expect("no hook: ungated");
    assert!(why.contains("clowder init --codex-hook --write"), "{why}");
    // The hook written, in a project Codex does not trust and with no hook
    // trust: the loop hands Codex the hook itself, past both.
    let init = run_in(&project, &home, &["init", "--codex-hook", "--write"]);
    assert_eq!(init.status.code(), Some(0), "{}", stderr_of(&init));
    std::fs::remove_file(project.path("args.txt")).ok();
    let output = project
        .command(&["--headless", "1"])
        .env("CODEX_HOME", home.path())
        .env("FAKE_AGENT_ARGSFILE", project.path("args.txt"))
        .output()
        .expect("run clowder");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(
        !stderr_of(&output).contains("ungated"),
        "{}",
        stderr_of(&output)
    );
    assert!(
        project.status()["ungated"].is_null(),
        "{}",
        project.status()
    );
    let sessions = sessions_args(&project);
    let args = sessions.first().expect("one session");
    assert_eq!(args[0], "exec", "{args:?}");
    assert_eq!(args[1], "-c", "{args:?}");
    let hook = &args[2];
    assert!(hook.starts_with("hooks.PreToolUse=["), "{hook}");
    let bin = clowder_bin().display().to_string();
    assert!(hook.contains(&format!("{bin} gate --handed")), "{hook}");
    assert!(hook.contains("Bash|apply_patch"), "{hook}");
    assert_eq!(args[3], "--dangerously-bypass-hook-trust", "{args:?}");
    assert_eq!(args[4..6], ["normal", "2"], "{args:?}");
    assert_eq!(
        args.last().map(String::as_str),
        Some("CLOWDER_GATE_HANDED=1")
    );

    // Its own flag is not passed twice.
    set_codex_args(&project, &["exec", "--dangerously-bypass-hook-trust"]);
    assert_eq!(ungated(&project, &home), None);

    // Only `codex exec` is handed the gate; anything else says why it is not gated.
    set_codex_args(&project, &[]);
    let why = ungated(&project, &home).expect("no exec: ungated");
    assert!(why.contains("codex exec"), "{why}");
}

#[test]
fn a_claude_loop_is_handed_its_settings_and_other_agents_nothing() {
    // The fake agent is named `claude`. Without the hook, it is said ungated.
    let project = Project::new(&fast_config(&["normal"], ""));
    let home = tempfile::tempdir().expect("home");
    let why = ungated(&project, &home).expect("no hook: ungated");
    assert!(why.contains("clowder init --claude-hook --write"), "{why}");
    let init = project.run(&["init", "--claude-hook", "--write"]);
    assert_eq!(init.status.code(), Some(0), "{}", stderr_of(&init));
    let output = project
        .command(&["--headless", "1"])
        .env("FAKE_AGENT_ARGSFILE", project.path("args.txt"))
        .output()
        .expect("run clowder");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let sessions = sessions_args(&project);
    let args = sessions.first().expect("one session");
    assert_eq!(args[0], "--settings", "{args:?}");
    let settings: serde_json::Value = serde_json::from_str(&args[1]).expect("JSON settings");
    assert_eq!(settings["disableAllHooks"], false, "{settings}");
    let hook = &settings["hooks"]["PreToolUse"][0];
    assert_eq!(hook["matcher"], "Bash|Edit|Write", "{settings}");
    let bin = clowder_bin().display().to_string();
    assert_eq!(hook["hooks"][0]["command"], format!("{bin} gate --handed"));
    assert_eq!(args[2..], ["normal", "CLOWDER_GATE_HANDED=1"], "{args:?}");
    assert!(project.status()["ungated"].is_null());

    let project = Project::new(&fast_config(&["normal"], "").replace(
        &format!("{:?}", fake_agent().display().to_string()),
        &format!("{:?}", fake_agent_script().display().to_string()),
    ));
    let output = project
        .command(&["--headless", "1"])
        .env("FAKE_AGENT_ARGSFILE", project.path("args.txt"))
        .output()
        .expect("run clowder");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(
        sessions_args(&project),
        [["normal", "CLOWDER_GATE_HANDED="]]
    );
    assert!(project.status()["ungated"].is_null());
}

#[test]
fn a_codex_version_without_hooks_is_ungated_whatever_is_configured() {
    let (project, home) = codex_project(&["exec", "--dangerously-bypass-hook-trust"]);
    let codex = project.path("codex");
    std::fs::remove_file(&codex).expect("remove the symlink");
    std::fs::write(
        &codex,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.101.0'; exit 0; fi\nexec {:?} \"$@\"\n",
            fake_agent().display().to_string()
        ),
    )
    .expect("write codex");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(
        home.path().join("hooks.json"),
        r#"{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"clowder gate"}]}]}}"#,
    )
    .expect("write hooks.json");
    let why = ungated(&project, &home).expect("0.101: ungated");
    assert!(why.contains("Codex 0.101.0 runs no hooks"), "{why}");
}

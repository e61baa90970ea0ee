//! What outside testing found on real transcripts and real CLIs, through the
//! binary: model variants, several invocations in one output file, Codex
//! endings and cost, unrecognised formats, and output file names.

use crate::common;

use std::path::Path;

use common::*;

fn transcript_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

fn replay(name: &str, extra: &str) -> Project {
    Project::new(&fast_config(&["replay", &transcript_fixture(name)], extra))
}

fn run_ok(project: &Project, args: &[&str]) -> String {
    let output = project.run(args);
    let context = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout_of(&output),
        stderr_of(&output)
    );
    assert_eq!(output.status.code(), Some(0), "{context}");
    context
}

#[test]
fn the_1m_context_model_is_counted_once() {
    let project = replay("claude_1m_context.jsonl", "");
    let context = run_ok(&project, &["--headless", "1"]);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{context}");
    assert_eq!(completes[0]["input_tokens"], 8, "{}", completes[0]);
    assert_eq!(completes[0]["output_tokens"], 150, "{}", completes[0]);
    let last = &project.status()["last_session"];
    assert_eq!(last["cache_read_tokens"], 2200, "{last}");
    assert_eq!(last["cache_write_tokens"], 200, "{last}");
    assert_eq!(last["result_subtype"], "success", "{last}");
}

#[test]
fn invocations_of_different_session_ids_add_up_in_one_output_file() {
    let project = replay("claude_two_invocations.jsonl", "");
    let context = run_ok(&project, &["--headless", "1"]);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{context}");
    let event = &completes[0];
    // 1 + 2 turns of two runs of aaaa…, 2 of bbbb….
    assert_eq!(event["turns"], 5, "{event}");
    assert_eq!(event["input_tokens"], 36, "{event}");
    assert_eq!(event["output_tokens"], 360, "{event}");
    let cost = event["cost_usd"].as_f64().unwrap_or_default();
    assert!((cost - 0.45).abs() < 1e-9, "{event}");
    let totals = &project.status()["totals"];
    assert_eq!(totals["turns"], 5, "{totals}");
}

#[test]
fn a_codex_run_reads_success_and_its_cost_is_unknown_not_zero() {
    let project = replay("codex_0169_run.jsonl", "");
    let context = run_ok(&project, &["--headless", "2"]);
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 2, "{context}");
    for event in &completes {
        assert_eq!(event["result"], "success", "{event}");
        assert!(event["cost_usd"].is_null(), "{event}");
        assert_eq!(event["turns"], 1, "{event}");
    }
    let status = project.status();
    assert!(status["totals"]["cost_usd"].is_null(), "{status}");
    assert_eq!(status["totals"]["turns"], 2, "{status}");
    assert_eq!(status["last_session"]["result_subtype"], "success");
    let report = stdout_of(&project.run(&["--status"]));
    assert!(
        report
            .lines()
            .any(|l| l == "Cost: unknown total, last session cost unknown · 1 turn · 2 tool calls"),
        "{report}"
    );
}

#[test]
fn an_unrecognised_output_format_is_said_once_in_the_events() {
    let project = replay("codex_legacy_0_40.jsonl", "");
    // Codex before 0.44 is not supported: the loop stops after its first session.
    let output = project.run(&["--headless", "2"]);
    let context = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout_of(&output),
        stderr_of(&output)
    );
    assert_eq!(output.status.code(), Some(1), "{context}");
    let said = project.events_named("unrecognised_output_format");
    assert_eq!(said.len(), 1, "{said:?}\n{context}");
    assert_eq!(said[0]["global"], 1, "{}", said[0]);
    assert!(
        context.contains("status=unrecognised_output_format"),
        "{context}"
    );
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{context}");
    for event in &completes {
        assert!(event["turns"].is_null(), "{event}");
        assert!(event["input_tokens"].is_null(), "{event}");
    }
}

/// An agent script named `name` in the project that replays `transcript`.
fn named_agent(project: &Project, name: &str, transcript: &str) -> String {
    let path = project.path(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec '{}' replay '{}'\n",
            fake_agent_script().display(),
            transcript_fixture(transcript)
        ),
    )
    .expect("write the agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

fn agent_config(command: &str, extra: &str) -> String {
    format!(
        "[agent]\ncommand = {command:?}\nargs = []\n\n[backoff]\ninitial_delay_secs = 0.05\n\n{extra}\n"
    )
}

#[test]
fn a_codex_loop_writes_codex_files_and_everything_finds_them() {
    let project = Project::new("");
    let agent = named_agent(&project, "codex", "codex_0169_run.jsonl");
    project.write("harness.toml", &agent_config(&agent, ""));
    let context = run_ok(&project, &["--headless", "2"]);
    for global in [1, 2] {
        let name = format!("codex-iteration-{global}.jsonl");
        assert!(project.path(&name).is_file(), "no {name}\n{context}");
    }
    assert!(!project.path("claude-iteration-1.jsonl").exists());
    let status = project.status();
    let output = status["output_file"].as_str().unwrap_or_default();
    assert!(output.ends_with("codex-iteration-2.jsonl"), "{status}");
    let starts = project.events_named("session_start");
    assert!(
        starts[0]["output_file"]
            .as_str()
            .is_some_and(|f| f.ends_with("codex-iteration-1.jsonl")),
        "{starts:?}"
    );
    // Without the counter and the event log, a second run goes on from the
    // codex files it finds.
    std::fs::remove_file(project.path(".iteration_counter")).expect("remove the counter");
    std::fs::remove_file(project.path("harness-events.jsonl")).expect("remove the events");
    run_ok(&project, &["--headless", "1"]);
    assert!(project.path("codex-iteration-3.jsonl").is_file());
    let report = stdout_of(&project.run(&["--status"]));
    assert!(
        report.contains("Current iteration: 1/1 (global: 3)"),
        "{report}"
    );
}

#[test]
fn the_dry_run_names_the_output_files() {
    let project = Project::new("");
    let agent = named_agent(&project, "codex", "codex_0169_run.jsonl");
    project.write("harness.toml", &agent_config(&agent, ""));
    let dry = stdout_of(&project.run(&["--dry-run"]));
    assert!(
        dry.lines()
            .any(|l| l == "# output files: ./codex-iteration-N.jsonl"),
        "{dry}"
    );
}

#[test]
fn the_output_prefix_key_overrides_the_agents_name() {
    let project = Project::new("");
    let agent = named_agent(&project, "codex", "codex_0169_run.jsonl");
    project.write(
        "harness.toml",
        &agent_config(&agent, "[session]\noutput_prefix = \"run\"\n"),
    );
    run_ok(&project, &["--headless", "1"]);
    assert!(project.path("run-1.jsonl").is_file());
    assert!(!project.path("codex-iteration-1.jsonl").exists());
}

#[test]
fn the_claude_agent_keeps_the_shell_loops_file_names() {
    let project = Project::new("");
    let agent = named_agent(&project, "claude", "claude_1m_context.jsonl");
    project.write("harness.toml", &agent_config(&agent, ""));
    run_ok(&project, &["--headless", "1"]);
    assert!(project.path("claude-iteration-1.jsonl").is_file());
}

//! The gate a loop hands its agent on the command line, with the pinned Claude
//! Code and Codex against the local model servers: a lane added after `clowder
//! init` (whose worktree has none of init's hook files) is gated, and an agent
//! that edits the hook out of its worktree's settings is gated at its next
//! session all the same, in a lane as in the single loop. A Codex without
//! hooks says UNGATED in `clowder lanes` and `--status`.

use crate::common;
use crate::model_server;
use crate::real_agents;

use std::process::{Child, Output};
use std::time::Duration;

use common::git::init_with_one_commit;
use common::*;
use model_server::{Reply, ToolCall};
use real_agents::Cli;
use serde_json::Value;

/// Whether this agent runs PreToolUse hooks at all (Codex since 0.124).
fn has_hooks(cli: Cli) -> bool {
    cli != Cli::Codex("0.101.0")
}

/// The project file `clowder init` writes the agent's hook into.
fn hook_file(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude(_) => ".claude/settings.json",
        Cli::Codex(_) => ".codex/config.toml",
    }
}

/// A git repository set up by `clowder init` for `cli` (its hook file left
/// untracked, as init leaves it), then pointed at the pinned agent.
fn project_after_init(cli: Cli) -> Project {
    let project = Project::new("");
    std::fs::remove_file(project.path("harness.toml")).expect("remove harness.toml");
    std::fs::remove_file(project.path("PROMPT.md")).expect("remove PROMPT.md");
    init_with_one_commit(project.root());
    let agent = match cli {
        Cli::Claude(_) => "claude",
        Cli::Codex(_) => "codex",
    };
    let init = project.run(&["init", "--agent", agent]);
    assert!(init.status.success(), "{}", stderr_of(&init));
    let written = project.read(hook_file(cli));
    assert!(written.contains(" gate"), "{written}");
    project.write(
        "harness.toml",
        &real_agents::config(cli, "[approvals]\ntimeout = \"150s\"\n"),
    );
    project.write("PROMPT.md", "Do the task.\n");
    project
}

fn add_lane(project: &Project, iterations: &str) {
    let add = project.run(&["lane", "add", "api", "--max-iterations", iterations]);
    assert!(add.status.success(), "{}", stderr_of(&add));
}

/// The pending request whose subject mentions `word` (of lane `api`, when the
/// project has lanes): its id.
fn pending_with(project: &Project, word: &str) -> Option<String> {
    let of_lane = project.path(".clowder/fleet.json").exists();
    let mut id = None;
    wait_until(Duration::from_secs(120), || {
        let listed = project.run(&["queue", "--json"]);
        let requests: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap_or_default();
        id = requests
            .iter()
            .find(|r| {
                (!of_lane || r["lane"] == "api")
                    && r["subject"].as_str().is_some_and(|s| s.contains(word))
            })
            .and_then(|r| r["id"].as_str().map(str::to_string));
        id.is_some()
    });
    id
}

fn answer(project: &Project, args: &[&str]) {
    let output = project.run(args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
}

fn finish(child: Child) -> Output {
    wait_with_deadline(child, Duration::from_secs(180))
}

/// What a test prints when it fails: the run's output and what the lane says.
fn everything(project: &Project, output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}\nlanes:\n{}",
        stdout_of(output),
        stderr_of(output),
        stdout_of(&project.run(&["lanes"]))
    )
}

fn a_lane_added_after_init_is_gated(cli: Cli) {
    if !cli.installed() {
        return;
    }
    let server = real_agents::model_server(cli);
    server.script([
        Reply::Tools("Trying.".into(), vec![ToolCall::shell("touch lane-marker")]),
        Reply::Text("Done.".into()),
    ]);
    let project = project_after_init(cli);
    add_lane(&project, "1");
    let worktree = project.path(".clowder/worktrees/api");
    assert!(
        !worktree.join(hook_file(cli)).exists(),
        "the worktree is made from HEAD, without init's hook file"
    );
    let child = real_agents::clowder(cli, &server, &project, &["--headless"])
        .spawn()
        .expect("spawn clowder");

    if !has_hooks(cli) {
        let output = finish(child);
        let all = everything(&project, &output);
        assert!(worktree.join("lane-marker").exists(), "ungated: {all}");
        let lanes = stdout_of(&project.run(&["lanes"]));
        assert!(lanes.contains("UNGATED"), "{lanes}");
        assert!(lanes.contains("runs no hooks"), "{lanes}");
        let status = stdout_of(&project.run(&["--status"]));
        assert!(status.contains("approvals=UNGATED"), "{status}");
        assert!(stdout_of(&output).contains("ungated: "), "{all}");
        return;
    }

    let Some(id) = pending_with(&project, "lane-marker") else {
        let output = finish(child);
        panic!(
            "the lane's call never reached the queue\n{}",
            everything(&project, &output)
        );
    };
    assert!(
        !worktree.join("lane-marker").exists(),
        "ran before a decision"
    );
    answer(&project, &["reject", &id, "--reason", "not-in-this-lane"]);
    let output = finish(child);
    let all = everything(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{all}");
    assert!(!worktree.join("lane-marker").exists(), "rejected, it ran");
    let results = real_agents::tool_results(cli, &server);
    assert!(
        results
            .iter()
            .any(|r| r.output.contains("not-in-this-lane")),
        "the reason never reached the model: {results:?}\n{all}"
    );
    assert!(!all.contains("UNGATED"), "gated, yet said ungated: {all}");
}

/// A command that takes the gate out of the agent's own settings file.
fn edit_away(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude(_) => "printf '{\"disableAllHooks\":true}' > .claude/settings.json",
        Cli::Codex(_) => "rm .codex/config.toml",
    }
}

fn an_agent_that_edits_its_hook_away_is_gated_at_its_next_session(cli: Cli) {
    edits_its_hook_away(cli, true);
}

fn a_single_loop_agent_that_edits_its_hook_away_is_gated_at_its_next_session(cli: Cli) {
    edits_its_hook_away(cli, false);
}

/// The agent's first session takes the gate out of its settings file (the
/// edit approved), its second asks again: in a lane, or in the single loop.
fn edits_its_hook_away(cli: Cli, in_a_lane: bool) {
    if !has_hooks(cli) || !cli.installed() {
        // Without hooks nothing is gated: `a_lane_added_after_init_is_gated` shows it says so.
        return;
    }
    let server = real_agents::model_server(cli);
    server.script([
        Reply::Tools("Editing.".into(), vec![ToolCall::shell(edit_away(cli))]),
        Reply::Text("Edited.".into()),
        Reply::Tools("Now.".into(), vec![ToolCall::shell("touch second-marker")]),
        Reply::Text("Done.".into()),
    ]);
    let project = project_after_init(cli);
    let (worktree, run) = if in_a_lane {
        // Committed, so the lane's worktree has init's hook too.
        common::git::git_in(project.root(), &["add", "-f", hook_file(cli)]);
        common::git::git_in(project.root(), &["commit", "--quiet", "-m", "hook"]);
        add_lane(&project, "2");
        (project.path(".clowder/worktrees/api"), vec!["--headless"])
    } else {
        (project.root().to_path_buf(), vec!["--headless", "2"])
    };
    let settings = worktree.join(hook_file(cli));
    assert!(settings.exists(), "in the agent's folder");
    let child = real_agents::clowder(cli, &server, &project, &run)
        .spawn()
        .expect("spawn clowder");

    let edited = hook_file(cli).rsplit('/').next().expect("a file name");
    let Some(first) = pending_with(&project, edited) else {
        let output = finish(child);
        panic!(
            "the edit never reached the queue\n{}",
            everything(&project, &output)
        );
    };
    answer(&project, &["approve", &first]);
    let Some(second) = pending_with(&project, "second-marker") else {
        let output = finish(child);
        panic!(
            "the next session's call never reached the queue\n{}",
            everything(&project, &output)
        );
    };
    let left = std::fs::read_to_string(&settings).unwrap_or_default();
    assert!(!left.contains(" gate"), "the hook was edited away: {left}");
    assert!(!worktree.join("second-marker").exists(), "ran unasked");
    answer(&project, &["reject", &second, "--reason", "still-gated"]);
    let output = finish(child);
    let all = everything(&project, &output);
    assert_eq!(output.status.code(), Some(0), "{all}");
    assert!(!worktree.join("second-marker").exists(), "rejected, it ran");
    let results = real_agents::tool_results(cli, &server);
    assert!(
        results.iter().any(|r| r.output.contains("still-gated")),
        "the reason never reached the model: {results:?}\n{all}"
    );
}

mod claude {
    use super::*;
    real_agents::per_version!(
        Claude, CLAUDE_VERSIONS:
        a_lane_added_after_init_is_gated,
        an_agent_that_edits_its_hook_away_is_gated_at_its_next_session,
        a_single_loop_agent_that_edits_its_hook_away_is_gated_at_its_next_session,
    );
}

mod codex {
    use super::*;
    real_agents::per_version!(
        Codex, CODEX_VERSIONS:
        a_lane_added_after_init_is_gated,
        an_agent_that_edits_its_hook_away_is_gated_at_its_next_session,
        a_single_loop_agent_that_edits_its_hook_away_is_gated_at_its_next_session,
    );
}

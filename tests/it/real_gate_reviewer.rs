//! The reviewer with the pinned Claude Code and Codex, in a project set up by
//! `clowder init`, the room on a terminal: one session's calls are allowed by
//! the reviewer, denied by it (the agent reads why), passed to the person who
//! approves in the room, and, once two denials in a row trip its breaker, sent
//! to the person without asking it, who rejects in the room. What the reviewer
//! cost is in the room's counters.

use crate::common;
use crate::model_server;
use crate::real_agents;

use std::time::Duration;

use common::git::init_with_one_commit;
use common::*;
use model_server::reviewer::{Answer, ReviewerServer};
use model_server::{Reply, ToolCall};
use real_agents::Cli;
use serde_json::Value;

/// A repository set up by `clowder init` for `cli`, whose gate asks `reviewer`.
fn project(cli: Cli, reviewer: &ReviewerServer) -> Project {
    let project = Project::new("");
    std::fs::remove_file(project.path("harness.toml")).expect("remove harness.toml");
    init_with_one_commit(project.root());
    let agent = match cli {
        Cli::Claude(_) => "claude",
        Cli::Codex(_) => "codex",
    };
    let init = project.run(&["init", "--agent", agent]);
    assert!(init.status.success(), "{}", stderr_of(&init));
    let approvals = format!(
        "[approvals]\ntimeout = \"150s\"\n\n[approvals.reviewer]\napi = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"judge-1\"\nmax_denials_in_a_row = 2\ninput_usd_per_mtok = 1\n",
        reviewer.base_url()
    );
    project.write("harness.toml", &real_agents::config(cli, &approvals));
    project.write("PROMPT.md", "Touch the marker files the task names.\n");
    project
}

/// The pending request whose subject mentions `word`.
fn pending_with(project: &Project, word: &str) -> Option<Value> {
    let mut found = None;
    wait_until(Duration::from_secs(120), || {
        let listed = project.run(&["queue", "--json"]);
        let requests: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap_or_default();
        found = requests
            .into_iter()
            .find(|r| r["subject"].as_str().is_some_and(|s| s.contains(word)));
        found.is_some()
    });
    found
}

fn the_reviewer_allows_denies_passes_on_and_trips(cli: Cli) {
    if !cli.installed() || cli == Cli::Codex("0.101.0") {
        // Codex before 0.124 runs no hooks: nothing reaches any gate.
        return;
    }
    let version = cli.version();
    let reviewer = ReviewerServer::start();
    reviewer.script([
        Answer::Verdict("allow", "part of the task"),
        Answer::Verdict("deny", "not-in-the-task"),
        Answer::Verdict("unsure", "cannot-tell"),
        Answer::Verdict("deny", "still-not-in-the-task"),
    ]);
    let server = real_agents::model_server(cli);
    let step = |marker: &str| {
        Reply::Tools(
            "Next.".into(),
            vec![ToolCall::shell(&format!("touch {marker}"))],
        )
    };
    server.script([
        step("allowed-marker"),
        step("denied-marker"),
        step("person-marker"),
        step("denied-again"),
        step("after-trip"),
        Reply::Text("Finished.".into()),
    ]);
    let project = project(cli, &reviewer);
    let command = real_agents::room_command(cli, &server, &project, &["1"], "");
    let tmux = common::tmux::Tmux::start(project.root(), &command, 120, 40);

    let Some(unsure) = pending_with(&project, "person-marker") else {
        panic!(
            "{version}: the unsure call never reached the person\n{}",
            tmux.screen()
        );
    };
    assert!(
        project.path("allowed-marker").exists(),
        "{version}: allowed, yet not run"
    );
    assert!(
        !project.path("denied-marker").exists(),
        "{version}: denied, yet run"
    );
    let body = unsure["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("reviewer judge-1: unsure") && body.contains("cannot-tell"),
        "{body}"
    );
    tmux.wait_for("Approvals (1 waiting)");
    // Done once the approved call ran: the next request can come so fast that
    // "1 waiting" never leaves the screen, and a second `a` would approve it.
    let marker = project.path("person-marker");
    real_agents::press_until(&tmux, "a", |_| marker.exists());

    let Some(tripped) = pending_with(&project, "after-trip") else {
        panic!(
            "{version}: after the breaker, nothing reached the person\n{}",
            tmux.screen()
        );
    };
    assert!(
        project.path("person-marker").exists(),
        "{version}: approved, yet not run"
    );
    assert!(
        !project.path("denied-again").exists(),
        "{version}: denied, yet run"
    );
    let body = tripped["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("off for this lane after 2 denials in a row"),
        "{body}"
    );
    assert_eq!(
        reviewer.asked().len(),
        4,
        "{version}: asked after its breaker tripped"
    );
    tmux.wait_for("Approvals (1 waiting)");
    real_agents::press_until(&tmux, "r", |screen| screen.contains("Enter rejects"));
    tmux.type_text("person-says-no");
    tmux.wait_for("person-says-no");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("✓ done");
    // Four answers of 1,000 input tokens at $1 a million: in the run's counters.
    let screen = if screen.contains("4 calls") {
        screen
    } else {
        tmux.wait_for("4 calls")
    };
    assert!(
        screen.contains("reviewer    4 calls · $0.0040"),
        "{version}: {screen}"
    );
    assert!(
        !project.path("after-trip").exists(),
        "{version}: rejected, yet run"
    );

    let results: Vec<String> = real_agents::tool_results(cli, &server)
        .into_iter()
        .map(|r| r.output)
        .collect();
    for reason in ["not-in-the-task", "still-not-in-the-task", "person-says-no"] {
        assert!(
            results.iter().any(|r| r.contains(reason)),
            "{version}: the agent never read {reason:?}: {results:?}\n{screen}"
        );
    }
    let events = std::fs::read_to_string(project.path(".clowder/harness-events.jsonl"))
        .or_else(|_| std::fs::read_to_string(project.path("harness-events.jsonl")))
        .unwrap_or_default();
    assert!(
        events.contains("\"reviewer_tripped\""),
        "{version}: {events}"
    );
    assert_eq!(
        events.matches("\"reviewer_reviewed\"").count(),
        5,
        "{version}: {events}"
    );
}

mod claude {
    use super::*;
    real_agents::per_version!(
        Claude, CLAUDE_VERSIONS:
        the_reviewer_allows_denies_passes_on_and_trips,
    );
}

mod codex {
    use super::*;
    real_agents::per_version!(
        Codex, CODEX_VERSIONS:
        the_reviewer_allows_denies_passes_on_and_trips,
    );
}

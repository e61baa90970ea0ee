//! Claude Code itself, each pinned version, run by the `clowder` binary against a
//! local Anthropic Messages server: the counters it keeps from the real stream, the
//! room's rendering of it, and the approval gate through the real hook protocol.

use crate::common;
use crate::model_server;
use crate::real_agents;

use common::*;
use model_server::{Reply, ToolCall, anthropic};
use real_agents::Cli;
use serde_json::Value;

/// The final `result` line of an output file, wherever its `type` key sits.
fn result_line(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).expect("read output file");
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
        .unwrap_or_else(|| panic!("no result line in {}:\n{text}", path.display()))
}

fn tool_uses(path: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("read output file");
    let mut ids = std::collections::BTreeSet::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["type"] != "assistant" {
            continue;
        }
        for block in v["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" {
                ids.insert(block["id"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    ids.len() as u64
}

/// Input tokens as the result line counts them over every model it used.
fn model_usage_sum(result: &Value, key: &str) -> u64 {
    result["modelUsage"]
        .as_object()
        .map(|models| models.values().map(|m| m[key].as_u64().unwrap_or(0)).sum())
        .unwrap_or(0)
}

fn three_sessions_count_what_the_real_result_lines_say_and_the_promise_stops_the_loop(cli: Cli) {
    {
        let version = cli.version();
        if !cli.installed() {
            return;
        }
        let server = anthropic::start();
        server.script([
            Reply::Tools("Looking.".into(), vec![ToolCall::shell("echo one")]),
            Reply::Text("Step one is done.".into()),
            Reply::Tools(
                "Two at once.".into(),
                vec![ToolCall::shell("echo two"), ToolCall::shell("echo three")],
            ),
            Reply::Text("Step two is done.".into()),
            Reply::Text("Everything passes. TASK_COMPLETE".into()),
        ]);
        let project = Project::new(&real_agents::config(
            cli,
            "[completion]\npromise = \"TASK_COMPLETE\"\n",
        ));
        let output = real_agents::run(cli, &server, &project, &["--headless", "5"]);
        let stdout = stdout_of(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{version}\n{stdout}\n{}",
            stderr_of(&output)
        );
        assert!(
            stdout.contains("clowder: stopped (completed)"),
            "{version}: {stdout}"
        );
        let files = project.output_files();
        assert_eq!(files.len(), 3, "{version}: {files:?}");
        let completes = project.events_named("session_complete");
        assert_eq!(completes.len(), 3, "{version}");
        let (mut cost, mut turns, mut calls, mut input, mut output_tokens) = (0.0, 0, 0, 0, 0);
        for (file, event) in files.iter().zip(&completes) {
            let result = result_line(file);
            let context = format!(
                "{version} {}:\nresult {result}\nevent {event}",
                file.display()
            );
            let result_cost = result["total_cost_usd"].as_f64().expect("cost");
            assert!(
                (event["cost_usd"].as_f64().unwrap_or(-1.0) - result_cost).abs() < 1e-9,
                "{context}"
            );
            assert_eq!(event["turns"], result["num_turns"], "{context}");
            assert_eq!(
                event["tool_calls"].as_u64(),
                Some(tool_uses(file)),
                "{context}"
            );
            assert_eq!(event["result"], "success", "{context}");
            assert_eq!(event["rate_limited"], false, "{context}");
            let want_input = model_usage_sum(&result, "inputTokens");
            let want_output = model_usage_sum(&result, "outputTokens");
            assert_eq!(
                event["input_tokens"].as_u64(),
                Some(want_input),
                "{context}"
            );
            assert_eq!(
                event["output_tokens"].as_u64(),
                Some(want_output),
                "{context}"
            );
            cost += result_cost;
            turns += result["num_turns"].as_u64().unwrap_or(0);
            calls += tool_uses(file);
            input += want_input;
            output_tokens += want_output;
        }
        let status = project.status();
        let totals = &status["totals"];
        assert!(
            (totals["cost_usd"].as_f64().unwrap_or(-1.0) - cost).abs() < 1e-9,
            "{version}: {totals}"
        );
        assert_eq!(totals["turns"].as_u64(), Some(turns), "{version}: {totals}");
        assert_eq!(
            totals["tool_calls"].as_u64(),
            Some(calls),
            "{version}: {totals}"
        );
        assert_eq!(
            totals["input_tokens"].as_u64(),
            Some(input),
            "{version}: {totals}"
        );
        assert_eq!(
            totals["output_tokens"].as_u64(),
            Some(output_tokens),
            "{version}: {totals}"
        );
        let last = result_line(&files[2]);
        let summary = &status["last_session"];
        assert_eq!(summary["result_subtype"], "success", "{version}: {summary}");
        assert_eq!(
            summary["agent_session_id"], last["session_id"],
            "{version}: {summary}"
        );
        assert_eq!(summary["turns"], last["num_turns"], "{version}: {summary}");
        // Every command's output reached the model.
        let results = anthropic::tool_results(&server);
        for word in ["one", "two", "three"] {
            assert!(
                results.iter().any(|r| r.output.starts_with(word)),
                "{version}: {results:?}"
            );
        }
    }
}

/// The lines of the session pane, without the frame and the side panes.
fn output_pane(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('┃'))
        .map(|l| {
            l.split('┃')
                .next()
                .unwrap_or_default()
                .trim_end()
                .to_string()
        })
        .collect()
}

/// The line right after the call that `call` starts, skipping the task notices
/// that Claude Code 2.1 writes between a sub-agent's call and its result.
fn line_after(pane: &[String], call: &str) -> String {
    let at = pane
        .iter()
        .position(|l| l.starts_with(call))
        .unwrap_or_else(|| panic!("no {call:?} in the pane:\n{}", pane.join("\n")));
    pane[at + 1..]
        .iter()
        .find(|l| !l.starts_with('◆'))
        .cloned()
        .unwrap_or_default()
}

fn parallel_calls_a_subagent_and_long_text_are_shown_in_order(cli: Cli) {
    let version = cli.version();
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    let long: String = (1..=60)
        .map(|i| format!("Line {i} of the long report. "))
        .collect();
    server.script([
        Reply::Tools(
            "Checking both.".into(),
            vec![
                ToolCall::shell("echo alpha-out"),
                ToolCall::shell("echo beta-out"),
            ],
        ),
        Reply::Tools(
            "Asking a helper.".into(),
            vec![ToolCall::subagent("Count files", "Count the files")],
        ),
        // The sub-agent's own request comes while the main conversation waits.
        Reply::Text("The helper found gamma-report.".into()),
        Reply::Text(format!("{long}END-OF-REPORT")),
    ]);
    let project = Project::new(&real_agents::config(cli, ""));
    let command = real_agents::room_command(cli, &server, &project, &["1"], "");
    let tmux = common::tmux::Tmux::start(project.root(), &command, 120, 40);
    let screen = tmux.wait_for_all(&["■ result: success · 4 turns", "✓ done"]);
    let pane = output_pane(&screen);
    let context = format!("{version}:\n{screen}");
    assert_eq!(
        line_after(&pane, "▶ Bash  echo alpha-out"),
        "  ↳ alpha-out",
        "{context}"
    );
    assert_eq!(
        line_after(&pane, "▶ Bash  echo beta-out"),
        "  ↳ beta-out",
        "{context}"
    );
    let agent = if version.starts_with("2.0") {
        "▶ Task  Count files"
    } else {
        "▶ Agent  Count files"
    };
    assert!(line_after(&pane, agent).starts_with("  ↳ "), "{context}");
    assert!(screen.contains("gamma-report"), "{context}");
    assert!(
        pane.iter()
            .any(|l| l.starts_with("Line 1 of the long report. Line 2")),
        "{context}"
    );
    assert!(screen.contains("tool calls  3 · 0 failed"), "{context}");
    // The whole text reached the agent's output, as the model sent it.
    let file = &project.output_files()[0];
    let result = result_line(file);
    assert!(
        result["result"]
            .as_str()
            .unwrap_or_default()
            .ends_with("Line 60 of the long report. END-OF-REPORT"),
        "{result}"
    );
}

/// `PATH` with the `clowder` under test first, as the hook's `clowder gate` finds it.
fn path_with_clowder() -> String {
    let dir = clowder_bin()
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

/// The ids of the pending requests, from `clowder queue --json`.
fn pending(project: &Project) -> Vec<Value> {
    let output = project.run(&["queue", "--json"]);
    serde_json::from_slice::<Value>(&output.stdout)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

fn wait_for_one_pending(project: &Project, context: &str) -> Value {
    let mut found = Vec::new();
    let arrived = wait_until(std::time::Duration::from_secs(120), || {
        found = pending(project);
        !found.is_empty()
    });
    assert!(arrived, "{context}: nothing was queued");
    assert_eq!(found.len(), 1, "{context}: {found:?}");
    found.remove(0)
}

/// A project whose hook is `clowder gate` (written by `clowder init`) and whose
/// rules allow `echo allowed…`; the model asks for that, then for a chain.
fn gated_project(cli: Cli, server: &model_server::ModelServer, chained: &str) -> Project {
    server.script([
        Reply::Tools("First.".into(), vec![ToolCall::shell("echo allowed-one")]),
        Reply::Tools("Second.".into(), vec![ToolCall::shell(chained)]),
        Reply::Text("Finished.".into()),
    ]);
    let project = Project::new(&real_agents::config(
        cli,
        "[approvals]\nallow = [{ tool = \"Bash\", prefix = \"echo allowed-one\" }]\n",
    ));
    let init = project.run(&["init", "--claude-hook", "--write"]);
    assert!(init.status.success(), "{}", stderr_of(&init));
    project
}

/// What a headless gated session left: the project, the request it held, the
/// tool results the model had before the answer and all of them after it.
struct Decided {
    project: Project,
    request: Value,
    before: Vec<model_server::ToolResult>,
    after: Vec<model_server::ToolResult>,
}

/// Runs one gated session headless, waits for the one call it holds, answers it
/// with `clowder VERB ID REST…`, and lets the session end.
fn decide_headless(cli: Cli, chained: &str, verb: &str, rest: &[&str]) -> Decided {
    let version = cli.version();
    let server = anthropic::start();
    let project = gated_project(cli, &server, chained);
    let child = real_agents::clowder(cli, &server, &project, &["--headless", "1"])
        .env("PATH", path_with_clowder())
        .spawn()
        .expect("spawn clowder");
    let request = wait_for_one_pending(&project, version);
    let before = anthropic::tool_results(&server);
    let id = request["id"].as_str().expect("id").to_string();
    let mut args = vec![verb, id.as_str()];
    args.extend_from_slice(rest);
    let answer = project.run(&args);
    assert!(answer.status.success(), "{}", stderr_of(&answer));
    let output = wait_with_deadline(child, std::time::Duration::from_secs(120));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{version}: {}",
        stdout_of(&output)
    );
    Decided {
        project,
        request,
        before,
        after: anthropic::tool_results(&server),
    }
}

fn the_gate_holds_a_chain_until_approved_or_rejected_headless(cli: Cli) {
    let version = cli.version();
    if !cli.installed() {
        return;
    }
    // Approved: the allowed call ran unasked, the chain waited, then ran.
    let approved = decide_headless(cli, "echo allowed-one && echo chained-two", "approve", &[]);
    assert!(
        approved
            .before
            .iter()
            .any(|r| r.output.starts_with("allowed-one")),
        "{version}: the allowed call did not run unasked: {:?}",
        approved.before
    );
    assert!(
        approved.request.to_string().contains("chained-two"),
        "{version}: {}",
        approved.request
    );
    let chained = approved.after.last().expect("a result");
    assert_eq!(
        chained.output.lines().collect::<Vec<_>>()[..2],
        ["allowed-one", "chained-two"],
        "{version}: {:?}",
        approved.after
    );

    // Rejected: the agent gets the reason as the call's result.
    let rejected = decide_headless(
        cli,
        "echo allowed-one; touch rejected-marker",
        "reject",
        &["--reason", "not on a Friday"],
    );
    let refused = rejected.after.last().expect("a result");
    assert!(
        refused.output.contains("not on a Friday"),
        "{version}: {:?}",
        rejected.after
    );
    assert!(
        !rejected.project.path("rejected-marker").exists(),
        "{version}: the rejected call ran"
    );
}

fn the_gate_holds_a_chain_until_a_or_r_in_the_room(cli: Cli) {
    let version = cli.version();
    if !cli.installed() {
        return;
    }
    let room = |chained: &str| {
        let server = anthropic::start();
        let project = gated_project(cli, &server, chained);
        let command = real_agents::room_command(cli, &server, &project, &["1"], "").replacen(
            "env ",
            &format!("env PATH={} ", path_with_clowder()),
            1,
        );
        let tmux = common::tmux::Tmux::start(project.root(), &command, 120, 40);
        (server, project, tmux)
    };

    let (server, _project, tmux) = room("echo allowed-one && echo chained-two");
    tmux.wait_for("Approvals (1 waiting)");
    real_agents::press_until(&tmux, "a", |screen| {
        !screen.contains("Approvals (1 waiting)")
    });
    let screen = tmux.wait_for_all(&["■ result: success", "✓ done"]);
    let results = anthropic::tool_results(&server);
    let last = results.last().map(|r| r.output.clone()).unwrap_or_default();
    assert!(
        last.starts_with("allowed-one\nchained-two"),
        "{version}: {results:?}\n{screen}"
    );

    let (server, project, tmux) = room("echo allowed-one; touch rejected-marker");
    tmux.wait_for("Approvals (1 waiting)");
    real_agents::press_until(&tmux, "r", |screen| screen.contains("Enter rejects"));
    tmux.type_text("not on a Friday");
    tmux.wait_for("not on a Friday");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for_all(&["■ result: success", "✓ done"]);
    let results = anthropic::tool_results(&server);
    let last = results.last().map(|r| r.output.clone()).unwrap_or_default();
    assert!(
        last.contains("not on a Friday"),
        "{version}: {results:?}\n{screen}"
    );
    assert!(
        !project.path("rejected-marker").exists(),
        "{version}: the rejected call ran"
    );
}

real_agents::per_version!(
    Claude, CLAUDE_VERSIONS:
    three_sessions_count_what_the_real_result_lines_say_and_the_promise_stops_the_loop,
    parallel_calls_a_subagent_and_long_text_are_shown_in_order,
    the_gate_holds_a_chain_until_approved_or_rejected_headless,
    the_gate_holds_a_chain_until_a_or_r_in_the_room,
);

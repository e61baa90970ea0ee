//! Claude Code itself, each pinned version, run by the `clowder` binary against a
//! local Anthropic Messages server: counters, errors, the watchdog and the gate as
//! the real program exercises them.

mod common;
mod model_server;
mod real_agents;

use common::*;
use model_server::{Reply, ToolCall, anthropic};
use real_agents::{CLAUDE_VERSIONS, Cli};
use serde_json::Value;

fn run_with(cli: Cli, server: &model_server::ModelServer, project: &Project, args: &[&str]) -> std::process::Output {
    let mut command = project.command(args);
    for (key, value) in cli.environment(project, server) {
        command.env(key, value);
    }
    let child = command.spawn().expect("spawn clowder");
    wait_with_deadline(child, std::time::Duration::from_secs(180))
}

#[test]
fn explore() {
    for version in CLAUDE_VERSIONS {
        let cli = Cli::Claude(version);
        if !cli.installed() { return; }
        let server = anthropic::start();
        server.script([
            Reply::Tools("Running it.".into(), vec![ToolCall::shell("echo hello-from-bash")]),
            Reply::Text("Done. TASK_COMPLETE".into()),
        ]);
        let project = Project::new(&format!("{}\n[completion]\npromise = \"TASK_COMPLETE\"\n", cli.agent_table()));
        let output = run_with(cli, &server, &project, &["--headless", "3"]);
        eprintln!("== {version}\nstdout:\n{}\nstderr:\n{}", stdout_of(&output), stderr_of(&output));
        for f in project.output_files() { eprintln!("{}", std::fs::read_to_string(f).unwrap()); }
        for r in server.requests() { eprintln!("REQ {} scripted={} {}", r.path, r.scripted, r.body.to_string().chars().take(300).collect::<String>()); }
        eprintln!("results {:?}", anthropic::tool_results(&server));
        let _: Value = project.status();
    }
}

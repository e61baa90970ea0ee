//! Codex itself, each pinned version, run by the `clowder` binary against a local
//! OpenAI Responses server: a normal run, its errors, and the gate as its hook.

mod common;
mod model_server;
mod real_agents;

use common::*;
use model_server::{Reply, ToolCall, openai};
use real_agents::{CODEX_VERSIONS, Cli};

fn run_with(
    cli: Cli,
    server: &model_server::ModelServer,
    project: &Project,
    args: &[&str],
) -> std::process::Output {
    let mut command = project.command(args);
    for (key, value) in cli.environment(project, server) {
        command.env(key, value);
    }
    let child = command.spawn().expect("spawn clowder");
    wait_with_deadline(child, std::time::Duration::from_secs(180))
}

#[test]
fn explore() {
    for version in CODEX_VERSIONS {
        let cli = Cli::Codex(version);
        if !cli.installed() {
            return;
        }
        let server = openai::start();
        server.script([
            Reply::Tools(
                "Running it.".into(),
                vec![ToolCall::shell("echo hello-from-bash")],
            ),
            Reply::Text("Done. TASK_COMPLETE".into()),
        ]);
        let project = Project::new(&format!(
            "{}\n[completion]\npromise = \"TASK_COMPLETE\"\n",
            cli.agent_table()
        ));
        let output = run_with(cli, &server, &project, &["--headless", "2"]);
        eprintln!(
            "== {version}\nstdout:\n{}\nstderr:\n{}",
            stdout_of(&output),
            stderr_of(&output)
        );
        for f in std::fs::read_dir(project.root()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "jsonl") {
                eprintln!(
                    "FILE {}\n{}",
                    f.display(),
                    std::fs::read_to_string(&f).unwrap()
                );
            }
        }
        for r in server.requests() {
            eprintln!(
                "REQ {} scripted={} tools={:?}",
                r.path,
                r.scripted,
                r.body["tools"].as_array().map(|t| t
                    .iter()
                    .map(|x| format!("{}:{}", x["type"], x["name"]))
                    .collect::<Vec<_>>())
            );
        }
        eprintln!("results {:?}", openai::tool_results(&server));
    }
}

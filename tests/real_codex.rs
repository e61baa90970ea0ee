//! Codex itself, each pinned version, run by the `clowder` binary against a local
//! OpenAI Responses server: a normal run, its errors, and the gate as its hook.

mod common;
mod model_server;
mod real_agents;

use common::*;
use model_server::{Reply, openai};
use real_agents::{CODEX_VERSIONS, Cli};

fn explore_one(label: &str, script: Vec<Reply>, extra: &str) {
    for version in CODEX_VERSIONS {
        let cli = Cli::Codex(version);
        if !cli.installed() { return; }
        let server = openai::start();
        server.script(script.clone());
        let project = Project::new(&format!("{}\n[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.1\n{extra}", cli.agent_table()));
        let t = std::time::Instant::now();
        let mut cmd = real_agents::clowder(cli, &server, &project, &["--headless", "1"]);
        if let Ok(r) = std::env::var("REQ_RETRIES") {
            let f = project.path("home/.codex/config.toml");
            let c = std::fs::read_to_string(&f).unwrap().replace("request_max_retries = 0", &format!("request_max_retries = {r}"));
            std::fs::write(&f, c).unwrap();
        }
        let output = wait_with_deadline(cmd.spawn().unwrap(), std::time::Duration::from_secs(120));
        eprintln!("===== {label} {version} took {:?} exit {:?}\nstdout:\n{}\nstderr:\n{}", t.elapsed(), output.status.code(), stdout_of(&output), stderr_of(&output));
        for f in std::fs::read_dir(project.root()).unwrap() { let f = f.unwrap().path(); if f.extension().is_some_and(|e| e=="jsonl") { eprintln!("FILE {}\n{}", f.display(), std::fs::read_to_string(&f).unwrap()); } }
        eprintln!("STATUS {}", project.read("harness.status"));
        eprintln!("requests: {}", server.requests().len());
    }
}

#[test]
fn explore_429_once3() { explore_one("429once3", vec![Reply::Fail(openai::rate_limited(3)), Reply::Text("ok".into())], ""); }
#[test]
fn explore_429_long() { explore_one("429long", vec![Reply::Fail(openai::rate_limited(3600)), Reply::Text("ok".into())], "[watchdog]\nstale_timeout_mins = 0.05\ncheck_interval_secs = 0.2\nkill_grace_secs = 0.5\n"); }

#[test]
fn explore_gate() {
    let cli = Cli::Codex("0.169.0");
    if !cli.installed() { return; }
    let server = openai::start();
    server.script([
        Reply::Tools("".into(), vec![model_server::ToolCall::shell("echo allowed-one")]),
        Reply::Tools("".into(), vec![model_server::ToolCall::shell("echo first && touch approved-marker")]),
        Reply::Text("done".into()),
    ]);
    let table = cli.agent_table().replace("\"exec\", ", "\"exec\", \"--dangerously-bypass-hook-trust\", ");
    let project = Project::new(&format!("{table}\n[approvals]\ntimeout = \"60s\"\nallow = [{{ tool = \"Bash\", prefix = \"echo\" }}]\n"));
    std::fs::create_dir_all(project.path(".codex")).unwrap();
    project.write(".codex/config.toml", &format!("[[hooks.PreToolUse]]\nmatcher = \"Bash|apply_patch\"\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"{} gate\"\ntimeout = 600\n", clowder_bin().display()));
    let mut cmd = real_agents::clowder(cli, &server, &project, &["--headless", "1"]);
    let f = project.path("home/.codex/config.toml");
    let c = std::fs::read_to_string(&f).unwrap() + &format!("\n[projects.{:?}]\ntrust_level = \"trusted\"\n", project.root().display().to_string());
    std::fs::write(&f, c).unwrap();
    let child = cmd.spawn().unwrap();
    let mut id = String::new();
    wait_until(std::time::Duration::from_secs(30), || {
        let q = project.run(&["queue", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&q.stdout).unwrap_or_default();
        if let Some(first) = v.as_array().and_then(|a| a.first()) { eprintln!("QUEUE {first:#}"); id = first["id"].as_str().unwrap().to_string(); true } else { false }
    });
    eprintln!("queued id {id:?}");
    if !id.is_empty() { let a = project.run(&["approve", &id]); eprintln!("approve: {} {}", stdout_of(&a), stderr_of(&a)); }
    let output = wait_with_deadline(child, std::time::Duration::from_secs(60));
    eprintln!("stdout:\n{}\nstderr:\n{}", stdout_of(&output), stderr_of(&output));
    for f in project.output_files() { eprintln!("{}", std::fs::read_to_string(f).unwrap()); }
    eprintln!("marker {}", project.path("approved-marker").exists());
    eprintln!("results {:#?}", openai::tool_results(&server));
}

//! A plan's failures said and undone: why a step failed (`step_failed`, `plan
//! status`), `clowder plan retry`, and the clean-up of a completed plan; in real
//! temporary git repositories, with `tests/agents/plan-agent.sh` as the agent.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::git::{clowder_command, git_in, init_with_one_commit};
use common::{DEADLINE, stderr_of, stdout_of, wait_with_deadline};
use serde_json::Value;
use tempfile::TempDir;

struct Repo {
    dir: TempDir,
    /// Where the agent saves each session's prompt.
    prompts: TempDir,
}

impl Repo {
    /// A repository on `main` with one commit, the plan agent's harness.toml and
    /// `plan` as plan.toml.
    fn new(plan: &str) -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("tempdir"),
            prompts: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(repo.root());
        std::fs::write(repo.path("harness.toml"), common::plan_agent_config()).expect("write");
        std::fs::write(repo.path("plan.toml"), plan).expect("write");
        repo
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(self.root(), args)
    }

    fn clowder(&self, args: &[&str]) -> Output {
        let mut command = clowder_command(self.root(), args);
        command.env("PLAN_AGENT_LOG", self.prompts.path());
        wait_with_deadline(command.spawn().expect("spawn"), DEADLINE)
    }

    fn run_plan(&self) -> Output {
        self.clowder(&["plan", "run", "plan.toml", "--headless"])
    }

    fn status_json(&self, plan: &str) -> (Option<i32>, Value) {
        let out = self.clowder(&["plan", "status", plan, "--json"]);
        let rows = serde_json::from_str(&stdout_of(&out)).expect("status JSON");
        (out.status.code(), rows)
    }

    fn events(&self, plan: &str, event: &str) -> Vec<Value> {
        let path = self.path(&format!(".clowder/plans/{plan}-events.jsonl"));
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("an event is JSON"))
            .filter(|e| e["event"] == event)
            .collect()
    }

    /// The prompts the agent was given in lane `lane`, in session order.
    fn prompts_of(&self, lane: &str) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.prompts.path())
            .expect("read the prompts")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{lane}-")))
            })
            .collect();
        files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        files
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("read a prompt"))
            .collect()
    }
}

const FAILING: &str = r#"
[plan]
name = "fx"

[[step]]
id = "a"
prompt = "write a.txt\nexit 1\nfail"
max_iterations = 2

[[step]]
id = "b"
depends_on = ["a"]
prompt = "write b.txt"
"#;

/// `step_failed` said only that the lane ended at max_iterations, and `plan
/// status` exited 0 for a failed plan without a reason per step.
#[test]
fn a_failed_step_says_why_in_its_event_and_in_plan_status() {
    let repo = Repo::new(FAILING);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let failed = repo.events("fx", "step_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        failed[0]["detail"],
        "exit 1 in each of 2 sessions; the lane ended: max_iterations"
    );
    let (code, rows) = repo.status_json("fx");
    assert_eq!(code, Some(1));
    assert_eq!(rows[0]["steps"][0]["reason"], failed[0]["detail"]);
    assert_eq!(rows[0]["steps"][1]["state"], "blocked");
    assert_eq!(rows[0]["steps"][1]["reason"], "depends on failed step a");
}

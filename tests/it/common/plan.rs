//! A plan's test repository: a temporary git repository on `main` with one commit,
//! the plan agent's `harness.toml` and a `plan.toml`, and the ways the plan tests
//! run `clowder plan` in it and read what it left.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use serde_json::Value;
use tempfile::TempDir;

use super::git::{clowder_command, git_in, init_with_one_commit};
use super::{DEADLINE, stdout_of, wait_with_deadline};

pub struct PlanRepo {
    pub dir: TempDir,
    /// Where the agent saves each session's prompt.
    pub prompts: TempDir,
}

impl PlanRepo {
    /// A repository on `main` with one commit, a harness.toml running the plan
    /// agent one session per lane, and `plan` as plan.toml.
    pub fn new(plan: &str) -> PlanRepo {
        let repo = PlanRepo {
            dir: tempfile::tempdir().expect("tempdir"),
            prompts: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(repo.root());
        std::fs::write(repo.path("harness.toml"), super::plan_agent_config()).expect("write");
        std::fs::write(repo.path("plan.toml"), plan).expect("write");
        repo
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.root(), args)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = clowder_command(self.root(), args);
        command.env("PLAN_AGENT_LOG", self.prompts.path());
        command
    }

    pub fn clowder(&self, args: &[&str]) -> Output {
        wait_with_deadline(self.command(args).spawn().expect("spawn"), DEADLINE)
    }

    pub fn spawn_plan(&self) -> Child {
        self.command(&["plan", "run", "plan.toml", "--headless"])
            .spawn()
            .expect("spawn the plan")
    }

    /// Step id → state, from `clowder plan status NAME --json`.
    pub fn step_states(&self, plan: &str) -> Vec<(String, String)> {
        let out = self.clowder(&["plan", "status", plan, "--json"]);
        // 1: the plan failed, or is not there yet (nothing printed).
        if !matches!(out.status.code(), Some(0 | 1)) || stdout_of(&out).is_empty() {
            return Vec::new();
        }
        let rows: Value = serde_json::from_str(&stdout_of(&out)).expect("status JSON");
        rows[0]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| {
                let text = |key: &str| s[key].as_str().unwrap_or_default().to_string();
                (text("id"), text("state"))
            })
            .collect()
    }

    pub fn state_of(&self, plan: &str, step: &str) -> String {
        self.step_states(plan)
            .into_iter()
            .find(|(id, _)| id == step)
            .map(|(_, state)| state)
            .unwrap_or_default()
    }

    /// Plan `plan`'s events; a sub-plan's when named by its place, `PARENT/STEP`.
    pub fn events(&self, plan: &str) -> Vec<Value> {
        let path = match plan.split_once('/') {
            Some((parent, step)) => {
                self.path(&format!(".clowder/plans/{parent}/sub/{step}/events.jsonl"))
            }
            None => self.path(&format!(".clowder/plans/{plan}-events.jsonl")),
        };
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("an event is JSON"))
            .collect()
    }

    pub fn has_event(&self, plan: &str, event: &str, step: &str) -> bool {
        self.events(plan)
            .iter()
            .any(|e| e["event"] == event && e["step"] == step)
    }

    /// The files of `rev`'s tree.
    pub fn files_at(&self, rev: &str) -> Vec<String> {
        self.git(&["ls-tree", "--name-only", rev])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The prompts the agent was given in lane `lane`, in session order.
    pub fn prompts_of(&self, lane: &str) -> Vec<String> {
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
        files.sort();
        files
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("read a prompt"))
            .collect()
    }

    pub fn pending_requests(&self) -> Vec<Value> {
        let dir = self.path(".clowder/approvals/pending");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).expect("read a request");
                serde_json::from_str(&text).expect("a request is JSON")
            })
            .collect()
    }

    /// Live processes whose environment names this repository's approval queue:
    /// the agents of its lanes.
    pub fn lane_processes(&self) -> Vec<i32> {
        let marker = format!(
            "CLOWDER_APPROVALS_DIR={}",
            self.path(".clowder/approvals").display()
        );
        super::processes_with_env(&marker)
    }

    /// Live processes of this repository's plan checks (`verify`, `done_when`).
    pub fn check_processes(&self) -> Vec<i32> {
        let prefix = format!("CLOWDER_CHECK_OUTPUT={}", self.root().display());
        std::fs::read_dir("/proc")
            .expect("read /proc")
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| super::pid_alive(*pid))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                    env.split(|b| *b == 0)
                        .any(|var| var.starts_with(prefix.as_bytes()))
                })
            })
            .collect()
    }
    pub fn run_plan(&self) -> Output {
        self.clowder(&["plan", "run", "plan.toml", "--headless"])
    }

    /// `clowder plan status PLAN --json`: its exit code and its rows.
    pub fn status_json(&self, plan: &str) -> (Option<i32>, Value) {
        let out = self.clowder(&["plan", "status", plan, "--json"]);
        let rows = serde_json::from_str(&stdout_of(&out)).expect("status JSON");
        (out.status.code(), rows)
    }

    /// The plan's events called `event`.
    pub fn events_named(&self, plan: &str, event: &str) -> Vec<Value> {
        self.events(plan)
            .into_iter()
            .filter(|e| e["event"] == event)
            .collect()
    }
}

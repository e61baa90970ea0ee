//! The whole path of a new user, through the binary: `clowder init`, a loop,
//! lanes, a plan, `clowder lanes`, `--status` and `git status`, with init's
//! config (every file under `.clowder/`) and with the defaults. Every reader
//! must find each file where the loop or lane wrote it.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::git::{clowder_command, git_in, init_with_one_commit};
use common::{DEADLINE, stderr_of, stdout_of, wait_with_deadline};
use serde_json::Value;
use tempfile::TempDir;

/// A repository and a bin folder whose `claude` is the promise agent.
struct NewUser {
    repo: TempDir,
    bin: TempDir,
    /// Where the agent keeps what its gate said.
    gate_log: TempDir,
}

impl NewUser {
    fn new() -> NewUser {
        let user = NewUser {
            repo: tempfile::tempdir().expect("tempdir"),
            bin: tempfile::tempdir().expect("tempdir"),
            gate_log: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(user.root());
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/promise-agent.sh");
        std::os::unix::fs::symlink(agent, user.bin.path().join("claude")).expect("link");
        user
    }

    fn root(&self) -> &Path {
        self.repo.path()
    }

    fn clowder(&self, args: &[&str]) -> Output {
        let mut path = self.bin.path().as_os_str().to_owned();
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        let child = clowder_command(self.root(), args)
            .env("PATH", path)
            .env("PROMISE_AGENT_GATE", common::clowder_bin())
            .env("PROMISE_AGENT_LOG", self.gate_log.path())
            .spawn()
            .expect("spawn clowder");
        wait_with_deadline(child, DEADLINE)
    }

    /// `clowder args…`, which must exit 0; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.clowder(args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "clowder {args:?}\nstdout: {}\nstderr: {}",
            stdout_of(&output),
            stderr_of(&output)
        );
        stdout_of(&output)
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(self.root(), args)
    }

    /// What every gate said while the loop or the fleet ran.
    fn gate_said(&self) -> String {
        let mut said = String::new();
        for entry in std::fs::read_dir(self.gate_log.path()).expect("read the gate log") {
            let path = entry.expect("entry").path();
            said.push_str(&std::fs::read_to_string(&path).expect("read"));
        }
        said
    }
}

const PLAN: &str = r#"
[plan]
name = "three"

[[step]]
id = "one"
prompt = "the first part"

[[step]]
id = "two"
depends_on = ["one"]
prompt = "the second part"

[[step]]
id = "three"
depends_on = ["two"]
prompt = "the third part"
"#;

/// The loop: it ends on the promise, and `--status` says so.
fn run_the_loop(user: &NewUser) {
    user.ok(&["--headless"]);
    let status = user.ok(&["--status", "--json"]);
    let status: Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(status["exit_reason"], "completed", "{status}");
    assert_eq!(status["iteration"], 1, "the iteration that ran: {status}");
    assert!(user.root().join("work-loop.txt").exists());
}

/// Two lanes run to their promise; `lanes` and `--status` then say done.
fn run_two_lanes(user: &NewUser) {
    user.ok(&["lane", "add", "api"]);
    user.ok(&["lane", "add", "docs"]);
    user.ok(&["--headless"]);
    let rows: Value = serde_json::from_str(&user.ok(&["lanes", "--json"])).expect("lanes JSON");
    for row in rows.as_array().expect("rows") {
        assert_eq!(row["state"], "done", "{row}");
        assert_eq!(row["iteration"], 1, "the iteration that ran: {row}");
    }
    let status = user.ok(&["--status"]);
    assert_eq!(status.matches("state=done").count(), 2, "{status}");
    assert!(!status.contains("not started"), "{status}");
}

/// The plan's three steps each keep the promise: the plan is done and merged.
fn run_the_plan(user: &NewUser) {
    std::fs::write(user.root().join("plan.toml"), PLAN).expect("write the plan");
    user.git(&["add", "plan.toml"]);
    user.git(&["commit", "-q", "-m", "the plan"]);
    let out = user.ok(&["plan", "run", "plan.toml", "--headless"]);
    assert!(!out.contains("step_failed"), "{out}");
    let status: Value =
        serde_json::from_str(&user.ok(&["plan", "status", "three", "--json"])).expect("JSON");
    for step in status[0]["steps"].as_array().expect("steps") {
        assert_eq!(step["state"], "merged", "{step}");
    }
    let rows: Value = serde_json::from_str(&user.ok(&["lanes", "--json"])).expect("lanes JSON");
    for row in rows.as_array().expect("rows") {
        assert_ne!(row["state"], "not started", "{row}");
    }
}

#[test]
fn a_new_user_goes_from_init_through_lanes_and_a_plan_to_a_clean_git_status() {
    let user = NewUser::new();
    user.ok(&["init", "--agent", "claude", "--promise", "TASK_COMPLETE"]);
    user.git(&["add", "-A"]);
    user.git(&["commit", "-q", "-m", "clowder init"]);
    run_the_loop(&user);
    assert_eq!(user.git(&["status", "--porcelain"]), "", "after the loop");
    run_two_lanes(&user);
    run_the_plan(&user);
    assert_eq!(user.git(&["status", "--porcelain"]), "", "after the plan");
    let said = user.gate_said();
    assert!(said.contains("waiting for approval"), "{said}");
    assert!(!said.contains("no clowder loop holds"), "{said}");
}

#[test]
fn the_same_path_with_the_default_file_names() {
    let user = NewUser::new();
    let config = "[completion]\npromise = \"TASK_COMPLETE\"\n";
    std::fs::write(user.root().join("harness.toml"), config).expect("write");
    std::fs::write(user.root().join("PROMPT.md"), "Do the task.\n").expect("write");
    // The default files land in the folder: a user keeps them out of git.
    let ignore =
        "harness.status\nharness-events.jsonl\n.iteration_counter\nclaude-iteration-*\n.clowder/\n";
    std::fs::write(user.root().join(".gitignore"), ignore).expect("write");
    user.git(&["add", "-A"]);
    user.git(&["commit", "-q", "-m", "clowder by hand"]);
    run_the_loop(&user);
    run_two_lanes(&user);
    run_the_plan(&user);
    assert_eq!(user.git(&["status", "--porcelain"]), "");
    assert!(!user.gate_said().contains("no clowder loop holds"));
}

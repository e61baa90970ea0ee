//! A lane's state files and budgets across runs, through the binary: a resumed
//! lane over its budget, a corrupt status file, an unreadable running record, a
//! lane whose sessions came to nothing, and the iteration shown once stopped.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::git::{clowder_command, init_with_one_commit};
use common::{DEADLINE, stderr_of, stdout_of, wait_with_deadline};
use serde_json::Value;
use tempfile::TempDir;

struct Fleet {
    dir: TempDir,
}

impl Fleet {
    /// A repository whose lane `a` (`lane add` with `add`) runs the commit agent.
    fn new(extra: &str, add: &[&str]) -> Fleet {
        let fleet = Fleet {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(fleet.root());
        std::fs::write(fleet.path("PROMPT.md"), "Do the work.\n").expect("write");
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/commit-agent.sh");
        let config = format!(
            "[agent]\ncommand = {:?}\n\n[watchdog]\nmin_output_bytes = 1\n\n[retry]\nretry_delay_secs = 0.05\n\n{extra}\n",
            agent.display().to_string()
        );
        std::fs::write(fleet.path("harness.toml"), config).expect("write");
        let mut args = vec!["lane", "add", "a"];
        args.extend_from_slice(add);
        fleet.expect(&args, 0);
        fleet
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn clowder(&self, args: &[&str], transcript: Option<&Path>) -> Output {
        let mut command = clowder_command(self.root(), args);
        if let Some(transcript) = transcript {
            command.env("COMMIT_AGENT_TRANSCRIPT", transcript);
        }
        wait_with_deadline(command.spawn().expect("spawn clowder"), DEADLINE)
    }

    /// `clowder args…`, which must exit `code`; its stdout and stderr.
    fn expect(&self, args: &[&str], code: i32) -> String {
        let output = self.clowder(args, None);
        let said = format!("{}{}", stdout_of(&output), stderr_of(&output));
        assert_eq!(output.status.code(), Some(code), "clowder {args:?}: {said}");
        said
    }

    fn lane_row(&self) -> Value {
        let rows: Value =
            serde_json::from_str(&self.expect(&["lanes", "--json"], 0)).expect("lanes JSON");
        rows[0].clone()
    }

    fn sessions_started(&self) -> usize {
        std::fs::read_to_string(self.path(".clowder/lanes/a/harness-events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains("\"session_start\""))
            .count()
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agent")
        .join(name)
}

#[test]
fn a_resumed_lane_over_its_own_budget_pays_for_no_more_sessions() {
    let fleet = Fleet::new("[session]\nmax_iterations = 5\n", &["--max-cost", "0.5"]);
    // $0.40 a session: the second one spends the lane's $0.50.
    let cost = fixture("cost_040.jsonl");
    let first = fleet.clowder(&["--headless"], Some(&cost));
    assert_eq!(first.status.code(), Some(4), "{}", stdout_of(&first));
    assert_eq!(fleet.sessions_started(), 2);
    let row = fleet.lane_row();
    assert_eq!(
        row["iteration"], 2,
        "the iteration that ran, not the next: {row}"
    );
    fleet.expect(&["lane", "resume", "a"], 0);
    let again = fleet.clowder(&["--headless"], Some(&cost));
    let stdout = stdout_of(&again);
    assert_eq!(again.status.code(), Some(4), "{stdout}");
    assert_eq!(fleet.sessions_started(), 2, "{stdout}");
    assert!(stdout.contains("budget_exceeded"), "{stdout}");
    let row = fleet.lane_row();
    assert_eq!(row["cost_usd"], 0.8, "{row}");
    assert_eq!(row["iteration"], 2, "{row}");
    let status = fleet.expect(&["--status"], 0);
    assert!(status.contains("iteration=2/5"), "{status}");
}

#[test]
fn a_lane_whose_status_file_is_corrupt_is_not_started_and_the_file_is_kept() {
    let fleet = Fleet::new("[session]\nmax_iterations = 1\n", &[]);
    fleet.expect(&["--headless"], 0);
    let status = fleet.path(".clowder/lanes/a/harness.status");
    std::fs::write(&status, "{\"schema_version\": 1, \"iteration\": ").expect("corrupt");
    fleet.expect(&["lane", "resume", "a"], 0);
    let said = fleet.expect(&["--headless"], 1);
    assert!(said.contains(&status.display().to_string()), "{said}");
    assert!(said.contains("the lane is not started"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&status).expect("kept"),
        "{\"schema_version\": 1, \"iteration\": "
    );
    assert_eq!(fleet.sessions_started(), 1, "{said}");
    assert_eq!(fleet.lane_row()["state"], "unknown");
    let status_said = fleet.expect(&["--status"], 0);
    assert!(
        status_said.contains("lane=a state=unknown"),
        "{status_said}"
    );
}

#[test]
fn an_unreadable_running_record_is_kept_aside_with_a_warning() {
    let fleet = Fleet::new("[session]\nmax_iterations = 1\n", &[]);
    let running = fleet.path(".clowder/lanes/a/running");
    std::fs::create_dir_all(&running).expect("mkdir");
    std::fs::write(running.join("1-2.s3.json"), "{\"token\": ").expect("write");
    let said = fleet.expect(&["--headless"], 0);
    let aside = running.join("1-2.s3.json.unreadable");
    assert!(said.contains(&aside.display().to_string()), "{said}");
    assert_eq!(
        std::fs::read_to_string(&aside).expect("kept"),
        "{\"token\": "
    );
}

#[test]
fn a_lane_whose_every_result_is_an_error_fails_though_its_agent_exits_0() {
    let fleet = Fleet::new("[session]\nmax_iterations = 2\n", &[]);
    let transcript = fleet.path("error-result.jsonl");
    let result = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"","session_id":"s","total_cost_usd":0.01}"#;
    std::fs::write(&transcript, format!("{result}\n")).expect("write");
    let output = fleet.clowder(&["--headless"], Some(&transcript));
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("lane=a no session came to anything"),
        "{stdout}"
    );
    assert_eq!(fleet.lane_row()["state"], "failed");
}

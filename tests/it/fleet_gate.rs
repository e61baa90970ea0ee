//! The gate of a fleet lane judges by the rules its host gave it, never by the
//! `harness.toml` of the lane's worktree (which the agent can edit), and a
//! request's lane comes from the fleet's records, not from the agent's word.
//! Through the binary, in a real temporary repository, with a fake agent that
//! runs `clowder gate` as Claude Code's hook does.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Output};

use common::git::{clowder_command, init_with_one_commit};
use common::{DEADLINE, clowder_bin, stderr_of, stdout_of, wait_until, wait_with_deadline};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

const DENY_RM: &str = "[approvals]\ndeny = [{ tool = \"Bash\", prefix = \"rm -rf\" }]\n";

struct Repo {
    dir: TempDir,
    out: TempDir,
}

impl Repo {
    /// A repository whose harness.toml denies `rm -rf`, with lanes `lanes`; the
    /// agent is `tests/agents/gate-agent.sh`, for one session.
    fn new(lanes: &[&str]) -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("tempdir"),
            out: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(repo.root());
        std::fs::write(repo.root().join("PROMPT.md"), "Do the work.\n").expect("write");
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/gate-agent.sh");
        let config = format!(
            "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n{DENY_RM}",
            agent.display().to_string()
        );
        std::fs::write(repo.root().join("harness.toml"), config).expect("write");
        for lane in lanes {
            repo.expect(&["lane", "add", lane]);
        }
        repo
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn worktree(&self, lane: &str) -> PathBuf {
        self.root().join(".clowder/worktrees").join(lane)
    }

    fn clowder(&self, args: &[&str]) -> Output {
        let child = clowder_command(self.root(), args).spawn().expect("spawn");
        wait_with_deadline(child, DEADLINE)
    }

    fn expect(&self, args: &[&str]) -> String {
        let out = self.clowder(args);
        assert!(
            out.status.success(),
            "clowder {args:?}: {}",
            stderr_of(&out)
        );
        stdout_of(&out)
    }

    /// Runs the fleet headless until its one session has ended.
    fn run_fleet(&self, tamper: bool) -> Output {
        let mut command = clowder_command(self.root(), &["--headless"]);
        command
            .env("GATE_AGENT_OUT", self.out.path())
            .env("GATE_AGENT_CLOWDER", clowder_bin())
            .env("GATE_AGENT_TAMPER", if tamper { "1" } else { "0" });
        wait_with_deadline(command.spawn().expect("spawn the fleet"), DEADLINE)
    }

    fn out(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.path().join(name)).unwrap_or_default()
    }
}

#[test]
fn a_lane_whose_worktree_allows_everything_is_still_judged_by_the_fleets_deny_rule() {
    let repo = Repo::new(&["a"]);
    let fleet = repo.run_fleet(false);
    assert_eq!(fleet.status.code(), Some(0), "{}", stdout_of(&fleet));
    assert_eq!(repo.out("code").trim(), "0", "{}", repo.out("stderr.txt"));
    let answer: Value = serde_json::from_str(&repo.out("answer.json")).expect("an answer");
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecision"], "deny",
        "{answer}"
    );
    // The worktree's own harness.toml is said, not used.
    let lanes = repo.expect(&["lanes"]);
    assert!(
        lanes.contains("clowder: lane a: ")
            && lanes.contains("its [approvals] rules differ from the fleet's"),
        "{lanes}"
    );
}

#[test]
fn a_lane_whose_host_rules_were_edited_is_denied_by_its_gate() {
    let repo = Repo::new(&["a"]);
    let fleet = repo.run_fleet(true);
    assert_eq!(fleet.status.code(), Some(0), "{}", stdout_of(&fleet));
    assert_eq!(repo.out("code").trim(), "2", "{}", repo.out("answer.json"));
    let said = repo.out("stderr.txt");
    assert!(
        said.contains("are not the ones its host wrote")
            && said.contains("the tool call is denied"),
        "{said}"
    );
}

#[test]
fn a_gate_that_says_it_is_in_a_lane_without_its_hosts_rules_denies() {
    let repo = Repo::new(&["a"]);
    let worktree = repo.worktree("a");
    std::fs::write(
        worktree.join("harness.toml"),
        "[approvals]\nallow = [{ tool = \"Bash\" }]\n",
    )
    .expect("write");
    let mut command = clowder_command(&worktree, &["gate", "--timeout", "5s"]);
    command
        .env("CLOWDER_LANE", "a")
        .stdin(std::process::Stdio::piped());
    let mut child = command.spawn().expect("spawn the gate");
    let input = r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf precious"}}"#;
    // The gate may deny (it lacks its host's rules) before it reads its
    // input: a closed pipe then is its answer, not the test's failure.
    let written =
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), input.as_bytes());
    if let Err(err) = written {
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "write: {err}");
    }
    let out = wait_with_deadline(child, DEADLINE);
    assert_eq!(out.status.code(), Some(2), "{}", stdout_of(&out));
    assert!(
        stderr_of(&out).contains("CLOWDER_GATE_RULES"),
        "{}",
        stderr_of(&out)
    );
}

/// `clowder ask` run in `dir` by an agent that forged its host's rules to name
/// lane `claimed` (a rules file of its own, with its hash); `claimed` is put in
/// the TOML file as it is, escapes included.
fn forged_ask(repo: &Repo, dir: &Path, claimed: &str, title: &str) -> Child {
    let rules = repo
        .out
        .path()
        .join(format!("forged-{}.toml", title.replace(' ', "-")));
    let text = format!("lane = \"{claimed}\"\n\n[approvals]\n");
    std::fs::write(&rules, &text).expect("write");
    let sha: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let approvals = repo.root().join(".clowder/approvals");
    let mut command = clowder_command(dir, &["ask", "--title", title, "--timeout", "60s"]);
    command
        .env("CLOWDER_GATE_RULES", &rules)
        .env("CLOWDER_GATE_RULES_SHA256", sha)
        .env("CLOWDER_LANE", claimed)
        .env("CLOWDER_APPROVALS_DIR", approvals);
    command.spawn().expect("spawn clowder ask")
}

#[test]
fn a_requests_lane_is_the_one_the_fleets_records_confirm_not_the_one_it_claims() {
    let repo = Repo::new(&["a", "b"]);
    let outside = tempfile::tempdir().expect("tempdir");
    let mut asks = vec![
        forged_ask(&repo, &repo.worktree("a"), "b", "claims b from a"),
        forged_ask(
            &repo,
            &repo.worktree("a"),
            "\\u001b]52;c;eA==\\u0007$(reboot)",
            "claims junk from a",
        ),
        forged_ask(&repo, outside.path(), "a", "claims a from outside"),
        forged_ask(&repo, &repo.worktree("b"), "b", "b from b"),
    ];
    let mut pending = Vec::new();
    let all_there = wait_until(DEADLINE, || {
        let out = repo.clowder(&["queue", "--json"]);
        pending = serde_json::from_str::<Value>(&stdout_of(&out))
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
        pending.len() == asks.len()
    });
    for ask in &mut asks {
        let _ = ask.kill();
        let _ = ask.wait();
    }
    assert!(all_there, "{pending:?}");
    let lane_of = |title: &str| {
        pending
            .iter()
            .find(|r| r["title"] == title)
            .map(|r| r["lane"].clone())
            .unwrap_or_else(|| panic!("no request {title}: {pending:?}"))
    };
    assert_eq!(lane_of("claims b from a"), "a");
    assert_eq!(lane_of("claims junk from a"), "a");
    assert_eq!(lane_of("claims a from outside"), Value::Null);
    assert_eq!(lane_of("b from b"), "b");
    let rows: Value = serde_json::from_str(&repo.expect(&["lanes", "--json"])).expect("json");
    assert_eq!(rows[0]["pending_approvals"], 2, "{rows}");
    assert_eq!(rows[1]["pending_approvals"], 1, "{rows}");
}

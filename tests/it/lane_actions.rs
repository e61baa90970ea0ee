//! `clowder lane merge`, `lane push`, `lane restart` and the removal of a
//! merged lane, through the binary, in a real temporary git repository.

use crate::common;

use std::path::{Path, PathBuf};

use common::git::{Scratch as Repo, git_in};
use common::{DEADLINE, stderr_of, wait_until};
use serde_json::Value;

fn commit_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/commit-agent.sh")
}

impl Repo {
    /// A repository on `main` with the fake committing agent and `extra` TOML.
    fn with_agent(extra: &str) -> Repo {
        let repo = Repo::new();
        repo.write("PROMPT.md", "Do the work.\n");
        let config = format!(
            "[agent]\ncommand = {:?}\n\n[watchdog]\nmin_output_bytes = 1\n\n[retry]\nretry_delay_secs = 0.05\n\n{extra}\n",
            commit_agent().display().to_string()
        );
        repo.write("harness.toml", &config);
        // The tracked files stay as they are: nothing of clowder's is committed.
        repo.write(".git/info/exclude", "harness.toml\nPROMPT.md\n.clowder/\n");
        repo
    }

    fn commit_text_in_lane(&self, lane: &str, file: &str, text: &str) {
        let worktree = self.path(&format!(".clowder/worktrees/{lane}"));
        std::fs::write(worktree.join(file), text).expect("write");
        git_in(&worktree, &["add", file]);
        git_in(&worktree, &["commit", "--quiet", "-m", "lane work"]);
    }

    fn contains(&self, branch: &str, base: &str) -> bool {
        let output = std::process::Command::new("git")
            .arg("-C")
            .arg(self.root())
            .args(["merge-base", "--is-ancestor", branch, base])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git merge-base");
        output.status.success()
    }

    fn pending_requests(&self) -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(self.path(".clowder/approvals/pending")) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
            .collect()
    }

    fn events(&self, lane: &str) -> Vec<Value> {
        let path = self.path(&format!(".clowder/lanes/{lane}/harness-events.jsonl"));
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).expect("an event is JSON"))
            .collect()
    }

    /// The one review request of `lane`, once it is in the queue.
    fn review_of(&self, lane: &str) -> Value {
        let mut found = None;
        let posted = wait_until(DEADLINE, || {
            found = self
                .pending_requests()
                .into_iter()
                .find(|r| r["lane"] == lane && r["kind"] == "ask");
            found.is_some()
        });
        assert!(posted, "no review request: {:?}", self.pending_requests());
        found.expect("found")
    }
}

#[test]
fn a_clean_lane_is_merged_after_verify_logged_and_then_removed_without_force() {
    let repo = Repo::with_agent("[fleet]\nverify = \"test -f work.txt\"\n");
    repo.expect(&["lane", "add", "auth"], 0);
    repo.commit_text_in_lane("auth", "work.txt", "work\n");

    let out = repo.expect(&["lane", "merge", "auth"], 0);
    assert!(
        out.contains("lane auth merged into main: clowder/auth at"),
        "{out}"
    );
    assert!(repo.contains("clowder/auth", "main"));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "main"]),
        "Merge lane auth"
    );
    // The user's checkout of main moved with it (it was clean).
    assert!(repo.path("work.txt").is_file());
    let merged: Vec<Value> = repo
        .events("auth")
        .into_iter()
        .filter(|e| e["event"] == "lane_merged")
        .collect();
    assert_eq!(merged.len(), 1, "{merged:?}");
    assert_eq!(merged[0]["base"], "main");
    assert!(repo.pending_requests().is_empty());

    let again = repo.expect(&["lane", "merge", "auth"], 0);
    assert!(again.contains("nothing to merge"), "{again}");
    // Merged, the lane goes without --force: its branch lost nothing.
    let out = repo.expect(&["lane", "rm", "auth"], 0);
    assert!(out.contains("deleted branch clowder/auth"), "{out}");
}

#[test]
fn a_conflict_becomes_a_review_request_whose_approval_merges_the_fixed_branch() {
    let repo = Repo::with_agent("");
    repo.expect(&["lane", "add", "auth"], 0);
    repo.commit_text_in_lane("auth", "README.md", "lane's words\n");
    repo.write("README.md", "main's words\n");
    repo.git(&["commit", "--quiet", "-am", "main moves on"]);
    let main_before = repo.git(&["rev-parse", "main"]);

    let out = repo.expect(&["lane", "merge", "auth"], 1);
    assert!(out.contains("conflicts with main in: README.md"), "{out}");
    assert!(out.contains("review request"), "{out}");
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
    let review = repo.review_of("auth");
    assert_eq!(review["title"], "lane auth: merge needs review");
    assert!(
        review["body"]
            .as_str()
            .is_some_and(|b| b.contains("README.md")),
        "{review}"
    );

    // Fixed on the lane's branch, then approved: merged.
    let worktree = repo.path(".clowder/worktrees/auth");
    git_in(&worktree, &["merge", "--quiet", "-X", "ours", "main"]);
    let id = review["id"].as_str().expect("an id");
    repo.expect(&["approve", id], 0);
    let merged = wait_until(DEADLINE, || repo.contains("clowder/auth", "main"));
    assert!(merged, "approving the review did not merge the lane");
    assert!(repo.pending_requests().is_empty());
}

#[test]
fn a_failed_verify_becomes_a_review_request_and_base_stays() {
    let repo =
        Repo::with_agent("[fleet]\nverify = \"echo checked; exit 3\"\nverify_timeout = \"1m\"\n");
    repo.expect(&["lane", "add", "auth"], 0);
    repo.commit_text_in_lane("auth", "work.txt", "work\n");
    let main_before = repo.git(&["rev-parse", "main"]);

    let out = repo.expect(&["lane", "merge", "auth"], 1);
    assert!(out.contains("the verify check failed"), "{out}");
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
    assert!(!repo.contains("clowder/auth", "main"));
    let review = repo.review_of("auth");
    // Rejected, the review is dismissed and its waiter ends.
    let id = review["id"].as_str().expect("an id");
    repo.expect(&["reject", id, "--reason", "later"], 0);
    assert!(wait_until(DEADLINE, || repo.pending_requests().is_empty()));
    assert!(
        repo.events("auth")
            .iter()
            .all(|e| e["event"] != "lane_merged")
    );
}

#[test]
fn a_review_is_withdrawn_once_a_later_merge_has_taken_the_lane() {
    let repo = Repo::with_agent("[fleet]\nverify = \"test -f ok\"\n");
    repo.expect(&["lane", "add", "auth"], 0);
    repo.commit_text_in_lane("auth", "work.txt", "work\n");
    let out = repo.expect(&["lane", "merge", "auth"], 1);
    assert!(out.contains("the verify check failed"), "{out}");
    repo.review_of("auth");

    repo.commit_text_in_lane("auth", "ok", "fixed\n");
    repo.expect(&["lane", "merge", "auth"], 0);
    let withdrawn = wait_until(DEADLINE, || repo.pending_requests().is_empty());
    assert!(withdrawn, "{:?}", repo.pending_requests());
}

#[test]
fn push_sends_the_branch_to_the_remote_and_names_the_forges_pull_request_page() {
    let repo = Repo::with_agent("");
    let remote = tempfile::tempdir().expect("tempdir");
    git_in(remote.path(), &["init", "--quiet", "--bare"]);
    let bare = remote.path().display().to_string();
    repo.git(&["remote", "add", "origin", &bare]);
    repo.expect(&["lane", "add", "auth"], 0);
    repo.commit_text_in_lane("auth", "work.txt", "work\n");
    let tip = repo.git(&["rev-parse", "clowder/auth"]);

    let out = repo.expect(&["lane", "push", "auth"], 0);
    assert!(out.contains("pushed clowder/auth to origin"), "{out}");
    assert!(
        !out.contains("pull request"),
        "a bare folder is no forge: {out}"
    );
    assert_eq!(git_in(remote.path(), &["rev-parse", "clowder/auth"]), tip);

    // A remote that reads as GitHub, whose pushes git sends to the bare folder.
    repo.git(&["remote", "add", "gh", "https://github.com/acme/app.git"]);
    let rewrite = format!("url.{bare}.pushInsteadOf");
    repo.git(&["config", &rewrite, "https://github.com/acme/app.git"]);
    repo.commit_text_in_lane("auth", "more.txt", "more\n");
    let out = repo.expect(&["lane", "push", "auth", "--remote", "gh"], 0);
    assert!(
        out.contains("https://github.com/acme/app/compare/main...clowder/auth?expand=1"),
        "{out}"
    );
    let tip = repo.git(&["rev-parse", "clowder/auth"]);
    assert_eq!(git_in(remote.path(), &["rev-parse", "clowder/auth"]), tip);

    let out = repo.expect(&["lane", "push", "auth", "--remote", "nowhere"], 2);
    assert!(out.contains("no remote named nowhere"), "{out}");
}

const STOPPED_AT_1_OF_2: &str = r#"{"lane":0,"pid":1,"state":"stopped","agent_command":"commit-agent.sh","stale_timeout_secs":1200.0,"paused":false,"paused_at":null,"stop_pending":false,"iteration":2,"max_iterations":2,"global_iteration":1,"output_file":null,"output_bytes":0,"loop_start":"2026-01-01T00:00:00Z","session_start":null,"last_output_growth":null,"last_update":"2026-01-01T01:00:00Z","last_completed_iteration":1,"last_completed_global":1,"last_committed":true,"last_exit_code":0,"consecutive_rate_limits":0,"pgid":null,"agent_pid":null,"next_session_at":null,"rate_limit_resets_at":null,"counters":{"sessions":1,"productive":1,"empty_retries":0,"empty_iterations":0,"rate_limits":0,"watchdog_kills":0,"user_kills":0,"hook_failures":0,"commits":1},"exit_reason":"stop_file","totals":{"cost_usd":0.0}}"#;

#[test]
fn restart_runs_a_finished_lane_again_from_iteration_one_and_refuses_a_running_one() {
    let repo = Repo::with_agent("");
    repo.expect(&["lane", "add", "a", "--max-iterations", "2"], 0);
    repo.expect(&["lane", "stop", "a"], 0);
    // Stopped after its first of two iterations (the status names the one under way).
    repo.write(".clowder/lanes/a/harness.status", STOPPED_AT_1_OF_2);
    let running = STOPPED_AT_1_OF_2
        .replace(r#""pid":1,"#, &format!(r#""pid":{},"#, std::process::id()))
        .replace(r#""state":"stopped""#, r#""state":"session_running""#);
    repo.write(".clowder/lanes/a/harness.status", &running);
    let out = repo.expect(&["lane", "restart", "a"], 1);
    assert!(out.contains("lane a is running"), "{out}");

    repo.write(".clowder/lanes/a/harness.status", STOPPED_AT_1_OF_2);
    let out = repo.expect(&["lane", "restart", "a"], 0);
    assert!(out.contains("lane a restarted"), "{out}");
    let fleet = repo.clowder(&["--headless"]);
    assert_eq!(fleet.status.code(), Some(0), "{}", stderr_of(&fleet));
    let starts: Vec<Value> = repo
        .events("a")
        .into_iter()
        .filter(|e| e["event"] == "session_start")
        .collect();
    // Two fresh iterations, not the one a resume would have left.
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[0]["iteration"], 1);
    assert_eq!(starts[1]["iteration"], 2);
    let out = repo.expect(&["lane", "restart", "nope"], 2);
    assert!(out.contains("no lane named nope"), "{out}");
}

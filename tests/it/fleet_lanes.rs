//! `clowder lane …` and `clowder lanes` through the binary, in a real temporary
//! git repository: the registry, the worktrees and branches, and `lane rm`
//! refusing whatever would lose work.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::git::{Scratch as Repo, clowder_command, git_in, isolate};
use common::{DEADLINE, clowder_bin, stderr_of, stdout_of, wait_with_deadline};
use serde_json::Value;

impl Repo {
    fn registry(&self) -> Value {
        let text = std::fs::read_to_string(self.path(".clowder/fleet.json")).expect("fleet.json");
        serde_json::from_str(&text).expect("fleet.json is JSON")
    }

    fn lane(&self, name: &str) -> Option<Value> {
        self.registry()["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .find(|lane| lane["name"] == name)
            .cloned()
    }

    fn branch_exists(&self, branch: &str) -> bool {
        !self.git(&["branch", "--list", branch]).is_empty()
    }

    fn lanes_json(&self) -> Vec<Value> {
        let output = self.clowder(&["lanes", "--json"]);
        assert!(output.status.success(), "{}", stderr_of(&output));
        serde_json::from_str::<Value>(&stdout_of(&output))
            .expect("lanes --json is JSON")
            .as_array()
            .expect("an array")
            .clone()
    }

    /// Commits `file` in the lane's worktree.
    fn commit_in_lane(&self, lane: &str, file: &str) {
        let worktree = self.path(&format!(".clowder/worktrees/{lane}"));
        std::fs::write(worktree.join(file), "work\n").expect("write");
        git_in(&worktree, &["add", file]);
        git_in(&worktree, &["commit", "--quiet", "-m", "lane work"]);
    }
}

#[test]
fn add_creates_the_worktree_the_branch_the_registry_and_the_gitignore() {
    let repo = Repo::new();
    repo.write("lanes/auth.md", "Work on auth.\n");
    repo.git(&["add", "lanes/auth.md"]);
    repo.git(&["commit", "--quiet", "-m", "prompt"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let out = repo.expect(
        &[
            "lane",
            "add",
            "auth",
            "--prompt",
            "lanes/auth.md",
            "--max-iterations",
            "5",
            "--max-cost",
            "2.5",
        ],
        0,
    );
    assert!(out.contains("clowder/auth"), "{out}");
    let worktree = repo.path(".clowder/worktrees/auth");
    assert!(
        worktree.join("README.md").is_file(),
        "the worktree has the files"
    );
    assert_eq!(
        git_in(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "clowder/auth"
    );
    assert_eq!(git_in(&worktree, &["rev-parse", "HEAD"]), head);
    assert_eq!(
        std::fs::read_to_string(repo.path(".clowder/.gitignore")).expect("gitignore"),
        "*\n"
    );
    assert!(repo.path(".clowder/lanes/auth").is_dir());
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "clowder's files stay out of git"
    );
    let registry = repo.registry();
    assert_eq!(registry["schema_version"], 1);
    let lane = repo.lane("auth").expect("registered");
    assert_eq!(lane["kind"], "worktree");
    assert_eq!(lane["dir"], ".clowder/worktrees/auth");
    assert_eq!(lane["branch"], "clowder/auth");
    assert_eq!(lane["base"], "refs/heads/main");
    assert_eq!(lane["base_commit"], head.as_str());
    assert_eq!(lane["prompt_file"], "lanes/auth.md");
    assert_eq!(lane["max_iterations"], 5);
    assert_eq!(lane["max_cost_usd"], 2.5);
    assert_eq!(lane["state"], "active");
    // Nothing of clowder's inside the worktree.
    assert_eq!(
        git_in(&worktree, &["status", "--porcelain", "--ignored"]),
        ""
    );
}

#[test]
fn bad_names_are_refused_with_exit_2_and_the_reason() {
    let repo = Repo::new();
    let long = "a".repeat(41);
    for name in [
        "..", "-x", "Auth", &long, "a/b", "café", "", ".hidden", "a b", "a..b", "x.lock",
    ] {
        let out = repo.expect(&["lane", "add", "--", name], 2);
        assert!(out.contains("invalid lane name"), "{name:?}: {out}");
    }
    assert!(
        !repo.path(".clowder/fleet.json").exists(),
        "nothing registered"
    );
    assert_eq!(repo.git(&["branch", "--list", "clowder/*"]), "");
    repo.expect(&["lane", "add", &"a".repeat(40)], 0);
}

#[test]
fn an_existing_branch_or_lane_is_refused_with_exit_2() {
    let repo = Repo::new();
    repo.git(&["branch", "clowder/taken"]);
    let out = repo.expect(&["lane", "add", "taken"], 2);
    assert!(out.contains("branch clowder/taken already exists"), "{out}");
    assert!(!repo.path(".clowder/worktrees/taken").exists());
    assert!(!repo.path(".clowder/lanes/taken").exists());

    repo.expect(&["lane", "add", "docs"], 0);
    let before = std::fs::read_to_string(repo.path(".clowder/fleet.json")).expect("read");
    let out = repo.expect(&["lane", "add", "docs"], 2);
    assert!(out.contains("lane docs already exists"), "{out}");
    let after = std::fs::read_to_string(repo.path(".clowder/fleet.json")).expect("read");
    assert_eq!(before, after);
}

#[test]
fn dir_lanes_use_an_existing_folder_and_no_worktree() {
    let repo = Repo::new();
    std::fs::create_dir(repo.path("scratch")).expect("mkdir");
    repo.expect(&["lane", "add", "scratch", "--dir", "scratch"], 0);
    repo.expect(&["lane", "add", "root", "--dir", "."], 0);
    for (name, dir) in [("scratch", "scratch"), ("root", ".")] {
        let lane = repo.lane(name).expect("registered");
        assert_eq!(lane["kind"], "dir");
        assert_eq!(lane["dir"], dir);
        assert_eq!(lane["branch"], Value::Null);
        assert!(repo.path(&format!(".clowder/lanes/{name}")).is_dir());
    }
    assert!(!repo.path(".clowder/worktrees/scratch").exists());
    assert_eq!(repo.git(&["branch", "--list", "clowder/*"]), "");
    let out = repo.expect(&["lane", "add", "missing", "--dir", "nowhere"], 2);
    assert!(out.contains("no such folder"), "{out}");
    let out = repo.expect(&["lane", "add", "again", "--dir", "./"], 2);
    assert!(
        out.contains("lane root already works in that folder"),
        "{out}"
    );

    // A dir lane is only unregistered: its folder stays.
    repo.write("scratch/notes.txt", "keep me\n");
    repo.expect(&["lane", "rm", "scratch"], 0);
    assert!(repo.lane("scratch").is_none());
    assert!(repo.path("scratch/notes.txt").is_file());
}

#[test]
fn a_dir_lane_needs_no_git() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(clowder_bin())
        .args(["lane", "add", "plain", "--dir", "."])
        .current_dir(dir.path())
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr_of(&output));
    let output = Command::new(clowder_bin())
        .args(["lane", "add", "tree"])
        .current_dir(dir.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("use --dir PATH"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn base_sets_where_the_branch_starts() {
    let repo = Repo::new();
    let first = repo.git(&["rev-parse", "HEAD"]);
    repo.write("second.txt", "2\n");
    repo.git(&["add", "second.txt"]);
    repo.git(&["commit", "--quiet", "-m", "second"]);
    repo.git(&["branch", "stable", &first]);

    repo.expect(&["lane", "add", "old", "--base", "stable"], 0);
    assert_eq!(repo.git(&["rev-parse", "clowder/old"]), first);
    assert_eq!(repo.lane("old").expect("lane")["base"], "refs/heads/stable");

    repo.expect(&["lane", "add", "pinned", "--base", &first], 0);
    assert_eq!(repo.lane("pinned").expect("lane")["base"], first.as_str());

    let out = repo.expect(&["lane", "add", "nope", "--base", "no-such-ref"], 2);
    assert!(out.contains("--base no-such-ref: no such commit"), "{out}");
    assert!(!repo.branch_exists("clowder/nope"));
}

/// A status file as a lane's loop leaves it when it has stopped.
const STOPPED_STATUS: &str = r#"{"lane":0,"pid":1,"state":"stopped","agent_command":"claude","stale_timeout_secs":1200.0,"paused":false,"paused_at":null,"stop_pending":false,"iteration":3,"max_iterations":10,"global_iteration":17,"output_file":null,"output_bytes":0,"loop_start":"2026-01-01T00:00:00Z","session_start":null,"last_output_growth":null,"last_update":"2026-01-01T01:00:00Z","last_completed_iteration":3,"last_completed_global":17,"last_committed":true,"last_exit_code":0,"consecutive_rate_limits":0,"pgid":null,"agent_pid":null,"next_session_at":null,"rate_limit_resets_at":null,"counters":{"sessions":3,"productive":3,"empty_retries":0,"empty_iterations":0,"rate_limits":0,"watchdog_kills":0,"user_kills":0,"hook_failures":0,"commits":2},"exit_reason":"max_iterations","totals":{"cost_usd":0.4321}}"#;

#[test]
fn lanes_shows_state_iteration_cost_and_commits_ahead() {
    let repo = Repo::new();
    repo.expect(&["lanes"], 0);
    repo.expect(&["lane", "add", "auth"], 0);
    repo.expect(&["lane", "add", "docs"], 0);
    repo.commit_in_lane("auth", "a.txt");
    repo.commit_in_lane("auth", "b.txt");
    repo.write(".clowder/lanes/auth/harness.status", STOPPED_STATUS);
    repo.expect(&["lane", "pause", "docs"], 0);

    let table = repo.expect(&["lanes"], 0);
    let auth = table
        .lines()
        .find(|l| l.starts_with("auth"))
        .expect("auth row");
    let cells: Vec<&str> = auth.split_whitespace().collect();
    assert_eq!(
        cells,
        ["auth", "done", "3/10", "17", "-", "$0.4321", "2", "0"],
        "{table}"
    );
    let docs = table
        .lines()
        .find(|l| l.starts_with("docs"))
        .expect("docs row");
    assert!(docs.contains("not started [paused]"), "{table}");

    let rows = repo.lanes_json();
    assert_eq!(rows.len(), 2);
    let auth = &rows[0];
    assert_eq!(auth["name"], "auth");
    assert_eq!(auth["state"], "done");
    assert_eq!(auth["last_exit_code"], 0);
    assert_eq!(auth["iteration"], 3);
    assert_eq!(auth["global_iteration"], 17);
    assert_eq!(auth["cost_usd"], 0.4321);
    assert_eq!(auth["commits_ahead"], 2);
    assert_eq!(auth["pending_approvals"], 0);
    assert_eq!(auth["requested"], "active");
    let docs = &rows[1];
    assert_eq!(docs["state"], "not started");
    assert_eq!(docs["requested"], "paused");
    assert_eq!(docs["iteration"], Value::Null);
    assert_eq!(docs["commits_ahead"], 0);
    let keys: Vec<&String> = docs.as_object().expect("object").keys().collect();
    for key in [
        "name",
        "kind",
        "dir",
        "branch",
        "base",
        "requested",
        "state",
        "running",
        "iteration",
        "max_iterations",
        "global_iteration",
        "idle_secs",
        "cost_usd",
        "commits_ahead",
        "pending_approvals",
        "problems",
    ] {
        assert!(keys.iter().any(|k| *k == key), "{key} missing: {keys:?}");
    }
}

#[test]
fn lanes_tell_done_from_failed_and_stopped_and_round_the_cost() {
    let repo = Repo::new();
    for lane in ["done", "failed", "stopped"] {
        repo.expect(&["lane", "add", lane], 0);
    }
    // Two sessions of 0.1 and 0.2 dollars: a sum that is not exact in binary.
    let done = STOPPED_STATUS.replace("\"cost_usd\":0.4321", "\"cost_usd\":0.30000000000000004");
    let failed = done
        .replace("\"last_exit_code\":0", "\"last_exit_code\":1")
        .replace("\"commits\":2}", "\"commits\":2,\"failed_exits\":3}");
    let stopped = done.replace(
        "\"exit_reason\":\"max_iterations\"",
        "\"exit_reason\":\"user_stop\"",
    );
    assert_ne!(stopped, done);
    repo.write(".clowder/lanes/done/harness.status", &done);
    repo.write(".clowder/lanes/failed/harness.status", &failed);
    repo.write(".clowder/lanes/stopped/harness.status", &stopped);

    let rows = repo.lanes_json();
    let states: Vec<&str> = rows
        .iter()
        .map(|r| r["state"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(states, ["done", "failed", "stopped"]);
    assert_eq!(rows[1]["last_exit_code"], 1);
    let text = repo.expect(&["lanes", "--json"], 0);
    assert!(text.contains("\"cost_usd\": 0.3,"), "{text}");
    assert!(!text.contains("0.30000000000000004"), "{text}");
}

#[test]
fn pending_approvals_are_counted_for_the_lane_whose_folder_asked() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    repo.expect(&["lane", "add", "root", "--dir", "."], 0);
    let pending = repo.path(".clowder/approvals/pending");
    std::fs::create_dir_all(&pending).expect("mkdir");
    let worktree = repo.path(".clowder/worktrees/auth").display().to_string();
    let elsewhere = std::env::temp_dir().display().to_string();
    for (id, cwd) in [
        ("req-aaaaaaa1", format!("{worktree}/src")),
        ("req-aaaaaaa2", worktree.clone()),
        ("req-aaaaaaa3", repo.root().display().to_string()),
        ("req-aaaaaaa4", elsewhere),
    ] {
        let request = serde_json::json!({
            "id": id, "created": "2026-01-01T00:00:00Z", "kind": "tool",
            "title": "Bash", "tool_name": "Bash", "tool_input": {"command": "ls"},
            "cwd": cwd,
        });
        std::fs::write(pending.join(format!("{id}.json")), request.to_string()).expect("write");
    }
    let rows = repo.lanes_json();
    assert_eq!(rows[0]["pending_approvals"], 2, "{rows:?}");
    assert_eq!(rows[1]["pending_approvals"], 1, "{rows:?}");
    let table = repo.expect(&["lanes"], 0);
    assert!(
        table.contains("1 pending approval request(s) come from no lane's folder"),
        "{table}"
    );
}

#[test]
fn rm_refuses_uncommitted_changes_untracked_files_and_unmerged_commits() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    let worktree = repo.path(".clowder/worktrees/auth");

    std::fs::write(worktree.join("README.md"), "changed\n").expect("write");
    let out = repo.expect(&["lane", "rm", "auth"], 1);
    assert!(
        out.contains("uncommitted changes") && out.contains("README.md"),
        "{out}"
    );
    git_in(&worktree, &["checkout", "--", "README.md"]);

    std::fs::write(worktree.join("new.txt"), "untracked\n").expect("write");
    let out = repo.expect(&["lane", "rm", "auth"], 1);
    assert!(out.contains("new.txt"), "{out}");
    std::fs::remove_file(worktree.join("new.txt")).expect("rm");

    // Another branch checked out in the worktree: its commits are not clowder's to judge.
    git_in(&worktree, &["checkout", "--quiet", "-b", "other"]);
    let out = repo.expect(&["lane", "rm", "auth", "--force"], 1);
    assert!(
        out.contains("has other checked out, not clowder/auth"),
        "{out}"
    );
    git_in(&worktree, &["checkout", "--quiet", "clowder/auth"]);

    repo.commit_in_lane("auth", "work.txt");
    let out = repo.expect(&["lane", "rm", "auth"], 1);
    assert!(
        out.contains("clowder/auth has 1 commit that neither main nor any other branch"),
        "{out}"
    );

    assert!(worktree.join("work.txt").is_file(), "nothing was removed");
    assert!(repo.branch_exists("clowder/auth"));
    assert!(repo.lane("auth").is_some());
}

#[test]
fn rm_force_removes_the_worktree_and_keeps_the_branch_and_the_changes() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    repo.commit_in_lane("auth", "work.txt");
    let tip = repo.git(&["rev-parse", "clowder/auth"]);
    let worktree = repo.path(".clowder/worktrees/auth");
    std::fs::write(worktree.join("draft.txt"), "not committed\n").expect("write");

    let out = repo.expect(&["lane", "rm", "auth", "--force"], 0);
    assert!(
        out.contains(&format!("kept branch clowder/auth at {tip}")),
        "{out}"
    );
    assert!(!worktree.exists());
    assert_eq!(repo.git(&["rev-parse", "clowder/auth"]), tip);
    assert!(repo.lane("auth").is_none());
    // The uncommitted file is in the stash, not lost.
    let stash = repo.git(&["stash", "list"]);
    assert!(stash.contains("clowder lane rm auth"), "{stash}");
    let files = repo.git(&["show", "--name-only", "--format=", "stash@{0}^3"]);
    assert_eq!(files, "draft.txt");
}

#[test]
fn a_safe_rm_removes_the_worktree_the_branch_and_the_entry() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    repo.expect(&["lane", "add", "docs"], 0);
    // Work merged into the base is not lost when the branch goes.
    repo.commit_in_lane("auth", "work.txt");
    repo.git(&["merge", "--quiet", "--ff-only", "clowder/auth"]);
    repo.write(".clowder/lanes/auth/harness.status", STOPPED_STATUS);

    let out = repo.expect(&["lane", "rm", "auth"], 0);
    assert!(out.contains("deleted branch clowder/auth"), "{out}");
    assert!(!repo.path(".clowder/worktrees/auth").exists());
    assert!(!repo.branch_exists("clowder/auth"));
    assert!(repo.lane("auth").is_none());
    assert!(repo.lane("docs").is_some());
    assert!(!repo.path(".clowder/lanes/auth").exists());
    let kept: Vec<_> = std::fs::read_dir(repo.path(".clowder/lanes-removed"))
        .expect("the lane's files are kept")
        .filter_map(Result::ok)
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(kept[0].path().join("harness.status").is_file());
    assert!(repo.git(&["worktree", "list"]).lines().count() == 2);

    // The name is free again, with a fresh files folder.
    repo.expect(&["lane", "add", "auth"], 0);
    assert_eq!(repo.lanes_json()[1]["state"], "not started");
}

#[test]
fn orphaned_worktrees_are_reported_and_never_deleted() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "gone"], 0);
    repo.expect(&["lane", "add", "kept"], 0);
    std::fs::remove_dir_all(repo.path(".clowder/worktrees/gone")).expect("rm");
    std::fs::create_dir_all(repo.path(".clowder/worktrees/stray")).expect("mkdir");
    std::fs::write(repo.path(".clowder/worktrees/stray/file"), "x").expect("write");

    let out = repo.expect(&["lanes"], 0);
    assert!(
        out.contains(
            "orphan: .clowder/worktrees/gone: lane gone is registered but its folder is gone"
        ),
        "{out}"
    );
    assert!(
        out.contains("orphan: .clowder/worktrees/stray: present but no registered lane owns it"),
        "{out}"
    );
    assert!(!out.contains("orphan: .clowder/worktrees/kept"), "{out}");
    assert!(repo.path(".clowder/worktrees/stray/file").is_file());
    assert!(repo.lane("gone").is_some());
    let out = repo.expect(&["lane", "add", "stray"], 2);
    assert!(
        out.contains("already exists but is no registered lane"),
        "{out}"
    );
    assert!(repo.path(".clowder/worktrees/stray/file").is_file());

    // A lane whose worktree is gone can still be removed; its branch goes too.
    repo.expect(&["lane", "rm", "gone"], 0);
    assert!(!repo.branch_exists("clowder/gone"));
}

#[test]
fn stop_pause_and_resume_are_recorded_in_the_registry() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    let out = repo.expect(&["lane", "stop", "auth"], 0);
    assert!(out.contains("lane auth: stopped (was active)"), "{out}");
    assert!(out.contains("recorded only"), "{out}");
    assert_eq!(repo.lane("auth").expect("lane")["state"], "stopped");
    assert!(
        !repo.path(".clowder/lanes/auth/STOP").exists(),
        "no STOP without a running clowder: it would end the next run at once"
    );
    repo.expect(&["lane", "resume", "auth"], 0);
    assert_eq!(repo.lane("auth").expect("lane")["state"], "active");
    repo.expect(&["lane", "pause", "auth"], 0);
    assert_eq!(repo.lane("auth").expect("lane")["state"], "paused");
    repo.expect(&["lane", "stop", "auth", "--now"], 0);
    assert_eq!(repo.lane("auth").expect("lane")["state"], "stopped");
    let out = repo.expect(&["lane", "pause", "nobody"], 2);
    assert!(out.contains("no lane named nobody"), "{out}");
}

/// Holds the folder's instance lock as a running clowder would.
fn hold_lock(root: &Path) -> std::fs::File {
    use std::os::unix::io::AsRawFd;
    std::fs::create_dir_all(root.join(".clowder")).expect("mkdir");
    let path = root.join(".clowder/lock");
    std::fs::write(&path, format!("{}\n", std::process::id())).expect("write");
    let file = std::fs::File::open(&path).expect("open");
    // SAFETY: flock on a descriptor this test owns.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(rc, 0, "lock");
    file
}

#[test]
fn with_a_clowder_running_the_requests_are_left_in_the_lane_folder() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    let lock = hold_lock(repo.root());
    let files = repo.path(".clowder/lanes/auth");
    let out = repo.expect(&["lane", "pause", "auth"], 0);
    assert!(out.contains("left"), "{out}");
    assert!(files.join("pause").exists());
    repo.expect(&["lane", "stop", "auth", "--now"], 0);
    assert!(files.join("STOP").exists());
    assert!(files.join("stop-now").exists());
    repo.expect(&["lane", "resume", "auth"], 0);
    assert!(files.join("resume").exists());
    assert!(!files.join("STOP").exists(), "resuming withdraws the stop");
    drop(lock);
}

#[test]
fn a_corrupt_or_newer_registry_is_refused_and_left_alone() {
    let repo = Repo::new();
    std::fs::create_dir_all(repo.path(".clowder")).expect("mkdir");
    let cases = [
        (
            r#"{"schema_version": 99, "lanes": []}"#,
            "fleet.json: made by a newer clowder (schema 99, this one reads up to 1)",
        ),
        (
            "{\"schema_version\": 1,\n \"lanes\": [",
            "fleet.json: line 2",
        ),
        (
            r#"{"schema_version": 1, "lanes": [{"name": "Bad"}]}"#,
            "at lanes[0].name",
        ),
        (r#"{"lanes": []}"#, "no schema_version"),
    ];
    for (text, expected) in cases {
        repo.write(".clowder/fleet.json", text);
        for args in [
            &["lanes"][..],
            &["lane", "add", "x"],
            &["lane", "stop", "x"],
            &["lane", "rm", "x"],
        ] {
            // A state file that cannot be read is a configuration error: exit 2.
            let out = repo.expect(args, 2);
            assert!(out.contains(expected), "{args:?} on {text}: {out}");
            assert!(out.contains(".clowder/fleet.json"), "{out}");
        }
        let after = std::fs::read_to_string(repo.path(".clowder/fleet.json")).expect("read");
        assert_eq!(after, text, "the file is left as it was");
    }
    assert!(!repo.branch_exists("clowder/x"));
}

/// A loop run by hand; killed with its agent's group if a test fails halfway.
struct HandLoop {
    child: std::process::Child,
    agent_group: Option<i32>,
}

impl Drop for HandLoop {
    fn drop(&mut self) {
        if let Some(pgid) = self.agent_group {
            // SAFETY: kill(2) with a group id and a signal number touches no memory.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_running_lane_shows_its_live_state_and_is_not_removed() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    // Until the fleet runs lanes, a loop run by hand in the lane's files folder
    // writes the status file `clowder lanes` reads.
    let files = repo.path(".clowder/lanes/auth");
    std::fs::write(
        files.join("harness.toml"),
        common::fast_config(&["hang"], ""),
    )
    .expect("write");
    std::fs::write(files.join("PROMPT.md"), "Work.\n").expect("write");
    let mut command = Command::new(clowder_bin());
    isolate(&mut command)
        .args(["--headless"])
        .current_dir(&files)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut hand = HandLoop {
        child: command.spawn().expect("spawn clowder"),
        agent_group: None,
    };
    let status_file = files.join("harness.status");
    let read_status = || -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(&status_file).ok()?).ok()
    };
    let running = common::wait_until(DEADLINE, || {
        read_status().is_some_and(|status| status["state"] == "session_running")
    });
    assert!(running, "the loop did not start a session");
    let pgid = read_status().expect("status")["pgid"]
        .as_i64()
        .expect("pgid") as i32;
    hand.agent_group = Some(pgid);

    let row = repo.lanes_json().remove(0);
    assert_eq!(row["state"], "running", "{row}");
    assert_eq!(row["loop_state"], "session_running", "{row}");
    assert_eq!(row["running"], true);
    assert_eq!(row["iteration"], 1);
    assert!(row["idle_secs"].is_i64(), "{row}");
    let out = repo.expect(&["lane", "rm", "auth", "--force"], 1);
    assert!(out.contains("lane auth is running"), "{out}");
    assert!(repo.path(".clowder/worktrees/auth").is_dir());

    // Twice: the first only asks the session to finish.
    common::send_signal(hand.child.id(), libc::SIGINT);
    assert!(common::wait_until(DEADLINE, || {
        read_status().is_some_and(|status| status["stop_pending"] == true)
    }));
    common::send_signal(hand.child.id(), libc::SIGINT);
    assert!(common::wait_until(DEADLINE, || {
        hand.child.try_wait().expect("wait").is_some()
    }));
    assert!(common::wait_until(DEADLINE, || {
        common::live_group_members(pgid).is_empty()
    }));
    let row = repo.lanes_json().remove(0);
    assert_eq!(row["state"], "stopped", "{row}");
    assert_eq!(row["running"], false);
}

#[test]
fn rm_refuses_ignored_files_and_with_force_moves_them_beside_the_lanes_kept_files() {
    let repo = Repo::new();
    repo.write(".gitignore", ".env\ntarget/\n");
    repo.git(&["add", ".gitignore"]);
    repo.git(&["commit", "--quiet", "-m", "ignore"]);
    repo.expect(&["lane", "add", "auth"], 0);
    let worktree = repo.path(".clowder/worktrees/auth");
    std::fs::write(worktree.join(".env"), "SECRET=1\n").expect("write");
    std::fs::create_dir_all(worktree.join("target/debug")).expect("mkdir");
    std::fs::write(worktree.join("target/debug/app"), "built\n").expect("write");

    let out = repo.expect(&["lane", "rm", "auth"], 1);
    assert!(out.contains("files git ignores"), "{out}");
    assert!(out.contains(".env") && out.contains("target/"), "{out}");
    assert!(worktree.join(".env").is_file(), "nothing was removed");
    assert!(repo.lane("auth").is_some());

    let out = repo.expect(&["lane", "rm", "auth", "--force"], 0);
    assert!(
        out.contains("moved 2 file(s) git ignores to .clowder/lanes-removed/auth-"),
        "{out}"
    );
    assert!(!worktree.exists());
    let kept = std::fs::read_dir(repo.path(".clowder/lanes-removed"))
        .expect("lanes-removed")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.to_string_lossy().ends_with("-ignored"))
        .expect("the ignored files' folder");
    assert!(
        out.contains(
            &kept
                .file_name()
                .expect("name")
                .to_string_lossy()
                .to_string()
        )
    );
    assert_eq!(
        std::fs::read_to_string(kept.join(".env")).expect(".env kept"),
        "SECRET=1\n"
    );
    assert!(kept.join("target/debug/app").is_file());
}

#[test]
fn rm_of_a_step_merged_into_the_base_past_its_dependency_is_allowed() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "cl-a"], 0);
    repo.commit_in_lane("cl-a", "a.txt");
    // A plan step after cl-a starts from cl-a's branch; its work then goes to main.
    repo.expect(&["lane", "add", "cl-b", "--base", "clowder/cl-a"], 0);
    repo.commit_in_lane("cl-b", "b.txt");
    repo.git(&[
        "merge",
        "--quiet",
        "--no-ff",
        "-m",
        "merge b",
        "clowder/cl-b",
    ]);
    let out = repo.expect(&["lane", "rm", "cl-b"], 0);
    assert!(out.contains("deleted branch clowder/cl-b"), "{out}");
    assert!(!repo.branch_exists("clowder/cl-b"));
    // What only a branch holds is still refused.
    repo.expect(&["lane", "add", "cl-c", "--base", "clowder/cl-a"], 0);
    repo.commit_in_lane("cl-c", "c.txt");
    let out = repo.expect(&["lane", "rm", "cl-c"], 1);
    assert!(
        out.contains("clowder/cl-c has 1 commit that neither clowder/cl-a nor any other branch, local or remote-tracking, has"),
        "{out}"
    );
}

#[test]
fn a_worktree_lane_edited_to_work_elsewhere_is_refused_naming_the_key() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    let outside = tempfile::tempdir().expect("tempdir");
    let original = std::fs::read_to_string(repo.path(".clowder/fleet.json")).expect("read");
    let edits = [
        (
            original.replace(
                "\".clowder/worktrees/auth\"",
                &format!("{:?}", outside.path().display().to_string()),
            ),
            "at lanes[0].dir: lane auth has its own worktree, which is .clowder/worktrees/auth",
        ),
        (
            original.replace("\"clowder/auth\"", "\"main\""),
            "at lanes[0].branch: lane auth works on clowder/auth, not main",
        ),
    ];
    for (text, expected) in edits {
        assert_ne!(text, original);
        repo.write(".clowder/fleet.json", &text);
        for args in [&["lanes"][..], &["lane", "rm", "auth", "--force"]] {
            // A state file that cannot be used is a configuration error.
            let out = repo.expect(args, 2);
            assert!(out.contains(".clowder/fleet.json: "), "{out}");
            assert!(out.contains(expected), "{args:?}: {out}");
        }
        let out = repo.clowder(&["--headless"]);
        assert_ne!(out.status.code(), Some(0));
        assert!(stderr_of(&out).contains(expected), "{}", stderr_of(&out));
    }
    assert!(repo.path(".clowder/worktrees/auth").is_dir());
}

#[test]
fn a_refused_lane_add_leaves_no_clowder_folder_behind() {
    let plain = tempfile::tempdir().expect("tempdir");
    let bare = tempfile::tempdir().expect("tempdir");
    git_in(bare.path(), &["init", "--quiet", "--bare"]);
    let empty = tempfile::tempdir().expect("tempdir");
    git_in(empty.path(), &["init", "--quiet"]);
    for (dir, expected) in [
        (plain.path(), "needs a git repository"),
        (bare.path(), "needs a git repository"),
        (empty.path(), "no commit yet"),
    ] {
        let out = wait_with_deadline(
            clowder_command(dir, &["lane", "add", "x"])
                .spawn()
                .expect("spawn"),
            DEADLINE,
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(stderr_of(&out).contains(expected), "{}", stderr_of(&out));
        assert!(
            !dir.join(".clowder").exists(),
            "{}: .clowder was left",
            dir.display()
        );
    }
}

/// Runs clowder with its standard output on a full disk (`/dev/full`).
fn on_full_disk(repo: &Repo, args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let child = clowder_command(repo.root(), args)
        .stdout(Stdio::from(full))
        .spawn()
        .expect("spawn");
    wait_with_deadline(child, DEADLINE)
}

#[test]
fn a_full_disk_under_stdout_is_one_error_line_and_exit_1() {
    let repo = Repo::new();
    repo.expect(&["lane", "add", "auth"], 0);
    repo.expect(&["lane", "add", "docs"], 0);
    for args in [
        &["lanes"][..],
        &["lanes", "--json"],
        &["--dry-run"],
        &["lane", "rm", "docs"],
        &["lane", "stop", "auth"],
    ] {
        let out = on_full_disk(&repo, args);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "clowder: error: cannot write to standard output: No space left on device (os error 28)",
            "{args:?}"
        );
    }
}

/// Whether lane `name` is whole (registered, its worktree on its branch) or
/// wholly gone (no entry, worktree, branch, nor anything pending).
fn whole_or_gone(repo: &Repo, name: &str) -> Result<bool, String> {
    let registry = repo.registry();
    let pending = registry.get("pending").cloned().unwrap_or(Value::Null);
    if !pending.is_null() {
        return Err(format!("still pending: {pending}"));
    }
    let registered = repo.lane(name).is_some();
    let worktree = repo.path(&format!(".clowder/worktrees/{name}"));
    let branch = repo.branch_exists(&format!("clowder/{name}"));
    let listed = repo
        .git(&["worktree", "list", "--porcelain"])
        .contains(&format!("worktrees/{name}\n"));
    match (registered, worktree.is_dir(), branch, listed) {
        (true, true, true, true) => Ok(true),
        (false, false, false, false) => Ok(false),
        parts => Err(format!(
            "half a lane: registered, folder, branch, git's worktree = {parts:?}"
        )),
    }
}

/// Starts `clowder args…` and SIGKILLs it after `delay` (if it has not ended).
fn killed_after(repo: &Repo, args: &[&str], delay: std::time::Duration) -> bool {
    let mut child = clowder_command(repo.root(), args).spawn().expect("spawn");
    std::thread::sleep(delay);
    let killed = child.try_wait().expect("try_wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    killed
}

#[test]
fn lane_add_and_rm_killed_at_random_moments_leave_a_whole_lane_or_none() {
    use rand::{Rng, SeedableRng};
    const ROUNDS: u64 = 30;
    let seed = std::env::var("CLOWDER_TORTURE_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0x1a4e5);
    eprintln!("torture seed {seed} (CLOWDER_TORTURE_SEED={seed} replays it)");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let repo = Repo::new();
    repo.expect(&["lane", "add", "keep"], 0);
    let mut interrupted = 0;
    for round in 0..ROUNDS {
        let name = format!("k{round}");
        // A lane add takes about 200 ms here, a lane rm about 130 ms.
        let delay = |rng: &mut rand_chacha::ChaCha8Rng, up_to_ms: u64| {
            std::time::Duration::from_micros(rng.random_range(0..up_to_ms * 1000))
        };
        // Every other round the user's `lane rm NAME` meets what is left;
        // otherwise any lane command settles it first.
        let settle = |repo: &Repo| {
            if round % 2 == 0 || repo.registry().get("pending").is_none() {
                repo.expect(&["lane", "pause", "keep"], 0);
            } else {
                repo.expect(&["lane", "rm", &name], 0);
            }
        };
        if killed_after(&repo, &["lane", "add", &name], delay(&mut rng, 250))
            && repo.registry().get("pending").is_some()
        {
            interrupted += 1;
        }
        settle(&repo);
        let whole = whole_or_gone(&repo, &name).unwrap_or_else(|e| panic!("add {name}: {e}"));
        if !whole {
            continue;
        }
        if killed_after(&repo, &["lane", "rm", &name], delay(&mut rng, 160))
            && repo.registry().get("pending").is_some()
        {
            interrupted += 1;
        }
        settle(&repo);
        if whole_or_gone(&repo, &name).unwrap_or_else(|e| panic!("rm {name}: {e}")) {
            repo.expect(&["lane", "rm", &name], 0);
            assert_eq!(whole_or_gone(&repo, &name), Ok(false));
        }
    }
    eprintln!(
        "{interrupted} kill(s) of {} left a change half done",
        ROUNDS * 2
    );
    let out = repo.expect(&["lanes"], 0);
    assert!(!out.contains("orphan"), "{out}");
}

#[test]
fn a_fleet_start_finishes_a_lane_rm_that_was_killed_midway() {
    let repo = Repo::new();
    repo.write("harness.toml", &common::fast_config(&["normal"], ""));
    repo.write("PROMPT.md", "Work.\n");
    repo.expect(&["lane", "add", "keep"], 0);
    repo.expect(&["lane", "stop", "keep"], 0);
    repo.expect(&["lane", "add", "gone"], 0);
    // As `lane rm gone` leaves it when killed right after removing the worktree.
    let mut registry = repo.registry();
    let lanes = registry["lanes"].as_array_mut().expect("lanes");
    let lane = lanes.pop().expect("gone");
    registry["pending"] = serde_json::json!([{"change": "removing", "lane": lane}]);
    repo.write(
        ".clowder/fleet.json",
        &serde_json::to_string_pretty(&registry).expect("json"),
    );
    repo.git(&["worktree", "remove", ".clowder/worktrees/gone"]);
    let out = repo.expect(&["lanes"], 0);
    assert!(
        out.contains("lane gone: an interrupted `lane rm gone` is half done"),
        "{out}"
    );

    let out = repo.expect(&["--headless"], 0);
    assert!(
        out.contains("lane gone: the interrupted `lane rm` is done"),
        "{out}"
    );
    assert_eq!(whole_or_gone(&repo, "gone"), Ok(false));
    assert!(repo.lane("keep").is_some());
}

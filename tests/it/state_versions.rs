//! The versions of clowder's state files: every frozen example in
//! `tests/fixtures/state/` (files as earlier clowders wrote them, kept forever)
//! still loads, and a file from a newer clowder is refused with its name and
//! both versions, through the commands that read it.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use clowder::plan::state::{PlanState, SCHEMA_VERSION};
use common::git::{clowder_command, init_with_one_commit};
use common::plan::PlanRepo;
use common::{DEADLINE, fast_config, stderr_of, stdout_of, wait_with_deadline};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/state")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// `text` with `"schema_version": version` put first.
fn with_version(text: &str, version: u64) -> String {
    let mut value: serde_json::Value = serde_json::from_str(text).expect("fixture JSON");
    let object = value.as_object_mut().expect("an object");
    object.insert("schema_version".into(), version.into());
    serde_json::to_string_pretty(&value).expect("encodes")
}

fn put(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

fn clowder(dir: &Path, args: &[&str]) -> Output {
    let child = clowder_command(dir, args).spawn().expect("spawn clowder");
    wait_with_deadline(child, DEADLINE)
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    init_with_one_commit(dir.path());
    put(
        &dir.path().join("harness.toml"),
        &fast_config(&["normal"], ""),
    );
    dir
}

/// A task directory from the frozen task.json, state.json and heartbeat.json.
fn task_dir(root: &Path, state: &str) -> PathBuf {
    let dir = root.join("crawl");
    put(&dir.join("task.json"), &fixture("task-v0.json"));
    put(&dir.join("state.json"), state);
    put(&dir.join("heartbeat.json"), &fixture("heartbeat-v0.json"));
    dir
}

/// An approval queue folder holding the frozen request as pending.
fn queue_with(root: &Path, request: &str) -> PathBuf {
    let queue = root.join("q");
    put(&queue.join("pending/r20261124-abc123.json"), request);
    for dir in [queue.clone(), queue.join("pending")] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    queue
}

#[test]
fn a_fleet_json_of_version_1_loads_as_written_by_every_earlier_clowder() {
    for name in ["fleet-v1.json", "fleet-v1-first.json"] {
        let dir = tempfile::tempdir().expect("tempdir");
        put(&dir.path().join(".clowder/fleet.json"), &fixture(name));
        let registry = clowder::fleet::registry::load(dir.path()).expect(name);
        assert_eq!(registry.schema_version, 1, "{name}");
        assert!(!registry.lanes.is_empty(), "{name}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    put(
        &dir.path().join(".clowder/fleet.json"),
        &fixture("fleet-v1.json"),
    );
    let registry = clowder::fleet::registry::load(dir.path()).expect("fleet-v1");
    assert_eq!(registry.lanes.len(), 3);
    assert_eq!(registry.pending.len(), 1);
    assert_eq!(registry.lanes[0].resumes, 2);
}

#[test]
fn a_plan_state_of_version_1_is_migrated_with_a_fingerprint_per_step() {
    let state = PlanState::from_json(&fixture("plan-state-v1.json")).expect("plan state v1");
    assert_eq!(state.schema_version, SCHEMA_VERSION);
    assert_eq!(state.steps.len(), 3);
    for step in &state.steps {
        assert_eq!(step.fingerprint.len(), 16, "{step:?}");
        assert_eq!(step.fingerprint, step.definition().fingerprint());
    }
    // The same definition in a state made now has the same fingerprint.
    let json = state.to_json();
    assert!(json.contains("\"schema_version\": 2"), "{json}");
    assert_eq!(PlanState::from_json(&json).expect("reads back"), state);

    let dir = repo();
    put(
        &dir.path().join(".clowder/plans/demo.json"),
        &fixture("plan-state-v1.json"),
    );
    let out = clowder(dir.path(), &["plan", "status", "demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("demo-b"), "{}", stdout_of(&out));
    // Read, not written: the file stays as it was until the plan runs.
    let after = std::fs::read_to_string(dir.path().join(".clowder/plans/demo.json"));
    assert_eq!(after.expect("read"), fixture("plan-state-v1.json"));
}

#[test]
fn task_files_without_a_version_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (state, status, iteration) in [
        ("task-state-v0.json", "completed", 4),
        ("task-state-v0-by-hand.json", "stopped", 0),
    ] {
        let task = task_dir(dir.path(), &fixture(state));
        let out = clowder(
            dir.path(),
            &["tasks", &task.display().to_string(), "--json"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let rows: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("JSON");
        assert_eq!(rows[0]["status"], status, "{state}: {rows}");
        assert_eq!(rows[0]["iteration"], iteration, "{state}: {rows}");
        assert_eq!(rows[0]["heartbeat_status"], "completed", "{state}: {rows}");
    }
}

/// The frozen actions.jsonl lines of a task (version 0: each answer's reasoning
/// beside the answer) are the history a worker goes on from, and what
/// `clowder tasks` shows; the worker appends lines of its own version after them.
#[test]
fn actions_lines_without_a_version_are_the_history_a_worker_goes_on_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state: serde_json::Value =
        serde_json::from_str(&fixture("task-state-v0.json")).expect("JSON");
    state["status"] = "running".into();
    state["iteration"] = 9.into();
    state["started_at"] = chrono::Utc::now().to_rfc3339().into();
    let task = task_dir(dir.path(), &state.to_string());
    let frozen = fixture("actions-v0.jsonl");
    put(&task.join("actions.jsonl"), &frozen);
    put(
        &dir.path().join("harness.toml"),
        "[worker]\nllm = [\"sh\", \"-c\", \"cat > context.txt; echo '{\\\"actions\\\": []}'\"]\n",
    );
    let out = clowder(dir.path(), &["tasks", "crawl", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("JSON");
    assert!(
        rows[0]["last_action"]
            .as_str()
            .is_some_and(|a| a.starts_with("#3 refused")),
        "{rows}"
    );
    let out = clowder(dir.path(), &["worker", "crawl"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let context = std::fs::read_to_string(dir.path().join("context.txt")).expect("context");
    for seen in [
        "## iteration 1",
        "task.json (230 bytes)",
        "wrote summary.txt (8 bytes)",
        "`..` is not allowed",
        "## iteration 3",
        "Sure! Here is the JSON:",
    ] {
        assert!(context.contains(seen), "{seen}: {context}");
    }
    let log = std::fs::read_to_string(task.join("actions.jsonl")).expect("log");
    let (old, new) = log.split_at(frozen.len());
    assert_eq!(old, frozen, "the old lines are kept as written");
    let line: serde_json::Value = serde_json::from_str(new.trim()).expect("one new line");
    assert_eq!(line["schema_version"], 1);
    assert_eq!(line["iteration"], 10);
    // A line of a newer version is not taken for one this clowder knows.
    put(
        &task.join("actions.jsonl"),
        &format!(
            "{}\n",
            with_version(frozen.lines().next().expect("a line"), 2).replace('\n', "")
        ),
    );
    let out = clowder(dir.path(), &["tasks", "crawl", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("JSON");
    assert!(rows[0]["last_action"].is_null(), "{rows}");
}

#[test]
fn approval_files_status_and_running_records_without_a_version_load() {
    let dir = repo();
    let queue = queue_with(dir.path(), &fixture("request-v0.json"));
    let out = clowder(
        dir.path(),
        &["queue", "--dir", &queue.display().to_string(), "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("r20261124-abc123") && stderr_of(&out).is_empty(),
        "{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );

    put(
        &queue.join("done/r20261124-abc123.json"),
        &fixture("done-v0.json"),
    );
    let done = clowder::approvals::list_done(&queue, 10);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].outcome, "rejected");
    let decision = done[0].decision.as_ref().expect("its decision");
    assert_eq!(decision.reason.as_deref(), Some("not today"));

    put(
        &dir.path().join("harness.status"),
        &fixture("status-v0.json"),
    );
    let out = clowder(dir.path(), &["--status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("3/3"), "{}", stdout_of(&out));

    let records = dir.path().join("running");
    put(
        &records.join("4242.1700000000.s17.json"),
        &fixture("running-v0.json"),
    );
    let all = clowder::store::running::Running::in_dir(records).all();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].pgid, 4250);
}

/// The frozen decision file reads as this clowder's own, once its hash is the
/// request's: a second decision is told who decided first.
#[test]
fn a_decision_without_a_version_is_read_as_the_first_decision() {
    use sha2::Digest;
    let dir = repo();
    let request = fixture("request-v0.json");
    let queue = queue_with(dir.path(), &request);
    let hash = format!("{:x}", sha2::Sha256::digest(request.as_bytes()));
    let decision = fixture("decision-v0.json").replace(
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        &hash,
    );
    put(&queue.join("decided/r20261124-abc123.json"), &decision);
    std::fs::set_permissions(
        queue.join("decided"),
        std::fs::Permissions::from_mode(0o700),
    )
    .expect("chmod");
    let out = clowder(
        dir.path(),
        &[
            "approve",
            "r20261124-abc123",
            "--dir",
            &queue.display().to_string(),
        ],
    );
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("already rejected by clowder reject (user me, pid 42)"),
        "{}\n{stderr}",
        stdout_of(&out)
    );
}

/// What each command says of a file one version past what it reads.
fn assert_newer(out: &Output, file: &str, found: u64, reads: u64) {
    let said =
        format!("{file}: made by a newer clowder (schema {found}, this one reads up to {reads})");
    let all = format!("{}{}", stdout_of(out), stderr_of(out));
    assert!(all.contains(&said), "wanted {said:?} in:\n{all}");
}

#[test]
fn a_state_file_from_a_newer_clowder_is_refused_naming_it_and_both_versions() {
    let dir = repo();
    let root = dir.path();
    put(
        &root.join(".clowder/fleet.json"),
        &with_version(&fixture("fleet-v1.json"), 2).replace("\"lanes\"", "\"later\": 1, \"lanes\""),
    );
    for args in [&["lanes"][..], &["lanes", "--json"]] {
        let out = clowder(root, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_newer(&out, ".clowder/fleet.json", 2, 1);
    }
    std::fs::remove_file(root.join(".clowder/fleet.json")).expect("rm");

    let next = u64::from(SCHEMA_VERSION) + 1;
    put(
        &root.join(".clowder/plans/demo.json"),
        &with_version(&fixture("plan-state-v1.json"), next),
    );
    for args in [&["plan", "status"][..], &["plan", "status", "demo"]] {
        let out = clowder(root, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_newer(&out, "plans/demo.json", next, SCHEMA_VERSION.into());
    }

    let task = task_dir(root, &with_version(&fixture("task-state-v0.json"), 2));
    let out = clowder(root, &["tasks", &task.display().to_string(), "--json"]);
    assert!(stdout_of(&out).contains("\"newer\""), "{}", stdout_of(&out));
    assert_newer(&out, "crawl/state.json", 2, 1);

    let queue = queue_with(root, &with_version(&fixture("request-v0.json"), 2));
    let out = clowder(root, &["queue", "--dir", &queue.display().to_string()]);
    assert_newer(&out, "pending/r20261124-abc123.json", 2, 1);
    // Left for the clowder that wrote it.
    assert!(queue.join("pending/r20261124-abc123.json").is_file());

    put(
        &root.join("harness.status"),
        &with_version(&fixture("status-v0.json"), 2),
    );
    let out = clowder(root, &["--status"]);
    assert_eq!(out.status.code(), Some(2));
    assert_newer(&out, "harness.status", 2, 1);
}

const FIRST_PLAN: &str = r#"
[plan]
name = "pl"

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "b"
depends_on = ["a"]
prompt = "write b.txt\nfail"

[[step]]
id = "x"
depends_on = ["a"]
prompt = "write x.txt\nfail"
"#;

const CHANGED_PLAN: &str = r#"
[plan]
name = "pl"

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "b"
depends_on = ["a"]
prompt = "write b.txt"

[[step]]
id = "c"
depends_on = ["b"]
prompt = "write c.txt"
"#;

#[test]
fn a_changed_plan_file_is_refused_naming_its_steps_and_restart_keeps_the_merged_work() {
    let repo = PlanRepo::new(FIRST_PLAN);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let sessions_of_a = repo.prompts_of("pl-a").len();

    std::fs::write(repo.path("plan.toml"), CHANGED_PLAN).expect("write");
    let out = repo.run_plan();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for said in [
        "plan.toml changed since its plan's state was made",
        "step b: changed (prompt)",
        "step c: added",
        "step x: removed",
        "clowder plan run plan.toml --restart",
    ] {
        assert!(stderr.contains(said), "{said:?} in:\n{stderr}");
    }
    assert!(!stderr.contains("step a"), "{stderr}");

    let out = repo.clowder(&["plan", "run", "plan.toml", "--headless", "--restart"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(stdout.contains("step a: merged, stays merged"), "{stdout}");
    assert_eq!(
        repo.step_states("pl"),
        [("a", "merged"), ("b", "merged"), ("c", "merged")]
            .map(|(id, state)| (id.to_string(), state.to_string()))
            .to_vec()
    );
    assert_eq!(repo.prompts_of("pl-a").len(), sessions_of_a, "a ran again");
    let files = repo.git(&["ls-tree", "--name-only", "main"]);
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(files.lines().any(|f| f == file), "{file} in {files}");
    }
    // The unchanged plan runs on as before: nothing to run.
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A plan named like a sub-plan (`PARENT-STEP`) once shared its state file:
/// it found the sub-plan's, completed, and ran nothing.
#[test]
fn a_plan_named_like_a_subplan_has_a_state_of_its_own() {
    let parent = "[plan]\nname = \"par\"\n\n[[step]]\nid = \"sub\"\nplan = \"sub.toml\"\n";
    let repo = PlanRepo::new(parent);
    let sub = "[plan]\nname = \"inner\"\n\n[[step]]\nid = \"x\"\nprompt = \"write x.txt\"\n";
    std::fs::write(repo.path("sub.toml"), sub).expect("write");
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(repo.path(".clowder/plans/par/sub/sub.json").is_file());
    assert!(!repo.path(".clowder/plans/par-sub.json").exists());

    let alone = "[plan]\nname = \"par-sub\"\n\n[[step]]\nid = \"z\"\nprompt = \"write z.txt\"\n";
    std::fs::write(repo.path("alone.toml"), alone).expect("write");
    let out = repo.clowder(&["plan", "run", "alone.toml", "--headless"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(
        stdout.contains("clowder: plan par-sub completed"),
        "{stdout}"
    );
    let files = repo.git(&["ls-tree", "--name-only", "main"]);
    assert!(files.lines().any(|f| f == "z.txt"), "{files}");
    assert_eq!(
        repo.step_states("par-sub"),
        vec![("z".to_string(), "merged".to_string())]
    );
}

/// A plan state saved before fingerprints gets them from the definitions it
/// kept: the same plan file is not taken for a changed one, a changed one is.
#[test]
fn a_plan_state_of_version_1_is_checked_against_its_plan_file_too() {
    let repo = PlanRepo::new(FIRST_PLAN);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let path = repo.path(".clowder/plans/pl.json");
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
    saved["schema_version"] = 1.into();
    for step in saved["steps"].as_array_mut().expect("steps") {
        step.as_object_mut().expect("step").remove("fingerprint");
    }
    std::fs::write(&path, saved.to_string()).expect("write");

    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("plan pl is failed: nothing to run"),
        "{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    std::fs::write(
        repo.path("plan.toml"),
        FIRST_PLAN.replace("write x.txt\\nfail", "write x.txt"),
    )
    .expect("write");
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("step x: changed (prompt)"),
        "{}",
        stderr_of(&out)
    );
}

/// A sub-plan file changed since its sub-plan's state was made fails its step,
/// naming the change, rather than run the old sub-plan; `--restart` on the
/// plan starts the sub-plan over from its file.
#[test]
fn a_changed_subplan_file_fails_its_step_until_the_plan_restarts() {
    let parent = "[plan]\nname = \"ps\"\n\n[[step]]\nid = \"sub\"\nplan = \"sub.toml\"\n";
    let repo = PlanRepo::new(parent);
    let sub = "[plan]\nname = \"inner\"\n\n[[step]]\nid = \"y\"\nprompt = \"write y.txt\\nfail\"\n";
    std::fs::write(repo.path("sub.toml"), sub).expect("write");
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));

    std::fs::write(repo.path("sub.toml"), sub.replace("\\nfail", "")).expect("write");
    let out = repo.clowder(&["plan", "retry", "ps", "--headless"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let (_, rows) = repo.status_json("ps");
    let reason = rows[0]["steps"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("changed since its state was made (step y: changed (prompt))"),
        "{rows}"
    );

    let out = repo.clowder(&["plan", "run", "plan.toml", "--headless", "--restart"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(stdout.contains("its sub-plan starts over"), "{stdout}");
    assert!(
        repo.path(".clowder/plans/ps/sub/sub.json.before-restart")
            .is_file()
    );
    let files = repo.git(&["ls-tree", "--name-only", "main"]);
    assert!(files.lines().any(|f| f == "y.txt"), "{files}");
}

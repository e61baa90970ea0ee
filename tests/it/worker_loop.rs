//! `clowder task new`, `clowder worker` and `clowder tasks` through the binary, with a
//! fake LLM program: a script that answers from canned files, one per call.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{DEADLINE, Project, live_group_members, stderr_of, stdout_of, wait_until};
use serde_json::{Value, json};

/// Call N (counted in `llm/counter`) saves its input as `llm/context-N.txt`, sleeps
/// `llm/sleep-N` seconds if that file exists (in a child, so that the whole group must
/// be killed), and prints `llm/answer-N` (nothing when it is missing).
const FAKE_LLM: &str = r#"#!/bin/sh
dir="$(dirname "$0")"
n=$(cat "$dir/counter" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$dir/counter"
echo "$$" > "$dir/pgid-$n"
cat > "$dir/context-$n.txt"
if [ -f "$dir/sleep-$n" ]; then
    sleep "$(cat "$dir/sleep-$n")" &
    wait
fi
if [ -f "$dir/answer-$n" ]; then cat "$dir/answer-$n"; fi
exit 0
"#;

pub(crate) struct Fixture {
    pub(crate) project: Project,
}

impl Fixture {
    /// A project whose `[worker] llm` is the fake LLM, plus `extra` keys for `[worker]`.
    pub(crate) fn new(extra: &str) -> Fixture {
        let project = Project::new("");
        let llm = project.path("llm");
        std::fs::create_dir_all(&llm).expect("mkdir llm");
        let script = llm.join("fake-llm.sh");
        std::fs::write(&script, FAKE_LLM).expect("write fake llm");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        project.write(
            "harness.toml",
            &format!(
                "[worker]\nllm = [{:?}]\n{extra}\n",
                script.display().to_string()
            ),
        );
        Fixture { project }
    }

    pub(crate) fn answer(&self, n: u32, text: &str) {
        self.project.write(&format!("llm/answer-{n}"), text);
    }

    pub(crate) fn sleep(&self, n: u32, secs: u32) {
        self.project
            .write(&format!("llm/sleep-{n}"), &secs.to_string());
    }

    pub(crate) fn new_task(&self, args: &[&str]) -> Output {
        let mut all = vec!["task", "new", "task", "--prompt", "Write notes about cats."];
        all.extend_from_slice(args);
        let output = self.project.run(&all);
        assert!(output.status.success(), "task new: {}", stderr_of(&output));
        output
    }

    pub(crate) fn task(&self, rel: &str) -> PathBuf {
        self.project.path("task").join(rel)
    }

    pub(crate) fn json(&self, rel: &str) -> Value {
        let text = std::fs::read_to_string(self.task(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}\n{text}"))
    }

    pub(crate) fn actions(&self) -> Vec<Value> {
        std::fs::read_to_string(self.task("actions.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("actions.jsonl line is JSON"))
            .collect()
    }

    pub(crate) fn context(&self, n: u32) -> String {
        self.project.read(&format!("llm/context-{n}.txt"))
    }

    pub(crate) fn pgid(&self, n: u32) -> i32 {
        self.project
            .read(&format!("llm/pgid-{n}"))
            .trim()
            .parse()
            .expect("pgid")
    }

    /// Waits until the fake LLM's call `n` has started (it records its group).
    pub(crate) fn wait_for_llm_call(&self, n: u32) {
        let started = self.project.path(&format!("llm/pgid-{n}"));
        assert!(
            wait_until(DEADLINE, || started.exists()),
            "LLM call {n} never started"
        );
    }

    /// Nothing of the fake LLM's call `n` is left running.
    pub(crate) fn assert_llm_group_ends(&self, n: u32) {
        let pgid = self.pgid(n);
        assert!(
            wait_until(DEADLINE, || live_group_members(pgid).is_empty()),
            "LLM group left running"
        );
    }
}

pub(crate) fn write_file(path: &str, content: &str) -> Value {
    json!({"tool": "write_file", "args": {"path": path, "content": content}})
}

pub(crate) fn answer(actions: Vec<Value>) -> String {
    json!({"reasoning": "because", "actions": actions}).to_string()
}

#[test]
fn a_task_runs_its_iterations_and_every_bad_answer_is_logged_and_counted() {
    let f = Fixture::new("context_iterations = 2");
    f.new_task(&["--max-iterations", "6"]);
    f.answer(
        1,
        &answer(vec![
            write_file("artifacts/notes.md", "cats sleep"),
            json!({"tool": "read_file", "args": {"path": "artifacts/missing.md"}}),
        ]),
    );
    f.answer(2, "this is not JSON {");
    f.answer(
        3,
        &answer(vec![
            json!({"tool": "run_shell", "args": {"command": "touch ../shell-ran"}}),
            json!({"tool": "create_file", "args": {"path": "artifacts/b.txt", "content": "b"}}),
        ]),
    );
    f.answer(
        4,
        &answer(vec![
            write_file("../escaped.txt", "out"),
            write_file("task.json", "{}"),
            write_file("artifacts/c.txt", "c"),
        ]),
    );
    // Call 5: no answer file, so an empty answer.
    f.answer(6, r#"{"actions": [], "verdict": "done"}"#);
    let task_json = std::fs::read_to_string(f.task("task.json")).expect("task.json");

    let output = f.project.run(&["worker", "task"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        stderr_of(&output)
    );
    assert!(stdout_of(&output).contains("completed after 6 iteration(s): max_iterations"));

    assert_eq!(
        std::fs::read_to_string(f.task("artifacts/notes.md")).expect("notes"),
        "cats sleep"
    );
    assert_eq!(
        std::fs::read_to_string(f.task("artifacts/b.txt")).expect("b"),
        "b"
    );
    assert_eq!(
        std::fs::read_to_string(f.task("artifacts/c.txt")).expect("c"),
        "c"
    );
    assert!(!f.project.path("escaped.txt").exists() && !f.project.path("shell-ran").exists());
    assert_eq!(
        std::fs::read_to_string(f.task("task.json")).expect("task.json"),
        task_json
    );

    let actions = f.actions();
    let iterations: Vec<u64> = actions
        .iter()
        .map(|a| a["iteration"].as_u64().expect("n"))
        .collect();
    assert_eq!(iterations, [1, 2, 3, 4, 5, 6]);
    for action in &actions {
        assert!(
            action["timestamp"].is_string() && action["llm_response"].is_string(),
            "{action}"
        );
    }
    assert_eq!(actions[0]["results"][0]["ok"], true);
    assert_eq!(actions[0]["results"][1]["ok"], false);
    // The reasoning is in the answer, kept once.
    assert!(actions[0].get("reasoning").is_none(), "{}", actions[0]);
    assert_eq!(actions[0]["schema_version"], 1);
    let first_answer: Value =
        serde_json::from_str(actions[0]["llm_response"].as_str().expect("answer")).expect("json");
    assert_eq!(first_answer["reasoning"], "because");
    assert!(
        actions[1]["error"]
            .as_str()
            .expect("error")
            .contains("not JSON")
    );
    assert_eq!(actions[1]["llm_response"], "this is not JSON {");
    assert_eq!(actions[2]["results"][0]["skipped"], true);
    assert_eq!(actions[2]["results"][1]["ok"], true);
    assert_eq!(actions[3]["results"][0]["security_violation"], true);
    assert_eq!(actions[3]["results"][1]["security_violation"], true);
    assert_eq!(actions[3]["results"][2]["ok"], true);
    assert!(
        actions[4]["error"]
            .as_str()
            .expect("error")
            .contains("empty answer")
    );
    assert!(
        actions[5]["error"]
            .as_str()
            .expect("error")
            .contains("unknown field `verdict`")
    );

    let state = f.json("state.json");
    assert_eq!(state["status"], "completed");
    assert_eq!(state["iteration"], 6);
    assert_eq!(state["termination_reason"], "max_iterations");
    assert!(state["started_at"].is_string() && state["updated_at"].is_string());
    assert_eq!(
        state["counters"],
        json!({"invalid_answers": 3, "llm_timeouts": 0, "unknown_tools": 1, "tool_errors": 1, "security_violations": 2})
    );
    let heartbeat = f.json("heartbeat.json");
    assert_eq!(heartbeat["status"], "completed");
    assert_eq!(heartbeat["iteration"], 6);
    assert!(heartbeat["timestamp"].is_string());

    // What the LLM saw: the task, the format, the last iterations' results, the files.
    let first = f.context(1);
    assert!(first.contains("Write notes about cats.") && first.contains("# Answer format"));
    assert!(first.contains("iteration 1 of at most 6") && first.contains("(none yet)"));
    let second = f.context(2);
    assert!(
        second.contains("artifacts/missing.md") && second.contains("-> error"),
        "{second}"
    );
    assert!(
        second.contains("artifacts/notes.md"),
        "the listing: {second}"
    );
    let third = f.context(3);
    assert!(third.contains("your answer was refused") && third.contains("this is not JSON {"));
    let fifth = f.context(5);
    assert!(fifth.contains("security violation") && fifth.contains("unknown tool \"run_shell\""));
    assert!(
        !fifth.contains("## iteration 2"),
        "context_iterations = 2: {fifth}"
    );

    // Listed, and not run again.
    let listed = f.project.run(&["tasks", "task", "--json"]);
    let rows: Value = serde_json::from_slice(&listed.stdout).expect("tasks --json");
    assert_eq!(rows[0]["status"], "completed");
    assert_eq!(rows[0]["iteration"], 6);
    assert!(
        rows[0]["last_action"]
            .as_str()
            .expect("last")
            .contains("refused")
    );
    let table = stdout_of(&f.project.run(&["tasks"]));
    assert!(
        table.contains("task") && table.contains("completed") && table.contains("6/6"),
        "{table}"
    );
    let again = f.project.run(&["worker", "task"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(stdout_of(&again).contains("already completed"));
    assert_eq!(f.actions().len(), 6);
}

#[test]
fn task_new_never_overwrites_a_task() {
    let f = Fixture::new("");
    f.new_task(&[
        "--allowed-path",
        "out",
        "--allowed-path",
        "src",
        "--max-iterations",
        "3",
    ]);
    let task = f.json("task.json");
    assert_eq!(task["prompt"], "Write notes about cats.");
    assert_eq!(task["constraints"]["max_iterations"], 3);
    assert_eq!(task["constraints"]["timeout_seconds"], 3600);
    assert_eq!(task["constraints"]["allowed_paths"], json!(["out", "src"]));
    assert!(task["task_id"].as_str().expect("id").starts_with("task-"));
    assert!(task["created_at"].is_string());
    assert!(f.task("artifacts").is_dir() && f.task("out").is_dir() && f.task("src").is_dir());
    let before = std::fs::read(f.task("task.json")).expect("task.json");
    let again = f.project.run(&["task", "new", "task", "--prompt", "other"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr_of(&again).contains("already exists"),
        "{}",
        stderr_of(&again)
    );
    assert_eq!(
        std::fs::read(f.task("task.json")).expect("task.json"),
        before
    );
}

#[test]
fn a_stop_written_into_state_json_ends_the_llm_call_and_a_restart_continues() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "4"]);
    for n in 1..=5 {
        f.answer(
            n,
            &answer(vec![write_file(&format!("artifacts/{n}.txt"), "x")]),
        );
    }
    f.sleep(3, 60);
    let child = f.project.spawn(&["worker", "task"]);
    assert!(
        wait_until(DEADLINE, || f.project.path("llm/pgid-3").exists()
            && f.json("heartbeat.json")["status"] == "calling_llm"),
        "the third call never started"
    );
    let mut state = f.json("state.json");
    assert_eq!(state["status"], "running");
    assert_eq!(state["iteration"], 2);
    state["status"] = json!("stopped");
    let temp = f.task("state.json.hand");
    std::fs::write(&temp, state.to_string()).expect("write");
    std::fs::rename(&temp, f.task("state.json")).expect("rename");

    let output = common::wait_with_deadline(child, DEADLINE);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        stderr_of(&output)
    );
    f.assert_llm_group_ends(3);
    let state = f.json("state.json");
    assert_eq!(state["status"], "stopped");
    assert_eq!(state["iteration"], 2);
    assert_eq!(state["termination_reason"], "stopped");
    assert_eq!(f.json("heartbeat.json")["status"], "stopped");
    assert_eq!(f.actions().len(), 2);

    // The state on disk is the truth: a new worker goes on from iteration 3.
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        stderr_of(&output)
    );
    assert!(stdout_of(&output).contains("resuming the stopped task after iteration 2"));
    let iterations: Vec<Value> = f.actions().iter().map(|a| a["iteration"].clone()).collect();
    assert_eq!(iterations, [1, 2, 3, 4]);
    assert_eq!(f.json("state.json")["status"], "completed");
    // Calls 4 and 5 answered iterations 3 and 4.
    assert!(f.task("artifacts/5.txt").exists() && !f.task("artifacts/3.txt").exists());
}

#[test]
fn task_stop_asks_a_running_worker_to_stop_and_the_heartbeat_beats_meanwhile() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "3"]);
    f.sleep(1, 60);
    let child = f.project.spawn(&["worker", "task"]);
    f.wait_for_llm_call(1);
    // While the LLM thinks, the heartbeat keeps being rewritten.
    let first = f.json("heartbeat.json");
    assert_eq!(first["status"], "calling_llm");
    assert_eq!(first["iteration"], 1);
    assert!(wait_until(DEADLINE, || {
        let beat = f.json("heartbeat.json");
        beat["status"] == "calling_llm" && beat["timestamp"] != first["timestamp"]
    }));
    let stop = f.project.run(&["task", "stop", "task"]);
    assert!(stop.status.success(), "{}", stderr_of(&stop));
    let output = common::wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0));
    let state = f.json("state.json");
    assert_eq!(state["status"], "stopped");
    assert_eq!(state["termination_reason"], "stopped by clowder task stop");
    assert_eq!(state["iteration"], 0);
}

#[test]
fn the_task_timeout_stops_the_worker_even_while_the_llm_thinks() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "5", "--timeout-seconds", "1"]);
    f.sleep(1, 60);
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "stderr: {}",
        stderr_of(&output)
    );
    let state = f.json("state.json");
    assert_eq!(state["status"], "stopped");
    assert_eq!(state["termination_reason"], "timeout");
    f.assert_llm_group_ends(1);
    let again = f.project.run(&["worker", "task"]);
    assert_eq!(again.status.code(), Some(4));
    assert!(stdout_of(&again).contains("timed out"));
}

#[test]
fn a_slow_answer_fails_only_its_iteration() {
    let f = Fixture::new("llm_timeout = 0.5");
    f.new_task(&["--max-iterations", "2"]);
    f.sleep(1, 60);
    f.answer(2, &answer(vec![write_file("artifacts/late.txt", "x")]));
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        stderr_of(&output)
    );
    let actions = f.actions();
    assert!(
        actions[0]["error"]
            .as_str()
            .expect("error")
            .contains("llm_timeout")
    );
    assert_eq!(actions[1]["results"][0]["ok"], true);
    assert_eq!(f.json("state.json")["counters"]["llm_timeouts"], 1);
    f.assert_llm_group_ends(1);
}

#[test]
fn a_missing_llm_program_fails_the_task_and_it_is_not_restarted_silently() {
    let f = Fixture::new("");
    f.project.write(
        "harness.toml",
        "[worker]\nllm = [\"/nonexistent/llm-program\"]\n",
    );
    f.new_task(&[]);
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1));
    let state = f.json("state.json");
    assert_eq!(state["status"], "failed");
    let reason = state["termination_reason"].as_str().expect("reason");
    assert!(reason.contains("/nonexistent/llm-program"), "{reason}");
    assert_eq!(f.json("heartbeat.json")["status"], "failed");
    let again = f.project.run(&["worker", "task"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stdout_of(&again).contains("not restarted"));
}

#[test]
fn a_failing_llm_program_is_fatal_and_not_retried() {
    let f = Fixture::new("");
    f.project.write(
        "harness.toml",
        "[worker]\nllm = [\"sh\", \"-c\", \"echo model is down >&2; exit 3\"]\n",
    );
    f.new_task(&[]);
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1));
    let reason = f.json("state.json")["termination_reason"]
        .as_str()
        .expect("reason")
        .to_string();
    assert!(reason.contains("model is down"), "{reason}");
    assert!(f.actions().is_empty());
}

#[test]
fn a_corrupt_state_json_is_kept_and_reported() {
    let f = Fixture::new("");
    f.new_task(&[]);
    std::fs::write(f.task("state.json"), "{\"status\": \"runn").expect("write");
    let output = f.project.run(&["worker", "task"]);
    // A state file that cannot be read is a configuration error, as elsewhere.
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("state.json"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(
        std::fs::read_to_string(f.task("state.json")).expect("state"),
        "{\"status\": \"runn"
    );
    let rows: Value =
        serde_json::from_slice(&f.project.run(&["tasks", "--json"]).stdout).expect("json");
    assert_eq!(rows[0]["status"], "corrupt");
}

#[test]
fn the_worker_refuses_a_folder_that_is_not_a_task() {
    let f = Fixture::new("");
    let output = f.project.run(&["worker", "nowhere"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("task.json"));
    assert!(!Path::new(&f.project.path("nowhere")).exists());
}

#[test]
fn sigterm_or_ctrl_c_stops_the_worker_and_its_llm_group() {
    for (signal, code, name) in [
        (libc::SIGTERM, 143, "SIGTERM"),
        (libc::SIGINT, 130, "SIGINT"),
    ] {
        let f = Fixture::new("");
        f.new_task(&["--max-iterations", "3"]);
        f.sleep(1, 60);
        let child = f.project.spawn(&["worker", "task"]);
        f.wait_for_llm_call(1);
        common::send_signal(child.id(), signal);
        let output = common::wait_with_deadline(child, DEADLINE);
        assert_eq!(
            output.status.code(),
            Some(code),
            "stderr: {}",
            stderr_of(&output)
        );
        let state = f.json("state.json");
        assert_eq!(state["status"], "stopped");
        assert_eq!(state["termination_reason"], format!("signal: {name}"));
        f.assert_llm_group_ends(1);
    }
}

#[test]
fn a_state_json_corrupted_while_running_is_kept_and_ends_the_worker() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "3"]);
    f.sleep(1, 60);
    let child = f.project.spawn(&["worker", "task"]);
    f.wait_for_llm_call(1);
    let temp = f.task("state.json.hand");
    std::fs::write(&temp, "not json").expect("write");
    std::fs::rename(&temp, f.task("state.json")).expect("rename");
    let output = common::wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains("left as it is"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(
        std::fs::read_to_string(f.task("state.json")).expect("state"),
        "not json"
    );
    f.assert_llm_group_ends(1);
}

#[test]
fn a_second_worker_on_the_same_task_is_refused() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "1"]);
    f.sleep(1, 60);
    let mut first = f.project.spawn(&["worker", "task"]);
    f.wait_for_llm_call(1);
    let second = f.project.run(&["worker", "task"]);
    assert_eq!(second.status.code(), Some(1));
    assert!(stderr_of(&second).contains("another worker is running this task"));
    assert_eq!(f.json("state.json")["status"], "running");
    common::send_signal(first.id(), libc::SIGTERM);
    first.wait().expect("wait");
}

fn read_file(path: &str) -> Value {
    json!({"tool": "read_file", "args": {"path": path}})
}

/// The results of iteration `n` (1-based) as (ok, security_violation, error).
fn results(f: &Fixture, n: usize) -> Vec<(bool, bool, String)> {
    f.actions()[n - 1]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["ok"] == true,
                r["security_violation"] == true,
                r["error"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn with_the_task_folder_allowed_the_workers_own_files_are_never_written() {
    let f = Fixture::new("");
    f.new_task(&[
        "--allowed-path",
        ".",
        "--allowed-path",
        "..",
        "--max-iterations",
        "2",
    ]);
    // A link someone left in the task folder, leading to task.json.
    std::os::unix::fs::symlink("task.json", f.task("notes")).expect("symlink");
    let widened = r#"{"task_id":"t","prompt":"p","constraints":{"max_iterations":9,"timeout_seconds":9,"allowed_paths":["/"]},"created_at":"2026-01-01T00:00:00Z"}"#;
    f.answer(
        1,
        &answer(vec![
            write_file("task.json", widened),
            write_file("./state.json", r#"{"status":"running"}"#),
            write_file("heartbeat.json", "{}"),
            json!({"tool": "create_file", "args": {"path": "actions.jsonl", "content": "{}"}}),
            write_file(".state.json.abc123.tmp", "{}"),
            write_file("actions.jsonl/x", "{}"),
            write_file("notes", widened),
            write_file("../harness.toml", "[worker]\nllm = [\"sh\"]\n"),
            write_file("artifacts/fine.md", "ok"),
        ]),
    );
    f.answer(2, &answer(vec![read_file("/etc/hostname")]));
    let task_json = std::fs::read(f.task("task.json")).expect("task.json");
    let harness = f.project.read("harness.toml");

    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let first = results(&f, 1);
    let (last, refused) = first.split_last().expect("results");
    assert!(last.0, "{last:?}");
    for (ok, violation, error) in refused {
        assert!(!ok && *violation, "{first:?}");
        assert!(
            error.contains("the worker's own file") || error.contains("symbolic link"),
            "{error}"
        );
    }
    assert_eq!(std::fs::read(f.task("task.json")).expect("read"), task_json);
    assert_eq!(f.project.read("harness.toml"), harness);
    assert!(!f.task(".state.json.abc123.tmp").exists());
    assert_eq!(f.json("state.json")["status"], "completed");
    assert_eq!(f.json("state.json")["allowed_paths"], json!([".", ".."]));
    // The allowed paths did not widen for the next iteration.
    assert!(results(&f, 2)[0].1, "{:?}", results(&f, 2));
}

#[test]
fn allowed_paths_are_fixed_when_the_task_starts() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "3"]);
    f.sleep(1, 60);
    let child = f.project.spawn(&["worker", "task"]);
    f.wait_for_llm_call(1);
    let stop = f.project.run(&["task", "stop", "task"]);
    assert!(stop.status.success(), "{}", stderr_of(&stop));
    let output = common::wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(f.json("state.json")["allowed_paths"], json!(["artifacts"]));

    // task.json widened after the start (by hand, or by anything that could write it).
    let mut task = f.json("task.json");
    task["constraints"]["allowed_paths"] = json!(["/"]);
    std::fs::write(f.task("task.json"), task.to_string()).expect("write");
    f.answer(2, &answer(vec![read_file("/etc/hostname")]));
    let state = std::fs::read(f.task("state.json")).expect("state");
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout_of(&output));
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("task.json: key `constraints.allowed_paths`")
            && stderr.contains("allowed paths are fixed when a task starts"),
        "{stderr}"
    );
    assert!(!f.project.path("llm/pgid-2").exists(), "the LLM was called");
    assert_eq!(std::fs::read(f.task("state.json")).expect("state"), state);
}

#[test]
fn fifos_devices_and_hard_links_are_refused_and_never_hang_the_worker() {
    let f = Fixture::new("");
    f.new_task(&[
        "--allowed-path",
        "artifacts",
        "--allowed-path",
        "/dev",
        "--max-iterations",
        "1",
        "--timeout-seconds",
        "600",
    ]);
    nix::unistd::mkfifo(&f.task("artifacts/pipe"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    f.project.write("outside.txt", "keep");
    std::fs::hard_link(
        f.project.path("outside.txt"),
        f.task("artifacts/linked.txt"),
    )
    .expect("hard link");
    f.answer(
        1,
        &answer(vec![
            read_file("artifacts/pipe"),
            write_file("artifacts/pipe", "x"),
            read_file("/dev/zero"),
            write_file("/dev/null", "x"),
            write_file("artifacts/linked.txt", "overwritten"),
            read_file("artifacts/linked.txt"),
        ]),
    );
    let child = f.project.spawn(&["worker", "task"]);
    // A FIFO opened for reading would wait for a writer forever.
    let output = common::wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let found = results(&f, 1);
    let expected = [
        "a FIFO",
        "a FIFO",
        "a device node",
        "a device node",
        "2 hard links",
        "2 hard links",
    ];
    for ((ok, violation, error), want) in found.iter().zip(expected) {
        assert!(!ok && *violation && error.contains(want), "{found:?}");
    }
    assert_eq!(found.len(), expected.len());
    assert_eq!(f.project.read("outside.txt"), "keep");
}

#[test]
fn an_allowed_path_that_is_a_symlink_is_refused_not_followed() {
    let f = Fixture::new("");
    f.new_task(&["--allowed-path", "out", "--max-iterations", "1"]);
    std::fs::create_dir(f.project.path("elsewhere")).expect("mkdir");
    std::fs::remove_dir(f.task("out")).expect("rmdir");
    std::os::unix::fs::symlink(f.project.path("elsewhere"), f.task("out")).expect("symlink");
    f.answer(1, &answer(vec![write_file("out/x.txt", "x")]));
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("allowed path \"out\"") && stderr.contains("is a symbolic link"),
        "{stderr}"
    );
    assert!(
        !f.project.path("llm/counter").exists(),
        "the LLM was called"
    );
    assert!(!f.project.path("elsewhere/x.txt").exists());
}

#[test]
fn a_fifo_in_place_of_a_task_file_never_hangs_the_worker_or_the_listing() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "1"]);
    f.answer(1, &answer(vec![write_file("artifacts/a.txt", "a")]));
    let fifo =
        |path: PathBuf| nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    fifo(f.task("actions.jsonl"));
    let listed = f.project.run(&["tasks", "task"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr_of(&listed));
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    assert!(
        stderr_of(&output).contains("actions.jsonl: a FIFO, not a regular file"),
        "{}",
        stderr_of(&output)
    );

    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "1"]);
    fifo(f.task("state.json"));
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout_of(&output));
    assert!(
        stderr_of(&output).contains("state.json: a FIFO, not a regular file"),
        "{}",
        stderr_of(&output)
    );
    assert!(
        !f.project.path("llm/counter").exists(),
        "the LLM was called"
    );
}

#[test]
fn an_answer_with_a_key_twice_is_refused_and_an_absolute_path_inside_the_task_works() {
    let f = Fixture::new("");
    f.new_task(&["--allowed-path", ".", "--max-iterations", "2"]);
    // Which `actions` was meant? Refused, not guessed.
    f.answer(
        1,
        r#"{"actions":[{"tool":"write_file","args":{"path":"artifacts/a.md","content":"a"}}],"actions":[]}"#,
    );
    let inside = f.task("artifacts/abs.md").display().to_string();
    let outside = f.project.path("elsewhere.md").display().to_string();
    f.answer(
        2,
        &answer(vec![
            write_file(&inside, "abs"),
            write_file(&outside, "no"),
            write_file(&f.task("task.json").display().to_string(), "{}"),
        ]),
    );
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let actions = f.actions();
    let refused = actions[0]["error"].as_str().expect("refused");
    assert!(refused.contains("duplicate key \"actions\""), "{refused}");
    assert!(!f.task("artifacts/a.md").exists());
    let found = results(&f, 2);
    assert!(found[0].0, "{found:?}");
    assert_eq!(f.project.read("task/artifacts/abs.md"), "abs");
    let (ok, violation, error) = &found[1];
    assert!(!ok && *violation, "{found:?}");
    assert!(
        error.contains("outside the allowed paths") && !error.contains(".."),
        "{error}"
    );
    assert!(!f.project.path("elsewhere.md").exists());
    assert!(
        found[2].1 && found[2].2.contains("the worker's own file"),
        "{found:?}"
    );
}

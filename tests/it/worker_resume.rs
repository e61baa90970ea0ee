//! A worker that is killed, or stopped early, through the binary: an iteration
//! killed while its actions ran is finished on resume with no action run twice
//! (and says which ran), a stop written before the worker's first state.json is
//! honoured, and the temporary files of killed writes are cleared.

use crate::common;
use crate::worker_loop::{Fixture, answer};

use std::time::{Duration, Instant, SystemTime};

use common::{DEADLINE, stderr_of, stdout_of};
use serde_json::{Value, json};

fn create_file(path: &str, content: &str) -> Value {
    json!({"tool": "create_file", "args": {"path": path, "content": content}})
}

/// The fake LLM's calls so far.
fn llm_calls(f: &Fixture) -> u32 {
    std::fs::read_to_string(f.project.path("llm/counter"))
        .map_or(0, |text| text.trim().parse().expect("counter"))
}

/// Starts a worker on an answer of many actions and SIGKILLs it while they run
/// (stopped first with SIGSTOP, once its journal says an action started, so that the look at
/// the journal and the kill see the same moment). `None` when the iteration was
/// over before the worker could be stopped.
fn kill_during_actions(f: &Fixture) -> Option<Vec<String>> {
    let journal = f.task("iteration.jsonl");
    let mut child = f.project.spawn(&["worker", "task"]);
    let pid = child.id();
    let start = Instant::now();
    let started = || std::fs::read_to_string(&journal).is_ok_and(|j| j.contains("{\"start\""));
    while !started() && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_micros(200));
    }
    common::send_signal(pid, libc::SIGSTOP);
    let lines: Vec<String> = std::fs::read_to_string(&journal)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    common::send_signal(pid, libc::SIGKILL);
    child.wait().expect("reap the worker");
    let logged = f.task("actions.jsonl").exists();
    (!lines.is_empty() && !logged).then_some(lines)
}

#[test]
fn a_worker_killed_while_its_actions_run_is_resumed_without_running_any_twice() {
    let content = "x".repeat(150_000);
    let actions: Vec<Value> = (0..20)
        .map(|n| create_file(&format!("artifacts/f{n:02}.txt"), &content))
        .collect();
    // Up to 5 tries: the kill must land while the actions run, not after.
    let (f, journal) = (0..5)
        .find_map(|_| {
            let f = Fixture::new("");
            f.new_task(&["--max-iterations", "1"]);
            // Asked again, the model would give the same answer.
            f.answer(1, &answer(actions.clone()));
            f.answer(2, &answer(actions.clone()));
            kill_during_actions(&f).map(|journal| (f, journal))
        })
        .expect("the worker was never caught while its actions ran");
    let done_before = journal
        .iter()
        .filter(|l| l.starts_with("{\"done\""))
        .count();

    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let stdout = stdout_of(&output);
    assert!(
        stdout.contains("iteration 1 resumed after its worker was killed while its actions ran"),
        "{stdout}"
    );
    assert_eq!(llm_calls(&f), 1, "the LLM was asked again for iteration 1");
    let records = f.actions();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert!(
        record["resumed"]
            .as_str()
            .is_some_and(|r| r.contains("resumed"))
    );
    let results = record["results"].as_array().expect("results");
    assert_eq!(results.len(), 20);
    let mut interrupted = 0;
    for (n, result) in results.iter().enumerate() {
        let error = result["error"].as_str().unwrap_or_default();
        assert!(
            !error.contains("File exists"),
            "action {n} ran twice: {error}"
        );
        if result["interrupted"] == true {
            interrupted += 1;
            assert!(error.starts_with("interrupted:"), "{error}");
            continue;
        }
        assert_eq!(result["ok"], true, "action {n}: {result}");
        let written = std::fs::read_to_string(f.task(&format!("artifacts/f{n:02}.txt")));
        assert_eq!(written.expect("written").len(), content.len());
    }
    assert!(interrupted <= 1, "{interrupted} actions under way at once");
    assert!(results[..done_before].iter().all(|r| r["ok"] == true));
    assert!(!f.task("iteration.jsonl").exists());
    assert_eq!(f.json("state.json")["status"], "completed");
}

#[test]
fn an_action_under_way_at_the_kill_is_reported_and_not_run_again() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "1"]);
    // As the killed worker left it: action 1 done, action 2 under way (its file
    // made, its result not yet written down), action 3 not started.
    let frozen = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/state/iteration-v1.jsonl"
    );
    std::fs::copy(frozen, f.task("iteration.jsonl")).expect("copy the journal");
    std::fs::write(f.task("artifacts/a.md"), "a").expect("a");
    std::fs::write(f.task("artifacts/b.md"), "b").expect("b");
    let state = json!({
        "schema_version": 1, "status": "running", "iteration": 0,
        "started_at": chrono::Utc::now().to_rfc3339(), "allowed_paths": ["artifacts"],
    });
    std::fs::write(f.task("state.json"), state.to_string()).expect("state");

    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let said = "iteration 1 resumed after its worker was killed while its actions ran: \
action 1 had run (not run again); action 2 was under way (not run again; what it did stays); \
action 3 had not started (run now)";
    let stdout = stdout_of(&output);
    assert!(stdout.contains(said), "{stdout}");
    assert!(
        stdout.contains("#1 create_file artifacts/b.md ✗ interrupted"),
        "{stdout}"
    );
    assert_eq!(llm_calls(&f), 0);
    let record = &f.actions()[0];
    assert_eq!(record["resumed"], said);
    assert_eq!(record["results"][0]["ok"], true);
    assert_eq!(record["results"][0]["args"]["path"], "artifacts/a.md");
    assert_eq!(record["results"][1]["interrupted"], true);
    assert_eq!(record["results"][2]["ok"], true);
    assert_eq!(f.project.read("task/artifacts/c.md"), "c");
    assert_eq!(f.json("state.json")["counters"]["tool_errors"], 1);
    assert!(!f.task("iteration.jsonl").exists());
}

#[test]
fn task_stop_right_after_the_worker_starts_is_not_lost() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "3"]);
    f.sleep(1, 300);
    let child = f.project.spawn(&["worker", "task"]);
    // At once: the worker may not have written its state.json yet.
    let stop = f.project.run(&["task", "stop", "task"]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr_of(&stop));
    let output = common::wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let state = f.json("state.json");
    assert_eq!(state["status"], "stopped", "{state}");
    assert_eq!(state["termination_reason"], "stopped by clowder task stop");
    assert!(f.actions().is_empty());
}

#[test]
fn a_task_stopped_before_it_started_waits_for_task_resume() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "1"]);
    f.answer(1, &answer(vec![create_file("artifacts/a.md", "a")]));
    let stop = f.project.run(&["task", "stop", "task"]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr_of(&stop));
    assert!(stdout_of(&stop).contains("the task had not started"));
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("stopped before it started (stopped by clowder task stop): not run; `clowder task resume task` lets it start"),
        "{}",
        stdout_of(&output)
    );
    assert_eq!(llm_calls(&f), 0);

    let resume = f.project.run(&["task", "resume", "task"]);
    assert_eq!(resume.status.code(), Some(0), "{}", stderr_of(&resume));
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(f.project.read("task/artifacts/a.md"), "a");
    let state = f.json("state.json");
    assert_eq!(state["status"], "completed");
    assert!(state["started_at"].is_string(), "{state}");
}

#[test]
fn temporary_files_left_by_killed_writes_are_cleared_at_the_start() {
    let f = Fixture::new("");
    f.new_task(&["--max-iterations", "1"]);
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let leftovers = [".state.json.a1B2c3.tmp", ".heartbeat.json.Zz9yX8.tmp"];
    for name in leftovers {
        let file = std::fs::File::create(f.task(name)).expect("create");
        file.set_modified(hour_ago).expect("backdate");
    }
    // Seconds old: perhaps a `clowder task stop` writing right now.
    std::fs::write(f.task(".state.json.q7W8e9.tmp"), "{}").expect("fresh");
    std::fs::write(f.task("artifacts/notes.tmp"), "mine").expect("not ours");
    let output = f.project.run(&["worker", "task"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    for name in leftovers {
        assert!(!f.task(name).exists(), "{name} was left");
    }
    assert!(f.task(".state.json.q7W8e9.tmp").exists());
    assert_eq!(f.project.read("task/artifacts/notes.tmp"), "mine");
}

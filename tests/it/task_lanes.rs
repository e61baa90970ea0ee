//! Task lanes through the binary: `clowder lane add NAME --task DIR` runs
//! `clowder worker DIR` under the fleet (`clowder --headless`), its heartbeat
//! being the watchdog; `--watch-task DIR` follows a worker the test starts
//! itself. The LLM is a fake program answering from canned files.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Stdio};

use common::{
    DEADLINE, Project, pid_alive, send_signal, stderr_of, stdout_of, wait_until, wait_with_deadline,
};
use serde_json::{Value, json};

/// Call N prints `llm/answer-N`, else `llm/answer` (else nothing), after
/// sleeping `llm/sleep` seconds if that file exists. With `llm/hang`, it hangs
/// instead, deaf to SIGTERM, its sleeper's PID in `llm/sleeper-N`.
const FAKE_LLM: &str = r#"#!/bin/sh
dir="$(dirname "$0")"
n=$(cat "$dir/counter" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$dir/counter"
cat > /dev/null
if [ -f "$dir/hang" ]; then
    trap '' TERM
    sleep 300 &
    echo $! > "$dir/sleeper-$n"
    wait
fi
if [ -f "$dir/sleep" ]; then sleep "$(cat "$dir/sleep")"; fi
if [ -f "$dir/answer-$n" ]; then cat "$dir/answer-$n"
elif [ -f "$dir/answer" ]; then cat "$dir/answer"; fi
exit 0
"#;

struct Fleet {
    project: Project,
}

impl Fleet {
    /// A folder whose `[worker] llm` is the fake LLM, with `extra` TOML after it,
    /// and a task `task` of `max` iterations.
    fn new(extra: &str, max: u32) -> Fleet {
        let project = Project::new("");
        std::fs::create_dir_all(project.path("llm")).expect("mkdir llm");
        let script = project.path("llm/fake-llm.sh");
        std::fs::write(&script, FAKE_LLM).expect("write fake llm");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        project.write(
            "harness.toml",
            &format!(
                "[worker]\nllm = [{:?}]\n\n[watchdog]\ncheck_interval_secs = 0.1\nkill_grace_secs = 1\n{extra}\n",
                script.display().to_string()
            ),
        );
        let fleet = Fleet { project };
        let max = max.to_string();
        let out = fleet.clowder(&[
            "task",
            "new",
            "task",
            "--prompt",
            "Write notes about cats.",
            "--max-iterations",
            &max,
        ]);
        assert!(out.status.success(), "task new: {}", stderr_of(&out));
        fleet
    }

    fn clowder(&self, args: &[&str]) -> std::process::Output {
        self.project.run(args)
    }

    fn add(&self, args: &[&str]) {
        let mut all = vec!["lane", "add"];
        all.extend_from_slice(args);
        let out = self.clowder(&all);
        assert!(out.status.success(), "lane add: {}", stderr_of(&out));
    }

    fn headless(&self) -> Child {
        self.project.spawn(&["--headless"])
    }

    fn answer(&self, n: Option<u32>, text: &str) {
        let name = n.map_or_else(|| "llm/answer".to_string(), |n| format!("llm/answer-{n}"));
        self.project.write(&name, text);
    }

    fn state(&self) -> Value {
        read_json(&self.project.path("task/state.json"))
    }

    fn actions(&self) -> usize {
        std::fs::read_to_string(self.project.path("task/actions.jsonl"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    fn lane_file(&self, lane: &str, name: &str) -> PathBuf {
        self.project.path(&format!(".clowder/lanes/{lane}/{name}"))
    }

    /// Everything the lane's output files hold.
    fn lane_output(&self, lane: &str) -> String {
        let dir = self.project.path(&format!(".clowder/lanes/{lane}"));
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .filter(|path| {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                // A task lane's agent is clowder's worker: `clowder-iteration-N.jsonl`.
                name.starts_with("clowder-iteration-") || name == "task-actions.log"
            })
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .collect()
    }

    fn lane_events(&self, lane: &str) -> Vec<Value> {
        std::fs::read_to_string(self.lane_file(lane, "harness-events.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("event line is JSON"))
            .collect()
    }

    fn has_event(&self, lane: &str, name: &str) -> bool {
        self.lane_events(lane).iter().any(|e| e["event"] == name)
    }

    /// The PID of the hanging LLM's `sleep`, which the fake LLM writes down.
    fn llm_sleeper(&self) -> i32 {
        self.project
            .read("llm/sleeper-1")
            .trim()
            .parse()
            .expect("sleeper pid")
    }

    /// A worker the test runs itself, outside any fleet.
    fn own_worker(&self) -> Child {
        let mut command = self.project.command(&["worker", "task"]);
        command.stdout(Stdio::null());
        command.spawn().expect("spawn clowder worker")
    }
}

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

fn answer(actions: Vec<Value>) -> String {
    json!({"reasoning": "notes first", "actions": actions}).to_string()
}

fn write_file(path: &str, content: &str) -> Value {
    json!({"tool": "write_file", "args": {"path": path, "content": content}})
}

#[test]
fn a_task_lane_runs_the_worker_to_completion_and_shows_each_action_readably() {
    let fleet = Fleet::new("", 3);
    fleet.answer(
        Some(1),
        &answer(vec![
            write_file("artifacts/notes.md", "cats sleep"),
            json!({"tool": "read_file", "args": {"path": "../../etc/passwd"}}),
        ]),
    );
    fleet.answer(Some(2), "this is not JSON {");
    fleet.add(&["t", "--task", "task"]);

    let out = wait_with_deadline(fleet.headless(), DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert_eq!(fleet.state()["status"], "completed");
    assert_eq!(fleet.state()["iteration"], 3);
    assert_eq!(
        fleet.project.read("task/artifacts/notes.md"),
        "cats sleep",
        "the worker ran in the fleet"
    );
    let output = fleet.lane_output("t");
    for line in [
        "#1 write_file artifacts/notes.md ✓ 10 bytes",
        "#1 read_file ../../etc/passwd ✗ security violation:",
        "#2 ✗ answer refused: invalid answer",
        "#3 calling the LLM",
    ] {
        assert!(output.contains(line), "{line:?} missing from:\n{output}");
    }
    assert_eq!(fleet.actions(), 3, "actions.jsonl stays the record");

    let lanes = fleet.clowder(&["lanes", "--json"]);
    let rows: Value = serde_json::from_str(&stdout_of(&lanes)).expect("lanes --json");
    assert_eq!(rows[0]["kind"], "task");
    assert_eq!(rows[0]["iteration"], 3);
    assert_eq!(rows[0]["max_iterations"], 3);
    assert_eq!(rows[0]["task_status"], "completed", "{rows}");
    let table = stdout_of(&fleet.clowder(&["lanes"]));
    assert!(table.contains("(task completed)"), "{table}");
    let status = stdout_of(&fleet.clowder(&["--status"]));
    assert!(
        status.contains("lane=t ") && status.contains("task=completed task_iteration=3/3"),
        "{status}"
    );
}

#[test]
fn lane_stop_writes_stopped_into_state_json_and_the_lane_ends_without_a_kill() {
    let fleet = Fleet::new("", 1000);
    fleet.project.write("llm/sleep", "0.2");
    fleet.answer(None, &answer(vec![write_file("artifacts/a.md", "a")]));
    fleet.add(&["t", "--task", "task"]);
    let child = fleet.headless();
    assert!(
        wait_until(DEADLINE, || fleet.actions() >= 1),
        "the worker never acted"
    );

    let out = fleet.clowder(&["lane", "stop", "t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("\"stopped\""),
        "{}",
        stdout_of(&out)
    );
    let out = wait_with_deadline(child, DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    let state = fleet.state();
    assert_eq!(state["status"], "stopped");
    assert_eq!(
        state["termination_reason"],
        "stopped by clowder lane stop t"
    );
    assert!(fleet.has_event("t", "session_complete"));
    for killed in ["session_killed", "watchdog_kill", "watchdog_stale"] {
        assert!(!fleet.has_event("t", killed), "{killed} in a graceful stop");
    }
    let ended = fleet
        .lane_events("t")
        .into_iter()
        .find(|e| e["event"] == "session_complete")
        .expect("session_complete");
    assert_eq!(
        ended["exit_code"], 0,
        "the worker ended on its own: {ended}"
    );
}

#[test]
fn a_stale_heartbeat_stops_the_task_then_kills_what_is_left() {
    // A heartbeat every 2 s while the LLM thinks is stale at 1.5 s.
    let fleet = Fleet::new("stale_timeout_mins = 0.025", 3);
    fleet.project.write("llm/hang", "");
    fleet.add(&["t", "--task", "task"]);

    let out = wait_with_deadline(fleet.headless(), DEADLINE);
    assert!(out.status.code().is_some(), "{}", stdout_of(&out));
    let state = fleet.state();
    assert_eq!(state["status"], "stopped", "{state}");
    let reason = state["termination_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("heartbeat stale"), "{reason}");
    assert!(fleet.has_event("t", "watchdog_stale"));
    assert!(fleet.has_event("t", "watchdog_kill"));
    // The watchdog speaks of what went quiet: the heartbeat, not the output.
    let events = fleet.lane_events("t");
    let stale = events.iter().find(|e| e["event"] == "watchdog_stale");
    assert_eq!(stale.map(|e| &e["heartbeat"]), Some(&Value::Bool(true)));
    let printed = stdout_of(&out);
    assert!(
        printed.contains("no heartbeat, killing the session"),
        "{printed}"
    );
    assert!(!printed.contains("no output"), "{printed}");
    let sleeper = fleet.llm_sleeper();
    assert!(
        wait_until(DEADLINE, || !pid_alive(sleeper)),
        "the hanging LLM (PID {sleeper}) is still in /proc"
    );
    assert!(
        fleet.lane_file("t", "STOP").exists(),
        "the lane does not start the stopped task again"
    );
}

#[test]
fn a_watch_task_lane_follows_a_worker_it_did_not_start_and_stops_it() {
    let fleet = Fleet::new("", 1000);
    fleet.project.write("llm/sleep", "0.2");
    fleet.answer(
        None,
        &answer(vec![
            write_file("artifacts/a.md", "a"),
            json!({"tool": "frobnicate", "args": {}}),
        ]),
    );
    let mut worker = fleet.own_worker();
    fleet.add(&["w", "--watch-task", "task"]);
    let child = fleet.headless();
    assert!(
        wait_until(DEADLINE, || fleet
            .lane_output("w")
            .contains("#1 frobnicate ✗ unknown tool")),
        "the watch never showed the worker's actions: {}",
        fleet.lane_output("w")
    );
    assert!(
        fleet
            .lane_output("w")
            .contains("#1 write_file artifacts/a.md ✓ 1 bytes")
    );
    assert!(fleet.lane_output("w").contains("calling the LLM"));
    let status = read_json(&fleet.lane_file("w", "harness.status"));
    assert_eq!(
        status["output_file"],
        json!(fleet.lane_file("w", "task-actions.log"))
    );
    let lanes = fleet.clowder(&["lanes"]);
    assert!(
        stdout_of(&lanes).contains("task running"),
        "{}",
        stdout_of(&lanes)
    );

    let out = fleet.clowder(&["lane", "stop", "w"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let start = std::time::Instant::now();
    let code = loop {
        if let Some(status) = worker.try_wait().expect("try_wait") {
            break status.code();
        }
        assert!(start.elapsed() < DEADLINE, "the worker did not stop");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(
        code,
        Some(0),
        "the worker ended on its own, through state.json"
    );
    assert_eq!(fleet.state()["status"], "stopped");
    let out = wait_with_deadline(child, DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
}

#[test]
fn a_dead_heartbeat_is_raised_and_the_watched_worker_is_never_killed() {
    let fleet = Fleet::new("stale_timeout_mins = 0.05", 3);
    fleet.project.write("llm/hang", "");
    let mut worker = fleet.own_worker();
    assert!(
        wait_until(DEADLINE, || fleet.project.path("llm/sleeper-1").exists()),
        "the worker never called the LLM"
    );
    fleet.add(&["w", "--watch-task", "task"]);
    let child = fleet.headless();
    // Frozen, the worker writes no heartbeat, as if it were dead.
    send_signal(worker.id(), libc::SIGSTOP);
    let held = || {
        std::fs::read_to_string(fleet.lane_file("w", "harness.status"))
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|s| {
                s["state"] == "held"
                    && s["held_reason"]
                        .as_str()
                        .is_some_and(|r| r.starts_with("heartbeat stale"))
            })
    };
    let raised = wait_until(DEADLINE, held);
    send_signal(worker.id(), libc::SIGCONT);
    assert!(raised, "a dead heartbeat was not raised");
    assert!(fleet.has_event("w", "watchdog_stale"));
    assert!(
        pid_alive(worker.id() as i32),
        "the watched worker was killed"
    );
    assert!(worker.try_wait().expect("try_wait").is_none());

    let out = fleet.clowder(&["lane", "stop", "w"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let out = wait_with_deadline(child, DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    let status = worker.wait().expect("wait worker");
    assert_eq!(status.code(), Some(0), "the worker stopped on its own");
    assert_eq!(fleet.state()["status"], "stopped");
}

#[test]
fn bad_task_lanes_are_refused_with_the_reason() {
    let fleet = Fleet::new("", 3);
    std::fs::create_dir_all(fleet.project.path("empty")).expect("mkdir");
    let out = fleet.clowder(&["lane", "add", "t", "--task", "empty"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("--task empty: not a task directory")
            && stderr_of(&out).contains("task.json"),
        "{}",
        stderr_of(&out)
    );
    let both = fleet.clowder(&["lane", "add", "t", "--task", "task", "--watch-task", "task"]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr_of(&both));
    let prompt = fleet.clowder(&[
        "lane",
        "add",
        "t",
        "--task",
        "task",
        "--prompt",
        "PROMPT.md",
    ]);
    assert_eq!(prompt.status.code(), Some(2), "{}", stderr_of(&prompt));
    assert!(stderr_of(&prompt).contains("cannot be used with"));
    fleet.add(&["t", "--task", "task"]);
    let again = fleet.clowder(&["lane", "add", "u", "--watch-task", "task"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr_of(&again).contains("lane t already works in that folder"));
    assert!(
        !fleet.project.path(".clowder/lanes/u").exists(),
        "nothing of a refused lane is left"
    );
}

#[test]
fn a_fresh_heartbeat_keeps_a_task_lane_alive_while_its_output_is_silent() {
    // The LLM thinks for 7 s, printing nothing; the heartbeat beats every 2 s.
    let fleet = Fleet::new("stale_timeout_mins = 0.08", 1);
    fleet.project.write("llm/sleep", "7");
    fleet.answer(None, &answer(vec![write_file("artifacts/a.md", "a")]));
    fleet.add(&["t", "--task", "task"]);
    let out = wait_with_deadline(fleet.headless(), DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert_eq!(fleet.state()["status"], "completed");
    assert!(
        !fleet.has_event("t", "watchdog_stale"),
        "{:?}",
        fleet.lane_events("t")
    );
}

#[test]
fn a_frozen_worker_is_stopped_through_state_json_and_ended_by_the_watchdog() {
    let fleet = Fleet::new("stale_timeout_mins = 0.05", 3);
    fleet.project.write("llm/hang", "");
    fleet.add(&["t", "--task", "task"]);
    let child = fleet.headless();
    assert!(
        wait_until(DEADLINE, || fleet.project.path("llm/sleeper-1").exists()),
        "the worker never called the LLM"
    );
    let pid = fleet.state()["pid"].as_u64().expect("the worker's pid") as u32;
    // Frozen, it stops beating; the watchdog's SIGTERM comes with a SIGCONT.
    send_signal(pid, libc::SIGSTOP);
    let out = wait_with_deadline(child, DEADLINE);
    assert!(out.status.code().is_some(), "{}", stdout_of(&out));
    let state = fleet.state();
    assert_eq!(state["status"], "stopped", "{state}");
    let reason = state["termination_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("heartbeat stale"), "{reason}");
    assert!(fleet.has_event("t", "watchdog_kill"));
    assert!(!pid_alive(pid as i32), "the worker is still in /proc");
    let sleeper = fleet.llm_sleeper();
    assert!(
        wait_until(DEADLINE, || !pid_alive(sleeper)),
        "the LLM (PID {sleeper}) is still in /proc"
    );
}

#[test]
fn a_watch_task_lane_shows_a_worker_waiting_for_a_busy_llm() {
    let fleet = Fleet::new("", 3);
    let now = chrono::Utc::now().to_rfc3339();
    let state = |status: &str| {
        json!({"status": status, "iteration": 0, "started_at": now, "allowed_paths": ["artifacts"]})
            .to_string()
    };
    fleet.project.write("task/state.json", &state("running"));
    // As a worker writes it while it waits for a rate-limited Ollama.
    let note =
        "the LLM is busy (429 Too Many Requests): retry 1 of 6 in 30 s, as its Retry-After asks";
    let beat = json!({"schema_version": 1, "iteration": 1, "timestamp": now, "status": "llm_busy", "note": note});
    fleet
        .project
        .write("task/heartbeat.json", &beat.to_string());
    fleet.add(&["w", "--watch-task", "task"]);
    let child = fleet.headless();
    let shown = format!("#1 {note}");
    assert!(
        wait_until(DEADLINE, || fleet.lane_output("w").contains(&shown)),
        "the wait was not shown: {}",
        fleet.lane_output("w")
    );
    fleet.project.write("task/state.json", &state("stopped"));
    let out = wait_with_deadline(child, DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert_eq!(fleet.lane_output("w").matches(&shown).count(), 1);
}

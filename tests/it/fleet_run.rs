//! `clowder` in a folder whose fleet has lanes: every lane runs in one process,
//! in its own worktree, with its own files; through the binary, in a real
//! temporary git repository, with a fake agent that commits in its folder.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use common::fleet::{lane_session_group, lane_status};
use common::git::{clowder_command, git_in, init_with_one_commit};
use common::{
    DEADLINE, clowder_bin, group_states, stderr_of, stdout_of, wait_until, wait_with_deadline,
};
use serde_json::Value;
use tempfile::TempDir;

struct Repo {
    dir: TempDir,
}

fn commit_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/commit-agent.sh")
}

impl Repo {
    /// A repository with one commit, a prompt, a harness.toml (`extra` appended)
    /// and the lanes `lanes`.
    fn with_lanes(lanes: &[&str], extra: &str) -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(repo.root());
        std::fs::write(repo.path("PROMPT.md"), "Do the work.\n").expect("write");
        let config = format!(
            "[agent]\ncommand = {:?}\n\n[watchdog]\nmin_output_bytes = 1\n\n[retry]\nretry_delay_secs = 0.05\n\n[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.5\n\n{extra}\n",
            commit_agent().display().to_string()
        );
        std::fs::write(repo.path("harness.toml"), config).expect("write");
        for lane in lanes {
            let out = repo.clowder(&["lane", "add", lane]);
            assert!(out.status.success(), "lane add: {}", stderr_of(&out));
        }
        repo
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(self.root(), args)
    }

    fn command(&self, args: &[&str]) -> Command {
        clowder_command(self.root(), args)
    }

    fn clowder(&self, args: &[&str]) -> Output {
        wait_with_deadline(self.command(args).spawn().expect("spawn"), DEADLINE)
    }

    /// The fleet, started in the background; the agent writes `ticks` lines, one
    /// every 0.1 s, each session.
    fn spawn_fleet(&self, ticks: u32) -> Child {
        self.fleet_command(ticks).spawn().expect("spawn the fleet")
    }

    fn fleet_command(&self, ticks: u32) -> Command {
        let mut command = self.command(&["--headless"]);
        command.env("COMMIT_AGENT_TICKS", ticks.to_string());
        command
    }

    fn status(&self, lane: &str) -> Option<Value> {
        lane_status(self.root(), lane)
    }

    fn session_group(&self, lane: &str) -> i32 {
        lane_session_group(self.root(), lane)
    }

    fn output_bytes(&self, lane: &str, global: u64) -> u64 {
        let path = self.path(&format!(
            ".clowder/lanes/{lane}/commit-agent-iteration-{global}.jsonl"
        ));
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    fn expect(&self, args: &[&str]) {
        let out = self.clowder(args);
        assert!(
            out.status.success(),
            "clowder {args:?}: {}",
            stderr_of(&out)
        );
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

    /// Whether the lane's session number `global` starts before the deadline.
    fn session_starts(&self, lane: &str, global: u64) -> bool {
        wait_until(DEADLINE, || {
            self.events(lane)
                .iter()
                .any(|e| e["event"] == "session_start" && e["global"] == global)
        })
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

    /// Live processes started for this fleet's lanes (their environment names
    /// this repository's approval queue).
    fn lane_processes(&self) -> Vec<i32> {
        let marker = format!(
            "CLOWDER_APPROVALS_DIR={}",
            self.path(".clowder/approvals").display()
        );
        common::processes_with_env(&marker)
    }
}

#[test]
fn three_lanes_run_at_once_each_in_its_own_worktree_with_its_own_files() {
    let repo = Repo::with_lanes(&["a", "b", "c"], "[session]\nmax_iterations = 2\n");
    let fleet = repo.spawn_fleet(10);
    // From another process during the run: every lane shows as running.
    let all_running = wait_until(DEADLINE, || {
        let rows = repo.lanes_json();
        rows.len() == 3 && rows.iter().all(|row| row["running"] == true)
    });
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = stdout_of(&output);
    assert!(
        all_running,
        "clowder lanes --json never showed 3 running lanes"
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        stderr_of(&output)
    );
    for lane in ["a", "b", "c"] {
        assert!(
            stdout.contains(&format!("lane={lane} loop_start")),
            "{stdout}"
        );
        // The branch holds its own agent's commits and nothing of another lane's.
        let log = repo.git(&["log", "--format=%s", &format!("clowder/{lane}")]);
        let subjects: Vec<&str> = log.lines().filter(|s| *s != "first").collect();
        assert_eq!(subjects.len(), 2, "{lane}: {log}");
        assert!(
            subjects.iter().all(|s| s.starts_with(&format!("{lane}: "))),
            "{lane}: {log}"
        );
        // The lane's files are in its files folder; the worktree holds only the work.
        let files = repo.path(&format!(".clowder/lanes/{lane}"));
        for name in [
            "harness.status",
            "harness-events.jsonl",
            ".iteration_counter",
        ] {
            assert!(files.join(name).is_file(), "{lane}: no {name}");
        }
        assert!(files.join("commit-agent-iteration-1.jsonl").is_file());
        let worktree = repo.path(&format!(".clowder/worktrees/{lane}"));
        assert_eq!(
            git_in(&worktree, &["status", "--porcelain", "--ignored"]),
            ""
        );
        // The agent was told its lane and the fleet's one approval queue.
        let output =
            std::fs::read_to_string(files.join("commit-agent-iteration-1.jsonl")).expect("output");
        let queue = repo.path(".clowder/approvals");
        assert!(
            output.contains(&format!(
                "lane={lane} global=1 approvals={}",
                queue.display()
            )),
            "{output}"
        );
    }
    assert!(
        repo.lane_processes().is_empty(),
        "left running: {:?}",
        repo.lane_processes()
    );
    // Finished lanes are not run again (until resumed).
    let again = repo.clowder(&["--headless"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        stdout_of(&again).contains("no lane to run"),
        "{}",
        stdout_of(&again)
    );
    let status = repo.clowder(&["--status"]);
    let text = stdout_of(&status);
    for lane in ["a", "b", "c"] {
        assert!(
            text.contains(&format!("lane={lane} state=done iteration=2/2")),
            "{text}"
        );
    }
}

/// The [start, end] times of every session of `lane`, from its event log.
fn session_spans(repo: &Repo, lane: &str) -> Vec<(String, String)> {
    let events = repo.events(lane);
    let times = |name: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["event"] == name)
            .map(|e| e["ts"].as_str().expect("ts").to_string())
            .collect()
    };
    let (starts, ends) = (times("session_start"), times("session_complete"));
    assert_eq!(starts.len(), ends.len(), "{lane}: {events:?}");
    starts.into_iter().zip(ends).collect()
}

#[test]
fn with_max_parallel_one_the_lanes_take_turns() {
    let repo = Repo::with_lanes(
        &["a", "b", "c"],
        "[session]\nmax_iterations = 2\n\n[fleet]\nmax_parallel = 1\n",
    );
    let output = wait_with_deadline(repo.spawn_fleet(2), DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    let mut spans: Vec<(String, String, &str)> = Vec::new();
    for lane in ["a", "b", "c"] {
        let lane_spans = session_spans(&repo, lane);
        assert_eq!(lane_spans.len(), 2, "{lane}");
        spans.extend(lane_spans.into_iter().map(|(s, e)| (s, e, lane)));
    }
    // RFC 3339 times with the same offset sort as text.
    spans.sort();
    for pair in spans.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "sessions overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn a_running_fleet_starts_an_added_lane_and_takes_pause_resume_and_stop() {
    let repo = Repo::with_lanes(&["a"], "[session]\nmax_iterations = 1\n");
    let fleet = repo.spawn_fleet(600);
    let group_a = repo.session_group("a");
    repo.expect(&["lane", "add", "b"]);
    let group_b = repo.session_group("b");

    repo.expect(&["lane", "pause", "a"]);
    let stopped = |pgid: i32| {
        let states = group_states(pgid);
        !states.is_empty() && states.iter().all(|state| *state == 'T')
    };
    assert!(
        wait_until(DEADLINE, || stopped(group_a)),
        "lane a's group was not stopped"
    );
    // The other lane keeps writing meanwhile.
    let before = repo.output_bytes("b", 1);
    assert!(wait_until(DEADLINE, || repo.output_bytes("b", 1) > before + 100));
    assert!(!stopped(group_b));
    assert!(stopped(group_a), "lane a woke up by itself");

    repo.expect(&["lane", "resume", "a"]);
    assert!(
        wait_until(DEADLINE, || !stopped(group_a)),
        "lane a was not resumed"
    );

    repo.expect(&["lane", "stop", "a", "--now"]);
    let ended = wait_until(DEADLINE, || {
        repo.status("a")
            .is_some_and(|status| status["state"] == "stopped")
    });
    assert!(ended, "lane a did not stop");
    // Resumed, a lane that ended runs again, with its numbering going on.
    repo.expect(&["lane", "resume", "a"]);
    let again = repo.session_starts("a", 2);
    assert!(again, "lane a did not run again after lane resume");
    repo.expect(&["lane", "stop", "a", "--now"]);
    repo.expect(&["lane", "stop", "b", "--now"]);
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(stdout.contains("lane=b loop_start"), "{stdout}");
    assert!(common::live_group_members(group_a).is_empty());
    assert!(common::live_group_members(group_b).is_empty());
    assert!(
        repo.lane_processes().is_empty(),
        "left running: {:?}",
        repo.lane_processes()
    );
}

/// `lane stop --now` then `lane resume` at once: the resume lands while the
/// stopped run is still ending (its agent ignores SIGTERM for the grace), and
/// the lane must run again, not count as finished.
#[test]
fn a_lane_resumed_while_its_stop_is_still_ending_runs_again() {
    let repo = Repo::with_lanes(&["a"], "[session]\nmax_iterations = 1\n");
    let config = std::fs::read_to_string(repo.path("harness.toml")).expect("read");
    let config = config.replace(
        "min_output_bytes = 1",
        "min_output_bytes = 1\nkill_grace_secs = 3",
    );
    std::fs::write(repo.path("harness.toml"), config).expect("write");
    let mut command = repo.fleet_command(600);
    command.env("COMMIT_AGENT_IGNORE_TERM", "1");
    let fleet = command.spawn().expect("spawn the fleet");
    repo.session_group("a");
    repo.expect(&["lane", "stop", "a", "--now"]);
    repo.expect(&["lane", "resume", "a"]);
    let again = repo.session_starts("a", 2);
    assert!(again, "lane a did not run again after lane resume");
    repo.expect(&["lane", "stop", "a", "--now"]);
    let output = wait_with_deadline(fleet, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(
        repo.lane_processes().is_empty(),
        "left running: {:?}",
        repo.lane_processes()
    );
}

#[test]
fn after_a_sigkill_a_restart_ends_every_lanes_abandoned_session_and_numbering_goes_on() {
    let repo = Repo::with_lanes(&["a", "b", "c"], "[session]\nmax_iterations = 1\n");
    let mut command = repo.fleet_command(600);
    command.env("COMMIT_AGENT_BACKGROUND", "1");
    let mut fleet = command.spawn().expect("spawn the fleet");
    repo.session_group("a");
    repo.session_group("b");
    repo.session_group("c");
    // Until each session's `sleep 600 &` runs.
    assert!(wait_until(DEADLINE, || repo.lane_processes().len() >= 6));
    fleet.kill().expect("SIGKILL the fleet");
    fleet.wait().expect("reap the fleet");
    // The agents die with clowder; what they left behind does not.
    assert!(wait_until(DEADLINE, || !repo.lane_processes().is_empty()));
    // Stopped by the user meanwhile: not run again, but its leftovers are ended too.
    repo.expect(&["lane", "stop", "c"]);

    let output = wait_with_deadline(repo.spawn_fleet(0), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        repo.lane_processes().is_empty(),
        "left running: {:?}\n{stdout}",
        repo.lane_processes()
    );
    let starts = |lane: &str| -> Vec<u64> {
        repo.events(lane)
            .iter()
            .filter(|e| e["event"] == "session_start")
            .filter_map(|e| e["global"].as_u64())
            .collect()
    };
    assert_eq!(starts("c"), vec![1], "{stdout}");
    for lane in ["a", "b", "c"] {
        let ended = stdout.lines().any(|line| {
            line.contains(&format!("lane={lane} ")) && line.contains("of an earlier run")
        });
        assert!(ended, "{lane}: no abandoned session was ended:\n{stdout}");
    }
    for lane in ["a", "b"] {
        assert_eq!(starts(lane), vec![1, 2], "{lane}: {stdout}");
        let log = repo.git(&["log", "--format=%s", &format!("clowder/{lane}")]);
        assert_eq!(log, format!("{lane}: session 2\nfirst"));
    }
}

#[test]
fn the_exit_code_is_the_first_lane_that_did_not_end_normally() {
    let repo = Repo::with_lanes(
        &["a", "b", "c"],
        "[session]\nmax_iterations = 1\n\n[detect]\nrate_limit_patterns = [\"RATE-LIMITED\"]\n",
    );
    // `[backoff]` is already in the base config: the limit goes into it.
    let mut command = repo.fleet_command(0);
    command.env("COMMIT_AGENT_LIMITED_LANE", "b");
    let config = std::fs::read_to_string(repo.path("harness.toml")).expect("config");
    let config = config.replace(
        "max_delay_secs = 0.5",
        "max_delay_secs = 0.5\nmax_consecutive_rate_limits = 1",
    );
    std::fs::write(repo.path("harness.toml"), config).expect("write");
    let output = wait_with_deadline(command.spawn().expect("spawn"), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(3),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        stdout.contains("lane b did not end normally; exit code 3"),
        "{stdout}"
    );
    for lane in ["a", "c"] {
        assert!(
            repo.git(&["log", "--format=%s", &format!("clowder/{lane}")])
                .starts_with(&format!("{lane}: session 1"))
        );
    }
}

#[test]
fn one_sigint_stops_every_lane_after_its_session() {
    let repo = Repo::with_lanes(&["a", "b"], "[session]\nmax_iterations = 5\n");
    let fleet = repo.spawn_fleet(10);
    repo.session_group("a");
    repo.session_group("b");
    common::send_signal(fleet.id(), libc::SIGINT);
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(130),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        stdout.contains("lane a did not end normally; exit code 130"),
        "{stdout}"
    );
    for lane in ["a", "b"] {
        // The session that ran was finished (and committed), and no other began.
        let log = repo.git(&["log", "--format=%s", &format!("clowder/{lane}")]);
        assert_eq!(log, format!("{lane}: session 1\nfirst"), "{stdout}");
    }
    assert!(repo.lane_processes().is_empty());
}

fn time_of(event: &Value) -> chrono::DateTime<chrono::Utc> {
    event["ts"]
        .as_str()
        .and_then(|ts| ts.parse().ok())
        .expect("an event has a time")
}

#[test]
fn with_a_shared_rate_limit_one_lanes_limit_holds_the_others_until_it_is_over() {
    let repo = Repo::with_lanes(
        &["a", "b", "c"],
        "[session]\nmax_iterations = 1\n\n[detect]\nrate_limit_patterns = [\"RATE-LIMITED\"]\n\n[fleet]\nshared_rate_limit = true\n",
    );
    // Every session is too short to count, so it is retried at once (not after
    // the pause between iterations): only the shared limit holds a lane back.
    let config = std::fs::read_to_string(repo.path("harness.toml")).expect("config");
    let config = config
        .replace("min_output_bytes = 1\n", "min_output_bytes = 1000000\n")
        .replace(
            "retry_delay_secs = 0.05",
            "retry_delay_secs = 0.05\nmax_empty_retries = 6",
        )
        .replace("initial_delay_secs = 0.05", "initial_delay_secs = 2")
        .replace("max_delay_secs = 0.5", "max_delay_secs = 5");
    std::fs::write(repo.path("harness.toml"), config).expect("write");
    let mut command = repo.fleet_command(3);
    command.env("COMMIT_AGENT_LIMITED_LANE", "a").env(
        "COMMIT_AGENT_LIMIT_ONCE",
        repo.path(".clowder/limited-once"),
    );
    let output = wait_with_deadline(command.spawn().expect("spawn"), DEADLINE);
    let stdout = stdout_of(&output);
    // Every session printed too little: each lane came to nothing, so failed.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(stdout.contains("no session came to anything"), "{stdout}");

    let limit = repo
        .events("a")
        .into_iter()
        .find(|e| e["event"] == "rate_limited")
        .expect("lane a was rate-limited");
    let backoff = limit["backoff_secs"].as_f64().expect("backoff_secs");
    let until = time_of(&limit) + chrono::TimeDelta::milliseconds((backoff * 1000.0) as i64);
    // (start, end, lane) of every session that started after the limit was seen.
    let mut after: Vec<_> = Vec::new();
    for lane in ["a", "b", "c"] {
        let events = repo.events(lane);
        let starts = events.iter().filter(|e| e["event"] == "session_start");
        let ends = events.iter().filter(|e| e["event"] == "session_complete");
        for (start, end) in starts.zip(ends) {
            if time_of(start) > time_of(&limit) {
                after.push((time_of(start), time_of(end), lane));
            }
        }
    }
    after.sort();
    assert!(after.len() >= 3, "{after:?}\n{stdout}");
    for (start, _, lane) in &after {
        assert!(
            *start >= until,
            "lane {lane} started at {start}, before the limit ended at {until}"
        );
    }
    // One lane went first; the others waited for its session to end well.
    let (_, first_end, first_lane) = after[0];
    for (start, _, lane) in &after[1..] {
        if *lane != first_lane {
            assert!(
                *start >= first_end,
                "lane {lane} did not wait for lane {first_lane}: {after:?}"
            );
        }
    }
}

#[test]
fn the_root_budget_is_the_whole_fleets_and_no_session_starts_once_it_is_spent() {
    let repo = Repo::with_lanes(
        &["a", "b"],
        "[session]\nmax_iterations = 5\n\n[guard]\nmax_cost_usd = 1.0\n\n[fleet]\nmax_parallel = 1\n",
    );
    // $0.40 a session: alone, a lane would run 3 sessions before its budget ran out.
    let transcript =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/cost_040.jsonl");
    let mut command = repo.fleet_command(0);
    command.env("COMMIT_AGENT_TRANSCRIPT", transcript);
    let output = wait_with_deadline(command.spawn().expect("spawn"), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        stdout.contains(
            "the fleet's budget [guard] max_cost_usd = $1.00 was spent ($1.2000 over all lanes)"
        ),
        "{stdout}"
    );
    let sessions: usize = ["a", "b"]
        .iter()
        .map(|lane| {
            repo.events(lane)
                .iter()
                .filter(|e| e["event"] == "session_start")
                .count()
        })
        .sum();
    // One at a time: the third session spends the budget, and none follows it.
    assert_eq!(sessions, 3, "{stdout}");
}

#[test]
fn an_agent_in_a_lane_asks_through_the_fleets_queue_and_the_request_names_its_lane() {
    let repo = Repo::with_lanes(&["a"], "[session]\nmax_iterations = 1\n");
    let mut command = repo.fleet_command(0);
    command.env("COMMIT_AGENT_ASK", clowder_bin());
    let fleet = command.spawn().expect("spawn the fleet");
    let mut pending = Vec::new();
    let asked = wait_until(DEADLINE, || {
        let out = repo.clowder(&["queue", "--json"]);
        pending = serde_json::from_str::<Value>(&stdout_of(&out))
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
        !pending.is_empty()
    });
    assert!(asked, "no request reached the queue in .clowder/approvals");
    assert_eq!(pending[0]["lane"], "a", "{pending:?}");
    let table = stdout_of(&repo.clowder(&["queue"]));
    assert!(table.contains("[a] may lane a commit?"), "{table}");
    let rows = repo.lanes_json();
    assert_eq!(rows[0]["pending_approvals"], 1, "{rows:?}");
    let id = pending[0]["id"].as_str().expect("an id");
    repo.expect(&["approve", id]);
    let output = wait_with_deadline(fleet, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(
        repo.git(&["log", "--format=%s", "-1", "clowder/a"]),
        "a: session 1"
    );
}

#[test]
fn a_sighup_stops_every_lane_after_its_session() {
    // The terminal the fleet was started from closed: no lane is left unwatched.
    let repo = Repo::with_lanes(&["a", "b"], "[session]\nmax_iterations = 5\n");
    let fleet = repo.spawn_fleet(10);
    repo.session_group("a");
    repo.session_group("b");
    common::send_signal(fleet.id(), libc::SIGHUP);
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(129),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        stdout.contains("lane=b clowder: stopped (SIGHUP)"),
        "{stdout}"
    );
    assert!(repo.lane_processes().is_empty());
}

#[test]
fn a_lane_queued_for_a_slot_starts_no_session_after_a_sigint() {
    let repo = Repo::with_lanes(
        &["a", "b"],
        "[session]\nmax_iterations = 3\n\n[fleet]\nmax_parallel = 1\n",
    );
    let fleet = repo.spawn_fleet(10);
    repo.session_group("a");
    // While lane a runs its session, lane b waits for the one slot.
    let queued = wait_until(DEADLINE, || {
        repo.lanes_json()
            .iter()
            .any(|row| row["name"] == "b" && row["state"] == "queued")
    });
    assert!(
        queued,
        "lane b never showed as queued: {:?}",
        repo.lanes_json()
    );
    let status = stdout_of(&repo.clowder(&["--status"]));
    assert!(status.contains("lane=b state=queued"), "{status}");
    common::send_signal(fleet.id(), libc::SIGINT);
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(130),
        "{stdout}{}",
        stderr_of(&output)
    );
    let started = |lane: &str| {
        repo.events(lane)
            .iter()
            .filter(|e| e["event"] == "session_start")
            .count()
    };
    assert_eq!((started("a"), started("b")), (1, 0), "{stdout}");
    assert!(
        stdout.contains("lane=b clowder: stopped (SIGINT)"),
        "{stdout}"
    );
}

#[test]
fn a_broken_registry_is_an_error_not_a_folder_without_lanes() {
    let repo = Repo::with_lanes(&["a"], "");
    std::fs::write(
        repo.path(".clowder/fleet.json"),
        "{\"schema_version\": 1,\n",
    )
    .expect("write");
    let output = repo.clowder(&["--headless"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout_of(&output));
    let stderr = stderr_of(&output);
    assert!(stderr.contains("fleet.json: line 2"), "{stderr}");
    assert!(!repo.path("harness.status").exists(), "the single loop ran");
}

#[test]
fn a_lane_paused_between_sessions_starts_its_next_session_only_on_resume() {
    // The hook ends only once the pause request was left and taken: the pause comes
    // between sessions, with no session running to stop.
    let repo = Repo::with_lanes(
        &["a"],
        "[session]\nmax_iterations = 1\n\n[hooks]\npre_session = [\"until [ -e \\\"$PAUSE_SENT\\\" ]; do sleep 0.05; done; while [ -e \\\"$PAUSE_FILE\\\" ]; do sleep 0.05; done\"]\n",
    );
    let log = repo.path(".clowder/fleet-out.txt");
    let mut command = repo.fleet_command(0);
    command
        .env("PAUSE_FILE", repo.path(".clowder/lanes/a/pause"))
        .env("PAUSE_SENT", repo.path(".clowder/pause-sent"))
        .stdout(std::fs::File::create(&log).expect("create the log"));
    let fleet = command.spawn().expect("spawn the fleet");
    let in_hook = wait_until(DEADLINE, || {
        repo.status("a")
            .is_some_and(|status| status["state"] == "pre_hooks")
    });
    assert!(in_hook, "lane a never ran its pre-session hook");
    repo.expect(&["lane", "pause", "a"]);
    std::fs::write(repo.path(".clowder/pause-sent"), "").expect("write");
    let held_line = "lane=a iteration=1 the lane is paused: the session starts on lane resume";
    let held = wait_until(DEADLINE, || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains(held_line))
    });
    assert!(
        held,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let resumed_at = chrono::Utc::now();
    repo.expect(&["lane", "resume", "a"]);
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        stderr_of(&output)
    );
    let start = repo
        .events("a")
        .into_iter()
        .find(|e| e["event"] == "session_start")
        .expect("the session ran once resumed");
    assert!(time_of(&start) >= resumed_at, "{stdout}");
}

/// The inotify instances of `pid` (a user has 128 by default).
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the fleet's fds")
        .filter_map(Result::ok)
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|to| to == Path::new("anon_inode:inotify"))
        })
        .count()
}

#[test]
fn the_lanes_of_a_fleet_share_one_inotify_instance_and_each_still_hears_its_stop_file() {
    let lanes = ["a", "b", "c", "d"];
    let repo = Repo::with_lanes(&lanes, "[session]\nmax_iterations = 2\n");
    let fleet = repo.spawn_fleet(600);
    let groups: Vec<i32> = lanes.iter().map(|lane| repo.session_group(lane)).collect();
    let instances = inotify_instances(fleet.id());
    assert!(
        instances <= 1,
        "{instances} inotify instances for {} running lanes",
        lanes.len()
    );
    // STOP ends each lane after its session, which `lane stop --now` cuts short.
    for lane in lanes {
        std::fs::write(repo.path(&format!(".clowder/lanes/{lane}/STOP")), "").expect("touch STOP");
        let pending = wait_until(DEADLINE, || {
            repo.status(lane)
                .is_some_and(|status| status["stop_pending"] == true)
        });
        assert!(pending, "lane {lane} did not see its STOP file");
        repo.expect(&["lane", "stop", lane, "--now"]);
    }
    let output = wait_with_deadline(fleet, DEADLINE);
    assert!(output.status.success(), "{}", stderr_of(&output));
    for lane in lanes {
        let starts = repo
            .events(lane)
            .iter()
            .filter(|e| e["event"] == "session_start")
            .count();
        assert_eq!(starts, 1, "lane {lane} started another session after STOP");
    }
    for group in groups {
        assert!(common::live_group_members(group).is_empty());
    }
    assert!(repo.lane_processes().is_empty());
}

/// The fleet's children that are zombies: exited, and not yet reaped.
fn zombie_children(pid: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or("", |(_, rest)| rest)
                    .split_whitespace()
                    .collect();
                fields.first() == Some(&"Z") && fields.get(1) == Some(&pid.to_string().as_str())
            })
        })
        .collect()
}

#[test]
fn the_daemons_a_session_leaves_are_reaped_as_they_die_not_when_it_ends() {
    let repo = Repo::with_lanes(&["a", "b"], "[session]\nmax_iterations = 1\n");
    // A minute-long session each, which leaves 3 daemons that end at once.
    let mut command = repo.fleet_command(600);
    command.env("COMMIT_AGENT_DAEMONS", "3");
    let fleet = command.spawn().expect("spawn the fleet");
    let pid = fleet.id();
    for lane in ["a", "b"] {
        let done = wait_until(DEADLINE, || {
            (0..3).all(|k| {
                repo.path(&format!(".clowder/worktrees/{lane}/daemon-{k}.done"))
                    .exists()
            })
        });
        assert!(done, "lane {lane}: the daemons did not run");
    }
    let reaped = wait_until(Duration::from_secs(10), || zombie_children(pid).is_empty());
    let left = zombie_children(pid);
    for lane in ["a", "b"] {
        repo.expect(&["lane", "stop", lane, "--now"]);
    }
    let output = wait_with_deadline(fleet, DEADLINE);
    assert!(reaped, "zombies while the sessions ran: {left:?}");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
}

#[test]
fn a_fleet_run_under_another_program_name_is_running_and_its_lane_is_not_removed() {
    let repo = Repo::with_lanes(&["a"], "[session]\nmax_iterations = 1\n");
    // As a package (clowder-0.1) or a wrapper (.clowder-wrapped) names it.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let renamed = elsewhere.path().join("clowder-0.1");
    std::fs::copy(clowder_bin(), &renamed).expect("copy the binary");
    let mut command = Command::new(&renamed);
    common::git::isolate(&mut command)
        .args(["--headless"])
        .current_dir(repo.root())
        .env("COMMIT_AGENT_TICKS", "600")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let fleet = common::spawn_written(&mut command);
    repo.session_group("a");

    let row = repo.lanes_json().remove(0);
    assert_eq!(row["running"], true, "{row}");
    assert_eq!(row["state"], "running", "{row}");
    assert_eq!(row["loop_state"], "session_running", "{row}");
    let status = repo.clowder(&["--status"]);
    assert!(
        stdout_of(&status).contains("lane=a state=running"),
        "{}",
        stdout_of(&status)
    );
    let out = repo.clowder(&["lane", "rm", "a", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    assert!(
        stderr_of(&out).contains("lane a is running"),
        "{}",
        stderr_of(&out)
    );
    assert!(repo.path(".clowder/worktrees/a").is_dir());
    assert!(!repo.git(&["branch", "--list", "clowder/a"]).is_empty());
    assert!(repo.lanes_json().len() == 1, "still registered");

    repo.expect(&["lane", "stop", "a", "--now"]);
    let output = wait_with_deadline(fleet, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let row = repo.lanes_json().remove(0);
    assert_eq!(row["running"], false, "{row}");
    repo.expect(&["lane", "rm", "a", "--force"]);
}

#[test]
fn a_stopped_then_resumed_lane_keeps_its_iterations_cost_and_budget() {
    let repo = Repo::with_lanes(&["keep"], "");
    repo.expect(&["lane", "add", "a", "--max-iterations", "3"]);
    // $0.40 a session; `keep` holds the fleet open meanwhile.
    let transcript =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/cost_040.jsonl");
    let mut command = repo.fleet_command(5);
    command.env("COMMIT_AGENT_TRANSCRIPT", transcript);
    let fleet = command.spawn().expect("spawn the fleet");
    assert!(repo.session_starts("a", 2), "lane a's second session");
    repo.expect(&["lane", "stop", "a"]);
    let stopped = wait_until(DEADLINE, || {
        repo.status("a").is_some_and(|s| s["state"] == "stopped")
    });
    assert!(stopped, "lane a did not stop after its session");
    let before = repo.status("a").expect("status");
    let sessions_before = before["counters"]["sessions"].as_u64().expect("sessions");
    assert!(sessions_before >= 2, "{before}");

    repo.expect(&["lane", "resume", "a"]);
    let ended = wait_until(DEADLINE, || {
        repo.status("a")
            .is_some_and(|s| s["state"] == "stopped" && s["exit_reason"] == "max_iterations")
    });
    let after = repo.status("a").expect("status");
    repo.expect(&["lane", "stop", "keep", "--now"]);
    let output = wait_with_deadline(fleet, DEADLINE);
    assert!(ended, "lane a did not end at max_iterations: {after}");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let starts = repo
        .events("a")
        .iter()
        .filter(|e| e["event"] == "session_start")
        .count();
    assert_eq!(
        starts, 3,
        "three iterations in all, not three after the resume"
    );
    assert_eq!(after["counters"]["sessions"], 3, "{after}");
    assert_eq!(after["iteration"], 3, "{after}");
    let cost = after["totals"]["cost_usd"].as_f64().expect("cost");
    assert!((cost - 1.2).abs() < 1e-9, "the cost counts on: {after}");
}

#[test]
fn a_headless_fleet_says_which_lane_waits_for_approval_and_how_to_answer() {
    let repo = Repo::with_lanes(
        &["a"],
        "[session]\nmax_iterations = 1\n\n[approvals]\nautonomy = 1\n",
    );
    let fleet = repo.spawn_fleet(1);
    let mut id = String::new();
    assert!(
        wait_until(DEADLINE, || {
            let queue = repo.clowder(&["queue", "--json"]);
            let listed: Value = serde_json::from_slice(&queue.stdout).unwrap_or_default();
            id = listed[0]["id"].as_str().unwrap_or_default().to_string();
            !id.is_empty()
        }),
        "no request appeared"
    );
    // Several polls of the queue pass while the request waits.
    std::thread::sleep(Duration::from_millis(1600));
    repo.expect(&["approve", &id]);
    let output = wait_with_deadline(fleet, DEADLINE);
    let stdout = stdout_of(&output);
    let notices: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("approval waiting:"))
        .collect();
    assert_eq!(notices.len(), 1, "{stdout}");
    assert!(
        notices[0].contains("lane a: approval waiting: start session 1/1"),
        "{stdout}"
    );
    assert!(
        notices[0].contains(&format!("clowder approve {id} /")),
        "{stdout}"
    );
}

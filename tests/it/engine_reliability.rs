//! One loop per folder, and what a later run does about a session an earlier run
//! left behind when clowder itself was killed.

use crate::common;

use std::os::unix::process::CommandExt;
use std::process::Child;

use common::*;

/// Fast polling, but the watchdog never fires within a test.
const SLOW_WATCHDOG: &str = "[watchdog]\nstale_timeout_mins = 10\ncheck_interval_secs = 0.1\n";

/// SIGKILLs the listed process groups and children on drop, so that a failing
/// test leaks no `sleep 600`.
#[derive(Default)]
struct Cleanup {
    groups: Vec<i32>,
    children: Vec<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for pgid in &self.groups {
            // SAFETY: killpg with a group id and a signal number touches no memory.
            unsafe {
                libc::killpg(*pgid, libc::SIGKILL);
            }
        }
    }
}

/// "pid pgid" lines the fake agent appended to its pidfile.
fn agent_pids(project: &Project) -> Vec<(i32, i32)> {
    std::fs::read_to_string(project.path("fake-agent.pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect()
}

fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[test]
fn a_second_loop_in_the_same_folder_is_refused_and_the_first_runs_on() {
    let project = Project::new(&fast_config(&["slow", "3"], SLOW_WATCHDOG));
    let mut cleanup = Cleanup::default();
    cleanup.children.push(project.spawn(&["--headless", "1"]));
    let first_pid = cleanup.children[0].id();
    assert!(
        wait_until(DEADLINE, || !project
            .events_named("session_start")
            .is_empty()),
        "the first loop never started its session"
    );

    let second = project.run(&["--headless", "1"]);
    let stderr = stderr_of(&second);
    assert_eq!(second.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!("PID {first_pid}")) && stderr.contains("already running"),
        "the refusal names the holder: {stderr}"
    );
    assert!(stderr.contains("nothing was run"), "{stderr}");
    // Reading the state and checking the config need no lock.
    let status = project.run(&["--status"]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr_of(&status));
    assert!(stdout_of(&status).contains(&format!("running (PID {first_pid})")));
    let dry = project.run(&["--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", stderr_of(&dry));

    let first = wait_with_deadline(cleanup.children.remove(0), DEADLINE);
    assert_eq!(first.status.code(), Some(0), "{}", stdout_of(&first));
    assert_eq!(project.events_named("loop_start").len(), 1);
    assert_eq!(project.events_named("session_start").len(), 1);
    let complete = project.events_named("session_complete");
    assert_eq!(complete.len(), 1);
    assert_eq!(complete[0]["productive"], true);
    assert_eq!(project.output_files().len(), 1);
    assert_eq!(
        std::fs::read_to_string(project.path(".clowder/lock"))
            .expect("lock file")
            .trim(),
        first_pid.to_string()
    );

    // Once the first loop is gone, the folder is free again.
    project.write("harness.toml", &fast_config(&["normal"], SLOW_WATCHDOG));
    let third = project.run(&["--headless", "1"]);
    assert_eq!(third.status.code(), Some(0), "{}", stderr_of(&third));
}

#[test]
fn the_group_of_a_session_left_behind_by_a_killed_loop_is_killed_on_the_next_start() {
    let project = Project::new(&fast_config(&["fork", "3"], SLOW_WATCHDOG));
    let mut cleanup = Cleanup::default();
    let child = project
        .command(&["--headless", "1"])
        .env("FAKE_AGENT_PIDFILE", project.path("fake-agent.pids"))
        .spawn()
        .expect("spawn clowder");
    cleanup.children.push(child);
    assert!(
        wait_until(DEADLINE, || !agent_pids(&project).is_empty()),
        "the agent never started"
    );
    let (pid, pgid) = agent_pids(&project)[0];
    cleanup.groups.push(pgid);
    assert!(
        wait_until(DEADLINE, || live_group_members(pgid).len() >= 4),
        "the agent's children never started"
    );
    let ticks = start_ticks(pid).expect("agent start time");
    assert!(
        wait_until(DEADLINE, || {
            let status = project.status();
            status["agent_pid"] == pid && status["agent_start_ticks"] == ticks
        }),
        "the status never recorded the agent's start time: {}",
        project.read("harness.status")
    );
    let start = &project.events_named("session_start")[0];
    assert_eq!(start["agent_start_ticks"], ticks);

    // clowder dies without a chance to clean up; its agent dies with it
    // (parent-death signal), the agent's children do not.
    let mut clowder = cleanup.children.remove(0);
    clowder.kill().expect("SIGKILL clowder");
    clowder.wait().expect("reap clowder");
    assert!(
        wait_until(DEADLINE, || !pid_alive(pid)),
        "the agent outlived clowder"
    );
    let left = live_group_members(pgid);
    assert_eq!(left.len(), 3, "the sleeps stay behind: {left:?}");

    project.write("harness.toml", &fast_config(&["normal"], SLOW_WATCHDOG));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(
        live_group_members(pgid).is_empty(),
        "the abandoned group survived: {:?}",
        live_group_members(pgid)
    );
    let abandoned = project.events_named("session_abandoned");
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["pgid"], pgid);
    assert_eq!(abandoned[0]["pid"], pid);
    assert_eq!(abandoned[0]["global"], 1);
    assert!(abandoned[0]["killed"].as_u64() >= Some(1), "{abandoned:?}");
    assert!(
        stdout_of(&output).contains("was left running"),
        "{}",
        stdout_of(&output)
    );
    // The new run goes on as usual, with the next global number.
    let complete = project.events_named("session_complete");
    assert_eq!(complete.len(), 1);
    assert_eq!(complete[0]["global"], 2);
}

/// A status file naming a session that was running, as a killed clowder leaves it.
fn abandoned_status(clowder_pid: u32, pid: i32, ticks: u64, output_file: &str) -> String {
    serde_json::json!({
        "lane": 0, "pid": clowder_pid, "state": "session_running", "agent_command": "claude",
        "stale_timeout_secs": 1200.0, "paused": false, "paused_at": null, "stop_pending": false,
        "iteration": 1, "max_iterations": 1, "global_iteration": 7,
        "output_file": output_file, "output_bytes": 0,
        "loop_start": "2026-01-01T00:00:00Z", "session_start": "2026-01-01T00:00:00Z",
        "last_output_growth": null, "last_update": "2026-01-01T00:00:00Z",
        "last_completed_iteration": null, "last_completed_global": null, "last_committed": null,
        "last_exit_code": null, "consecutive_rate_limits": 0, "pgid": pid, "agent_pid": pid,
        "agent_start_ticks": ticks, "next_session_at": null, "rate_limit_resets_at": null,
        "counters": {"sessions": 1, "productive": 0, "empty_retries": 0, "empty_iterations": 0,
            "rate_limits": 0, "watchdog_kills": 0, "user_kills": 0, "hook_failures": 0, "commits": 0},
        "exit_reason": null
    })
    .to_string()
}

/// A pid that belongs to no process now.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

#[test]
fn a_reused_group_id_is_never_signalled() {
    let project = Project::new(&fast_config(&["normal"], SLOW_WATCHDOG));
    let mut cleanup = Cleanup::default();
    // An unrelated process group that happens to have the recorded id.
    let stranger = std::process::Command::new("sleep")
        .arg("600")
        .process_group(0)
        .spawn()
        .expect("spawn sleep");
    let pid = stranger.id() as i32;
    cleanup.groups.push(pid);
    cleanup.children.push(stranger);
    let ticks = start_ticks(pid).expect("start time");
    let output_file = project.path("claude-iteration-7.jsonl");
    project.write(
        "harness.status",
        &abandoned_status(
            dead_pid(),
            pid,
            ticks + 1,
            &output_file.display().to_string(),
        ),
    );

    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(
        pid_alive(pid),
        "a process that is not the session's was killed"
    );
    let abandoned = project.events_named("session_abandoned");
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["killed"], 0);
    assert_eq!(abandoned[0]["global"], 7);
}

#[test]
fn a_session_whose_group_is_gone_is_only_logged() {
    let project = Project::new(&fast_config(&["normal"], SLOW_WATCHDOG));
    let gone = dead_pid() as i32;
    project.write(
        "harness.status",
        &abandoned_status(dead_pid(), gone, 1, "/nonexistent/out.jsonl"),
    );
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    let abandoned = project.events_named("session_abandoned");
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert_eq!(abandoned[0]["killed"], 0);
    assert_eq!(abandoned[0]["pgid"], gone);

    // A status that says the loop stopped is no abandoned session.
    let again = project.run(&["--headless", "1"]);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(project.events_named("session_abandoned").len(), 1);
}

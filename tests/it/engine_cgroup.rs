//! Per-session cgroups: where clowder can write cgroup2 (root here, as in CI),
//! a session ends with `cgroup.kill`, so even a daemon that clears its
//! environment and `setsid`s away is killed at session end, and after a SIGKILL
//! of clowder by the next start. `CLOWDER_KILL_METHOD=group` forces the
//! fallback (process group + `CLOWDER_SESSION` token). Two clowders in two
//! folders leave each other's cgroups alone.

use crate::common;
use crate::procs_common;

use std::path::PathBuf;

use common::*;
use procs_common::*;

/// Starts `sh -c 'echo $$ > daemon.pid; exec sleep 1000'` in a session of its
/// own (with `env -i` when `clear_env`), waits for its pid file, then `rest`.
fn daemon_agent(clear_env: bool, rest: &str) -> String {
    let env = if clear_env { "env -i " } else { "" };
    format!(
        "setsid {env}sh -c 'echo $$ > daemon.pid; exec sleep 1000' & while [ ! -s daemon.pid ]; do sleep 0.02; done; {rest}"
    )
}

fn loop_start(project: &Project) -> serde_json::Value {
    project.events_named("loop_start")[0].clone()
}

/// Whether this test can say anything here; on a machine without a writable
/// cgroup2 it says so and passes (CI runs as root with cgroup2).
fn skip_without_cgroups() -> bool {
    if cgroups_expected() {
        return false;
    }
    eprintln!("no writable cgroup2 here (not root, or no cgroup2 mount): skipped");
    true
}

#[test]
fn a_daemon_that_clears_its_environment_is_killed_at_session_end_by_the_cgroup() {
    if skip_without_cgroups() {
        return;
    }
    let project = Project::new(&sh_config(&daemon_agent(true, "echo started"), ""));
    let mut reaper = Reaper::new(project.root());
    let output = project.run(&["--headless", "1"]);
    let stdout = stdout_of(&output);
    let daemon = wait_pid(&project, "daemon.pid");
    reaper.pids.push(daemon);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let start = loop_start(&project);
    assert_eq!(start["kill_method"], "cgroup", "{start}");
    let tree = PathBuf::from(start["kill_method_detail"].as_str().expect("detail"));
    assert!(
        tree.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("clowder-")),
        "{start}"
    );
    assert!(
        wait_until(DEADLINE, || !pid_alive(daemon)),
        "the daemon {daemon} outlived its session\n{stdout}"
    );
    let leaked = project.events_named("leaked_pid");
    assert!(
        leaked
            .iter()
            .any(|e| e["pid"] == daemon && e["killed"] == true),
        "{leaked:?}"
    );
    assert!(!tree.exists(), "{} was left behind", tree.display());
}

#[test]
fn the_forced_fallback_kills_a_setsid_daemon_by_group_and_token() {
    let project = Project::new(&sh_config(&daemon_agent(false, "echo started"), ""));
    let mut reaper = Reaper::new(project.root());
    let child = project
        .command(&["--headless", "1"])
        .env("CLOWDER_KILL_METHOD", "group")
        .spawn()
        .expect("spawn clowder");
    let output = wait_with_deadline(child, DEADLINE);
    let stdout = stdout_of(&output);
    let daemon = wait_pid(&project, "daemon.pid");
    reaper.pids.push(daemon);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let start = loop_start(&project);
    assert_eq!(start["kill_method"], "group+token", "{start}");
    assert_eq!(start["kill_method_detail"], "CLOWDER_KILL_METHOD=group");
    assert!(
        wait_until(DEADLINE, || !pid_alive(daemon)),
        "the daemon {daemon} outlived its session\n{stdout}"
    );
    let leaked = project.events_named("leaked_pid");
    assert!(
        leaked
            .iter()
            .any(|e| e["pid"] == daemon && e["killed"] == true),
        "{leaked:?}"
    );

    let dry = project
        .command(&["--dry-run"])
        .env("CLOWDER_KILL_METHOD", "group")
        .output()
        .expect("dry run");
    assert!(
        stdout_of(&dry).contains("# kill method: group+token (CLOWDER_KILL_METHOD=group)"),
        "{}",
        stdout_of(&dry)
    );
}

#[test]
fn dry_run_names_the_cgroup_method() {
    if skip_without_cgroups() {
        return;
    }
    let project = Project::new("");
    let dry = project.command(&["--dry-run"]).output().expect("dry run");
    assert!(
        stdout_of(&dry).contains("# kill method: cgroup (under /"),
        "{}",
        stdout_of(&dry)
    );
}

#[test]
fn a_cleared_environment_daemon_left_by_a_killed_clowder_is_ended_through_its_cgroup() {
    if skip_without_cgroups() {
        return;
    }
    let project = Project::new(&sh_config(&daemon_agent(true, "sleep 1000"), ""));
    let mut reaper = Reaper::new(project.root());
    let mut clowder = project.spawn(&["--headless", "1"]);
    let daemon = wait_pid(&project, "daemon.pid");
    reaper.pids.push(daemon);
    assert!(wait_until(DEADLINE, || std::fs::read_to_string(format!(
        "/proc/{daemon}/comm"
    ))
    .is_ok_and(|c| c.trim() == "sleep")));
    assert!(!environ_has(daemon, "CLOWDER_SESSION", ""));
    clowder.kill().expect("SIGKILL clowder");
    clowder.wait().expect("wait");
    assert!(pid_alive(daemon));

    project.write("STOP", "");
    let output = project.run(&["--headless", "1"]);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        wait_until(DEADLINE, || !pid_alive(daemon)),
        "the daemon {daemon} survived the restart\n{stdout}"
    );
    let leaked = project.events_named("leaked_pid");
    assert!(
        leaked
            .iter()
            .any(|e| e["pid"] == daemon && e["killed"] == true),
        "{leaked:?}\n{stdout}"
    );
}

/// The cgroup a process is in, relative to the cgroup2 root (`0::` line).
fn cgroup_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
}

#[test]
fn two_clowders_in_two_folders_leave_each_others_cgroups_alone() {
    if skip_without_cgroups() {
        return;
    }
    let long = Project::new(&sh_config("echo $$ > agent.pid; exec sleep 1000", ""));
    let mut reaper = Reaper::new(long.root());
    let clowder = long.spawn(&["--headless", "1"]);
    let agent = wait_pid(&long, "agent.pid");
    reaper.pids.push(agent);
    let tree = PathBuf::from(
        loop_start(&long)["kill_method_detail"]
            .as_str()
            .expect("detail")
            .to_string(),
    );
    assert!(
        cgroup_of(agent)
            .is_some_and(|c| c.contains(&format!("/clowder-{}/session-1", clowder.id()))),
        "{:?}",
        cgroup_of(agent)
    );

    // A second clowder starts, runs its session and ends meanwhile.
    let short = Project::new(&sh_config("echo hi", ""));
    let output = short.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(loop_start(&short)["kill_method"], "cgroup");
    assert!(pid_alive(agent), "the other folder's agent was killed");
    assert!(
        tree.join("session-1").exists(),
        "the other folder's cgroup was removed"
    );

    // Pause is SIGSTOP to the group: the agent shows as stopped.
    let paused = long.run(&["pause"]);
    assert_eq!(paused.status.code(), Some(0), "{}", stderr_of(&paused));
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(format!("/proc/{agent}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('T'))
            })
            .unwrap_or(false)
    }));

    send_signal(clowder.id(), libc::SIGINT);
    assert!(wait_until(DEADLINE, || !long
        .events_named("stop_requested")
        .is_empty()));
    send_signal(clowder.id(), libc::SIGINT);
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(130), "{}", stdout_of(&output));
    assert!(wait_until(DEADLINE, || !pid_alive(agent)));
    assert!(!tree.exists(), "{} was left behind", tree.display());
}

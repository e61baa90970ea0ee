//! No process outlives clowder: a hook running when clowder is SIGKILLed dies
//! with it (the parent-death signal) and what it started is ended by the next
//! start; SIGTERM and a second Ctrl-C interrupt a hung hook within the kill
//! grace; a `setsid` daemon of a session survives a SIGKILL of clowder only
//! until the next start, which finds it by its `CLOWDER_SESSION` token.
//! Each runs with the kill method of this machine and with the forced fallback.

use crate::common;
use crate::procs_common;

use std::time::Instant;

use common::*;
use procs_common::*;

fn spawn_with_method(
    project: &Project,
    args: &[&str],
    method: Option<&str>,
) -> std::process::Child {
    let mut command = project.command(args);
    if let Some(method) = method {
        command.env("CLOWDER_KILL_METHOD", method);
    }
    command.spawn().expect("spawn clowder")
}

/// Starts clowder again with a STOP file, so that it only cleans up and exits.
fn restart_to_clean_up(project: &Project, method: Option<&str>) -> std::process::Output {
    project.write("STOP", "");
    let child = spawn_with_method(project, &["--headless", "1"], method);
    let output = wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    output
}

fn records_left(project: &Project) -> usize {
    std::fs::read_dir(project.path(".clowder/running")).map_or(0, |d| d.count())
}

fn a_hook_left_by_a_killed_clowder_is_ended_by_the_next_start(method: Option<&str>) {
    let hook = "echo $$ > hook.pid; sleep 1000 & echo $! > hook-child.pid; wait";
    let project = Project::new(&sh_config(
        "echo hi",
        &format!("[hooks]\npre_session = [{hook:?}]\n"),
    ));
    let mut reaper = Reaper::new(project.root());
    let mut clowder = spawn_with_method(&project, &["--headless", "1"], method);
    let hook_pid = wait_pid(&project, "hook.pid");
    let child = wait_pid(&project, "hook-child.pid");
    reaper.pids.extend([hook_pid, child]);
    assert!(wait_until(DEADLINE, || environ_has(
        child,
        "CLOWDER_SESSION",
        ""
    )));
    clowder.kill().expect("SIGKILL clowder");
    clowder.wait().expect("wait");

    // The hook's shell dies with clowder; what it started lives on, orphaned.
    assert!(
        wait_until(DEADLINE, || !pid_alive(hook_pid)),
        "the hook outlived clowder"
    );
    assert!(pid_alive(child), "the hook's child died with it");
    assert_ne!(ppid(child), Some(hook_pid));

    let output = restart_to_clean_up(&project, method);
    let stdout = stdout_of(&output);
    assert!(
        wait_until(DEADLINE, || !pid_alive(child)),
        "the hook's child {child} survived the restart\n{stdout}"
    );
    assert!(
        stdout.contains("hook `echo $$ > hook.pid;") && stdout.contains("was left running"),
        "{stdout}"
    );
    assert_eq!(records_left(&project), 0);
}

#[test]
fn a_hook_left_by_a_killed_clowder_is_ended_by_the_next_start_default_method() {
    a_hook_left_by_a_killed_clowder_is_ended_by_the_next_start(None);
}

#[test]
fn a_hook_left_by_a_killed_clowder_is_ended_by_the_next_start_group_method() {
    a_hook_left_by_a_killed_clowder_is_ended_by_the_next_start(Some("group"));
}

/// A pre-session hook that ignores SIGTERM (so does its `sleep`): only the KILL
/// after the grace ends it.
#[test]
fn sigterm_during_a_hung_hook_interrupts_it_and_exits_143() {
    let hook = "trap '' TERM; echo $$ > hook.pid; sleep 1000 & echo $! > hook-child.pid; wait";
    let project = Project::new(&sh_config(
        "echo hi",
        &format!("[hooks]\npre_session = [{hook:?}]\n"),
    ));
    let mut reaper = Reaper::new(project.root());
    let clowder = project.spawn(&["--headless", "1"]);
    let hook_pid = wait_pid(&project, "hook.pid");
    let child = wait_pid(&project, "hook-child.pid");
    reaper.pids.extend([hook_pid, child]);
    let sent = Instant::now();
    send_signal(clowder.id(), libc::SIGTERM);
    let output = wait_with_deadline(clowder, DEADLINE);
    println!("SIGTERM to exit during a hung hook: {:?}", sent.elapsed());
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(143), "{stdout}");
    for pid in [hook_pid, child] {
        assert!(wait_until(DEADLINE, || !pid_alive(pid)), "{pid} lives on");
    }
    assert!(project.events_named("session_start").is_empty());
    assert_eq!(
        project.events_named("loop_end")[0]["reason"]["signal"]["signal"],
        "SIGTERM"
    );
    assert_eq!(records_left(&project), 0);
}

/// The last session is over and its post-session hook hangs: the second Ctrl-C
/// ends it and the loop exits 130, not 0 for a finished run.
#[test]
fn ctrl_c_twice_during_a_hung_post_session_hook_exits_130() {
    let hook = "echo $$ > hook.pid; sleep 1000 & echo $! > hook-child.pid; wait";
    let project = Project::new(&sh_config(
        "echo done",
        &format!("[hooks]\npost_session = [{hook:?}]\n"),
    ));
    let mut reaper = Reaper::new(project.root());
    let clowder = project.spawn(&["--headless", "1"]);
    let hook_pid = wait_pid(&project, "hook.pid");
    let child = wait_pid(&project, "hook-child.pid");
    reaper.pids.extend([hook_pid, child]);
    send_signal(clowder.id(), libc::SIGINT);
    assert!(wait_until(DEADLINE, || !project
        .events_named("stop_requested")
        .is_empty()));
    let sent = Instant::now();
    send_signal(clowder.id(), libc::SIGINT);
    let output = wait_with_deadline(clowder, DEADLINE);
    println!(
        "second Ctrl-C to exit during a hung hook: {:?}",
        sent.elapsed()
    );
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(130), "{stdout}");
    for pid in [hook_pid, child] {
        assert!(wait_until(DEADLINE, || !pid_alive(pid)), "{pid} lives on");
    }
    assert_eq!(records_left(&project), 0);
}

fn a_setsid_daemon_left_by_a_killed_clowder_is_ended_by_the_next_start(method: Option<&str>) {
    let agent =
        "setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' & echo $$ > agent.pid; sleep 1000";
    let project = Project::new(&sh_config(agent, ""));
    let mut reaper = Reaper::new(project.root());
    let mut clowder = spawn_with_method(&project, &["--headless", "1"], method);
    let daemon = wait_pid(&project, "daemon.pid");
    let agent_pid = wait_pid(&project, "agent.pid");
    reaper.pids.extend([daemon, agent_pid]);
    // Once it has exec'd `sleep`, with the session's token.
    assert!(wait_until(DEADLINE, || std::fs::read_to_string(format!(
        "/proc/{daemon}/comm"
    ))
    .is_ok_and(|c| c.trim() == "sleep")));
    assert!(environ_has(daemon, "CLOWDER_SESSION", ""));
    clowder.kill().expect("SIGKILL clowder");
    clowder.wait().expect("wait");
    assert!(wait_until(DEADLINE, || !pid_alive(agent_pid)));
    assert!(pid_alive(daemon), "the daemon died with clowder");

    let output = restart_to_clean_up(&project, method);
    let stdout = stdout_of(&output);
    assert!(
        wait_until(DEADLINE, || !pid_alive(daemon)),
        "the daemon {daemon} survived the restart\n{stdout}"
    );
    let leaked = project.events_named("leaked_pid");
    assert!(
        leaked
            .iter()
            .any(|e| e["pid"] == daemon && e["killed"] == true && e["global"] == 1),
        "{leaked:?}\n{stdout}"
    );
    assert_eq!(records_left(&project), 0);
}

#[test]
fn a_setsid_daemon_left_by_a_killed_clowder_is_ended_by_the_next_start_default_method() {
    a_setsid_daemon_left_by_a_killed_clowder_is_ended_by_the_next_start(None);
}

#[test]
fn a_setsid_daemon_left_by_a_killed_clowder_is_ended_by_the_next_start_group_method() {
    a_setsid_daemon_left_by_a_killed_clowder_is_ended_by_the_next_start(Some("group"));
}

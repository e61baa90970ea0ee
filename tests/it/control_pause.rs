//! `clowder pause` / `clowder resume` from another terminal, against a loop
//! running headless in the same folder: the session's process group stops and
//! continues, and a loop held by a rejected session gate goes on.

use crate::common;

use common::*;

fn status_of(project: &Project) -> serde_json::Value {
    std::fs::read_to_string(project.path("harness.status"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[test]
fn pause_stops_the_sessions_group_and_resume_continues_it() {
    let project = Project::new(&fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let clowder = project.spawn(&["--headless", "1"]);
    let mut pgid = None;
    assert!(
        wait_until(DEADLINE, || {
            let status = status_of(&project);
            pgid = status["pgid"].as_i64().map(|p| p as i32);
            status["state"] == "session_running" && pgid.is_some()
        }),
        "no session started"
    );
    let pgid = pgid.expect("the session's group");
    assert!(wait_until(DEADLINE, || !group_states(pgid).is_empty()));

    let paused = project.run(&["pause"]);
    assert_eq!(paused.status.code(), Some(0), "{}", stderr_of(&paused));
    assert!(
        wait_until(DEADLINE, || {
            let states = group_states(pgid);
            !states.is_empty() && states.iter().all(|s| *s == 'T')
        }),
        "the group never stopped: {:?}",
        group_states(pgid)
    );
    assert!(wait_until(DEADLINE, || status_of(&project)["paused"] == true));

    let resumed = project.run(&["resume"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr_of(&resumed));
    assert!(
        wait_until(DEADLINE, || {
            let states = group_states(pgid);
            !states.is_empty() && states.iter().all(|s| *s != 'T')
        }),
        "the group never continued: {:?}",
        group_states(pgid)
    );
    assert!(wait_until(DEADLINE, || status_of(&project)["paused"] == false));
    assert_eq!(project.events_named("paused").len(), 1);
    assert_eq!(project.events_named("resumed").len(), 1);

    // Twice within 3 s: stop now, killing the session. The second waits until
    // the first was taken, so the two are not merged into one.
    send_signal(clowder.id(), libc::SIGINT);
    assert!(wait_until(DEADLINE, || status_of(&project)["stop_pending"] == true));
    send_signal(clowder.id(), libc::SIGINT);
    wait_with_deadline(clowder, DEADLINE);
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
}

#[test]
fn resume_releases_a_loop_held_by_a_rejected_session() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 2\n"));
    let clowder = project.spawn(&["--headless", "1"]);
    let pending = || {
        let output = project.run(&["queue", "--json"]);
        let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        listed
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["kind"] == "session")
            .filter_map(|r| r["id"].as_str().map(str::to_string))
            .collect::<Vec<String>>()
    };
    let mut ids = Vec::new();
    assert!(wait_until(DEADLINE, || {
        ids = pending();
        !ids.is_empty()
    }));
    let rejected = project.run(&["reject", &ids[0], "--reason", "not yet"]);
    assert_eq!(rejected.status.code(), Some(0));
    assert!(wait_until(DEADLINE, || status_of(&project)["state"] == "held"));

    let resumed = project.run(&["resume"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr_of(&resumed));
    assert!(
        wait_until(DEADLINE, || !project
            .events_named("loop_resumed")
            .is_empty()),
        "the held loop was not resumed"
    );
    // It asks again for the session; approved, it runs and the loop ends.
    let first = ids[0].clone();
    assert!(wait_until(DEADLINE, || {
        ids = pending();
        ids.iter().any(|id| *id != first)
    }));
    let id = ids.iter().find(|id| **id != first).expect("a new request");
    assert_eq!(project.run(&["approve", id]).status.code(), Some(0));
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(project.events_named("session_start").len(), 1);
}

/// A paused session cannot finish: one SIGTERM (a service manager stopping
/// the host, `kill PID`) kills it instead of waiting for it forever.
#[test]
fn one_sigterm_ends_a_loop_whose_session_is_paused() {
    let project = Project::new(&fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let clowder = project.spawn(&["--headless", "1"]);
    let mut pgid = None;
    assert!(
        wait_until(DEADLINE, || {
            let status = status_of(&project);
            pgid = status["pgid"].as_i64().map(|p| p as i32);
            status["state"] == "session_running" && pgid.is_some()
        }),
        "no session started"
    );
    let pgid = pgid.expect("the session's group");
    let paused = project.run(&["pause"]);
    assert_eq!(paused.status.code(), Some(0), "{}", stderr_of(&paused));
    assert!(wait_until(DEADLINE, || status_of(&project)["paused"] == true));

    send_signal(clowder.id(), libc::SIGTERM);
    let output = wait_with_deadline(clowder, DEADLINE);
    assert!(
        stderr_of(&output).contains("while the session is paused")
            || stdout_of(&output).contains("while the session is paused"),
        "{}{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
}

//! Session gates: `[approvals] autonomy` makes sessions wait for a human before they
//! start; a rejection holds the loop. Driven headless with `clowder approve/reject`.

use crate::common;

use common::*;

/// The pending session requests, as `clowder queue --json` lists them.
fn session_requests(project: &Project) -> Vec<serde_json::Value> {
    let output = project.run(&["queue", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    listed
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r["kind"] == "session")
        .collect()
}

fn wait_for_session_request(project: &Project) -> serde_json::Value {
    let mut found = Vec::new();
    assert!(
        wait_until(DEADLINE, || {
            found = session_requests(project);
            !found.is_empty()
        }),
        "no session request appeared"
    );
    found.remove(0)
}

#[test]
fn autonomy_1_asks_before_every_session_and_runs_it_once_approved() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 1\n"));
    let clowder = project.spawn(&["--headless", "1"]);
    let request = wait_for_session_request(&project);
    assert_eq!(request["title"], "start session 1/1");
    assert!(
        request["body"]
            .as_str()
            .is_some_and(|b| b.contains("Fix the failing test."))
    );
    // Nothing runs before the answer.
    assert!(project.events_named("session_start").is_empty());
    assert_eq!(project.status()["state"], "awaiting_approval");
    let id = request["id"].as_str().expect("id").to_string();
    assert_eq!(project.run(&["approve", &id]).status.code(), Some(0));
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(project.events_named("session_start").len(), 1);
    let gate = project.events_named("session_gate");
    assert_eq!(gate.len(), 1);
    assert_eq!(gate[0]["approved"], true);
}

#[test]
fn a_rejected_session_holds_the_loop_until_it_is_stopped() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 2\n"));
    let clowder = project.spawn(&["--headless", "3"]);
    let request = wait_for_session_request(&project);
    let id = request["id"].as_str().expect("id").to_string();
    let rejected = project.run(&["reject", &id, "--reason", "not tonight"]);
    assert_eq!(rejected.status.code(), Some(0));
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(project.path("harness.status"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|s| s["state"] == "held" && s["held_reason"] == "not tonight")
    }));
    assert!(project.events_named("session_start").is_empty());
    // Held is idle: one SIGINT stops at once.
    send_signal(clowder.id(), libc::SIGINT);
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(130), "{}", stdout_of(&output));
    assert!(stdout_of(&output).contains("status=held"));
    assert!(project.events_named("session_start").is_empty());
}

#[test]
fn autonomy_3_asks_only_for_critical_sessions() {
    let project = Project::new(&fast_config(
        &["normal"],
        "[approvals]\nautonomy = 3\ncritical_every = 2\n",
    ));
    let clowder = project.spawn(&["--headless", "2"]);
    // The first session is not critical and runs without asking.
    assert!(wait_until(DEADLINE, || !project
        .events_named("session_complete")
        .is_empty()));
    let request = wait_for_session_request(&project);
    assert_eq!(request["title"], "start session 2/2 (critical)");
    assert_eq!(project.events_named("session_start").len(), 1);
    let id = request["id"].as_str().expect("id").to_string();
    project.run(&["approve", &id]);
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(project.events_named("session_start").len(), 2);
}

#[test]
fn a_critical_marker_in_the_prompt_asks_at_autonomy_3() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 3\n"));
    project.write("PROMPT.md", "Migrate the database.\n<!-- critical -->\n");
    let clowder = project.spawn(&["--headless", "1"]);
    let request = wait_for_session_request(&project);
    let id = request["id"].as_str().expect("id").to_string();
    project.run(&["approve", &id]);
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(project.events_named("session_gate").len(), 1);
}

#[test]
fn autonomy_4_never_asks() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 4\n"));
    project.write("PROMPT.md", "<!-- critical -->\n");
    let output = project.run(&["--headless", "2"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(project.events_named("session_gate").is_empty());
    assert_eq!(project.events_named("session_start").len(), 2);
}

#[test]
fn headless_says_once_per_request_that_it_waits_and_how_to_answer_it() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 1\n"));
    let clowder = project.spawn(&["--headless", "2"]);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let request = wait_for_session_request(&project);
        let id = request["id"].as_str().expect("id").to_string();
        // Several polls of the queue pass while the request waits.
        std::thread::sleep(std::time::Duration::from_millis(1600));
        assert_eq!(project.run(&["approve", &id]).status.code(), Some(0));
        assert!(wait_until(DEADLINE, || session_requests(&project)
            .iter()
            .all(|r| r["id"] != id.as_str())));
        ids.push(id);
    }
    let output = wait_with_deadline(clowder, DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let notices: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("approval waiting:"))
        .collect();
    assert_eq!(notices.len(), 2, "{stdout}");
    for (notice, id) in notices.iter().zip(&ids) {
        assert!(notice.contains("[WARN]"), "{notice}");
        assert!(notice.contains("start session"), "{notice}");
        assert!(
            notice.contains(&format!(
                "(id {id}) — clowder approve {id} / clowder reject {id} --reason"
            )),
            "{notice}"
        );
    }
}

//! Notes told to Claude Code itself, each pinned version, run with stream-json
//! input against the local Anthropic Messages server: a note told during a
//! long Bash call is in the next request to the model and in the output file;
//! one told after the session's result goes to the next session; the session
//! still ends at its result, and the loop goes on to the next one.

use crate::common;
use crate::model_server;
use crate::real_agents;

use std::path::Path;

use common::*;
use model_server::{ModelServer, Reply, ToolCall, anthropic};
use real_agents::Cli;

const TOLD_NOW: &str = "told now (the session reads it at its next step)";

/// The requests of the main conversation that hold `text`, by their place.
fn requests_with(server: &ModelServer, text: &str) -> Vec<usize> {
    server
        .requests()
        .iter()
        .filter(|r| r.scripted)
        .enumerate()
        .filter(|(_, r)| r.body["messages"].to_string().contains(text))
        .map(|(i, _)| i)
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn tell(cli: Cli, server: &ModelServer, project: &Project, text: &str) -> String {
    let told = real_agents::clowder(cli, server, project, &["tell", text])
        .output()
        .expect("clowder tell");
    assert_eq!(told.status.code(), Some(0), "{}", stderr_of(&told));
    stdout_of(&told)
}

fn a_note_told_during_a_long_bash_call_is_in_the_next_request(cli: Cli) {
    let version = cli.version();
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    server.script([
        Reply::Tools(
            "Running the migration.".into(),
            vec![ToolCall::shell("sleep 8; echo migrated")],
        ),
        Reply::Text("Stopped the migrations; the test is next.".into()),
        Reply::Text("The second session is done.".into()),
    ]);
    let project = Project::new(&real_agents::live_input_config(cli, 0.05, ""));
    let run = real_agents::clowder(cli, &server, &project, &["--headless", "2"])
        .spawn()
        .expect("spawn clowder");
    // The Bash call runs: the model was asked once, and the call is in the output.
    let running = wait_until(DEADLINE, || {
        server.scripted_requests() == 1
            && project
                .output_files()
                .first()
                .is_some_and(|f| read(f).contains("sleep 8"))
    });
    assert!(running, "{version}: the Bash call never started");
    let note = "stop editing the migrations; fix the test first";
    let answer = tell(cli, &server, &project, note);
    assert!(answer.contains(TOLD_NOW), "{version}: {answer}");
    let output = crate::common::wait_with_deadline(run, std::time::Duration::from_secs(180));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{version}\n{}\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    // The model's next request, after the Bash call, held the note; the first did not.
    let with_note = requests_with(&server, note);
    assert_eq!(with_note.first(), Some(&1), "{version}: {with_note:?}");
    let files = project.output_files();
    assert_eq!(files.len(), 2, "{version}: {files:?}");
    assert!(
        read(&files[0]).contains(note),
        "{version}: {}",
        read(&files[0])
    );
    assert!(!read(&files[1]).contains(note), "{version}");
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{version}: {delivered:?}");
    assert_eq!(delivered[0]["how"], "now", "{version}");
    assert_eq!(delivered[0]["global"], 1, "{version}");
    // Each session ended at its result; none was killed.
    assert_eq!(
        project.events_named("session_complete").len(),
        2,
        "{version}"
    );
    assert!(
        project.events_named("watchdog_stale").is_empty(),
        "{version}"
    );
}

fn a_note_told_after_the_result_goes_to_the_next_session(cli: Cli) {
    let version = cli.version();
    if !cli.installed() {
        return;
    }
    let server = anthropic::start();
    server.script([
        Reply::Text("The first session is done.".into()),
        Reply::Text("The second session is done.".into()),
    ]);
    // A long pause between the sessions: the note is told in it.
    let project = Project::new(&real_agents::live_input_config(cli, 6.0, ""));
    let run = real_agents::clowder(cli, &server, &project, &["--headless", "2"])
        .spawn()
        .expect("spawn clowder");
    let ended = wait_until(DEADLINE, || {
        project.events_named("session_complete").len() == 1
    });
    assert!(ended, "{version}: the first session never ended");
    let note = "then update the changelog";
    let answer = tell(cli, &server, &project, note);
    assert!(
        answer.contains("left for the next session (no session takes notes now)"),
        "{version}: {answer}"
    );
    let output = crate::common::wait_with_deadline(run, std::time::Duration::from_secs(180));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{version}: {}",
        stderr_of(&output)
    );
    assert_eq!(requests_with(&server, note), [1], "{version}");
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{version}: {delivered:?}");
    assert_eq!(delivered[0]["how"], "prompt", "{version}");
    assert_eq!(delivered[0]["global"], 2, "{version}");
}

real_agents::per_version!(
    Claude, CLAUDE_VERSIONS:
    a_note_told_during_a_long_bash_call_is_in_the_next_request,
    a_note_told_after_the_result_goes_to_the_next_session,
);

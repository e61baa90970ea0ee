//! Notes told to a running session: an agent that reads its stdin while it
//! runs (the fake agent's `stdin` mode, which reads it as `claude -p
//! --input-format stream-json` does) takes a note at its next step; a note
//! told once it has its result, or after a kill, waits for the next session.

use crate::common;

use std::path::Path;

use common::tmux::Tmux;
use common::*;

const NOTE_HEADING: &str = "## Note from your human operator";
const TOLD_NOW: &str = "told now (the session reads it at its next step)";

/// A loop whose agent takes notes on its stdin during a `secs`-long tool
/// call; `watchdog` goes in its `[watchdog]` table.
fn config(secs: f64, watchdog: &str) -> String {
    format!(
        "[agent]\ncommand = {:?}\nargs = [\"stdin\", \"{secs}\", \"--input-format\", \"stream-json\", \"--output-format\", \"stream-json\", \"--replay-user-messages\"]\n\n[watchdog]\nmin_output_bytes = 1\n{watchdog}\n[backoff]\ninitial_delay_secs = 0.05\n\n[retry]\nretry_delay_secs = 0.05\n",
        fake_agent_script().display().to_string()
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Output file `n` (1-based) once it holds `text`.
fn wait_for_output(project: &Project, n: usize, text: &str) -> std::path::PathBuf {
    let found = wait_until(DEADLINE, || {
        project
            .output_files()
            .get(n - 1)
            .is_some_and(|file| read(file).contains(text))
    });
    assert!(
        found,
        "no output file {n} with {text:?}: {:?}",
        project.output_files()
    );
    project.output_files()[n - 1].clone()
}

/// The user messages of an output file the agent echoed, as their text.
fn echoed(file: &Path) -> Vec<String> {
    read(file)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["type"] == "user")
        .filter_map(|v| {
            v["message"]["content"][0]["text"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

fn tell(project: &Project, text: &str) -> String {
    let told = project.run(&["tell", text]);
    assert_eq!(told.status.code(), Some(0), "{}", stderr_of(&told));
    stdout_of(&told)
}

#[test]
fn a_note_told_during_a_long_tool_call_enters_the_running_session_now_once() {
    let project = Project::new(&config(3.0, ""));
    let run = project.spawn(&["--headless", "2"]);
    let first = wait_for_output(&project, 1, "toolu_long");
    let note = "stop editing the migrations; fix the test first";
    let answer = tell(&project, note);
    assert!(answer.contains(TOLD_NOW), "{answer}");
    let run = wait_with_deadline(run, DEADLINE);
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));

    // The prompt went in first, the note next, where the agent took it.
    let messages = echoed(&first);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0], "Fix the failing test.\n");
    assert_eq!(messages[1], format!("{NOTE_HEADING}\n{note}"));
    let text = read(&first);
    let at = text.find(note).expect("the note in the output");
    assert!(text[at..].contains("Read the note."), "{text}");
    assert!(text[at..].contains("toolu_long\",\"content\":\"done\""));

    // Delivered once: the second session's prompt has no note.
    let second = &project.output_files()[1];
    assert_eq!(echoed(second), ["Fix the failing test.\n"]);
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["how"], "now");
    assert_eq!(delivered[0]["global"], 1);
    assert_eq!(delivered[0]["text"], note);
    assert_eq!(project.events_named("note_queued").len(), 0);
    assert!(stdout_of(&run).contains(&format!(
        "status=note_delivered now: \"{note}\": {TOLD_NOW}"
    )));
    // Both sessions ended at their result: the loop went on and finished.
    assert_eq!(project.events_named("session_complete").len(), 2);
    assert_eq!(project.events_named("watchdog_stale").len(), 0);
}

#[test]
fn a_note_told_after_the_result_waits_for_the_next_session() {
    let marks = tempfile::tempdir().expect("tempdir");
    let eof = marks.path().join("eof");
    let project = Project::new(&config(0.3, ""));
    let run = project
        .command(&["--headless", "2"])
        .env("FAKE_AGENT_EOF_MARK", &eof)
        .env("FAKE_AGENT_LINGER", "3")
        .spawn()
        .expect("spawn clowder");
    // The session wrote its result and clowder closed its stdin; it has not ended.
    assert!(wait_until(DEADLINE, || eof.exists()));
    assert_eq!(project.output_files().len(), 1);
    let answer = tell(&project, "then update the changelog");
    assert!(
        answer.contains("left for the next session (no session takes notes now)"),
        "{answer}"
    );
    let run = wait_with_deadline(run, DEADLINE);
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    let files = project.output_files();
    assert_eq!(echoed(&files[0]), ["Fix the failing test.\n"]);
    assert_eq!(
        echoed(&files[1]),
        [format!(
            "{NOTE_HEADING}\nthen update the changelog\n---\nFix the failing test.\n"
        )]
    );
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["how"], "prompt");
    assert_eq!(delivered[0]["global"], 2);
}

#[test]
fn a_session_that_never_writes_its_result_is_killed_and_takes_no_note_after() {
    let project = Project::new(&config(0.2, "stale_timeout_mins = 0.05\n"));
    let run = project
        .command(&["--headless", "1"])
        .env("FAKE_AGENT_STALL", "1")
        .spawn()
        .expect("spawn clowder");
    assert!(wait_until(DEADLINE, || !project
        .events_named("watchdog_stale")
        .is_empty()));
    let answer = tell(&project, "too late for that one");
    assert!(answer.contains("left for the next session"), "{answer}");
    let run = wait_with_deadline(run, DEADLINE);
    assert!(run.status.code().is_some(), "{}", stderr_of(&run));
    let files = project.output_files();
    assert!(!read(&files[0]).contains("too late"), "{}", read(&files[0]));
    assert!(project.events_named("note_delivered").is_empty());
    // Not lost: the next session starts with it.
    let again = project.run(&["--headless", "1"]);
    assert!(again.status.code().is_some(), "{}", stderr_of(&again));
    let files = project.output_files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(echoed(&files[1])[0].starts_with(&format!("{NOTE_HEADING}\ntoo late for that one\n")));
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["how"], "prompt");
}

#[test]
fn an_agent_that_reads_notes_at_start_only_says_so() {
    let agent = fake_agent_script().display().to_string();
    let project = Project::new(&format!(
        "[agent]\ncommand = {agent:?}\nargs = [\"slow\", \"3\"]\n\n[watchdog]\nmin_output_bytes = 1\n"
    ));
    let dry = project.run(&["--dry-run"]);
    assert!(
        stdout_of(&dry).contains("# notes (`clowder tell`): wait for the next session"),
        "{}",
        stdout_of(&dry)
    );
    let run = project.spawn(&["--headless", "1"]);
    wait_for_output(&project, 1, "Step 1");
    let answer = tell(&project, "look at the logs");
    assert!(
        answer.contains("left for the next session (this agent reads notes only at start)"),
        "{answer}"
    );
    let run = wait_with_deadline(run, DEADLINE);
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    let live = Project::new(&config(1.0, ""));
    let dry = live.run(&["--dry-run"]);
    assert!(
        stdout_of(&dry).contains("# notes (`clowder tell`): reach the running session now"),
        "{}",
        stdout_of(&dry)
    );
}

#[test]
fn t_in_the_room_tells_the_running_session_now_and_the_pane_shows_the_note() {
    let project = Project::new(&config(4.0, ""));
    let command = format!(
        "{} 1; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(project.root(), &command, 140, 40);
    wait_for_output(&project, 1, "toolu_long");
    tmux.wait_for("notes now");
    tmux.keys(&["t"]);
    tmux.wait_for("Note for the loop");
    tmux.type_text("fix the test first");
    tmux.keys(&["Enter"]);
    tmux.wait_for("told now");
    tmux.wait_for("your note: fix the test first");
    tmux.wait_for("done: max_iterations");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["how"], "now");
}

#[test]
fn a_note_told_now_is_not_told_again_after_clowder_is_killed() {
    let project = Project::new(&config(30.0, ""));
    let run = project.spawn(&["--headless", "1"]);
    let first = wait_for_output(&project, 1, "toolu_long");
    let answer = tell(&project, "only once, please");
    assert!(answer.contains(TOLD_NOW), "{answer}");
    assert!(wait_until(DEADLINE, || read(&first).contains("Read the note.")));
    send_signal(run.id(), libc::SIGKILL);
    wait_with_deadline(run, DEADLINE);

    // The next run's first session starts with the prompt alone.
    project.write("harness.toml", &config(0.2, ""));
    let again = project.run(&["--headless", "1"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    let files = project.output_files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(echoed(&files[1]), ["Fix the failing test.\n"]);
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["how"], "now");
    assert!(project.events_named("note_queued").is_empty());
}

#[test]
fn a_note_told_while_the_session_is_paused_waits_for_the_next_session() {
    let project = Project::new(&config(2.0, ""));
    let run = project.spawn(&["--headless", "2"]);
    let first = wait_for_output(&project, 1, "toolu_long");
    let paused = project.run(&["pause"]);
    assert_eq!(paused.status.code(), Some(0), "{}", stderr_of(&paused));
    assert!(wait_until(DEADLINE, || project
        .read("harness.status")
        .contains("\"paused\": true")
        || project.read("harness.status").contains("\"paused\":true")));
    let answer = tell(&project, "after the pause");
    assert!(
        answer.contains("left for the next session (no session takes notes now)"),
        "{answer}"
    );
    let resumed = project.run(&["resume"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr_of(&resumed));
    let run = wait_with_deadline(run, DEADLINE);
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    assert_eq!(echoed(&first), ["Fix the failing test.\n"]);
    let second = &project.output_files()[1];
    assert_eq!(
        echoed(second),
        [format!(
            "{NOTE_HEADING}\nafter the pause\n---\nFix the failing test.\n"
        )]
    );
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["how"], "prompt");
}

//! Notes from the human (`clowder tell`, `clowder lane tell`, `t` in the room):
//! through the binary, with an agent that records every prompt it is given.

use crate::common;

use std::path::{Path, PathBuf};

use common::git::{clowder_command, clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::*;

const MARK: &str = "## Note from your human operator";

fn prompt_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/prompt-log.sh")
}

/// A loop whose agent appends each prompt to `log` (held while `log.hold` exists).
fn config(log: &Path) -> String {
    format!(
        "[agent]\ncommand = {:?}\nargs = [{:?}, \"{{prompt}}\"]\n\n[watchdog]\nmin_output_bytes = 1\n\n[retry]\nretry_delay_secs = 0.05\n",
        prompt_agent().display().to_string(),
        log.display().to_string()
    )
}

/// Each session's prompt, by global iteration, from the agent's log.
fn prompts(log: &Path) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.split("=== session ")
        .filter(|part| !part.is_empty())
        .filter_map(|part| {
            let (head, prompt) = part.split_once(" ===\n")?;
            Some((head.parse().ok()?, prompt.trim_end().to_string()))
        })
        .collect()
}

fn logged(project: &Project, name: &str) -> usize {
    project.events_named(name).len()
}

#[test]
fn notes_left_before_the_start_reach_the_first_session_once_in_order() {
    let out = tempfile::tempdir().expect("tempdir");
    let log = out.path().join("prompts.log");
    let project = Project::new(&config(&log));
    for text in ["use the v2 API", "then run the tests"] {
        let told = project.run(&["tell", text]);
        assert_eq!(told.status.code(), Some(0), "{}", stderr_of(&told));
        assert!(
            stdout_of(&told).contains("no loop runs here now"),
            "{}",
            stdout_of(&told)
        );
    }
    let empty = project.run(&["tell", "  "]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(stderr_of(&empty).contains("the note is empty"));

    let run = project.run(&["--headless", "2"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    let prompts = prompts(&log);
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert_eq!(
        prompts[0].1,
        format!("{MARK}\nuse the v2 API\n\n{MARK}\nthen run the tests\n---\nFix the failing test.")
    );
    assert_eq!(prompts[1].1, "Fix the failing test.");
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 2);
    assert_eq!(delivered[0]["text"], "use the v2 API");
    assert_eq!(delivered[1]["text"], "then run the tests");
    assert!(
        delivered
            .iter()
            .all(|e| e["global"] == 1 && e["iteration"] == 1)
    );
    assert_eq!(logged(&project, "note_queued"), 2);
    assert!(stdout_of(&run).contains("status=note_delivered: \"use the v2 API\""));
}

#[test]
fn a_note_survives_a_restart_and_is_logged_once() {
    let out = tempfile::tempdir().expect("tempdir");
    let log = out.path().join("prompts.log");
    let hold = out.path().join("prompts.log.hold");
    let project = Project::new(&config(&log));
    std::fs::write(&hold, "").expect("hold");
    let first = project.spawn(&["--headless", "3"]);
    assert!(wait_until(DEADLINE, || prompts(&log).len() == 1));
    let told = project.run(&["tell", "look at the logs first"]);
    assert_eq!(told.status.code(), Some(0), "{}", stderr_of(&told));
    assert!(
        stdout_of(&told)
            .contains("left for the next session (this agent reads notes only at start)"),
        "{}",
        stdout_of(&told)
    );
    // Seen (and logged) by the running loop, which dies before any session
    // took it.
    assert!(wait_until(DEADLINE, || logged(&project, "note_queued") == 1));
    send_signal(first.id(), libc::SIGKILL);
    wait_with_deadline(first, DEADLINE);
    assert_eq!(logged(&project, "note_delivered"), 0);

    std::fs::remove_file(&hold).expect("release");
    let second = project.run(&["--headless", "2"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr_of(&second));
    let prompts = prompts(&log);
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    assert!(!prompts[0].1.contains(MARK));
    assert!(
        prompts[1]
            .1
            .starts_with(&format!("{MARK}\nlook at the logs first\n---\n"))
    );
    assert!(!prompts[2].1.contains(MARK));
    assert_eq!(logged(&project, "note_queued"), 1);
    let delivered = project.events_named("note_delivered");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["global"], prompts[1].0);
}

#[test]
fn lane_tell_reaches_the_lanes_next_session() {
    let repo = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    let log = out.path().join("prompts.log");
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    std::fs::write(root.join("harness.toml"), config(&log)).expect("write");
    clowder_in(root, &["lane", "add", "a", "--max-iterations", "2"]);
    let run = |args: &[&str]| clowder_command(root, args).output().expect("clowder");

    let told = run(&["lane", "tell", "a", "keep", "it", "small"]);
    assert_eq!(told.status.code(), Some(0), "{}", stderr_of(&told));
    assert!(
        stdout_of(&told)
            .contains("for lane a: left for the next session (the lane is not running now)"),
        "{}",
        stdout_of(&told)
    );
    let unknown = run(&["lane", "tell", "b", "hello"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr_of(&unknown).contains("no lane named b"));
    // With lanes, the folder's loop is the fleet: a note names its lane.
    let loop_note = run(&["tell", "hello"]);
    assert_eq!(loop_note.status.code(), Some(2));
    assert!(stderr_of(&loop_note).contains("clowder lane tell NAME"));

    let fleet = run(&["--headless"]);
    assert_eq!(fleet.status.code(), Some(0), "{}", stderr_of(&fleet));
    let prompts = prompts(&log);
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert_eq!(
        prompts[0].1,
        format!("{MARK}\nkeep it small\n---\nDo the work.")
    );
    assert_eq!(prompts[1].1, "Do the work.");
    let events =
        std::fs::read_to_string(root.join(".clowder/lanes/a/harness-events.jsonl")).expect("log");
    assert_eq!(events.matches("\"note_delivered\"").count(), 1);
    assert_eq!(events.matches("\"note_queued\"").count(), 1);
}

#[test]
fn t_in_the_room_leaves_a_note_the_next_session_reads() {
    let out = tempfile::tempdir().expect("tempdir");
    let log = out.path().join("prompts.log");
    let hold = out.path().join("prompts.log.hold");
    let project = Project::new(&config(&log));
    std::fs::write(&hold, "").expect("hold");
    let command = format!(
        "{} 2; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    assert!(wait_until(DEADLINE, || prompts(&log).len() == 1));
    tmux.wait_for("global 1");
    tmux.keys(&["t"]);
    tmux.wait_for("Note for the loop");
    tmux.type_text("try the other branch");
    tmux.keys(&["Enter"]);
    tmux.wait_for("note queued");
    // The events pane, zoomed, shows the whole note and the session that took it.
    tmux.keys(&["Tab", "Tab", "Tab", "Tab", "z"]);
    tmux.wait_for("note queued: \"try the other branch\"");
    std::fs::remove_file(&hold).expect("release");
    tmux.wait_for("#2 took your note: \"try the other branch\"");
    let prompts = prompts(&log);
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert_eq!(
        prompts[1].1,
        format!("{MARK}\ntry the other branch\n---\nFix the failing test.")
    );
    tmux.wait_for("loop ended");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
}

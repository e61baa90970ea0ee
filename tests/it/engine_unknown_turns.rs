//! A stream without its ending (no Claude `result`, no Codex `turn.completed`):
//! turns and tokens are unknown everywhere, not 0 and not a guess.

use crate::common;

use common::*;

const CLAUDE_NO_RESULT: &str = concat!(
    r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5","tools":["Read"],"cwd":"/tmp"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Working on it."}],"usage":{"input_tokens":40,"output_tokens":12}},"session_id":"s1"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"msg_2","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Still working."}],"usage":{"input_tokens":50,"output_tokens":9}},"session_id":"s1"}"#,
    "\n",
);

const CODEX_NO_TURN_COMPLETED: &str = concat!(
    r#"{"type":"thread.started","thread_id":"t1"}"#,
    "\n",
    r#"{"type":"turn.started"}"#,
    "\n",
    r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Working on it."}}"#,
    "\n",
);

fn unknown_everywhere(transcript: &str) {
    let project = Project::new("");
    let file = project.path("out.jsonl");
    std::fs::write(&file, transcript).expect("write the transcript");
    let config = fast_config(
        &["burst", &file.to_string_lossy(), "0"],
        "[hooks]\npost_session = [\"env > post-env.txt\"]\n",
    );
    std::fs::write(project.path("harness.toml"), config).expect("write harness.toml");
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));

    let complete = &project.events_named("session_complete")[0];
    for key in ["turns", "input_tokens", "output_tokens"] {
        assert!(complete[key].is_null(), "{key}: {complete}");
    }
    let status = project.status();
    let last = &status["last_session"];
    for key in ["turns", "input_tokens", "output_tokens"] {
        assert!(last[key].is_null(), "{key}: {last}");
    }
    let env = project.read("post-env.txt");
    assert!(
        env.lines().any(|l| l == "HARNESS_TURNS="),
        "HARNESS_TURNS is not empty:\n{env}"
    );
    let shown = stdout_of(&project.run(&["--status"]));
    assert!(shown.contains("? turns"), "{shown}");
    assert!(
        !stdout_of(&output).contains(" turns="),
        "the log guessed the turns: {}",
        stdout_of(&output)
    );
}

#[test]
fn a_claude_session_without_a_result_has_unknown_turns_and_tokens() {
    unknown_everywhere(CLAUDE_NO_RESULT);
}

#[test]
fn a_codex_run_without_turn_completed_has_unknown_turns_and_tokens() {
    unknown_everywhere(CODEX_NO_TURN_COMPLETED);
}

//! The attention calls with a control room (made by the host, once), its
//! new-lane dialog and the stop of a task lane, end to end: the real binary in
//! a real terminal (tmux), keys sent with `send-keys`, the screen read with
//! `capture-pane`, files and `/proc` checked.

use crate::common;

use std::path::Path;

use common::fleet::registered_lanes;
use common::git::{clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, pid_alive, wait_until};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Live processes whose command line mentions `text`.
fn processes_mentioning(text: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(text))
                && pid_alive(*pid)
        })
        .collect()
}

/// A git repository whose lanes run the fleet's fake agent for one short session
/// (long enough for the control room to see each lane run before it ends).
fn repository(on_attention: &Path) -> TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
    let config = format!(
        "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n[ui]\non_attention = \"echo $CLOWDER_LANE $CLOWDER_EVENT >> {}\"\n",
        agent.display().to_string(),
        on_attention.display()
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    repo
}

fn calls(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_default()
}

fn wait_for_call(file: &Path, call: &str) {
    assert!(
        wait_until(DEADLINE, || calls(file).lines().any(|line| line == call)),
        "on_attention never said {call:?}; it said:\n{}",
        calls(file)
    );
}

/// Every call in `file` was made once: by the host (or the loop's watcher),
/// not again by the room.
fn once_each(file: &Path) {
    let said = calls(file);
    let mut lines: Vec<&str> = said.lines().collect();
    let all = lines.len();
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), all, "a call made twice:\n{said}");
}

/// A gate's request and lanes ending call for attention through `[ui]
/// on_attention`; `n` opens the new-lane dialog, whose lane the host adds to
/// fleet.json and starts, and whose end calls as well.
#[test]
fn attention_calls_and_the_new_lane_dialog_work_in_the_control_room() {
    let out = tempfile::tempdir().expect("tempdir");
    let file = out.path().join("attention.log");
    let repo = repository(&file);
    let root = repo.path();
    for lane in ["alpha", "beta"] {
        clowder_in(root, &["lane", "add", lane]);
    }
    let command = format!(
        "env FLEET_AGENT_GATE_LANE=alpha FLEET_AGENT_OUT={out} FLEET_AGENT_CLOWDER={clowder} FLEET_AGENT_SECS=2 \
         GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {clowder}; echo CLOWDER_EXIT=$?; sleep 600",
        out = out.path().display(),
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    tmux.wait_for("Lanes 2");

    tmux.wait_for("[alpha] Bash  git push origin");
    wait_for_call(&file, "alpha approval_requested");
    wait_for_call(&file, "beta lane_done");
    tmux.keys(&["a"]);
    wait_for_call(&file, "alpha lane_done");

    // `n` (no output search active): the dialog; a name, a typed prompt, Enter on the base.
    tmux.keys(&["n"]);
    tmux.wait_for("or a prompt");
    tmux.type_text("delta");
    tmux.keys(&["Tab", "Tab"]);
    tmux.type_text("Write the docs.");
    tmux.keys(&["Tab", "Enter"]);
    tmux.wait_for("lane delta added");
    tmux.wait_for("delta");
    let names = registered_lanes(root);
    assert_eq!(names, ["alpha", "beta", "delta"]);
    let prompt = std::fs::read_to_string(root.join(".clowder/prompts/delta.md")).expect("prompt");
    assert_eq!(prompt, "Write the docs.\n");
    // The host started it: it ran its session, committed, and ended.
    wait_for_call(&file, "delta lane_done");
    assert!(
        root.join(".clowder/worktrees/delta/work-delta.txt")
            .is_file()
    );

    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
    // The host calls, the room only rings: each call is made once.
    once_each(&file);
    let worktrees = root.join(".clowder/worktrees");
    assert!(
        wait_until(DEADLINE, || processes_mentioning(
            &worktrees.display().to_string()
        )
        .is_empty()),
        "left running: {:?}",
        processes_mentioning(&worktrees.display().to_string())
    );
}

/// Call N of the fake LLM prints `llm/answer`, after a short sleep: it keeps
/// answering until the worker is told to stop.
const FAKE_LLM: &str = r#"#!/bin/sh
dir="$(dirname "$0")"
cat > /dev/null
sleep 0.2
cat "$dir/answer"
"#;

/// A task lane in the control room: its row, its readable actions, and `s`
/// stopping it gracefully through state.json; `K` and `p` on a watch-task lane
/// say they do not apply.
#[test]
fn s_stops_a_task_lane_through_its_state_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("llm")).expect("mkdir");
    let script = root.join("llm/fake-llm.sh");
    std::fs::write(&script, FAKE_LLM).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let answer = json!({"reasoning": "notes", "actions": [
        {"tool": "write_file", "args": {"path": "artifacts/notes.md", "content": "cats"}}
    ]});
    std::fs::write(root.join("llm/answer"), answer.to_string()).expect("write");
    std::fs::write(
        root.join("harness.toml"),
        format!(
            "[worker]\nllm = [{:?}]\n\n[watchdog]\ncheck_interval_secs = 0.1\nkill_grace_secs = 1\n",
            script.display().to_string()
        ),
    )
    .expect("write");
    for task in ["task", "other"] {
        clowder_in(
            root,
            &[
                "task",
                "new",
                task,
                "--prompt",
                "Notes about cats.",
                "--max-iterations",
                "1000",
            ],
        );
    }
    clowder_in(root, &["lane", "add", "t", "--task", "task"]);
    clowder_in(root, &["lane", "add", "w", "--watch-task", "other"]);
    let command = format!(
        "{}; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    tmux.wait_for("Lanes 2");
    tmux.keys(&["1"]);
    tmux.wait_for("lane t");
    tmux.wait_for("write_file artifacts/notes.md ✓ 4 bytes");
    let state = || -> Value {
        let text = std::fs::read_to_string(root.join("task/state.json")).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    assert_eq!(state()["status"], "running");

    tmux.keys(&["s"]);
    assert!(
        wait_until(DEADLINE, || state()["status"] == "stopped"),
        "state.json never said stopped: {}",
        state()
    );
    tmux.wait_for("✓ done");
    tmux.wait_for("stop: wrote \"status\"");
    let task_dir = root.join("task").display().to_string();
    assert!(
        wait_until(DEADLINE, || processes_mentioning(&task_dir).is_empty()),
        "the worker is left: {:?}",
        processes_mentioning(&task_dir)
    );
    let llm = root.join("llm").display().to_string();
    assert!(
        wait_until(DEADLINE, || processes_mentioning(&llm).is_empty()),
        "the LLM program is left: {:?}",
        processes_mentioning(&llm)
    );

    // The watched task's worker is nobody's here: K and p do not apply.
    tmux.keys(&["2"]);
    tmux.wait_for("lane w");
    tmux.keys(&["K"]);
    tmux.wait_for("K (kill) does not apply");
    // Its task has not started: `q` and a stop end the watch, and the room.
    tmux.keys(&["q"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    tmux.wait_for("CLOWDER_EXIT=");
    let status = std::fs::read_to_string(root.join(".clowder/lanes/t/harness.status"))
        .expect("the lane's status");
    let status: Value = serde_json::from_str(&status).expect("status is JSON");
    let pid = status["pid"].as_i64().expect("clowder's pid") as i32;
    assert!(wait_until(DEADLINE, || !pid_alive(pid)), "clowder is left");
}

/// The single loop with its control room calls too (the loop's watcher, not
/// the screen, and once): its loop ending well is `lane_done`, the lane named
/// after the folder.
#[test]
fn the_single_loops_end_calls_for_attention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let out = tempfile::tempdir().expect("tempdir");
    let file = out.path().join("attention.log");
    let agent = root.join("agent.sh");
    std::fs::write(&agent, "#!/bin/sh\necho 'all done here'\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let config = format!(
        "[agent]\ncommand = {:?}\nargs = []\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n[ui]\nnotify = \"off\"\non_attention = \"echo $CLOWDER_LANE $CLOWDER_EVENT >> {}\"\n",
        agent.display().to_string(),
        file.display()
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    let command = format!(
        "{}; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    let folder = root
        .canonicalize()
        .expect("canonical")
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    wait_for_call(&file, &format!("{folder} lane_done"));
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
    once_each(&file);
}

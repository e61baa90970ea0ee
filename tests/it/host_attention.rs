//! `[ui] on_attention` is run by the host: a headless fleet with no room
//! attached calls its human for a gate's request and for lanes that end, and
//! a headless single loop calls when it ends. Through the real binary.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::git::{clowder_command, clowder_in, init_with_one_commit};
use common::{DEADLINE, clowder_bin, wait_until, wait_with_deadline};
use serde_json::Value;

/// `[ui]` whose command appends `LANE|EVENT|TEXT` to `file`.
fn ui_section(file: &Path) -> String {
    format!(
        "[ui]\non_attention = \"printf '%s|%s|%s\\\\n' \\\"$CLOWDER_LANE\\\" \\\"$CLOWDER_EVENT\\\" \\\"$CLOWDER_TEXT\\\" >> {}\"\n",
        file.display()
    )
}

fn calls(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn wait_for_call(file: &Path, found: impl Fn(&str) -> bool, what: &str) {
    assert!(
        wait_until(DEADLINE, || calls(file).iter().any(|line| found(line))),
        "on_attention never called for {what}; it said:\n{:?}",
        calls(file)
    );
}

/// The pending requests' ids, as `clowder queue --json` lists them.
fn pending_ids(root: &Path) -> Vec<String> {
    let output = clowder_command(root, &["queue", "--json"])
        .output()
        .expect("clowder queue");
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let requests = listed
        .as_array()
        .or_else(|| listed["requests"].as_array())
        .cloned()
        .unwrap_or_default();
    requests
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect()
}

/// A headless fleet calls: the gate's request names its lane and says what is
/// asked; each lane that ends well is `lane_done`; each call is made once.
#[test]
fn a_headless_fleet_calls_its_human_for_requests_and_ended_lanes() {
    let repo = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    let file = out.path().join("attention.log");
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
    let config = format!(
        "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n{}",
        agent.display().to_string(),
        ui_section(&file)
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    for lane in ["alpha", "beta"] {
        clowder_in(root, &["lane", "add", lane]);
    }
    let host = Command::new(clowder_bin())
        .arg("--headless")
        .current_dir(root)
        .env("FLEET_AGENT_SECS", "1")
        .env("FLEET_AGENT_OUT", out.path())
        .env("FLEET_AGENT_GATE_LANE", "alpha")
        .env("FLEET_AGENT_CLOWDER", clowder_bin())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the host");

    wait_for_call(
        &file,
        |line| {
            line.starts_with("alpha|approval_requested|alpha: approval requested: ")
                && line.contains("git push origin")
        },
        "alpha's request",
    );
    let mut ids = Vec::new();
    assert!(
        wait_until(DEADLINE, || {
            ids = pending_ids(root);
            !ids.is_empty()
        }),
        "no pending request listed"
    );
    for id in &ids {
        clowder_in(root, &["approve", id]);
    }
    let output = wait_with_deadline(host, DEADLINE * 2);
    assert!(
        output.status.success(),
        "the host failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The host lets its last calls finish before it exits: no wait here.
    let seen = calls(&file);
    for lane in ["alpha", "beta"] {
        let done = format!("{lane}|lane_done|lane {lane} is done");
        let count = seen.iter().filter(|line| **line == done).count();
        assert_eq!(count, 1, "{done:?} in {seen:?}");
    }
    let asked = seen
        .iter()
        .filter(|line| line.starts_with("alpha|approval_requested|"))
        .count();
    assert_eq!(asked, 1, "{seen:?}");
}

/// A headless single loop (no lanes) calls when it ends, named after its folder.
#[test]
fn a_headless_single_loop_calls_when_it_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let file = out.path().join("attention.log");
    let agent = root.join("agent.sh");
    std::fs::write(&agent, "#!/bin/sh\necho 'all done here'\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let config = format!(
        "[agent]\ncommand = {:?}\nargs = []\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n{}",
        agent.display().to_string(),
        ui_section(&file)
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    let child = Command::new(clowder_bin())
        .arg("--headless")
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start clowder");
    let output = wait_with_deadline(child, DEADLINE);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let folder = root
        .canonicalize()
        .expect("canonical")
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    // Called before clowder exited.
    assert_eq!(
        calls(&file),
        [format!("{folder}|lane_done|lane {folder} is done")]
    );
}

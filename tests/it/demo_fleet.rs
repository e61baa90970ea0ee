//! `clowder demo --headless`, the README's fleet demo, through the binary: the
//! scratch repository with three lanes, the release lane's request in the inbox
//! (approved with `clowder approve`), the run to its end, nothing left running.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use common::fleet::registered_lanes;
use common::git::{clowder_command, git_in};
use common::{processes_with_env, stderr_of, wait_until};
use serde_json::Value;

/// The whole demo at full speed takes seconds; this is only a bound for a slow machine.
const DEMO_DEADLINE: Duration = Duration::from_secs(120);

/// clowder in `dir`, isolated from the user's git configuration.
fn clowder(dir: &Path, args: &[&str]) -> Command {
    let mut command = clowder_command(dir, args);
    command.env("DEMO_PACE", "0.02");
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    clowder(dir, args).output().expect("run clowder")
}

/// The demo's clowder, killed if the test fails before it ends.
struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn pending(fleet: &Path) -> Vec<Value> {
    let dir = fleet.join(".clowder/approvals");
    if !dir.is_dir() {
        return Vec::new();
    }
    let output = run(fleet, &["queue", "--json", "--dir", &dir.to_string_lossy()]);
    serde_json::from_slice::<Vec<Value>>(&output.stdout).unwrap_or_default()
}

#[test]
fn the_fleet_demo_runs_three_lanes_and_one_asks_through_the_inbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = |name: &str| std::fs::File::create(dir.path().join(name)).expect("log file");
    let child = clowder(dir.path(), &["demo", "--headless"])
        .stdout(log("demo.out"))
        .stderr(log("demo.err"))
        .spawn()
        .expect("spawn clowder demo");
    let mut demo = Demo(child);
    let fleet: PathBuf = dir.path().join("target/demo/fleet");
    let read_log = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();

    let mut request = None;
    let asked = wait_until(DEMO_DEADLINE, || {
        request = pending(&fleet).into_iter().next();
        request.is_some()
    });
    assert!(
        asked,
        "no request in the inbox\nstdout:\n{}\nstderr:\n{}",
        read_log("demo.out"),
        read_log("demo.err")
    );
    let request = request.expect("a request, because we waited for one");
    assert_eq!(request["lane"], "release", "{request}");
    assert_eq!(request["tool_name"], "Bash", "{request}");
    assert_eq!(request["subject"], "./release.sh --publish", "{request}");
    let id = request["id"].as_str().expect("an id");
    let queue_dir = fleet.join(".clowder/approvals");
    let approved = run(
        &fleet,
        &["approve", id, "--dir", &queue_dir.to_string_lossy()],
    );
    assert!(approved.status.success(), "{}", stderr_of(&approved));

    let started = Instant::now();
    let status = loop {
        if let Some(status) = demo.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            started.elapsed() < DEMO_DEADLINE,
            "the demo did not end\nstdout:\n{}",
            read_log("demo.out")
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The banner names a command that runs from another terminal: the binary
    // cargo built, unless PATH finds that same binary as `clowder`.
    let banner = read_log("demo.err");
    let built = common::clowder_bin();
    let installed = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::canonicalize(dir.join("clowder")).ok() == std::fs::canonicalize(&built).ok()
        })
    });
    let named = if installed {
        "clowder".to_string()
    } else {
        built.display().to_string()
    };
    assert!(
        banner.contains(&format!(
            "run `{named} queue` and `{named} approve ID` there"
        )),
        "{banner}"
    );
    let stdout = read_log("demo.out");
    assert_eq!(
        status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        read_log("demo.err")
    );
    assert!(stdout.contains("3 lane(s) ended normally"), "{stdout}");

    // Three lanes registered, each in its own worktree, each branch with its own commits.
    let names = registered_lanes(&fleet);
    assert_eq!(names, ["api", "docs", "release"]);
    for name in &names {
        let worktree = fleet.join(".clowder/worktrees").join(name);
        assert!(worktree.join(".git").is_file(), "{name}: no worktree");
        let ahead = git_in(
            &fleet,
            &["rev-list", "--count", &format!("main..clowder/{name}")],
        );
        assert_ne!(ahead, "0", "{name}: no commit of its own");
        let log = git_in(
            &fleet,
            &["log", "--format=%s", &format!("main..clowder/{name}")],
        );
        assert!(
            log.lines()
                .all(|subject| subject.starts_with(&format!("{name}: "))),
            "{name}'s branch holds another lane's commit:\n{log}"
        );
    }
    // The approved call went on: the agent saw the gate's answer.
    let release_outputs = std::fs::read_dir(fleet.join(".clowder/lanes/release"))
        .expect("release lane files")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect::<String>();
    assert!(
        release_outputs.contains("published v0.3.0"),
        "the gate did not let it on"
    );
    assert!(pending(&fleet).is_empty());
    // clowder writes nothing into a worktree: the gate logged to the lane's event log.
    let release = fleet.join(".clowder/worktrees/release");
    assert!(
        !release.join("harness-events.jsonl").exists(),
        "the gate wrote its events into the worktree"
    );
    let lane_events =
        std::fs::read_to_string(fleet.join(".clowder/lanes/release/harness-events.jsonl"))
            .expect("the release lane's event log");
    assert!(lane_events.contains("approval_"), "{lane_events}");

    let mark = format!(
        "DEMO_STATE_DIR={}",
        fleet.join(".clowder/demo-agent").display()
    );
    assert!(
        wait_until(Duration::from_secs(10), || processes_with_env(&mark)
            .is_empty()),
        "left running: {:?}",
        processes_with_env(&mark)
    );
}

#[test]
fn the_demo_refuses_a_folder_it_did_not_make() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("target/demo/fleet");
    std::fs::create_dir_all(&fleet).expect("mkdir");
    std::fs::write(fleet.join("mine.txt"), "keep me\n").expect("write");
    let output = run(dir.path(), &["demo", "--headless"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("is not a clowder demo"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(
        std::fs::read_to_string(fleet.join("mine.txt")).expect("kept"),
        "keep me\n"
    );
    assert!(!fleet.join(".clowder").exists());
}

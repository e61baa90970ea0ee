//! A process that leaves its session's process group with `setsid` does not
//! outlive the session: clowder, its subreaper, finds it by the session's
//! environment once the group is empty, kills it and logs `leaked_pid`. What a
//! post-session hook leaves running, with the same HARNESS_OUTPUT_FILE, is not
//! taken for the session's (it carries the hook's own CLOWDER_SESSION token): it
//! ends with the hook, unreported.

use crate::common;

use std::path::Path;

use common::*;

/// Fast polling, but the watchdog never fires within a test.
const SLOW_WATCHDOG: &str = "[watchdog]\nstale_timeout_mins = 10\ncheck_interval_secs = 0.1\n";

/// SIGKILLs, on drop, the listed processes that still run in the project folder,
/// so that a failing test leaks no `sleep 1000` (and a reused pid is left alone).
struct Reaper<'a> {
    root: &'a Path,
    pids: Vec<i32>,
}

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        let Ok(root) = self.root.canonicalize() else {
            return;
        };
        for pid in &self.pids {
            if std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == root) {
                // SAFETY: kill(2) with a pid and a signal number touches no memory.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// The pids printed as "escaped pid PID" in `text`.
fn escaped_pids(text: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|line| line.strip_prefix("escaped pid ")?.trim().parse().ok())
        .collect()
}

#[test]
fn an_agent_process_that_escapes_with_setsid_is_killed_and_reported_a_hook_one_is_not() {
    // The hook leaves a `setsid` child too, with the session's HARNESS_OUTPUT_FILE.
    let hook = format!(
        "[hooks]\npost_session = [{:?}]\n",
        format!(
            "'{}' setsid-escape >> hook-escapes.txt 2>&1",
            fake_agent().display()
        )
    );
    let project = Project::new(&fast_config(
        &["setsid-escape"],
        &format!("{SLOW_WATCHDOG}\n{hook}"),
    ));
    let mut reaper = Reaper {
        root: project.root(),
        pids: Vec::new(),
    };
    let output = project.run(&["--headless", "2"]);
    let stdout = stdout_of(&output);
    let hook_pids = escaped_pids(
        &std::fs::read_to_string(project.path("hook-escapes.txt")).unwrap_or_default(),
    );
    reaper.pids.extend(&hook_pids);
    let mut session_pids = Vec::new();
    for global in 1..=2 {
        let text = project.read(&format!("claude-iteration-{global}.jsonl"));
        let pids = escaped_pids(&text);
        assert_eq!(pids.len(), 1, "session {global}: {text}");
        session_pids.push(pids[0]);
    }
    reaper.pids.extend(&session_pids);
    assert_eq!(output.status.code(), Some(0), "{stdout}");

    let leaked = project.events_named("leaked_pid");
    assert_eq!(leaked.len(), 2, "one per session: {leaked:?}\n{stdout}");
    for (i, (event, pid)) in leaked.iter().zip(&session_pids).enumerate() {
        assert_eq!(event["global"], i as u64 + 1, "{event}");
        assert_eq!(event["pid"], *pid, "{event}");
        assert_eq!(event["command"], "sleep", "{event}");
        assert_eq!(event["killed"], true, "{event}");
        assert!(
            stdout.contains(&format!(
                "global={} process {pid} (sleep) left the session's process group",
                i + 1
            )),
            "{stdout}"
        );
    }
    for pid in &session_pids {
        assert!(
            wait_until(DEADLINE, || !pid_alive(*pid)),
            "the escaped process {pid} is still alive"
        );
    }
    // Each session ended as usual.
    let complete = project.events_named("session_complete");
    assert_eq!(complete.len(), 2, "{complete:?}");
    assert!(
        complete.iter().all(|e| e["productive"] == true),
        "{complete:?}"
    );

    // The hooks ran after each session's search: their processes carry the
    // session's HARNESS_OUTPUT_FILE but were not reported as the session's, and
    // the second session's search did not take the first hook's for its own.
    // They ended with their hook: nothing outlives clowder.
    assert_eq!(hook_pids.len(), 2, "one per post-session hook run");
    for pid in &hook_pids {
        assert!(!session_pids.contains(pid));
        assert!(
            leaked.iter().all(|e| e["pid"] != *pid),
            "a hook's process was reported: {pid} in {leaked:?}"
        );
        assert!(
            wait_until(DEADLINE, || !pid_alive(*pid)),
            "a hook's process {pid} outlived its hook"
        );
    }
}

//! Each session's output is read on a thread of its own, `clowder-reader`, that
//! lives as long as its session: one while a session runs, none left behind when
//! it ended, however it ended.

mod common;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::*;

const THREAD_NAME: &str = "clowder-reader";

/// How many of `pid`'s threads are reader threads, from `/proc/PID/task/*/comm`.
fn reader_threads(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == THREAD_NAME)
        })
        .count()
}

/// Counts clowder's reader threads every few milliseconds until it exits; returns
/// the most seen at once, and its output.
fn watch_reader_threads(mut child: Child, deadline: Duration) -> (usize, Output) {
    let pid = child.id();
    let start = Instant::now();
    let mut most = 0;
    while child.try_wait().expect("try_wait").is_none() && start.elapsed() < deadline {
        most = most.max(reader_threads(pid));
        std::thread::sleep(Duration::from_millis(5));
    }
    (most, wait_with_deadline(child, Duration::from_secs(30)))
}

#[test]
fn one_reader_thread_per_session_and_none_left_after_it() {
    let project = Project::new(&fast_config(&["slow", "1"], ""));
    let child = project.spawn(&["--headless", "3"]);
    let (most, output) = watch_reader_threads(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(project.events_named("session_complete").len(), 3);
    assert_eq!(most, 1, "reader threads at once, over three sessions");
}

#[test]
fn a_killed_sessions_reader_thread_ends_with_it() {
    let project = Project::new(&fast_config(
        &["hang"],
        "[watchdog]\nstale_timeout_mins = 0.02\ncheck_interval_secs = 0.1\n",
    ));
    let child = project.spawn(&["--headless", "2"]);
    let (most, output) = watch_reader_threads(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(project.events_named("watchdog_kill").len(), 2);
    assert_eq!(most, 1, "reader threads at once, over two killed sessions");
}

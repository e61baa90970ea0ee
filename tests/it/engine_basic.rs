//! The headless loop end to end: the real binary, a fake agent, the files it leaves.

use crate::common;

use common::*;

#[test]
fn three_normal_sessions_leave_three_output_files_and_a_summary() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = project.run(&["--headless", "3"]);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        stderr_of(&output)
    );
    assert_eq!(project.output_files().len(), 3);
    assert_eq!(project.read(".iteration_counter").trim(), "3");
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 3);
    for (i, event) in completes.iter().enumerate() {
        assert_eq!(event["iteration"], i as u64 + 1);
        assert_eq!(event["global"], i as u64 + 1);
        assert_eq!(event["exit_code"], 0);
        assert_eq!(event["rate_limited"], false);
        assert!(event["output_bytes"].as_u64().unwrap_or(0) >= 100);
        assert!(event["duration_secs"].is_number());
        assert!(event["committed"].is_boolean());
        assert!(event["retries"].is_number());
    }
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("clowder: stopped (max_iterations)"),
        "{last}"
    );
    assert!(last.contains("3 productive of 3 max"), "{last}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("[INFO]  iteration=1 global=1 status=session_running pid=")),
        "{stdout}"
    );
    let status = project.status();
    assert_eq!(status["state"], "stopped");
    assert_eq!(status["iteration"], 3);
    assert_eq!(status["global_iteration"], 3);
}

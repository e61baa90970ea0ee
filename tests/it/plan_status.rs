//! `clowder plan status` through the binary, on a state saved by the scheduler.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use chrono::DateTime;
use clowder::plan::file::{Collaboration, Plan, Step, Work};
use clowder::plan::scheduler::{Input, Outcome, step};
use clowder::plan::state::{PlanState, SCHEMA_VERSION};
use common::*;

const LANE_STATUS: &str = r#"{"lane":0,"pid":1,"state":"stopped","agent_command":"claude","stale_timeout_secs":1200.0,"paused":false,"paused_at":null,"stop_pending":false,"iteration":3,"max_iterations":10,"global_iteration":17,"output_file":null,"output_bytes":0,"loop_start":"2026-01-01T00:00:00Z","session_start":null,"last_output_growth":null,"last_update":"2026-01-01T01:00:00Z","last_completed_iteration":3,"last_completed_global":17,"last_committed":true,"last_exit_code":0,"consecutive_rate_limits":0,"pgid":null,"agent_pid":null,"next_session_at":null,"rate_limit_resets_at":null,"counters":{"sessions":3,"productive":3,"empty_retries":0,"empty_iterations":0,"rate_limits":0,"watchdog_kills":0,"user_kills":0,"hook_failures":0,"commits":2},"exit_reason":"max_iterations","totals":{"cost_usd":0.4321}}"#;

fn saved_plan(root: &Path) -> PlanState {
    let step_of = |id: &str, deps: &[&str]| Step {
        id: id.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        collaboration: Collaboration::Parallel,
        critical: false,
        work: Work::Prompt("Do it.".into()),
        done_when: "promise".into(),
        max_iterations: None,
        verify_timeout: None,
        done_when_timeout: None,
    };
    let plan = Plan {
        file: "plan.toml".into(),
        name: "auth".into(),
        base: None,
        autonomy: 4,
        verify: String::new(),
        max_parallel: 2,
        verify_timeout: clowder::plan::file::DEFAULT_CHECK_TIMEOUT,
        done_when_timeout: clowder::plan::file::DEFAULT_CHECK_TIMEOUT,
        steps: vec![step_of("schema", &[]), step_of("api", &["schema"])],
        subplans: Vec::new(),
        cleanup: true,
    };
    let mut state = PlanState::new(&plan, "main");
    let now = DateTime::from_timestamp(1_800_000_000, 0).expect("valid");
    step(now, &mut state, Input::Start).expect("starts");
    state.save(root).expect("saved");
    state
}

fn plan_status(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new(clowder_bin())
        .args(["plan", "status"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn clowder");
    wait_with_deadline(child, DEADLINE)
}

#[test]
fn status_lists_each_step_with_its_lanes_iteration_and_cost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = plan_status(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout_of(&output),
        "no plans (their state is kept in .clowder/plans/)\n"
    );

    saved_plan(dir.path());
    let lane_files = dir.path().join(".clowder/lanes/auth-schema");
    std::fs::create_dir_all(&lane_files).expect("mkdir");
    std::fs::write(lane_files.join("harness.status"), LANE_STATUS).expect("write status");

    let output = plan_status(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout_of(&output),
        "plan auth: running (base main)\n\
         STEP    STATE    LANE         BRANCH               ITER  COST\n\
         schema  running  auth-schema  clowder/auth-schema  3/10  $0.4321\n\
         api     pending  auth-api     -                    -     -\n"
    );

    let output = plan_status(dir.path(), &["auth", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let rows: serde_json::Value = serde_json::from_str(&stdout_of(&output)).expect("JSON");
    assert_eq!(rows[0]["name"], "auth");
    assert_eq!(rows[0]["steps"][0]["state"], "running");
    assert_eq!(rows[0]["steps"][0]["iteration"], 3);
    assert_eq!(rows[0]["steps"][0]["cost_usd"], 0.4321);
    assert_eq!(rows[0]["steps"][1]["iteration"], serde_json::Value::Null);
}

#[test]
fn status_refuses_a_missing_plan_and_a_state_of_another_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = plan_status(dir.path(), &["nope"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = stderr_of(&output);
    assert!(
        stderr.starts_with("clowder: error: no plan \"nope\": ")
            && stderr.contains(".clowder/plans/nope.json does not exist"),
        "{output:?}"
    );

    saved_plan(dir.path());
    let path = PlanState::path(dir.path(), "auth");
    let text = std::fs::read_to_string(&path).expect("read state");
    std::fs::write(
        &path,
        text.replace(
            &format!("\"schema_version\": {SCHEMA_VERSION}"),
            "\"schema_version\": 7",
        ),
    )
    .expect("write state");
    let output = plan_status(dir.path(), &["auth"]);
    // A state file that cannot be read is a configuration error: exit 2.
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr_of(&output).contains(&format!(
            "auth.json: made by a newer clowder (schema 7, this one reads up to {SCHEMA_VERSION})"
        )),
        "{output:?}"
    );
    assert!(stdout_of(&output).is_empty(), "{output:?}");
}

/// A failed plan exited 0 from `plan status`, and nothing said why a step failed
/// or what blocked another.
#[test]
fn a_failed_plan_exits_1_and_says_why_each_step_failed_or_is_blocked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = saved_plan(dir.path());
    let now = DateTime::from_timestamp(1_800_000_100, 0).expect("valid");
    // The first failure is retried; the second fails the step.
    for _ in 0..2 {
        let failed = Outcome::Failed {
            reason: "exit 1 in each of 2 sessions; the lane ended: max_iterations".into(),
            last_result: "the tests are red".into(),
        };
        let input = Input::StepEnded {
            id: "schema".into(),
            outcome: failed,
        };
        step(now, &mut state, input).expect("ends");
    }
    state.save(dir.path()).expect("saved");

    let output = plan_status(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        stdout_of(&output),
        "plan auth: failed (base main)\n\
         STEP    STATE    LANE         BRANCH               ITER  COST\n\
         schema  failed   auth-schema  clowder/auth-schema  -     -\n\
         api     blocked  auth-api     -                    -     -\n\
         schema failed: exit 1 in each of 2 sessions; the lane ended: max_iterations\n\
         api blocked: depends on failed step schema\n"
    );

    let output = plan_status(dir.path(), &["auth", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let rows: serde_json::Value = serde_json::from_str(&stdout_of(&output)).expect("JSON");
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(
        rows[0]["steps"][0]["reason"],
        "exit 1 in each of 2 sessions; the lane ended: max_iterations"
    );
    assert_eq!(
        rows[0]["steps"][1]["reason"],
        "depends on failed step schema"
    );
}

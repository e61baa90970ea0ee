//! `clowder plan check` through the binary: a good plan prints its waves; each bad
//! one exits 2 with the frozen text of `tests/invalid_plans/NAME.expected`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn invalid_plans_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid_plans")
}

fn plan_check(dir: &Path, file: &str) -> Output {
    let child = Command::new(clowder_bin())
        .args(["plan", "check", file])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn clowder");
    wait_with_deadline(child, DEADLINE)
}

fn check_invalid_plan(name: &str) {
    let dir = invalid_plans_dir();
    let expected = std::fs::read_to_string(dir.join(format!("{name}.expected")))
        .unwrap_or_else(|e| panic!("{name}.expected: {e}"));
    let output = plan_check(&dir, &format!("{name}.toml"));
    assert_eq!(output.status.code(), Some(2), "{name}: {output:?}");
    assert!(stdout_of(&output).is_empty(), "{name}: {output:?}");
    assert_eq!(stderr_of(&output), expected, "{name}");
}

macro_rules! invalid_plan_cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_invalid_plan(stringify!($name));
            }
        )*
    };
}

invalid_plan_cases!(
    unknown_key,
    unknown_step_key,
    duplicate_id,
    unknown_dependency,
    cycle,
    sequential_without_dependency,
    missing_prompt_file,
    two_prompts,
    bad_step_id,
    bad_autonomy,
    bad_timeout,
    syntax_error,
    too_deep,
    missing_subplan,
    invalid_subplan,
    unknown_keys_hide_nothing,
    unknown_key_and_bad_value,
);

/// The harness.toml the good plans are checked against: their steps' promise can be kept.
const PROMISE_HARNESS: &str = "[completion]\npromise = \"TASK_COMPLETE\"\n";

const GOOD_PLAN: &str = r#"[plan]
name = "auth"
base = "main"
autonomy = 3
verify = "cargo test -q"
verify_timeout = "10m"
max_parallel = 3

[[step]]
id = "schema"
prompt_file = "tasks/schema.md"
done_when = "promise"
max_iterations = 5

[[step]]
id = "api"
depends_on = ["schema"]
collaboration = "sequential"
critical = true
prompt = "Build the API on the new schema. Say TASK_COMPLETE when the tests pass."

[[step]]
id = "docs"
depends_on = ["schema"]
prompt_file = "tasks/docs.md"

[[step]]
id = "release"
depends_on = ["api", "docs"]
plan = "release.toml"
"#;

#[test]
fn a_good_plan_prints_its_steps_in_waves() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("tasks")).expect("mkdir");
    for file in ["tasks/schema.md", "tasks/docs.md"] {
        std::fs::write(dir.path().join(file), "Do it.\n").expect("write prompt");
    }
    std::fs::write(dir.path().join("plan.toml"), GOOD_PLAN).expect("write plan");
    std::fs::write(dir.path().join("harness.toml"), PROMISE_HARNESS).expect("write harness");
    std::fs::write(
        dir.path().join("release.toml"),
        "[plan]\nname = \"release\"\n\n[[step]]\nid = \"tag\"\nprompt = \"Tag it.\"\n",
    )
    .expect("write sub-plan");
    let output = plan_check(dir.path(), "plan.toml");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout_of(&output),
        "plan auth (plan.toml): 4 steps, base main, autonomy 3, max_parallel 3, verify \"cargo test -q\" (verify_timeout 10m, done_when_timeout 30m)\n\
         1: schema\n\
         2: api, docs\n\
         3: release\n  \
         plan release (release.toml): 1 step, base its step's branch, autonomy 3, max_parallel 2, no check (done_when_timeout 30m)\n  \
         1: tag\n"
    );
    assert!(stderr_of(&output).is_empty(), "{output:?}");
}

#[test]
fn every_problem_of_a_file_is_reported_in_one_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("harness.toml"), PROMISE_HARNESS).expect("write harness");
    std::fs::write(
        dir.path().join("plan.toml"),
        "[plan]\nname = \"p\"\n\n[[step]]\nid = \"a\"\ndepends_on = [\"x\"]\nprompt = \"A.\"\n\n[[step]]\nid = \"a\"\nprompt = \"B.\"\n",
    )
    .expect("write plan");
    let output = plan_check(dir.path(), "plan.toml");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(
        stderr_of(&output),
        "clowder: error: plan.toml:6:15: key `step[0].depends_on`: step \"a\" depends on \"x\", which is not a step of this plan\n\
         clowder: error: plan.toml:10:6: key `step[1].id`: duplicate step id \"a\" (first at line 5), expected each id once\n"
    );
}

/// A chain of `steps` steps written last first (`s{n-1}` depends on `s{n-2}` …),
/// so that a walk along the dependencies from the first step goes the whole way
/// down; `s0` depends on `bottom` when given.
fn reversed_chain(steps: usize, bottom: Option<&str>) -> String {
    let mut text = String::from("[plan]\nname = \"chain\"\nbase = \"main\"\n");
    for i in (0..steps).rev() {
        let dep = match (i, bottom) {
            (0, Some(bottom)) => format!("depends_on = [\"{bottom}\"]\n"),
            (0, None) => String::new(),
            (i, _) => format!("depends_on = [\"s{}\"]\n", i - 1),
        };
        text.push_str(&format!(
            "\n[[step]]\nid = \"s{i}\"\n{dep}prompt = \"Step {i}.\"\n"
        ));
    }
    text
}

/// `clowder plan check plan.toml` in `dir`, its output going to a file (waves
/// of a long plan fill a pipe nobody reads until the end): stdout, the rest.
fn plan_check_to_file(dir: &Path) -> (String, Output) {
    let printed = dir.join("printed.txt");
    let child = Command::new(clowder_bin())
        .args(["plan", "check", "plan.toml"])
        .current_dir(dir)
        .stdout(std::fs::File::create(&printed).expect("create"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn clowder");
    let output = wait_with_deadline(child, DEADLINE);
    (std::fs::read_to_string(printed).expect("read"), output)
}

/// 50,000 steps took minutes when each step's line was counted from the start
/// of the file and each wave was a pass over every step; the walk that finds
/// cycles went as deep as the chain on the thread's stack.
#[test]
fn a_chain_of_fifty_thousand_steps_is_checked_in_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("harness.toml"), PROMISE_HARNESS).expect("write harness");
    std::fs::write(dir.path().join("plan.toml"), reversed_chain(50_000, None)).expect("write");
    let (stdout, output) = plan_check_to_file(dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout.lines().count(), 50_001);
    assert!(
        stdout.ends_with("\n50000: s49999\n"),
        "{}",
        &stdout[stdout.len() - 100..]
    );

    std::fs::write(
        dir.path().join("plan.toml"),
        reversed_chain(50_000, Some("s1")),
    )
    .expect("write");
    let (_, output) = plan_check_to_file(dir.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr_of(&output).contains("dependency cycle: s1 → s0 → s1\n"),
        "{}",
        stderr_of(&output)
    );
}

/// Without `[completion] promise`, a step done by the promise ran all its
/// sessions and failed, and `plan check` said nothing.
#[test]
fn a_step_done_by_a_promise_the_harness_lacks_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("plan.toml"),
        "[plan]\nname = \"p\"\n\n[[step]]\nid = \"a\"\nprompt = \"A.\"\n\n[[step]]\nid = \"b\"\nprompt = \"B.\"\ndone_when = \"promise\"\n\n[[step]]\nid = \"c\"\nprompt = \"C.\"\ndone_when = \"test -f c.txt\"\n",
    )
    .expect("write plan");
    let output = plan_check(dir.path(), "plan.toml");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(
        stderr_of(&output),
        "clowder: error: plan.toml:5:6: key `step[0].done_when`: step \"a\" cannot succeed: its done_when (\"promise\" by default) needs the completion promise, and harness.toml sets no `[completion] promise`; expected `[completion] promise = \"…\"` there, or a command that exits 0 when the step is done\n\
         clowder: error: plan.toml:11:13: key `step[1].done_when`: step \"b\" cannot succeed: its done_when = \"promise\" needs the completion promise, and harness.toml sets no `[completion] promise`; expected `[completion] promise = \"…\"` there, or a command that exits 0 when the step is done\n"
    );

    std::fs::write(dir.path().join("harness.toml"), PROMISE_HARNESS).expect("write harness");
    let output = plan_check(dir.path(), "plan.toml");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

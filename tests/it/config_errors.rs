//! Bad configuration is refused before anything runs, with the exact message.
//!
//! Each `tests/invalid_configs/NAME.toml` is used as `harness.toml`; its
//! `NAME.expected` holds the exact first line clowder must print on stderr
//! (`clowder: error: FILE:LINE:COL: key `DOTTED.KEY`: MESSAGE`), followed by
//! `clowder: nothing was run`, with exit code 2 and no file written.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;

fn invalid_configs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid_configs")
}

/// A `claude` on PATH that records that it ran, so "nothing was run" is checked
/// even when a config falls back to the default agent command.
fn with_claude_stub(project: &Project) -> String {
    let bin = project.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let stub = bin.join("claude");
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' normal\n",
            project.path("agent-ran").display(),
            fake_agent().display()
        ),
    )
    .expect("write stub");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{}:{path}", bin.display())
}

fn run_with_stub(project: &Project, args: &[&str]) -> Output {
    let path = with_claude_stub(project);
    let child = project
        .command(args)
        .env("PATH", path)
        .spawn()
        .expect("spawn clowder");
    wait_with_deadline(child, DEADLINE)
}

/// Exit 2, the two-line refusal, and not a single file written or process run.
fn assert_refused(project: &Project, output: &Output) -> String {
    let stderr = stderr_of(output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "stdout:\n{}\nstderr:\n{stderr}",
        stdout_of(output)
    );
    assert!(
        stdout_of(output).is_empty(),
        "stdout: {}",
        stdout_of(output)
    );
    assert_nothing_run(project);
    stderr
}

fn assert_nothing_run(project: &Project) {
    assert!(
        project.output_files().is_empty(),
        "output files were created"
    );
    for file in [
        "harness-events.jsonl",
        "harness.status",
        ".iteration_counter",
        "agent-ran",
    ] {
        assert!(!project.path(file).exists(), "{file} exists: something ran");
    }
}

fn check_invalid_config(name: &str) {
    let dir = invalid_configs_dir();
    let toml = std::fs::read_to_string(dir.join(format!("{name}.toml")))
        .unwrap_or_else(|e| panic!("{name}.toml: {e}"));
    let expected = std::fs::read_to_string(dir.join(format!("{name}.expected")))
        .unwrap_or_else(|e| panic!("{name}.expected: {e}"));
    let expected = expected.trim_end_matches('\n');
    let project = Project::new(&toml);
    let output = run_with_stub(&project, &["--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(expected),
        "{name}: stderr:\n{stderr}"
    );
    assert_eq!(
        lines.get(1).copied(),
        Some("clowder: nothing was run"),
        "{name}: stderr:\n{stderr}"
    );
    assert_eq!(lines.len(), 2, "{name}: stderr:\n{stderr}");

    // The same refusal for a dry run.
    let output = run_with_stub(&project, &["--dry-run"]);
    let stderr = assert_refused(&project, &output);
    assert_eq!(stderr.lines().next(), Some(expected), "{name} (--dry-run)");
}

macro_rules! invalid_config_cases {
    ($($name:ident),* $(,)?) => {
        const CASES: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                check_invalid_config(stringify!($name));
            }
        )*
    };
}

invalid_config_cases!(
    unknown_table,
    unknown_watchdog_key,
    wrong_type_max_iterations,
    negative_duration,
    negative_stale_timeout,
    negative_min_output_bytes,
    zero_max_iterations,
    zero_max_consecutive_rate_limits,
    bad_regex,
    syntax_unquoted_string,
    syntax_unclosed_table,
    syntax_missing_value,
    duplicate_table,
    duplicate_key,
    duplicate_key_in_inline_table,
    duplicate_key_as_table,
    empty_agent_command,
    output_prefix_with_slash,
    hooks_not_a_list,
    zero_kill_grace,
    disk_recheck_words,
    inline_table_column_after_non_ascii,
    blank_completion_promise,
    guard_runtime_words,
    guard_doom_threshold_one,
    guard_negative_cost,
    bad_continuation_mode,
    ui_bad_notify,
    ui_bad_notify_url,
    signals_bad_sigterm,
);

#[test]
fn every_invalid_config_has_an_expected_message_and_a_test() {
    let mut found: Vec<String> = std::fs::read_dir(invalid_configs_dir())
        .expect("read invalid_configs")
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".toml")
                .map(str::to_string)
        })
        .collect();
    found.sort();
    let mut cases: Vec<String> = CASES.iter().map(|c| c.to_string()).collect();
    cases.sort();
    assert_eq!(
        found, cases,
        "every NAME.toml needs a case, and every case a NAME.toml"
    );
    for name in &found {
        let expected = invalid_configs_dir().join(format!("{name}.expected"));
        let text = std::fs::read_to_string(&expected)
            .unwrap_or_else(|e| panic!("{}: {e}", expected.display()));
        assert_eq!(
            text.lines().count(),
            1,
            "{name}.expected must hold one line"
        );
        assert!(
            text.starts_with("clowder: error: harness.toml:"),
            "{name}.expected: {text}"
        );
    }
}

/// The error names the file as given with `-c`, not `harness.toml`.
#[test]
fn errors_name_the_config_file_given_with_dash_c() {
    let project = Project::new("");
    std::fs::create_dir_all(project.path("conf")).expect("mkdir");
    project.write("conf/loop.toml", "[watchdog]\nstale_timeout = 3\n");
    let output = run_with_stub(&project, &["-c", "conf/loop.toml", "--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    assert_eq!(
        stderr.lines().next(),
        Some(
            "clowder: error: conf/loop.toml:2:1: key `watchdog.stale_timeout`: unknown field `stale_timeout`, expected one of `check_interval_secs`, `stale_timeout_mins`, `min_output_bytes`, `kill_grace_secs`"
        ),
        "{stderr}"
    );
}

#[test]
fn a_missing_config_named_with_dash_c_is_an_error() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = run_with_stub(&project, &["-c", "missing.toml", "--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("clowder: error: missing.toml: "),
        "{stderr}"
    );
    assert!(stderr.contains("clowder: nothing was run"), "{stderr}");
}

#[test]
fn a_missing_prompt_file_is_an_error_naming_it() {
    let project = Project::new(&fast_config(&["normal"], ""));
    std::fs::remove_file(project.path("PROMPT.md")).expect("remove PROMPT.md");
    let output = run_with_stub(&project, &["--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("clowder: error: "), "{stderr}");
    assert!(first.contains("PROMPT.md"), "{stderr}");
    assert!(stderr.contains("clowder: nothing was run"), "{stderr}");
}

#[test]
fn a_missing_prompt_file_named_with_dash_p_is_an_error_naming_it() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = run_with_stub(&project, &["-p", "TASK.md", "--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    assert!(
        stderr
            .lines()
            .next()
            .unwrap_or_default()
            .contains("TASK.md"),
        "{stderr}"
    );
}

#[test]
fn an_agent_command_that_does_not_exist_is_an_error_naming_it() {
    let project = Project::new("[agent]\ncommand = \"no-such-agent-b7e1\"\n");
    let output = run_with_stub(&project, &["--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("clowder: error: "), "{stderr}");
    assert!(first.contains("no-such-agent-b7e1"), "{stderr}");
    assert!(stderr.contains("clowder: nothing was run"), "{stderr}");
}

#[test]
fn a_relative_agent_command_that_does_not_exist_is_an_error_naming_it() {
    let project = Project::new("[agent]\ncommand = \"./bin/agent.sh\"\n");
    let output = run_with_stub(&project, &["--headless", "1"]);
    let stderr = assert_refused(&project, &output);
    assert!(
        stderr
            .lines()
            .next()
            .unwrap_or_default()
            .contains("./bin/agent.sh"),
        "{stderr}"
    );
}

#[test]
fn zero_max_iterations_on_the_command_line_is_a_usage_error() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = run_with_stub(&project, &["--headless", "0"]);
    let stderr = assert_refused(&project, &output);
    assert!(stderr.starts_with("clowder: error: "), "{stderr}");
    assert!(stderr.contains("MAX_ITERATIONS"), "{stderr}");
}

#[test]
fn a_non_positive_timeout_on_the_command_line_is_a_usage_error() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = run_with_stub(&project, &["--headless", "1", "--timeout", "0"]);
    let stderr = assert_refused(&project, &output);
    assert!(stderr.contains("--timeout"), "{stderr}");
}

#[test]
fn an_empty_harness_toml_is_valid() {
    let project = Project::new("");
    let output = run_with_stub(&project, &["--dry-run"]);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        stderr_of(&output)
    );
    let settings: toml::Table = stdout.parse().expect("the dry run prints TOML");
    assert_eq!(settings["session"]["max_iterations"].as_integer(), Some(25));
    assert_eq!(settings["agent"]["command"].as_str(), Some("claude"));
    assert_nothing_run(&project);
}

#[test]
fn no_harness_toml_at_all_means_the_defaults() {
    let project = Project::new("");
    std::fs::remove_file(project.path("harness.toml")).expect("remove harness.toml");
    let output = run_with_stub(&project, &["--dry-run", "4"]);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        stderr_of(&output)
    );
    assert!(stdout.contains("harness.toml not found"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l == "max_iterations = 4"),
        "{stdout}"
    );
    assert_nothing_run(&project);
}

//! The loop's decisions end to end, with the real binary and scripted agents:
//! empty sessions and their retries, rate limits and their backoff, hooks, the
//! global counter across runs, `--status`, `--dry-run`, commit detection and the
//! prompt's prepended context.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::Value;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn ratelimit_fixture(name: &str) -> String {
    fixture(&format!("ratelimit/{name}")).display().to_string()
}

/// A `harness.toml` built table by table, with fast timings unless a test sets
/// its own: `set("backoff", "initial_delay_secs = 20")` replaces that key only.
struct Harness {
    command: String,
    args: Vec<String>,
    tables: BTreeMap<String, Vec<(String, String)>>,
}

impl Harness {
    fn new(command: &Path, args: &[&str]) -> Harness {
        let harness = Harness {
            command: command.display().to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            tables: BTreeMap::new(),
        };
        harness
            .set("backoff", "initial_delay_secs = 0.05")
            .set("backoff", "max_delay_secs = 0.5")
            .set("retry", "retry_delay_secs = 0.05")
    }

    /// The fake agent in `mode_args`.
    fn fake(mode_args: &[&str]) -> Harness {
        Harness::new(&fake_agent(), mode_args)
    }

    fn set(mut self, table: &str, line: &str) -> Harness {
        let (key, value) = line.split_once('=').expect("key = value");
        let entries = self.tables.entry(table.to_string()).or_default();
        let key = key.trim().to_string();
        let value = value.trim().to_string();
        match entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => entries.push((key, value)),
        }
        self
    }

    fn build(&self) -> String {
        let args: Vec<String> = self.args.iter().map(|a| format!("{a:?}")).collect();
        let mut text = format!(
            "[agent]\ncommand = {:?}\nargs = [{}]\n",
            self.command,
            args.join(", ")
        );
        for (table, entries) in &self.tables {
            text.push_str(&format!("\n[{table}]\n"));
            for (key, value) in entries {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        text
    }
}

/// A TOML array of basic strings.
fn toml_list(items: &[&str]) -> String {
    let items: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", items.join(", "))
}

/// Shell words, single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A shell step that runs the fake agent with `args` in place of the script.
fn fake_step(args: &[&str]) -> String {
    let mut words = vec![quote(&fake_agent().display().to_string())];
    words.extend(args.iter().map(|a| quote(a)));
    format!("exec {}", words.join(" "))
}

/// Writes an agent script into the project: its Nth run does `steps[N-1]`, and
/// runs past the end repeat the last step. The run count is kept in a file.
fn sequence_agent(project: &Project, steps: &[String]) -> PathBuf {
    let script = project.path("agent.sh");
    let state = project.path("agent-runs.txt");
    let mut text = format!(
        "#!/bin/sh\nstate={}\nn=$(cat \"$state\" 2>/dev/null || echo 0)\nn=$((n + 1))\necho \"$n\" > \"$state\"\ncase \"$n\" in\n",
        quote(&state.display().to_string())
    );
    for (i, step) in steps.iter().enumerate() {
        if i + 1 < steps.len() {
            text.push_str(&format!("  {}) {step} ;;\n", i + 1));
        } else {
            text.push_str(&format!("  *) {step} ;;\n"));
        }
    }
    text.push_str("esac\n");
    std::fs::write(&script, text).expect("write agent.sh");
    make_executable(&script);
    script
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).expect("stat").permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).expect("chmod");
}

/// A project whose harness is written after the project exists (it needs the
/// project's path, e.g. for a sequence agent).
fn project_with(build: impl FnOnce(&Project) -> Harness) -> Project {
    let project = Project::new("");
    let harness = build(&project);
    project.write("harness.toml", &harness.build());
    project
}

fn run_ok(project: &Project, args: &[&str]) -> std::process::Output {
    let output = project.run(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "clowder {args:?}\nstdout:\n{}\nstderr:\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    output
}

fn field_u64(event: &Value, key: &str) -> u64 {
    event[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a whole number in {event}"))
}

fn field_f64(event: &Value, key: &str) -> f64 {
    event[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {event}"))
}

fn column(events: &[Value], key: &str) -> Vec<u64> {
    events.iter().map(|e| field_u64(e, key)).collect()
}

fn ts(event: &Value) -> DateTime<Utc> {
    let text = event["ts"].as_str().expect("ts is a string");
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("ts {text:?}: {e}"))
        .with_timezone(&Utc)
}

fn resets_at_epoch(event: &Value) -> i64 {
    let text = event["resets_at"]
        .as_str()
        .unwrap_or_else(|| panic!("resets_at is not a time in {event}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("resets_at {text:?} is not RFC 3339: {e}"))
        .timestamp()
}

fn last_line(output: &std::process::Output) -> String {
    stdout_of(output)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// `KEY=VALUE` lines (as `env` prints them) into a map.
fn read_env_dump(project: &Project, rel: &str) -> BTreeMap<String, String> {
    project
        .read(rel)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn now_epoch() -> i64 {
    Utc::now().timestamp()
}

// ---------------------------------------------------------------------------
// 1. Empty sessions and their retries
// ---------------------------------------------------------------------------

#[test]
fn empty_sessions_are_retried_with_new_numbers_then_the_iteration_is_given_up() {
    let project = Project::new(
        &Harness::fake(&["empty"])
            .set("retry", "max_empty_retries = 2")
            .set("hooks", "post_session = [\"touch post-hook-ran\"]")
            .build(),
    );
    let output = run_ok(&project, &["--headless", "1"]);

    let starts = project.events_named("session_start");
    assert_eq!(column(&starts, "global"), [1, 2, 3], "{starts:?}");
    assert_eq!(column(&starts, "iteration"), [1, 1, 1]);

    let retries = project.events_named("empty_retry");
    assert_eq!(retries.len(), 2, "{retries:?}");
    for (i, retry) in retries.iter().enumerate() {
        assert_eq!(field_u64(retry, "iteration"), 1);
        assert_eq!(field_u64(retry, "global"), i as u64 + 1);
        assert_eq!(field_u64(retry, "output_bytes"), 0);
        assert_eq!(field_u64(retry, "retry"), i as u64 + 1);
        assert_eq!(field_u64(retry, "max_retries"), 2);
    }

    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 3);
    assert!(
        completes.iter().all(|e| e["productive"] == false),
        "{completes:?}"
    );

    // A fresh output file for every attempt.
    let files = project.output_files();
    assert_eq!(files.len(), 3, "{files:?}");
    for (i, file) in files.iter().enumerate() {
        assert!(file.ends_with(format!("claude-iteration-{}.jsonl", i + 1)));
        assert_eq!(std::fs::metadata(file).expect("stat").len(), 0);
    }
    assert_eq!(project.read(".iteration_counter").trim(), "3");
    assert!(
        !project.path("post-hook-ran").exists(),
        "the post-session hook ran for an empty session"
    );
    let last = last_line(&output);
    assert!(
        last.starts_with("clowder: stopped (max_iterations)"),
        "{last}"
    );
    assert!(last.contains("0 productive of 1 max"), "{last}");
    assert!(last.contains("3 sessions, 2 empty retries"), "{last}");
}

#[test]
fn retries_flag_zero_gives_up_after_one_empty_session() {
    let project = Project::new(&fast_config(&["empty"], ""));
    run_ok(&project, &["--headless", "1", "--retries", "0"]);
    assert_eq!(project.events_named("session_start").len(), 1);
    assert!(project.events_named("empty_retry").is_empty());
    assert_eq!(project.output_files().len(), 1);
    assert_eq!(project.read(".iteration_counter").trim(), "1");
}

#[test]
fn output_under_min_output_bytes_counts_as_empty() {
    // `tiny` prints "ok\n": 3 bytes, under the default 100.
    let project = Project::new(
        &Harness::fake(&["tiny"])
            .set("retry", "max_empty_retries = 1")
            .build(),
    );
    run_ok(&project, &["--headless", "1"]);
    let retries = project.events_named("empty_retry");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(field_u64(&retries[0], "output_bytes"), 3);
    assert_eq!(field_u64(&retries[0], "max_retries"), 1);
    assert_eq!(
        column(&project.events_named("session_start"), "global"),
        [1, 2]
    );
}

#[test]
fn output_at_min_output_bytes_is_productive() {
    let project = Project::new(
        &Harness::fake(&["tiny"])
            .set("watchdog", "min_output_bytes = 3")
            .build(),
    );
    run_ok(&project, &["--headless", "1"]);
    assert!(project.events_named("empty_retry").is_empty());
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0]["productive"], true, "{completes:?}");
}

#[test]
fn after_the_empty_retries_the_loop_moves_on_to_the_next_iteration() {
    let project = project_with(|p| {
        let empty = fake_step(&["empty"]);
        let agent = sequence_agent(
            p,
            &[empty.clone(), empty.clone(), empty, fake_step(&["normal"])],
        );
        Harness::new(&agent, &[])
    });
    let output = run_ok(&project, &["--headless", "2"]);
    let completes = project.events_named("session_complete");
    assert_eq!(
        column(&completes, "iteration"),
        [1, 1, 1, 2],
        "{}",
        stdout_of(&output)
    );
    assert_eq!(column(&completes, "global"), [1, 2, 3, 4]);
    let productive: Vec<bool> = completes.iter().map(|e| e["productive"] == true).collect();
    assert_eq!(productive, [false, false, false, true]);
    assert_eq!(
        column(&project.events_named("empty_retry"), "retry"),
        [1, 2]
    );
    let last = last_line(&output);
    assert!(
        last.starts_with("clowder: stopped (max_iterations)"),
        "{last}"
    );
    assert!(last.contains("1 productive of 2 max"), "{last}");
}

#[test]
fn an_empty_session_then_a_normal_one_is_one_retry_then_productive() {
    let project = project_with(|p| {
        let agent = sequence_agent(p, &[fake_step(&["empty"]), fake_step(&["normal"])]);
        Harness::new(&agent, &[]).set(
            "hooks",
            "post_session = [\"touch post-ran-$HARNESS_GLOBAL_ITERATION\"]",
        )
    });
    let output = run_ok(&project, &["--headless", "1"]);

    let retries = project.events_named("empty_retry");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(field_u64(&retries[0], "global"), 1);
    assert_eq!(field_u64(&retries[0], "retry"), 1);

    let completes = project.events_named("session_complete");
    assert_eq!(column(&completes, "global"), [1, 2]);
    assert_eq!(column(&completes, "iteration"), [1, 1]);
    assert_eq!(completes[0]["productive"], false);
    assert_eq!(completes[1]["productive"], true);
    assert_eq!(field_u64(&completes[1], "retries"), 1);

    assert!(
        !project.path("post-ran-1").exists(),
        "post hook ran for the empty session"
    );
    assert!(
        project.path("post-ran-2").exists(),
        "post hook did not run for the productive session"
    );
    assert_eq!(project.output_files().len(), 2);
    assert!(
        last_line(&output).contains("1 productive of 1 max"),
        "{}",
        last_line(&output)
    );
}

// ---------------------------------------------------------------------------
// 2. Rate limits
// ---------------------------------------------------------------------------

/// Runs one iteration whose first session replays `transcript` and whose second
/// is normal; checks the first was rate-limited and the same iteration retried.
/// Returns the `rate_limited` event.
fn limited_then_productive(transcript: &str, detect: Option<&str>) -> Value {
    let project = project_with(|p| {
        let agent = sequence_agent(
            p,
            &[fake_step(&["replay", transcript]), fake_step(&["normal"])],
        );
        let harness = Harness::new(&agent, &[]);
        match detect {
            Some(line) => harness.set("detect", line),
            None => harness,
        }
    });
    let output = run_ok(&project, &["--headless", "1"]);
    let context = format!("transcript {transcript}\nstdout:\n{}", stdout_of(&output));

    let limited = project.events_named("rate_limited");
    assert_eq!(
        limited.len(),
        1,
        "{context}\nrate_limited events: {limited:?}"
    );
    let event = limited[0].clone();
    assert_eq!(field_u64(&event, "iteration"), 1, "{event}");
    assert_eq!(field_u64(&event, "global"), 1, "{event}");
    assert_eq!(field_u64(&event, "consecutive"), 1, "{event}");
    assert!(
        event["reason"]
            .as_str()
            .is_some_and(|r| !r.trim().is_empty()),
        "reason: {event}"
    );
    let backoff = field_f64(&event, "backoff_secs");
    assert!(
        (0.0..=0.5).contains(&backoff),
        "backoff_secs {backoff} outside [0, max_delay]: {event}"
    );
    assert!(
        event
            .get("resets_at")
            .is_some_and(|r| r.is_null() || r.is_string()),
        "resets_at: {event}"
    );

    let completes = project.events_named("session_complete");
    assert_eq!(column(&completes, "iteration"), [1, 1], "{context}");
    assert_eq!(column(&completes, "global"), [1, 2], "{context}");
    assert_eq!(completes[0]["rate_limited"], true, "{context}");
    assert_eq!(completes[0]["productive"], false, "{context}");
    assert_eq!(completes[1]["rate_limited"], false, "{context}");
    assert_eq!(completes[1]["productive"], true, "{context}");

    // The retry waited out the backoff (ms rounding aside).
    let starts = project.events_named("session_start");
    assert_eq!(column(&starts, "iteration"), [1, 1]);
    let waited = (ts(&starts[1]) - ts(&event)).num_milliseconds() as f64 / 1000.0;
    assert!(
        waited + 0.005 >= backoff,
        "second session started {waited}s after the rate limit, backoff was {backoff}s"
    );
    assert_eq!(project.status()["counters"]["rate_limits"], 1);
    event
}

#[test]
fn rate_limit_result_is_error_with_api_error_status_429() {
    limited_then_productive(
        &ratelimit_fixture("result_api_error_status_429.jsonl"),
        None,
    );
}

/// A copy of a rate-limit fixture whose reset time (1755806400 in the file) is
/// `ahead_secs` from now, and that epoch; the copy lives as long as the path.
fn with_reset_in(name: &str, ahead_secs: i64) -> (tempfile::TempPath, i64) {
    use std::io::Write;
    let epoch = Utc::now().timestamp() + ahead_secs;
    let text = std::fs::read_to_string(fixture(&format!("ratelimit/{name}"))).expect("fixture");
    assert!(text.contains("1755806400"), "{name} has no reset time");
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(text.replace("1755806400", &epoch.to_string()).as_bytes())
        .expect("write");
    (file.into_temp_path(), epoch)
}

#[test]
fn rate_limit_usage_limit_reached_with_epoch_gives_the_reset_time() {
    let (transcript, epoch) = with_reset_in("result_usage_limit_reached_epoch.jsonl", 3600);
    let event = limited_then_productive(&transcript.display().to_string(), None);
    assert_eq!(resets_at_epoch(&event), epoch, "{event}");
}

/// With the clock a day ahead of the API's, a reset "in a minute" reads as a day
/// ago; a year ahead is as wrong. Neither is believed: the backoff starts at
/// `initial_delay_secs` and doubles, and the skew is logged once.
#[test]
fn a_reset_time_in_the_past_or_a_year_ahead_is_not_trusted_and_the_backoff_grows() {
    for ahead in [-86_400, 365 * 86_400] {
        let (transcript, _) = with_reset_in("result_usage_limit_reached_epoch.jsonl", ahead);
        let project = Project::new(
            &Harness::fake(&["replay", &transcript.display().to_string()])
                .set("backoff", "initial_delay_secs = 0.2")
                .set("backoff", "max_delay_secs = 5")
                .set("backoff", "max_consecutive_rate_limits = 3")
                .build(),
        );
        let output = project.run(&["--headless", "1"]);
        let text = format!("{}{}", stdout_of(&output), stderr_of(&output));
        assert_eq!(
            output.status.code(),
            Some(3),
            "reset {ahead}s ahead:\n{text}"
        );
        let limited = project.events_named("rate_limited");
        assert_eq!(column(&limited, "consecutive"), [1, 2, 3], "{text}");
        let expected = [0.2, 0.4, 0.8];
        let starts = project.events_named("session_start");
        for (i, event) in limited.iter().enumerate() {
            let backoff = field_f64(event, "backoff_secs");
            assert!((backoff - expected[i]).abs() < 0.0015, "{event}\n{text}");
            assert!(event["resets_at"].is_null(), "{event}");
            if let Some(next) = starts.get(i + 1) {
                let waited = (ts(next) - ts(event)).num_milliseconds() as f64 / 1000.0;
                assert!(waited + 0.005 >= expected[i], "waited {waited}s\n{text}");
            }
        }
        assert_eq!(text.matches("not trusted").count(), 1, "{text}");
    }
}

#[test]
fn rate_limit_five_hour_limit_reached() {
    limited_then_productive(&ratelimit_fixture("result_five_hour_limit.jsonl"), None);
}

#[test]
fn rate_limit_you_have_hit_your_limit() {
    limited_then_productive(&ratelimit_fixture("result_hit_your_limit.jsonl"), None);
}

#[test]
fn rate_limit_api_error_rate_limit_reached() {
    limited_then_productive(
        &ratelimit_fixture("result_api_error_rate_limit_reached.jsonl"),
        None,
    );
}

#[test]
fn rate_limit_api_error_request_rejected_429() {
    limited_then_productive(
        &ratelimit_fixture("result_api_error_request_rejected_429.jsonl"),
        None,
    );
}

#[test]
fn rate_limit_event_rejected_gives_the_reset_time() {
    let (transcript, epoch) = with_reset_in("rate_limit_event_rejected.jsonl", 3600);
    let event = limited_then_productive(&transcript.display().to_string(), None);
    assert_eq!(resets_at_epoch(&event), epoch, "{event}");
}

#[test]
fn rate_limit_assistant_error_rate_limit() {
    limited_then_productive(&ratelimit_fixture("assistant_error_rate_limit.jsonl"), None);
}

#[test]
fn rate_limit_plain_text_agent_default_pattern() {
    limited_then_productive(&ratelimit_fixture("text_agent_rate_limit.txt"), None);
}

#[test]
fn rate_limit_plain_text_agent_configured_pattern_is_case_insensitive() {
    limited_then_productive(
        &ratelimit_fixture("text_agent_custom_limit.txt"),
        Some("rate_limit_patterns = [\"quota exhausted\"]"),
    );
}

/// A single session replaying `transcript`: it must be productive, not limited.
fn assert_not_limited(transcript: &str) {
    let project = Project::new(&fast_config(&["replay", transcript], ""));
    let output = run_ok(&project, &["--headless", "1"]);
    let limited = project.events_named("rate_limited");
    assert!(
        limited.is_empty(),
        "{transcript} was taken for a rate limit: {limited:?}\nstdout:\n{}",
        stdout_of(&output)
    );
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{completes:?}");
    assert_eq!(completes[0]["rate_limited"], false, "{completes:?}");
    assert_eq!(completes[0]["productive"], true, "{completes:?}");
    assert_eq!(project.events_named("session_start").len(), 1);
}

#[test]
fn tool_results_that_mention_rate_limits_are_not_a_rate_limit() {
    assert_not_limited(&ratelimit_fixture(
        "negative_tool_results_mention_limits.jsonl",
    ));
}

#[test]
fn an_allowed_rate_limit_event_is_not_a_rate_limit() {
    assert_not_limited(&ratelimit_fixture("rate_limit_event_allowed.jsonl"));
}

#[test]
fn an_allowed_warning_rate_limit_event_is_not_a_rate_limit() {
    assert_not_limited(&ratelimit_fixture("rate_limit_event_allowed_warning.jsonl"));
}

#[test]
fn an_api_retry_on_429_that_then_succeeded_is_not_a_rate_limit() {
    assert_not_limited(&ratelimit_fixture("api_retry_429_then_success.jsonl"));
}

#[test]
fn plain_text_output_without_a_pattern_is_not_a_rate_limit() {
    assert_not_limited(&ratelimit_fixture("text_agent_ok.txt"));
}

#[test]
fn the_real_claude_transcript_is_productive() {
    let transcript = public_fixture("claude/gleam-2.1.7-basic_query.ndjson");
    assert!(std::fs::metadata(&transcript).expect("fixture").len() >= 100);
    assert_not_limited(&transcript.display().to_string());
}

#[test]
fn too_many_rate_limits_in_a_row_exit_3() {
    let transcript = ratelimit_fixture("result_api_error_status_429.jsonl");
    let project = Project::new(
        &Harness::fake(&["replay", &transcript])
            .set("backoff", "max_consecutive_rate_limits = 2")
            .build(),
    );
    let output = project.run(&["--headless", "5"]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "stdout:\n{}\nstderr:\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    let starts = project.events_named("session_start");
    assert_eq!(column(&starts, "global"), [1, 2]);
    assert_eq!(column(&starts, "iteration"), [1, 1]);
    assert_eq!(
        column(&project.events_named("rate_limited"), "consecutive"),
        [1, 2]
    );
    let last = last_line(&output);
    assert!(
        last.starts_with("clowder: stopped (rate_limited (2 in a row))"),
        "{last}"
    );
    let end = project.events_named("loop_end");
    assert_eq!(end.len(), 1);
    assert_eq!(
        end[0]["reason"]["rate_limited"]["consecutive"], 2,
        "{end:?}"
    );
    assert_eq!(project.status()["state"], "stopped");
}

#[test]
fn backoff_doubles_from_the_initial_delay_up_to_the_cap() {
    let transcript = ratelimit_fixture("result_api_error_status_429.jsonl");
    let project = Project::new(
        &Harness::fake(&["replay", &transcript])
            .set("backoff", "initial_delay_secs = 0.05")
            .set("backoff", "max_delay_secs = 0.3")
            .set("backoff", "max_consecutive_rate_limits = 5")
            .build(),
    );
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(3), "{}", stdout_of(&output));
    let limited = project.events_named("rate_limited");
    assert_eq!(column(&limited, "consecutive"), [1, 2, 3, 4, 5]);
    let backoffs: Vec<f64> = limited
        .iter()
        .map(|e| field_f64(e, "backoff_secs"))
        .collect();
    let expected = [0.05, 0.1, 0.2, 0.3, 0.3];
    assert_eq!(backoffs.len(), expected.len());
    for (got, want) in backoffs.iter().zip(expected) {
        assert!(
            (got - want).abs() < 0.0015,
            "backoffs {backoffs:?}, expected {expected:?}"
        );
    }
    // Each retry came after its backoff.
    let starts = project.events_named("session_start");
    for (i, event) in limited.iter().take(4).enumerate() {
        let waited = (ts(&starts[i + 1]) - ts(event)).num_milliseconds() as f64 / 1000.0;
        assert!(
            waited + 0.005 >= expected[i],
            "retry {} came {waited}s after, backoff {}",
            i + 1,
            expected[i]
        );
    }
}

#[test]
fn a_good_session_resets_the_rate_limit_count() {
    let transcript = ratelimit_fixture("result_api_error_status_429.jsonl");
    let project = project_with(|p| {
        let limited = fake_step(&["replay", &transcript]);
        let normal = fake_step(&["normal"]);
        let agent = sequence_agent(
            p,
            &[
                limited.clone(),
                limited.clone(),
                normal.clone(),
                limited,
                normal,
            ],
        );
        Harness::new(&agent, &[]).set("backoff", "max_consecutive_rate_limits = 3")
    });
    let output = run_ok(&project, &["--headless", "2"]);
    let limited = project.events_named("rate_limited");
    assert_eq!(
        column(&limited, "consecutive"),
        [1, 2, 1],
        "{}",
        stdout_of(&output)
    );
    assert_eq!(column(&limited, "iteration"), [1, 1, 2]);
    assert_eq!(column(&limited, "global"), [1, 2, 4]);
    let productive: Vec<u64> = project
        .events_named("session_complete")
        .iter()
        .filter(|e| e["productive"] == true)
        .map(|e| field_u64(e, "global"))
        .collect();
    assert_eq!(productive, [3, 5]);
    let status = project.status();
    assert_eq!(status["consecutive_rate_limits"], 0, "{status}");
    assert_eq!(status["counters"]["rate_limits"], 3, "{status}");
}

// ---------------------------------------------------------------------------
// 3. Reset times
// ---------------------------------------------------------------------------

/// The pipe-form usage-limit transcript with its reset epoch replaced.
fn usage_limit_transcript(project: &Project, epoch: i64) -> String {
    let template =
        std::fs::read_to_string(fixture("ratelimit/result_usage_limit_reached_epoch.jsonl"))
            .expect("read fixture");
    assert!(template.contains("|1755806400"));
    let text = template.replace("|1755806400", &format!("|{epoch}"));
    let path = project.path("limited-now.jsonl");
    std::fs::write(&path, text).expect("write transcript");
    path.display().to_string()
}

/// The reset (3 s away) is waited for rather than the first backoff (0.5 s); a
/// reset sooner than `initial_delay_secs` would not shorten the wait.
#[test]
fn a_reset_sooner_than_the_cap_is_waited_for_instead_of_the_backoff() {
    let project = Project::new("");
    let epoch = now_epoch() + 3;
    let transcript = usage_limit_transcript(&project, epoch);
    let agent = sequence_agent(
        &project,
        &[fake_step(&["replay", &transcript]), fake_step(&["normal"])],
    );
    project.write(
        "harness.toml",
        &Harness::new(&agent, &[])
            .set("backoff", "initial_delay_secs = 0.5")
            .set("backoff", "max_delay_secs = 30")
            .build(),
    );
    let output = run_ok(&project, &["--headless", "1"]);
    let limited = project.events_named("rate_limited");
    assert_eq!(limited.len(), 1, "{}", stdout_of(&output));
    assert_eq!(resets_at_epoch(&limited[0]), epoch, "{}", limited[0]);
    let backoff = field_f64(&limited[0], "backoff_secs");
    assert!(
        (0.5..=3.0).contains(&backoff),
        "waited {backoff}s for a reset 3 s away: {}",
        limited[0]
    );
    // The retry came at the reset, not after the first backoff.
    let starts = project.events_named("session_start");
    assert_eq!(column(&starts, "iteration"), [1, 1]);
    let retry_at = ts(&starts[1]).timestamp_millis();
    assert!(
        retry_at + 50 >= epoch * 1000,
        "retried at {retry_at} ms, before the reset {epoch}"
    );
}

#[test]
fn a_reset_later_than_the_cap_uses_the_exponential_backoff() {
    let project = Project::new("");
    let epoch = now_epoch() + 86_400;
    let transcript = usage_limit_transcript(&project, epoch);
    project.write(
        "harness.toml",
        &Harness::fake(&["replay", &transcript])
            .set("backoff", "initial_delay_secs = 0.05")
            .set("backoff", "max_delay_secs = 0.5")
            .set("backoff", "max_consecutive_rate_limits = 2")
            .build(),
    );
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(3), "{}", stdout_of(&output));
    let limited = project.events_named("rate_limited");
    assert_eq!(limited.len(), 2, "{limited:?}");
    for (event, want) in limited.iter().zip([0.05, 0.1]) {
        assert_eq!(resets_at_epoch(event), epoch, "{event}");
        let backoff = field_f64(event, "backoff_secs");
        assert!(
            (backoff - want).abs() < 0.0015,
            "backoff {backoff}, expected {want}: {event}"
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Hooks
// ---------------------------------------------------------------------------

#[test]
fn a_failing_pre_session_hook_skips_the_iteration() {
    let project = Project::new(
        &Harness::fake(&["normal"])
            .set("hooks", "pre_session = [\"exit 3\"]")
            .build(),
    );
    run_ok(&project, &["--headless", "2"]);
    let failed = project.events_named("hook_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    for event in &failed {
        assert_eq!(event["kind"], "pre_session", "{event}");
        assert_eq!(event["exit_code"], 3, "{event}");
        assert_eq!(event["command"], "exit 3", "{event}");
        assert_eq!(event["timed_out"], false, "{event}");
    }
    assert_eq!(
        column(&project.events_named("iteration_skipped"), "iteration"),
        [1, 2]
    );
    assert!(project.events_named("session_start").is_empty());
    assert!(project.output_files().is_empty());
}

#[test]
fn a_pre_session_hook_that_fails_once_skips_one_iteration_and_the_loop_goes_on() {
    let project = Project::new(
        &Harness::fake(&["normal"])
            .set(
                "hooks",
                "pre_session = [\"test -e pre-failed-once || { touch pre-failed-once; exit 3; }\"]",
            )
            .build(),
    );
    let output = run_ok(&project, &["--headless", "2"]);
    let skipped = project.events_named("iteration_skipped");
    assert_eq!(column(&skipped, "iteration"), [1], "{}", stdout_of(&output));
    assert!(
        skipped[0]["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{skipped:?}"
    );
    let failed = project.events_named("hook_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["kind"], "pre_session");
    assert_eq!(failed[0]["exit_code"], 3);
    let starts = project.events_named("session_start");
    assert_eq!(column(&starts, "iteration"), [2]);
    assert_eq!(project.output_files().len(), 1);
}

#[test]
fn pre_session_hooks_get_the_iteration_numbers_and_the_prompt_file() {
    let project = Project::new(
        &Harness::fake(&["normal"])
            .set("hooks", "pre_session = [\"sh pre-env.sh\"]")
            .build(),
    );
    project.write(
        "pre-env.sh",
        "env | grep '^HARNESS_' | sort > \"pre-env-$HARNESS_ITERATION.txt\"\n",
    );
    run_ok(&project, &["--headless", "2"]);
    for iteration in 1..=2u64 {
        let env = read_env_dump(&project, &format!("pre-env-{iteration}.txt"));
        assert_eq!(
            env.get("HARNESS_ITERATION").map(String::as_str),
            Some(&*iteration.to_string()),
            "{env:?}"
        );
        assert_eq!(
            env.get("HARNESS_GLOBAL_ITERATION").map(String::as_str),
            Some(&*iteration.to_string()),
            "{env:?}"
        );
        let prompt = env.get("HARNESS_PROMPT_FILE").expect("HARNESS_PROMPT_FILE");
        let prompt_path = project.root().join(prompt);
        assert_eq!(
            std::fs::read_to_string(&prompt_path).ok().as_deref(),
            Some("Fix the failing test.\n"),
            "HARNESS_PROMPT_FILE={prompt}"
        );
    }
}

#[test]
fn post_session_hooks_get_the_session_facts() {
    let project = Project::new(
        &Harness::fake(&["exit", "5"])
            .set("hooks", "post_session = [\"sh post-env.sh\"]")
            .build(),
    );
    project.write(
        "post-env.sh",
        "env | grep '^HARNESS_' | sort > \"post-env-$HARNESS_GLOBAL_ITERATION.txt\"\n",
    );
    run_ok(&project, &["--headless", "1"]);
    let complete = &project.events_named("session_complete")[0];
    let env = read_env_dump(&project, "post-env-1.txt");
    let get = |key: &str| {
        env.get(key)
            .unwrap_or_else(|| panic!("{key} missing from the post hook's environment: {env:?}"))
            .clone()
    };
    assert_eq!(get("HARNESS_ITERATION"), "1");
    assert_eq!(get("HARNESS_GLOBAL_ITERATION"), "1");
    assert_eq!(get("HARNESS_EXIT_CODE"), "5");
    let output_file = project.root().join(get("HARNESS_OUTPUT_FILE"));
    assert_eq!(
        output_file
            .canonicalize()
            .expect("HARNESS_OUTPUT_FILE exists"),
        project
            .path("claude-iteration-1.jsonl")
            .canonicalize()
            .expect("output file")
    );
    let bytes = std::fs::metadata(&output_file).expect("stat").len();
    assert_eq!(get("HARNESS_OUTPUT_BYTES"), bytes.to_string());
    assert_eq!(field_u64(complete, "output_bytes"), bytes);
    assert!(
        get("HARNESS_SESSION_DURATION").parse::<u64>().is_ok(),
        "{env:?}"
    );
    assert_eq!(get("HARNESS_COMMITTED"), "false");
    assert_eq!(
        std::fs::read_to_string(project.root().join(get("HARNESS_PROMPT_FILE")))
            .ok()
            .as_deref(),
        Some("Fix the failing test.\n")
    );
}

#[test]
fn a_failing_post_session_hook_is_logged_and_the_loop_goes_on() {
    let project = Project::new(
        &Harness::fake(&["normal"])
            .set(
                "hooks",
                &format!(
                    "post_session = {}",
                    toml_list(&[
                        "echo boom; exit 7",
                        "touch second-post-hook-$HARNESS_GLOBAL_ITERATION"
                    ])
                ),
            )
            .build(),
    );
    let output = run_ok(&project, &["--headless", "2"]);
    let failed = project.events_named("hook_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    for event in &failed {
        assert_eq!(event["kind"], "post_session", "{event}");
        assert_eq!(event["exit_code"], 7, "{event}");
        assert_eq!(event["output"], "boom", "{event}");
    }
    // The later hook still ran, and both iterations were productive.
    assert!(project.path("second-post-hook-1").exists());
    assert!(project.path("second-post-hook-2").exists());
    assert_eq!(project.events_named("session_start").len(), 2);
    assert!(
        last_line(&output).contains("2 productive of 2 max"),
        "{}",
        last_line(&output)
    );
    assert_eq!(project.status()["counters"]["hook_failures"], 2);
}

// ---------------------------------------------------------------------------
// 5. The global counter across runs
// ---------------------------------------------------------------------------

#[test]
fn the_global_counter_continues_across_runs_and_skips_existing_files() {
    let project = Project::new(&fast_config(&["normal"], ""));
    run_ok(&project, &["--headless", "2"]);
    assert_eq!(project.read(".iteration_counter").trim(), "2");
    run_ok(&project, &["--headless", "2"]);
    assert_eq!(project.read(".iteration_counter").trim(), "4");
    assert_eq!(
        column(&project.events_named("session_start"), "global"),
        [1, 2, 3, 4]
    );

    let precious = "{\"type\":\"note\",\"text\":\"written by hand, not by clowder\"}\n";
    project.write("claude-iteration-5.jsonl", precious);
    run_ok(&project, &["--headless", "1"]);
    assert_eq!(project.read("claude-iteration-5.jsonl"), precious);
    assert_eq!(
        column(&project.events_named("session_start"), "global"),
        [1, 2, 3, 4, 6]
    );
    assert!(project.path("claude-iteration-6.jsonl").exists());
    assert_eq!(project.read(".iteration_counter").trim(), "6");
}

#[test]
fn a_stale_counter_never_reuses_an_existing_output_file() {
    let project = Project::new(&fast_config(&["normal"], ""));
    for n in 1..=3 {
        project.write(
            &format!("claude-iteration-{n}.jsonl"),
            &format!("old session {n}\n"),
        );
    }
    project.write(".iteration_counter", "1\n");
    run_ok(&project, &["--headless", "1"]);
    for n in 1..=3 {
        assert_eq!(
            project.read(&format!("claude-iteration-{n}.jsonl")),
            format!("old session {n}\n")
        );
    }
    assert_eq!(
        column(&project.events_named("session_start"), "global"),
        [4]
    );
    assert_eq!(project.read(".iteration_counter").trim(), "4");
}

// ---------------------------------------------------------------------------
// 6. --status
// ---------------------------------------------------------------------------

fn status_state(project: &Project) -> Option<String> {
    let text = std::fs::read_to_string(project.path("harness.status")).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    value["state"].as_str().map(str::to_string)
}

#[test]
fn status_while_the_loop_runs_and_after_it_ends() {
    let project = Project::new(&fast_config(&["slow", "3"], ""));
    let child = project.spawn(&["--headless", "3"]);
    let pid = child.id();
    assert!(
        wait_until(DEADLINE, || !project
            .events_named("session_start")
            .is_empty()
            && status_state(&project).as_deref() == Some("session_running")),
        "the session never started"
    );

    let output = project.run(&["--status"]);
    let text = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{text}\n{}",
        stderr_of(&output)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(&*format!("Loop state: running (PID {pid})")),
        "{text}"
    );
    assert!(
        lines.contains(&"Current iteration: 1/3 (global: 1)"),
        "{text}"
    );
    for prefix in ["Session output: ", "Uptime: ", "Last completed: "] {
        assert!(
            lines.iter().any(|l| l.starts_with(prefix)),
            "no {prefix:?} line in:\n{text}"
        );
    }

    // Stop after this session, then look again.
    project.write("STOP", "");
    let finished = wait_with_deadline(child, DEADLINE);
    assert_eq!(finished.status.code(), Some(0), "{}", stdout_of(&finished));
    let output = project.run(&["--status"]);
    let text = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0));
    assert!(text.starts_with("Loop state: not running"), "{text}");

    let output = project.run(&["--status", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let json: Value =
        serde_json::from_str(&stdout_of(&output)).expect("--status --json prints JSON");
    assert_eq!(json["state"], "stopped", "{json}");
    assert_eq!(json["pid"], pid, "{json}");
}

#[test]
fn status_in_an_empty_folder_fails_and_names_the_status_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(clowder_bin())
        .arg("--status")
        .current_dir(dir.path())
        .output()
        .expect("run clowder");
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr_of(&output);
    assert!(stderr.contains("harness.status"), "{stderr}");
    assert!(stdout_of(&output).is_empty(), "{}", stdout_of(&output));
}

// ---------------------------------------------------------------------------
// 7. --dry-run
// ---------------------------------------------------------------------------

#[test]
fn dry_run_prints_the_resolved_settings_and_runs_nothing() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let output = run_ok(&project, &["--dry-run", "7"]);
    let text = stdout_of(&output);
    assert!(text.lines().any(|l| l == "max_iterations = 7"), "{text}");
    let settings: toml::Table = text.parse().expect("the dry run prints TOML");
    assert_eq!(settings["session"]["max_iterations"].as_integer(), Some(7));
    assert_eq!(
        settings["agent"]["command"].as_str(),
        Some(&*fake_agent().display().to_string())
    );
    assert_eq!(
        settings["backoff"]["initial_delay_secs"].as_float(),
        Some(0.05)
    );
    assert!(project.output_files().is_empty());
    for file in [
        "harness-events.jsonl",
        "harness.status",
        ".iteration_counter",
    ] {
        assert!(!project.path(file).exists(), "--dry-run created {file}");
    }
}

// ---------------------------------------------------------------------------
// 8. Commit detection
// ---------------------------------------------------------------------------

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=clowder-test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run git");
    assert!(status.success(), "git {args:?} failed");
}

const RECORD_COMMITTED: &str = "post_session = [\"echo $HARNESS_COMMITTED > committed.txt\"]";

fn commit_step() -> String {
    format!(
        "git -c user.name=agent -c user.email=agent@example.invalid commit -q --allow-empty -m x >/dev/null 2>&1; {}",
        fake_step(&["normal"])
    )
}

fn assert_committed(project: &Project, expected: bool) {
    let completes = project.events_named("session_complete");
    assert_eq!(completes.len(), 1, "{completes:?}");
    assert_eq!(completes[0]["committed"], expected, "{completes:?}");
    assert_eq!(project.read("committed.txt").trim(), expected.to_string());
}

#[test]
fn the_default_commit_pattern_in_the_transcript_means_committed() {
    let transcript = fixture("commit/bd_finish.jsonl").display().to_string();
    let project = Project::new(
        &Harness::fake(&["replay", &transcript])
            .set("hooks", RECORD_COMMITTED)
            .build(),
    );
    let output = run_ok(&project, &["--headless", "1"]);
    assert_committed(&project, true);
    assert!(
        last_line(&output).contains("1 commits"),
        "{}",
        last_line(&output)
    );
}

#[test]
fn a_head_that_moves_during_the_session_means_committed() {
    let project = project_with(|p| {
        git(p.root(), &["init", "-q"]);
        git(
            p.root(),
            &["commit", "-q", "--allow-empty", "-m", "initial"],
        );
        let agent = sequence_agent(p, &[commit_step()]);
        Harness::new(&agent, &[]).set("hooks", RECORD_COMMITTED)
    });
    run_ok(&project, &["--headless", "1"]);
    assert_committed(&project, true);
}

#[test]
fn the_first_commit_of_a_fresh_repository_means_committed() {
    // HEAD goes from unborn to a commit during the session: it moved.
    let project = project_with(|p| {
        git(p.root(), &["init", "-q"]);
        let agent = sequence_agent(p, &[commit_step()]);
        Harness::new(&agent, &[]).set("hooks", RECORD_COMMITTED)
    });
    run_ok(&project, &["--headless", "1"]);
    assert_committed(&project, true);
}

#[test]
fn no_commit_and_no_pattern_means_not_committed() {
    let project = project_with(|p| {
        git(p.root(), &["init", "-q"]);
        git(
            p.root(),
            &["commit", "-q", "--allow-empty", "-m", "initial"],
        );
        Harness::fake(&["normal"]).set("hooks", RECORD_COMMITTED)
    });
    run_ok(&project, &["--headless", "1"]);
    assert_committed(&project, false);
}

// ---------------------------------------------------------------------------
// 9. Prepended context
// ---------------------------------------------------------------------------

#[test]
fn prepend_commands_output_comes_before_the_prompt() {
    let project = Project::new(
        &Harness::fake(&["prompt", "{prompt}"])
            .set("prompt", "prepend_commands = [\"echo CONTEXT-A\"]")
            .build(),
    );
    run_ok(&project, &["--headless", "1"]);
    let output = project.read("claude-iteration-1.jsonl");
    assert!(
        output.starts_with("CONTEXT-A\n---\nFix the failing test."),
        "output file starts with {:?}",
        output.chars().take(80).collect::<String>()
    );
}

#[test]
fn status_finds_a_loop_started_with_another_config() {
    let project = Project::new("");
    std::fs::create_dir(project.path("conf")).expect("mkdir conf");
    project.write(
        "conf/h.toml",
        &fast_config(&["hang"], "[output]\nstatus_file = \"conf/loop.status\"\n"),
    );
    let clowder = project.spawn(&["-c", "conf/h.toml", "--headless", "1"]);
    let running = |args: &[&str]| {
        let output = project.run(args);
        output.status.code() == Some(0) && stdout_of(&output).contains("session_running")
    };
    assert!(
        wait_until(DEADLINE, || running(&["-c", "conf/h.toml", "--status"])),
        "`-c conf/h.toml --status` never showed the running session"
    );
    let plain = project.run(&["--status"]);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr_of(&plain));
    assert!(stdout_of(&plain).contains("session_running"));
    // Twice: stop now, killing the hanging session (the second once the first was taken).
    send_signal(clowder.id(), libc::SIGINT);
    assert!(wait_until(DEADLINE, || project
        .read("conf/loop.status")
        .contains("\"stop_pending\": true")));
    send_signal(clowder.id(), libc::SIGINT);
    wait_with_deadline(clowder, DEADLINE);
}

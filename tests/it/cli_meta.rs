//! What users expect of a command-line tool, through the binary: shell
//! completions, a man page, and the JSON Schema of harness.toml that the
//! reference file points editors at.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Runs `clowder ARGS` in an empty folder; exit 0 and stdout.
fn clowder_stdout(args: &[&str]) -> String {
    let project = Project::new("");
    let output = project.run(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: stderr:\n{}",
        stderr_of(&output)
    );
    stdout_of(&output)
}

const SUBCOMMANDS: &[&str] = &[
    "gate",
    "queue",
    "approve",
    "pause",
    "completions",
    "man",
    "config",
];

#[test]
fn completions_for_each_shell_offer_the_subcommands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let script = clowder_stdout(&["completions", shell]);
        for word in SUBCOMMANDS.iter().chain(&["dry-run", "schema"]) {
            assert!(script.contains(word), "{shell}: no `{word}` in:\n{script}");
        }
    }
    assert!(clowder_stdout(&["completions", "bash"]).contains("complete -F _clowder"));
    assert!(clowder_stdout(&["completions", "zsh"]).starts_with("#compdef clowder"));
    assert!(clowder_stdout(&["completions", "fish"]).contains("complete -c clowder"));
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let project = Project::new("");
    let output = project.run(&["completions", "tcsh"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("tcsh"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn a_mistyped_subcommand_is_suggested_and_a_number_is_still_a_count() {
    let project = Project::new(&fast_config(&["success"], ""));
    let output = project.run(&["lnaes"]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unrecognized subcommand 'lnaes'"),
        "{stderr}"
    );
    assert!(stderr.contains("'lanes'"), "{stderr}");
    assert!(!stderr.contains("MAX_ITERATIONS'"), "{stderr}");

    // Far from every subcommand: the word is a bad count, as before.
    let output = project.run(&["3x"]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid value '3x'"), "{stderr}");

    let output = project.run(&["2", "--dry-run"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("max_iterations = 2"));
}

#[test]
fn the_man_page_is_roff_about_clowder() {
    let page = clowder_stdout(&["man"]);
    assert!(page.contains(".TH clowder 1"), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "no {section} in:\n{page}");
    }
    assert!(page.contains("\\-\\-dry\\-run"), "{page}");
    assert!(page.contains("completions"), "{page}");
}

#[test]
fn the_schema_is_json_with_every_section() {
    let schema: serde_json::Value =
        serde_json::from_str(&clowder_stdout(&["config", "schema"])).expect("valid JSON");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    let reference: toml::Table = std::fs::read_to_string(repo_file("harness.toml"))
        .expect("read harness.toml")
        .parse()
        .expect("harness.toml is TOML");
    let properties = schema["properties"].as_object().expect("properties");
    for section in reference.keys() {
        assert!(
            properties.contains_key(section),
            "no [{section}] in the schema"
        );
    }
}

#[test]
fn the_committed_schema_is_what_clowder_prints() {
    let committed =
        std::fs::read_to_string(repo_file("assets/harness.schema.json")).expect("read the schema");
    assert!(
        committed == clowder_stdout(&["config", "schema"]),
        "assets/harness.schema.json is stale: run `clowder config schema > assets/harness.schema.json`"
    );
}

#[test]
fn the_reference_file_points_editors_at_the_schema_and_validates_against_it() {
    let text = std::fs::read_to_string(repo_file("harness.toml")).expect("read harness.toml");
    assert_eq!(
        text.lines().next(),
        Some("#:schema ./assets/harness.schema.json")
    );
    let validator = validator();
    let reference: serde_json::Value = toml::from_str(&text).expect("harness.toml is TOML");
    let errors: Vec<String> = validator
        .iter_errors(&reference)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// The schema refuses what clowder refuses: a sample of bad values and keys.
#[test]
fn the_schema_refuses_bad_values() {
    let validator = validator();
    for bad in [
        "[session]\nmax_iterations = 0\n",
        "[session]\noutput_prefix = \"a/b\"\n",
        "[watchdog]\nstale_timeout = 3\n",
        "[watchdog]\ncheck_interval_secs = 0\n",
        "[guard]\nmax_runtime = \"8 hours\"\n",
        "[guard]\ndoom_loop_threshold = 1\n",
        "[approvals]\nautonomy = 6\n",
        "[agent]\nformat = \"yaml\"\n",
        "[nonsense]\n",
    ] {
        let value: serde_json::Value = toml::from_str(bad).expect("TOML");
        assert!(!validator.is_valid(&value), "the schema accepts {bad:?}");
    }
    for good in [
        "[guard]\nmax_runtime = \"1.5d\"\n",
        "[approvals]\ntimeout = \"never\"\nallow = [{ tool = \"Bash\", prefix = \"cargo test\" }]\n",
        "[watchdog]\nstale_timeout_mins = 0.5\n",
    ] {
        let value: serde_json::Value = toml::from_str(good).expect("TOML");
        assert!(validator.is_valid(&value), "the schema refuses {good:?}");
    }
}

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("assets/harness.schema.json")).expect("read schema"),
    )
    .expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_output_quietly() {
    for args in [
        &["completions", "bash"][..],
        &["man"],
        &["config", "schema"],
    ] {
        let mut child = std::process::Command::new(clowder_bin())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn clowder");
        // Closing the read end at once is what `| head -0` does.
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("wait for clowder");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// A listing whose reader has gone (`clowder queue | head -0`) ends by SIGPIPE,
/// as `ls` does, never with a panic message.
#[test]
fn a_listing_whose_reader_has_gone_ends_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().expect("temp dir");
    for args in [
        &["queue"][..],
        &["lanes"],
        &["tasks", "."],
        &["plan", "status"],
    ] {
        let mut child = std::process::Command::new(clowder_bin())
            .args(args)
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn clowder");
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("wait for clowder");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let quiet_end =
            output.status.signal() == Some(13) || output.status.code().is_some_and(|c| c != 101);
        assert!(quiet_end, "{args:?}: {:?} {stderr}", output.status);
    }
}

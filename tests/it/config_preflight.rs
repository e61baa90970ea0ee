//! Places clowder cannot write are refused before anything runs: exit 2, the
//! config key named, no pre-session hook run, no file created or changed —
//! in a run and in `--dry-run` alike.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// A pre-session hook that leaves a mark, so "nothing was run" covers the hooks.
const HOOK: &str = "[hooks]\npre_session = [\"touch hook-ran\"]\n";

fn config(extra: &str) -> String {
    fast_config(&["normal"], &format!("{HOOK}\n{extra}"))
}

/// Exit 2 with `clowder: error: key `KEY`: …` and `clowder: nothing was run`,
/// for a run and a dry run, and no hook run, no session started.
fn assert_refused_naming(project: &Project, key: &str) -> String {
    let mut first = String::new();
    for args in [&["--headless", "1"][..], &["--dry-run"][..]] {
        let output = project.run(args);
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: stderr:\n{stderr}");
        first = stderr.lines().next().unwrap_or_default().to_string();
        assert!(
            first.starts_with(&format!("clowder: error: key `{key}`: ")),
            "{args:?}: stderr:\n{stderr}"
        );
        assert!(first.contains("expected"), "{args:?}: {first}");
        assert_eq!(
            stderr.lines().nth(1),
            Some("clowder: nothing was run"),
            "{stderr}"
        );
        assert!(!project.path("hook-ran").exists(), "{args:?}: the hook ran");
        assert!(project.output_files().is_empty(), "{args:?}: a session ran");
    }
    first
}

fn assert_accepted(project: &Project) -> Output {
    let output = project.run(&["--dry-run"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr_of(&output)
    );
    output
}

#[test]
fn an_output_dir_that_is_a_file_is_refused_before_the_hooks() {
    let project = Project::new(&config("[session]\noutput_dir = \"out\"\n"));
    project.write("out", "not a folder\n");
    let line = assert_refused_naming(&project, "session.output_dir");
    assert!(line.contains("out is a file"), "{line}");
    assert_eq!(project.read("out"), "not a folder\n");
}

#[test]
fn an_output_dir_given_with_dash_o_that_is_a_file_is_refused() {
    let project = Project::new(&config(""));
    project.write("out", "x");
    let output = project.run(&["--headless", "1", "-o", "out"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).starts_with("clowder: error: key `session.output_dir`: out is a file"),
        "{}",
        stderr_of(&output)
    );
    assert!(!project.path("hook-ran").exists());
}

#[test]
fn a_read_only_output_dir_is_refused_before_the_hooks() {
    let project = Project::new(&config("[session]\noutput_dir = \"out\"\n"));
    let Some(_read_only) = ReadOnly::make(&project.path("out")) else {
        return;
    };
    let line = assert_refused_naming(&project, "session.output_dir");
    assert!(line.contains("cannot write in the folder out"), "{line}");
}

#[test]
fn a_status_file_in_a_read_only_folder_is_refused() {
    let project = Project::new(&config(
        "[session]\noutput_dir = \"out\"\n[output]\nstatus_file = \"locked/harness.status\"\n",
    ));
    let Some(_read_only) = ReadOnly::make(&project.path("locked")) else {
        return;
    };
    assert_refused_naming(&project, "output.status_file");
}

#[test]
fn a_status_file_that_is_a_folder_is_refused() {
    let project = Project::new(&config(""));
    std::fs::create_dir(project.path("harness.status")).expect("mkdir");
    let line = assert_refused_naming(&project, "output.status_file");
    assert!(line.contains("harness.status is a folder"), "{line}");
}

#[test]
fn an_event_log_in_a_missing_folder_is_refused() {
    let project = Project::new(&config("[output]\nevent_log = \"logs/events.jsonl\"\n"));
    let line = assert_refused_naming(&project, "output.event_log");
    assert!(line.contains("does not exist"), "{line}");
    assert!(!project.path("logs").exists());
}

#[test]
fn a_counter_file_that_is_a_folder_is_refused() {
    let project = Project::new(&config("[session]\ncounter_file = \"state\"\n"));
    std::fs::create_dir(project.path("state")).expect("mkdir");
    assert_refused_naming(&project, "session.counter_file");
}

/// The check writes nothing: existing files keep their bytes and nothing new
/// appears (not even the output folder, which a run would make).
#[test]
fn a_dry_run_changes_no_file() {
    let project = Project::new(&config("[session]\noutput_dir = \"out/deeper\"\n"));
    let files = [
        ("harness-events.jsonl", "{\"event\":\"x\"}"),
        ("harness.status", "{}\n"),
        (".iteration_counter", "7\n"),
    ];
    for (name, content) in files {
        project.write(name, content);
    }
    let before = listing(project.root());
    assert_accepted(&project);
    for (name, content) in files {
        assert_eq!(project.read(name), content, "{name} changed");
    }
    assert_eq!(listing(project.root()), before);
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A folder nobody can write in, root included, undone on drop: permission bits
/// for other users; for root, a read-only tmpfs mounted on it, or else the
/// immutable attribute. `None` (said loudly; a failure under CI) when neither works.
enum ReadOnly {
    Mode(PathBuf),
    Mount(PathBuf),
    Immutable(PathBuf),
}

impl ReadOnly {
    fn make(dir: &Path) -> Option<ReadOnly> {
        std::fs::create_dir_all(dir).expect("mkdir");
        let set_mode = |mode| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
        set_mode(0o555).expect("chmod");
        if !writable(dir) {
            return Some(ReadOnly::Mode(dir.to_path_buf()));
        }
        set_mode(0o755).expect("chmod");
        if run("mount", &["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs"], dir) {
            let guard = ReadOnly::Mount(dir.to_path_buf());
            if !writable(dir) {
                return Some(guard);
            }
        }
        if run("chattr", &["+i"], dir) {
            let guard = ReadOnly::Immutable(dir.to_path_buf());
            if !writable(dir) {
                return Some(guard);
            }
        }
        cannot_run(
            "no way to make a folder read-only for this user (not root-proof: mount and chattr +i failed)",
        );
        None
    }
}

fn writable(dir: &Path) -> bool {
    tempfile::tempfile_in(dir).is_ok()
}

fn run(program: &str, args: &[&str], dir: &Path) -> bool {
    Command::new(program)
        .args(args)
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        match self {
            ReadOnly::Mode(dir) => {
                let _ = std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o755));
            }
            ReadOnly::Mount(dir) => {
                run("umount", &["-l"], dir);
            }
            ReadOnly::Immutable(dir) => {
                run("chattr", &["-i"], dir);
            }
        }
    }
}

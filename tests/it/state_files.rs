//! Config and state files that are not what they should be: a FIFO, a device, a
//! folder, a truncated file, a newer schema. clowder refuses each at once with the
//! file named and exit code 2, like any configuration error: it never waits on a
//! FIFO, nor fills its memory from `/dev/zero`.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::git::{init_with_one_commit, isolate};
use common::{clowder_bin, fast_config, stderr_of, stdout_of, wait_with_deadline};

/// Far more than a refusal takes; a regression waiting on a FIFO fails here.
const QUICK: Duration = Duration::from_secs(30);

/// `clowder args…` in `dir`, its address space capped so that a regression reading
/// `/dev/zero` ends in a failed allocation rather than in the machine's memory, and
/// killed (failing the test) after [`QUICK`].
fn run_bounded(dir: &Path, args: &[&str]) -> Output {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -v 2000000; exec \"$0\" \"$@\"")
        .arg(clowder_bin())
        .args(args);
    let child = isolate(&mut command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn clowder");
    wait_with_deadline(child, QUICK)
}

/// What is put where a file should be.
#[derive(Clone, Copy, Debug)]
enum Bad {
    DevZero,
    Fifo,
    Folder,
    Truncated,
    NewerSchema,
}

impl Bad {
    fn put(self, path: &Path) {
        match self {
            Bad::DevZero => std::os::unix::fs::symlink("/dev/zero", path).expect("symlink"),
            Bad::Fifo => nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo"),
            Bad::Folder => std::fs::create_dir(path).expect("mkdir"),
            Bad::Truncated => std::fs::write(path, "{\"schema_version\": 1, \"na").expect("write"),
            Bad::NewerSchema => std::fs::write(path, "{\"schema_version\": 99}\n").expect("write"),
        }
    }

    /// What the error must say besides the file's name.
    fn said(self) -> &'static str {
        match self {
            Bad::DevZero => "a device, not a regular file",
            Bad::Fifo => "a FIFO, not a regular file",
            Bad::Folder => "a folder, not a regular file",
            Bad::Truncated => "",
            Bad::NewerSchema => "99",
        }
    }
}

fn assert_refused(dir: &Path, args: &[&str], file: &str, bad: Bad) {
    let started = Instant::now();
    let output = run_bounded(dir, args);
    let stderr = stderr_of(&output);
    let context = format!(
        "clowder {args:?} with {file} {bad:?}\nstdout:\n{}\nstderr:\n{stderr}",
        stdout_of(&output)
    );
    assert_eq!(output.status.code(), Some(2), "{context}");
    assert!(
        stderr.contains(file) && stderr.contains(bad.said()),
        "{context}"
    );
    assert!(started.elapsed() < QUICK, "{context}");
}

/// A git repository with a working `harness.toml`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    init_with_one_commit(dir.path());
    std::fs::write(
        dir.path().join("harness.toml"),
        fast_config(&["normal"], ""),
    )
    .expect("write harness.toml");
    std::fs::write(dir.path().join("PROMPT.md"), "Fix it.\n").expect("write PROMPT.md");
    dir
}

#[test]
fn a_harness_toml_that_is_a_device_a_fifo_or_a_folder_is_refused_at_once() {
    for bad in [Bad::DevZero, Bad::Fifo, Bad::Folder] {
        let dir = repo();
        std::fs::remove_file(dir.path().join("harness.toml")).expect("rm");
        bad.put(&dir.path().join("harness.toml"));
        for args in [&["--headless", "1"][..], &["--dry-run"]] {
            assert_refused(dir.path(), args, "harness.toml", bad);
        }
    }
}

#[test]
fn a_plan_file_that_is_a_device_or_a_fifo_is_refused_at_once() {
    for bad in [Bad::DevZero, Bad::Fifo] {
        let dir = repo();
        bad.put(&dir.path().join("plan.toml"));
        for args in [
            &["plan", "check", "plan.toml"][..],
            &["plan", "run", "plan.toml"],
        ] {
            assert_refused(dir.path(), args, "plan.toml", bad);
        }
    }
}

#[test]
fn a_fleet_json_that_cannot_be_read_exits_2_and_names_it() {
    for bad in [
        Bad::DevZero,
        Bad::Fifo,
        Bad::Folder,
        Bad::Truncated,
        Bad::NewerSchema,
    ] {
        let dir = repo();
        std::fs::create_dir(dir.path().join(".clowder")).expect("mkdir");
        bad.put(&dir.path().join(".clowder/fleet.json"));
        for args in [
            &["lanes"][..],
            &["lanes", "--json"],
            &["lane", "rm", "x"],
            &["lane", "stop", "x"],
            &["--status"],
            &["--headless", "1"],
        ] {
            assert_refused(dir.path(), args, "fleet.json", bad);
        }
    }
}

#[test]
fn a_plan_state_that_cannot_be_read_exits_2_and_names_it() {
    for bad in [Bad::Folder, Bad::Truncated, Bad::NewerSchema, Bad::Fifo] {
        let dir = repo();
        std::fs::write(
            dir.path().join("plan.toml"),
            // A command done_when: this harness.toml has no completion promise.
            "[plan]\nname = \"demo\"\nbase = \"main\"\n\n[[step]]\nid = \"a\"\nprompt = \"do a\"\ndone_when = \"true\"\n",
        )
        .expect("write plan.toml");
        std::fs::create_dir_all(dir.path().join(".clowder/plans")).expect("mkdir");
        bad.put(&dir.path().join(".clowder/plans/demo.json"));
        for args in [&["plan", "run", "plan.toml"][..], &["plan", "status"]] {
            assert_refused(dir.path(), args, "demo.json", bad);
        }
    }
}

#[test]
fn a_status_file_that_cannot_be_read_exits_2_and_a_missing_one_1() {
    let dir = repo();
    let missing = run_bounded(dir.path(), &["--status"]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr_of(&missing));
    for bad in [Bad::Truncated, Bad::Folder, Bad::Fifo] {
        let dir = repo();
        bad.put(&dir.path().join("harness.status"));
        assert_refused(dir.path(), &["--status"], "harness.status", bad);
    }
}

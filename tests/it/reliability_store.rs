//! What clowder keeps on disk survives clowder being killed at any moment: the
//! status file is always whole and temp files of interrupted writes do not pile
//! up; a lost or corrupt iteration counter is recovered from the event log and
//! the output files without reusing or skipping a number.

use crate::common;

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// SIGKILLs in the torture test.
const KILLS: usize = 500;
/// Every fourth kill comes at a random moment after the start, up to this: during
/// start-up, the recovery of the killed run's session, the first writes.
const MAX_EARLY_KILL: Duration = Duration::from_millis(60);
/// The other kills come this long at most after the run's first status write,
/// while sessions cycle and rewrite the status and the counter.
const MAX_LATE_KILL: Duration = Duration::from_millis(40);

/// Sessions cycle as fast as they can (the agent exits at once, 50 ms between
/// sessions), so the status and the counter are rewritten many times a second.
const CYCLING: &str = "[session]\nmax_iterations = 1000000\n\n[watchdog]\ncheck_interval_secs = 0.02\nstale_timeout_mins = 10\n";

/// Leftovers of an interrupted atomic write: `.{file}.XXXXXX.tmp` next to the file.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read project dir")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| name.ends_with(".tmp"))
        .collect()
}

/// Live processes (not zombies) whose working directory is `dir`: the fake agent
/// and everything it starts run in the project folder, clowder too.
fn processes_in(dir: &Path) -> Vec<i32> {
    let Ok(dir) = dir.canonicalize() else {
        return Vec::new();
    };
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| pid_alive(*pid))
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

/// Whether no process holds `.clowder/lock` (taken and dropped at once if free).
fn lock_is_free(root: &Path) -> bool {
    use std::os::unix::io::AsRawFd;
    let Ok(file) = std::fs::File::open(root.join(".clowder/lock")) else {
        return true;
    };
    // SAFETY: flock on a descriptor owned by `file`; no memory is passed.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn sigkill(pid: i32) {
    // SAFETY: kill(2) with a pid and a signal number touches no memory.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

fn status_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

fn random_delay(rng: &mut ChaCha8Rng, max: Duration) -> Duration {
    Duration::from_micros(rng.random_range(0..max.as_micros() as u64))
}

/// The default seed: the same kill sequence on every run, so a failure replays.
const DEFAULT_SEED: u64 = 0x00c1_0d3e;

/// `CLOWDER_TORTURE_SEED` (decimal, or hex with `0x`) or the default; a seed that
/// does not parse is an error rather than a quiet fallback.
fn torture_seed() -> u64 {
    let Ok(text) = std::env::var("CLOWDER_TORTURE_SEED") else {
        return DEFAULT_SEED;
    };
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|err| panic!("CLOWDER_TORTURE_SEED={text:?}: {err}"))
}

/// A seed names one sequence of kill delays: printing it is enough to replay them.
#[test]
fn the_kill_delays_are_a_function_of_the_seed() {
    let delays = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..16)
            .map(|_| random_delay(&mut rng, MAX_EARLY_KILL))
            .collect::<Vec<_>>()
    };
    assert_eq!(delays(DEFAULT_SEED), delays(DEFAULT_SEED));
    assert_ne!(delays(DEFAULT_SEED), delays(DEFAULT_SEED + 1));
    assert!(
        delays(0).iter().any(|d| !d.is_zero()),
        "seed 0 is a sequence too"
    );
}

#[test]
fn random_sigkills_never_leave_a_torn_status_or_piled_up_temp_files() {
    let project = Project::new(&fast_config(&["normal"], CYCLING));
    let status_path = project.path("harness.status");
    let seed = torture_seed();
    // Past the harness's capture, so the seed shows even when the test passes.
    let _ = writeln!(
        std::io::stderr(),
        "torture seed {seed} (CLOWDER_TORTURE_SEED={seed} replays it)"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Outside the project folder, which must hold nothing but clowder's files.
    let scratch = tempfile::tempdir().expect("scratch dir");
    let stderr_path = scratch.path().join("clowder.stderr");

    let started = Instant::now();
    let mut status_writers = std::collections::BTreeSet::new();
    let mut left_behind = 0;
    let mut max_temps = 0;
    for kill in 0..KILLS {
        let before = status_inode(&status_path);
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut clowder = project
            .command(&["--headless"])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn clowder");
        // The sleeps only pick the moment of the kill; nothing is asserted from them.
        let delay = if kill % 4 == 0 {
            random_delay(&mut rng, MAX_EARLY_KILL)
        } else {
            // A rename gives the status a new inode: this run has written it once.
            let waiting = Instant::now();
            while status_inode(&status_path) == before {
                if let Ok(Some(status)) = clowder.try_wait() {
                    panic!(
                        "run {kill} ended on its own: {status}\n{}",
                        std::fs::read_to_string(&stderr_path).unwrap_or_default()
                    );
                }
                assert!(
                    waiting.elapsed() < DEADLINE,
                    "run {kill} never wrote the status"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            random_delay(&mut rng, MAX_LATE_KILL)
        };
        std::thread::sleep(delay);
        clowder.kill().expect("SIGKILL clowder");
        clowder.wait().expect("reap clowder");
        // A child that clowder was forking when it died shares the lock until it
        // execs or dies, a moment later; a start before that would be refused.
        assert!(
            wait_until(DEADLINE, || lock_is_free(project.root())),
            "run {kill}: the lock outlived the killed clowder"
        );

        match clowder::store::status::read(&status_path) {
            Ok((snapshot, _)) => {
                status_writers.insert(snapshot.pid);
            }
            Err(_) if !status_path.exists() => {}
            Err(err) => panic!(
                "kill {kill} (seed {seed}) left a torn status file: {err}\n{:?}",
                std::fs::read(&status_path).map(|b| String::from_utf8_lossy(&b).into_owned())
            ),
        }
        let temps = temp_files(project.root());
        if !temps.is_empty() {
            left_behind += 1;
        }
        max_temps = max_temps.max(temps.len());
        // Only the one write the kill interrupted may be left; the next start
        // clears it before it writes anything itself.
        assert!(
            temps.len() <= 1,
            "kill {kill} (seed {seed}): temp files pile up: {temps:?}"
        );
        // The counter is replaced the same way: a number, or not there yet.
        match std::fs::read_to_string(project.path(".iteration_counter")) {
            Ok(text) => assert!(
                text.trim().parse::<u64>().is_ok(),
                "kill {kill} (seed {seed}) left a torn counter: {text:?}"
            ),
            Err(err) => assert_eq!(err.kind(), ErrorKind::NotFound),
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{KILLS} kills in {elapsed:.1?}: {} runs wrote the status, {left_behind} kills left a temp file (at most {max_temps} at once)",
        status_writers.len()
    );

    // A last run to completion clears what the last kill left and ends cleanly.
    project.write(
        "harness.toml",
        &fast_config(&["normal"], "[watchdog]\ncheck_interval_secs = 0.02\n"),
    );
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let temps = temp_files(project.root());
    assert!(temps.is_empty(), "temp files left: {temps:?}");
    let (snapshot, _) = clowder::store::status::read(&status_path).expect("status");
    assert_eq!(snapshot.state, clowder::protocol::LoopState::Stopped);

    // Every agent of every killed run is gone: it dies with clowder (parent-death
    // signal) or the next start kills what is left of its group.
    let root: PathBuf = project.root().to_path_buf();
    let gone = wait_until(DEADLINE, || processes_in(&root).is_empty());
    let left = processes_in(&root);
    for pid in &left {
        sigkill(*pid);
    }
    assert!(gone, "processes of the killed runs are left: {left:?}");
}

/// `(file name, content)` of every output file under `dir`, recursively.
fn output_file_contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
    {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            found.extend(output_file_contents(&path));
        } else if name.starts_with("claude-iteration-") && name.ends_with(".jsonl") {
            found.push((name, std::fs::read(&path).expect("read output file")));
        }
    }
    found.sort();
    found
}

/// The `global` of every `session_start` in the event log, skipping the lines
/// the test damaged on purpose.
fn session_globals(project: &Project) -> Vec<u64> {
    project
        .read("harness-events.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["event"] == "session_start")
        .map(|event| event["global"].as_u64().expect("global"))
        .collect()
}

#[test]
fn a_lost_or_corrupt_counter_continues_after_the_highest_number_in_the_event_log() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let first = project.run(&["--headless", "3"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    assert_eq!(session_globals(&project), [1, 2, 3]);
    let archive = project.path("archive");
    std::fs::create_dir(&archive).expect("mkdir archive");

    for (round, counter) in [
        ("garbage", Some("\u{0}x17 not a number\n")),
        ("empty", Some("")),
        ("missing", None),
    ] {
        // The output files are rotated away: of the numbers used, only the event
        // log keeps a record.
        for file in project.output_files() {
            let name = file.file_name().expect("name").to_owned();
            std::fs::rename(&file, archive.join(name)).expect("move output file");
        }
        match counter {
            Some(text) => project.write(".iteration_counter", text),
            None => std::fs::remove_file(project.path(".iteration_counter")).expect("rm"),
        }
        if round == "empty" {
            // A line torn by a crash and one that is no event at all are skipped.
            let mut log = std::fs::OpenOptions::new()
                .append(true)
                .open(project.path("harness-events.jsonl"))
                .expect("open event log");
            use std::io::Write;
            log.write_all(b"garbage\n{\"ts\":\"2026-01-01T00:00:00Z\",\"event\":\"session_st")
                .expect("append");
        }
        let before_files = output_file_contents(project.root());
        let before = session_globals(&project);
        let expected = before.iter().max().expect("sessions") + 1;

        let output = project.run(&["--headless", "1"]);
        let stdout = stdout_of(&output);
        assert_eq!(output.status.code(), Some(0), "{round}: {stdout}");
        let after = session_globals(&project);
        assert_eq!(
            after.last(),
            Some(&expected),
            "{round}: the new session must be number {expected}: {after:?}\n{stdout}"
        );
        assert_eq!(after.len(), before.len() + 1, "{round}: {after:?}");
        assert!(
            stdout.contains(".iteration_counter")
                && stdout.contains(&format!("highest number in use: {}", expected - 1)),
            "{round}: the recovery is reported: {stdout}"
        );
        let files = project.output_files();
        assert_eq!(
            files,
            [project.path(&format!("claude-iteration-{expected}.jsonl"))],
            "{round}"
        );
        // Nothing that was there was touched; one new file was added.
        let now = output_file_contents(project.root());
        assert_eq!(now.len(), before_files.len() + 1, "{round}");
        for file in &before_files {
            assert!(now.contains(file), "{round}: {} was overwritten", file.0);
        }
        assert_eq!(
            project.read(".iteration_counter").trim(),
            expected.to_string()
        );
    }
    // Every number used once, none skipped.
    assert_eq!(session_globals(&project), [1, 2, 3, 4, 5, 6]);
}

//! A full disk: with the output directory on a small tmpfs that is filled up,
//! clowder keeps running, logs `disk_full`, starts no session until space
//! returns, then goes on. Needs `mount`: skipped loudly without it, and a
//! failure under CI, which runs as root.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

/// A tmpfs mounted for the test, unmounted when dropped (even on failure).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).expect("mkdir");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .ok()?;
        status.success().then(|| Tmpfs {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Writes zeros into `path` until the file system says it is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).expect("create filler");
    let block = vec![0u8; 64 * 1024];
    loop {
        match file.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) if err.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(err) => panic!("filling the disk: {err}"),
        }
    }
}

#[test]
fn a_full_disk_holds_new_sessions_until_space_returns() {
    let project = Project::new(&fast_config(
        &["normal"],
        "[session]\noutput_dir = \"out\"\n\n[output]\ndisk_recheck_secs = 0.5\n",
    ));
    let Some(tmpfs) = Tmpfs::mount(&project.path("out"), "4m") else {
        cannot_run("cannot mount a tmpfs for a disk to fill (needs root)");
        return;
    };
    let filler = tmpfs.dir.join("filler");
    fill(&filler);

    let clowder = project.spawn(&["--headless", "2"]);
    assert!(
        wait_until(DEADLINE, || !project.events_named("disk_full").is_empty()),
        "no disk_full event: {:?}",
        project.events()
    );
    let full = project.events_named("disk_full");
    assert_eq!(full.len(), 1);
    assert!(
        full[0]["free_bytes"]
            .as_u64()
            .is_some_and(|f| f < 1024 * 1024)
    );
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(project.path("harness.status"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|s| s["state"] == "disk_full")
    }));
    // Through more than one look at the disk (every 0.5 s): still no session, one event.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(project.events_named("session_start").is_empty());
    assert_eq!(project.events_named("disk_full").len(), 1);
    assert!(pid_alive(clowder.id() as i32), "clowder gave up");

    std::fs::remove_file(&filler).expect("free the space");
    let output = wait_with_deadline(clowder, DEADLINE);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    assert_eq!(project.events_named("disk_space_restored").len(), 1);
    assert_eq!(project.events_named("session_complete").len(), 2);
    assert!(stdout_of(&output).contains("status=disk_full"));
    let outputs: Vec<_> = std::fs::read_dir(&tmpfs.dir)
        .expect("read out")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("claude-iteration-")
        })
        .collect();
    assert_eq!(outputs.len(), 2);
    drop(tmpfs);
}

/// An agent whose first run writes far more than the disk holds and whose later
/// runs are normal; runs are counted in `runs` (off the full disk).
fn flood_then_normal(project: &Project) -> PathBuf {
    let script = project.path("agent.sh");
    let agent = fake_agent().display().to_string();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat runs 2>/dev/null || echo 0)\necho $((n + 1)) > runs\nif [ \"$n\" = 0 ]; then exec '{agent}' flood 8000000; fi\nexec '{agent}' normal\n"
        ),
    )
    .expect("write agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

#[test]
fn a_session_cut_short_by_a_full_disk_is_not_productive_and_runs_again() {
    let project = Project::new("");
    let agent = flood_then_normal(&project);
    project.write(
        "harness.toml",
        &format!(
            "[agent]\ncommand = {:?}\n\n[session]\noutput_dir = \"out\"\n\n[output]\ndisk_recheck_secs = 0.5\n\n[backoff]\ninitial_delay_secs = 0.05\n",
            agent.display().to_string()
        ),
    );
    let Some(tmpfs) = Tmpfs::mount(&project.path("out"), "4m") else {
        cannot_run("cannot mount a tmpfs for a disk to fill (needs root)");
        return;
    };
    // Half the disk; the first session fills the rest.
    let filler = tmpfs.dir.join("filler");
    std::fs::write(&filler, vec![0u8; 2 * 1024 * 1024]).expect("write filler");

    let clowder = project.spawn(&["--headless", "1"]);
    assert!(
        wait_until(DEADLINE, || !project.events_named("disk_full").is_empty()),
        "no disk_full event: {:?}",
        project.events()
    );
    let first = project.events_named("session_complete");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["productive"], false, "{first:?}");
    std::fs::remove_file(&filler).expect("free the space");
    let output = wait_with_deadline(clowder, DEADLINE);
    let text = format!("{}{}", stdout_of(&output), stderr_of(&output));
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("the disk filled up during the session"),
        "{text}"
    );
    let completes = project.events_named("session_complete");
    let iterations: Vec<_> = completes.iter().map(|e| e["iteration"].clone()).collect();
    assert_eq!(iterations, [1, 1], "the same iteration runs again: {text}");
    assert_eq!(completes[1]["productive"], true, "{completes:?}");
    assert_eq!(project.status()["counters"]["productive"], 1);
    assert_eq!(project.events_named("disk_space_restored").len(), 1);
    drop(tmpfs);
}

//! Helpers for the tests of process clean-up: an agent or hook written as a
//! shell script, pid files it leaves, and a guard that SIGKILLs, on drop, the
//! processes a failing test would otherwise leak.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::common::*;

/// A `harness.toml` whose agent is `sh -c SCRIPT`, with fast timings (a 0.5 s
/// kill grace) and no empty-session retries; `extra` adds whole tables.
pub fn sh_config(script: &str, extra: &str) -> String {
    format!(
        "[agent]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n\n[watchdog]\nstale_timeout_mins = 10\ncheck_interval_secs = 0.1\nmin_output_bytes = 0\nkill_grace_secs = 0.5\n\n[backoff]\ninitial_delay_secs = 0.05\n\n{extra}\n"
    )
}

/// The pid written in `file` of the project, once it is there.
pub fn wait_pid(project: &Project, file: &str) -> i32 {
    let mut pid = None;
    let found = wait_until(DEADLINE, || {
        pid = std::fs::read_to_string(project.path(file))
            .ok()
            .and_then(|text| text.trim().parse().ok());
        pid.is_some()
    });
    assert!(found, "{file} never held a pid");
    pid.expect("checked above")
}

/// Whether `pid` carries `key=value` in its environment.
pub fn environ_has(pid: i32, key: &str, value_prefix: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|b| *b == 0)
            .any(|entry| entry.starts_with(format!("{key}={value_prefix}").as_bytes()))
    })
}

/// The parent of `pid`, from `/proc`.
pub fn ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// SIGKILLs, on drop, the listed processes that still run in the project
/// folder (a reused pid elsewhere is left alone).
pub struct Reaper {
    pub root: PathBuf,
    pub pids: Vec<i32>,
}

impl Reaper {
    pub fn new(root: &Path) -> Reaper {
        Reaper {
            root: root.canonicalize().expect("canonical root"),
            pids: Vec::new(),
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.pids {
            if std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == self.root) {
                // SAFETY: kill(2) with a pid and a signal number touches no memory.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Whether this machine lets clowder make cgroups: root and a cgroup2 mount.
pub fn cgroups_expected() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let cgroup2 = std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|text| text.lines().any(|l| l.contains(" - cgroup2 ")));
    root && cgroup2
}

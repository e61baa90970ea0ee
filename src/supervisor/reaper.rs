//! The one reaper of the process: clowder is the subreaper of its sessions, so
//! orphans come to it as zombies and must be reaped, but its own children (an
//! agent, a hook, a `git`) are waited for by whoever started them. Every child is
//! registered here, with the lane that owns it, from before its fork until it has
//! been waited for; the reaper reaps only zombies that nobody owns, so that no
//! lane's clean-up can take another lane's exit code.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Mutex, MutexGuard};

use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// The children whose exit somebody waits for, and the lane (or "") that owns each.
static OWNED: Mutex<BTreeMap<i32, String>> = Mutex::new(BTreeMap::new());

fn owned() -> MutexGuard<'static, BTreeMap<i32, String>> {
    // A panic elsewhere while holding it leaves a map that is still whole.
    OWNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A child registered as owned; unregistered when dropped (after it was waited for).
#[derive(Debug)]
pub struct Owned {
    pid: i32,
}

impl Drop for Owned {
    fn drop(&mut self) {
        owned().remove(&self.pid);
    }
}

/// Runs `spawn` (a fork) with the registry held, and registers the child it
/// returns as `owner`'s: between the fork and the registration no reap can run.
pub fn spawn_owned<C>(
    owner: &str,
    spawn: impl FnOnce() -> io::Result<C>,
    pid_of: impl Fn(&C) -> Option<u32>,
) -> io::Result<(C, Option<Owned>)> {
    let mut map = owned();
    let child = spawn()?;
    let registered = pid_of(&child)
        .and_then(|pid| i32::try_from(pid).ok())
        .map(|pid| {
            map.insert(pid, owner.to_string());
            Owned { pid }
        });
    Ok((child, registered))
}

/// The lane that owns `pid`, if it is a registered child.
pub fn owner_of(pid: i32) -> Option<String> {
    owned().get(&pid).cloned()
}

/// Reaps the zombies reparented to clowder that no one owns; returns how many.
///
/// Never `waitpid(-1)`: that would take the exit status of a child that std or
/// tokio waits for (a `git` the lane commands run, a session's leader). A
/// zombie is reaped by its pid, and only when it is (1) clowder's child, (2)
/// not registered as owned, and (3) in another process group than clowder's.
/// Children clowder starts without registering them stay in its own group, so
/// (3) leaves them to whoever waits for them; orphans come from sessions and
/// hooks (their own groups) or from daemons that called `setsid` (git's
/// detached auto-maintenance), never from clowder's group.
pub fn reap_orphans() -> usize {
    let me = std::process::id() as i32;
    let own_group = nix::unistd::getpgrp().as_raw();
    let map = owned();
    let zombies: Vec<i32> = children()
        .into_iter()
        .filter(|pid| !map.contains_key(pid))
        .filter_map(crate::proc_stat::read_proc_stat)
        .filter(|info| info.ppid == me && info.state == 'Z' && info.pgid != own_group)
        .map(|info| info.pid)
        .collect();
    for pid in &zombies {
        let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
    }
    zombies.len()
}

/// The pids of clowder's children, zombies included: each thread's `children`
/// file (an orphan is given to one of the subreaper's threads), or every
/// process in /proc where the kernel has no such file.
fn children() -> Vec<i32> {
    let pids = |text: &str| -> Vec<i32> {
        text.split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect()
    };
    let from_tasks = std::fs::read_dir("/proc/self/task").ok().and_then(|tasks| {
        let mut all = Vec::new();
        for task in tasks.filter_map(Result::ok) {
            let text = std::fs::read_to_string(task.path().join("children")).ok()?;
            all.extend(pids(&text));
        }
        Some(all)
    });
    from_tasks.unwrap_or_else(|| {
        std::fs::read_dir("/proc").map_or_else(
            |_| Vec::new(),
            |entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                    .collect()
            },
        )
    })
}

/// How long a burst of SIGCHLDs is gathered into one look.
const REAP_COALESCE: std::time::Duration = std::time::Duration::from_millis(200);

/// Reaps orphans as they die, for as long as the process runs: git's detached
/// auto-maintenance after each commit in a lane would otherwise stay a zombie
/// until the session ends (one per commit, hundreds in a large fleet). One look
/// per SIGCHLD, a burst of them gathered.
pub async fn reap_as_orphans_die() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut sigchld) = signal(SignalKind::child()) else {
        return;
    };
    while sigchld.recv().await.is_some() {
        tokio::time::sleep(REAP_COALESCE).await;
        reap_orphans();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_zombie_is_left_for_its_owner() {
        let (mut child, owned) = spawn_owned(
            "a",
            || std::process::Command::new("true").spawn(),
            |c| Some(c.id()),
        )
        .expect("true runs");
        let pid = child.id() as i32;
        assert_eq!(owner_of(pid).as_deref(), Some("a"));
        // Until it is a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while super::super::process::read_proc_stat(pid).is_some_and(|p| p.state != 'Z')
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        reap_orphans();
        assert!(
            child
                .wait()
                .expect("its exit status is still there")
                .success()
        );
        drop(owned);
        assert_eq!(owner_of(pid), None);
    }
}

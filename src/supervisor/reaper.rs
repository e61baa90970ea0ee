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
pub fn reap_orphans() -> usize {
    let me = std::process::id() as i32;
    let map = owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let zombies: Vec<i32> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !map.contains_key(pid))
        .filter_map(super::process::read_proc_stat)
        .filter(|info| info.ppid == me && info.state == 'Z')
        .map(|info| info.pid)
        .collect();
    for pid in &zombies {
        let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
    }
    zombies.len()
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

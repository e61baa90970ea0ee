//! Processes: spawn the agent in its own process group with its output file as
//! stdout and stderr, signal the whole group, escalate TERM to KILL, and reap.
//!
//! A session is over only when no live process of its group is left, not when
//! the leader exits: a background `sleep 600 &` must not outlive its session.
//! Nor may a process that left the group with `setsid` (a daemon): once the
//! group is empty, clowder's descendants that carry the session's environment are
//! found in `/proc`, killed one by one and reported.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep};

/// How often a dying group is looked at.
const GROUP_POLL: Duration = Duration::from_millis(50);
/// After SIGKILL, how long to wait for the kernel before reporting the group as stuck.
const KILL_SETTLE: Duration = Duration::from_secs(10);

/// A stream of SIGHUP (the terminal closed), unless whoever started clowder
/// set it to be ignored (`nohup`): then a closing terminal is not meant to
/// stop it, and it stays ignored. Call before anything else takes SIGHUP.
pub fn hangup_signal() -> Option<tokio::signal::unix::Signal> {
    if hangup_ignored() {
        return None;
    }
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

pub use crate::detach::hangup_ignored;

/// Makes clowder the reaper of orphans from its sessions, so their zombies do not
/// stay in the group (and look alive) on systems whose init does not reap.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// A started agent: the leader and its process group id.
pub struct Spawned {
    pub child: Child,
    pub pid: i32,
    pub pgid: i32,
    /// Keeps the leader registered with the reaper until it has been waited for.
    pub owned: Option<super::reaper::Owned>,
    /// The agent's stdin, when it takes messages there (see [`AgentIo`]).
    pub stdin: Option<tokio::process::ChildStdin>,
}

/// Where an agent's standard streams go.
pub struct AgentIo<'a> {
    /// Its stdout and stderr, opened for append.
    pub output: &'a File,
    /// A pipe that clowder writes the agent's messages to; else `/dev/null`.
    pub piped_stdin: bool,
}

/// Starts `program args` in `cwd` as the leader of a new process group, with
/// its streams as `io` says; registered with the reaper as `owner`'s.
pub fn spawn_agent(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    io: &AgentIo<'_>,
    cwd: &Path,
    cgroup: Option<&Path>,
    owner: &str,
) -> io::Result<Spawned> {
    let stdout = io.output.try_clone()?;
    let stderr = io.output.try_clone()?;
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(cwd)
        .stdin(if io.piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .kill_on_drop(false);
    die_with_clowder(&mut command, cgroup)?;
    let (mut child, owned) = super::reaper::spawn_owned(owner, || command.spawn(), Child::id)?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| io::Error::other("the agent exited before its pid was known"))?;
    let stdin = child.stdin.take();
    Ok(Spawned {
        child,
        pid,
        pgid: pid,
        owned,
        stdin,
    })
}

/// Makes the child die with clowder (the parent-death signal) and, with a
/// `cgroup`, move itself into it before it execs.
pub fn die_with_clowder(command: &mut Command, cgroup: Option<&Path>) -> io::Result<()> {
    let procs = cgroup.map(super::cgroup::cgroup_procs_path).transpose()?;
    // SAFETY: the closure runs between fork and exec and only calls prctl, open,
    // write and close, which are async-signal-safe. Spawning from the runtime's own
    // thread matters: the parent-death signal fires when the forking thread exits.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            match &procs {
                Some(procs) => super::cgroup::join_self(procs),
                None => Ok(()),
            }
        });
    }
    Ok(())
}

/// Sends `signal` to every process of the group; a group already gone is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    if pgid <= 1 {
        return;
    }
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(err) => tracing::warn!("signal {signal} to group {pgid}: {err}"),
    }
}

pub use crate::proc_stat::{ProcInfo, read_proc_stat};

/// Whether `pid` was started with `key=value` in its environment (false when
/// it cannot be read: gone, or another user's).
pub fn environ_has(pid: i32, key: &str, value: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wanted = format!("{key}={value}");
    environ
        .split(|b| *b == 0)
        .any(|entry| entry == wanted.as_bytes())
}

/// How an abandoned group was dealt with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCleanup {
    /// Live processes found in the group and signalled.
    pub killed: u64,
    pub needed_sigkill: bool,
    /// Still alive after SIGKILL and the settle time.
    pub stuck: usize,
}

/// Ends every process of `pgid`, which is no child of clowder's (a group left by
/// a previous run): TERM (+CONT), KILL after `grace`, then waits for the kernel.
pub async fn kill_foreign_group(pgid: i32, grace: Duration) -> GroupCleanup {
    let live = live_members(pgid, &[]);
    let mut cleanup = GroupCleanup {
        killed: live.len() as u64,
        needed_sigkill: false,
        stuck: 0,
    };
    if live.is_empty() {
        return cleanup;
    }
    terminate(pgid);
    let deadline = Instant::now() + grace;
    let mut killed_at: Option<Instant> = None;
    loop {
        let live = live_members(pgid, &[]);
        if live.is_empty() {
            break;
        }
        let now = Instant::now();
        match killed_at {
            Some(at) if now.duration_since(at) > KILL_SETTLE => {
                cleanup.stuck = live.len();
                break;
            }
            Some(_) => {}
            None if now >= deadline => {
                signal_group(pgid, Signal::SIGKILL);
                cleanup.needed_sigkill = true;
                killed_at = Some(now);
            }
            None => {}
        }
        sleep(GROUP_POLL).await;
    }
    cleanup
}

/// Every process whose process group is `pgid`, zombies included.
pub fn group_members(pgid: i32) -> Vec<ProcInfo> {
    all_processes()
        .into_iter()
        .filter(|info| info.pgid == pgid)
        .collect()
}

/// Reaps zombies that were reparented to clowder (it is their subreaper) and
/// that no lane owns (see [`super::reaper`]); `_owned` is kept for callers that
/// name their own children, which are registered anyway.
pub fn reap_orphan_zombies(_owned: &[i32]) -> usize {
    super::reaper::reap_orphans()
}

/// Processes of the group that are still alive (not zombies), after reaping the
/// zombies that are clowder's to reap.
pub fn live_members(pgid: i32, owned: &[i32]) -> Vec<ProcInfo> {
    let members = group_members(pgid);
    if members.iter().any(|m| m.state == 'Z') {
        reap_orphan_zombies(owned);
    }
    members
        .into_iter()
        .filter(|m| m.state != 'Z' && m.state != 'X')
        .collect()
}

/// The shell-style exit code of a process: its code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(-1)
}

/// How a session's process group ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEnd {
    pub exit_code: i32,
    pub needed_sigkill: bool,
    /// Processes still in the group after the leader had exited on its own.
    pub lingering_killed: u64,
    /// Live processes still there after SIGKILL and the settle time (stuck in the kernel).
    pub stuck: usize,
    /// Processes of the session that had left its group and were still alive
    /// once the group was empty.
    pub escaped: Vec<Escaped>,
}

/// A process that left the session's process group (`setsid`, `setpgid`) and
/// outlived the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escaped {
    pub pid: i32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
    /// Gone after TERM, the grace and KILL; false if it survived them.
    pub killed: bool,
}

/// The environment variable that carries a session's (or hook's) token.
pub const TOKEN_ENV: &str = "CLOWDER_SESSION";

/// What names a session's processes besides its process group: the token in
/// every process's environment, and its cgroup when there is one.
#[derive(Debug, Clone)]
pub struct Containment {
    pub token: String,
    pub cgroup: Option<PathBuf>,
}

impl Containment {
    /// Ends what is left of the session outside its (now empty) group: with a
    /// cgroup, everything still in it; otherwise clowder's descendants started
    /// no earlier than `since` that carry the token. TERM, `grace`, KILL; then
    /// the cgroup is removed.
    pub async fn end_escaped(
        &self,
        pgid: i32,
        since: Option<u64>,
        grace: Duration,
    ) -> Vec<Escaped> {
        let escaped = match (&self.cgroup, since) {
            (Some(cgroup), _) => {
                let found = super::cgroup::members(cgroup)
                    .into_iter()
                    .filter_map(read_proc_stat)
                    .filter(|p| p.state != 'Z' && p.state != 'X')
                    .collect();
                kill_escaped(found, grace).await
            }
            (None, Some(since)) => {
                let me = std::process::id() as i32;
                kill_escaped(find_escaped(me, pgid, &self.token, since), grace).await
            }
            (None, None) => {
                tracing::warn!("group {pgid}: no start time, so no search for escaped processes");
                Vec::new()
            }
        };
        if let Some(cgroup) = &self.cgroup {
            super::cgroup::kill_and_remove(cgroup).await;
        }
        escaped
    }
}

/// Owns one session's process group from spawn to the last process reaped.
///
/// A message on `kill_requests` starts TERM (+CONT, in case it is paused), and
/// KILL after `grace`. Once the leader exits, anything left in the group gets the
/// same treatment, and then whatever escaped it (see [`Containment::end_escaped`]).
pub async fn supervise_group(
    mut child: Child,
    pgid: i32,
    grace: Duration,
    kill_requests: mpsc::UnboundedReceiver<()>,
    containment: Containment,
) -> GroupEnd {
    let leader = pgid;
    // Read before the leader is waited for: until then its pid cannot be reused.
    let leader_start = read_proc_stat(leader).map(|info| info.start_ticks);
    let mut ending = Ending::default();
    let status = wait_for_leader(&mut child, pgid, grace, kill_requests, &mut ending).await;
    let exit_code = match status {
        Ok(status) => exit_code(status),
        Err(err) => {
            tracing::warn!("waiting for agent {leader}: {err}");
            -1
        }
    };
    let (lingering_killed, stuck) = empty_group(pgid, grace, &mut ending).await;
    // Now, with the group empty and before the loop moves on: the post-session
    // hooks have tokens of their own, so nothing of theirs is taken for the session's.
    let escaped = containment.end_escaped(pgid, leader_start, grace).await;
    GroupEnd {
        exit_code,
        needed_sigkill: ending.needed_sigkill,
        lingering_killed,
        stuck,
        escaped,
    }
}

/// How far the ending of a group has gone: TERM sent with KILL due at
/// `kill_deadline`, and whether KILL was needed.
#[derive(Default)]
struct Ending {
    kill_deadline: Option<Instant>,
    needed_sigkill: bool,
}

/// Waits for the group's leader, ending the group when asked to.
async fn wait_for_leader(
    child: &mut Child,
    pgid: i32,
    grace: Duration,
    mut kill_requests: mpsc::UnboundedReceiver<()>,
    ending: &mut Ending,
) -> std::io::Result<std::process::ExitStatus> {
    let mut kill_requests_open = true;
    loop {
        tokio::select! {
            status = child.wait() => break status,
            request = kill_requests.recv(), if kill_requests_open => {
                match request {
                    Some(()) if ending.kill_deadline.is_none() => {
                        terminate(pgid);
                        ending.kill_deadline = Some(Instant::now() + grace);
                    }
                    Some(()) => {}
                    None => kill_requests_open = false,
                }
            }
            _ = sleep_until_opt(ending.kill_deadline), if ending.kill_deadline.is_some() && !ending.needed_sigkill => {
                signal_group(pgid, Signal::SIGKILL);
                ending.needed_sigkill = true;
            }
        }
    }
}

/// Once the leader is gone, ends what is left in its group: the processes
/// killed that lingered, and those that survived even KILL.
async fn empty_group(pgid: i32, grace: Duration, ending: &mut Ending) -> (u64, usize) {
    let mut lingering_killed = 0;
    let lingering = live_members(pgid, &[]);
    if !lingering.is_empty() && ending.kill_deadline.is_none() {
        lingering_killed = lingering.len() as u64;
        terminate(pgid);
        ending.kill_deadline = Some(Instant::now() + grace);
    }
    let mut killed_at: Option<Instant> = ending.needed_sigkill.then(Instant::now);
    let mut stuck = 0;
    loop {
        let live = live_members(pgid, &[]);
        if live.is_empty() {
            break;
        }
        let now = Instant::now();
        if let Some(at) = killed_at {
            if now.duration_since(at) > KILL_SETTLE {
                stuck = live.len();
                tracing::warn!("process group {pgid}: {stuck} process(es) survive SIGKILL");
                break;
            }
        } else if ending.kill_deadline.is_some_and(|deadline| now >= deadline) {
            signal_group(pgid, Signal::SIGKILL);
            ending.needed_sigkill = true;
            killed_at = Some(now);
        }
        sleep(GROUP_POLL).await;
    }
    (lingering_killed, stuck)
}

/// Every process in `/proc` (those that vanish while it is read are left out).
fn all_processes() -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_proc_stat)
        .collect()
}

/// Whether the parent chain of `pid` reaches `ancestor`.
fn descends_from(pid: i32, ancestor: i32, parents: &HashMap<i32, i32>) -> bool {
    let mut current = pid;
    // Bounded: a chain read from a changing /proc could in theory loop.
    for _ in 0..parents.len() {
        match parents.get(&current) {
            Some(&parent) if parent == ancestor => return true,
            Some(&parent) if parent > 1 => current = parent,
            _ => return false,
        }
    }
    false
}

/// The processes of a session that are alive outside its group `pgid`. Only
/// what is provably the session's: a descendant of clowder (`me`; orphans come
/// to it as their subreaper), started no earlier than the session's leader
/// (`since`, clock ticks since boot), with the session's token in its
/// environment. A process that cleared its environment is not found (a cgroup
/// finds it).
pub fn find_escaped(me: i32, pgid: i32, token: &str, since: u64) -> Vec<ProcInfo> {
    let processes = all_processes();
    let parents: HashMap<i32, i32> = processes.iter().map(|p| (p.pid, p.ppid)).collect();
    processes
        .into_iter()
        .filter(|p| p.state != 'Z' && p.state != 'X')
        .filter(|p| p.pid != me && p.pgid != pgid && p.start_ticks >= since)
        .filter(|p| descends_from(p.pid, me, &parents))
        .filter(|p| environ_has(p.pid, TOKEN_ENV, token))
        .collect()
}

/// Every live process, wherever it is now, started no earlier than `since`
/// with `token` in its environment: what a killed clowder's session left.
pub fn find_by_token(token: &str, since: u64) -> Vec<ProcInfo> {
    let me = std::process::id() as i32;
    all_processes()
        .into_iter()
        .filter(|p| p.state != 'Z' && p.state != 'X' && p.pid != me && p.start_ticks >= since)
        .filter(|p| environ_has(p.pid, TOKEN_ENV, token))
        .collect()
}

/// One process to end, held by a pidfd when the kernel has them, so that a
/// signal can never reach another process that reused the pid.
struct Target {
    info: ProcInfo,
    command: String,
    pidfd: Option<OwnedFd>,
}

impl Target {
    fn new(info: ProcInfo) -> Option<Target> {
        let command = std::fs::read_to_string(format!("/proc/{}/comm", info.pid))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_default();
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
        // (or -1); no memory is passed.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, info.pid, 0) };
        let pidfd = i32::try_from(fd)
            .ok()
            .filter(|fd| *fd >= 0)
            // SAFETY: the descriptor was just returned by the kernel and is owned here only.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        // The same start time after the pidfd is open: it names the process found.
        let target = Target {
            info,
            command,
            pidfd,
        };
        target.alive().then_some(target)
    }

    /// Still the process that was found, and not a zombie.
    fn alive(&self) -> bool {
        read_proc_stat(self.info.pid).is_some_and(|now| {
            now.start_ticks == self.info.start_ticks && now.state != 'Z' && now.state != 'X'
        })
    }

    fn signal(&self, signal: Signal) {
        match &self.pidfd {
            Some(fd) => {
                // SAFETY: pidfd_send_signal on a descriptor owned by `self`, with no
                // siginfo (null) and no flags.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        signal as libc::c_int,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    );
                }
            }
            // Kernels before 5.3: the start time is checked just before the signal.
            None if self.alive() => {
                let _ = nix::sys::signal::kill(Pid::from_raw(self.info.pid), signal);
            }
            None => {}
        }
    }
}

/// Ends `found` as a group is ended: TERM (+CONT), KILL after `grace`, then waits
/// for the kernel; each process is signalled alone (an escaped process may lead
/// a group of its own, with members that are not provably the session's).
pub async fn kill_escaped(found: Vec<ProcInfo>, grace: Duration) -> Vec<Escaped> {
    let targets: Vec<Target> = found.into_iter().filter_map(Target::new).collect();
    if targets.is_empty() {
        return Vec::new();
    }
    for target in &targets {
        target.signal(Signal::SIGTERM);
        target.signal(Signal::SIGCONT);
    }
    let deadline = Instant::now() + grace;
    let mut killed_at: Option<Instant> = None;
    loop {
        // Orphans are clowder's to reap; until then a dead one is a zombie.
        reap_orphan_zombies(&[]);
        let live: Vec<&Target> = targets.iter().filter(|t| t.alive()).collect();
        if live.is_empty() {
            break;
        }
        let now = Instant::now();
        match killed_at {
            Some(at) if now.duration_since(at) > KILL_SETTLE => break,
            Some(_) => {}
            None if now >= deadline => {
                for target in live {
                    target.signal(Signal::SIGKILL);
                }
                killed_at = Some(now);
            }
            None => {}
        }
        sleep(GROUP_POLL).await;
    }
    targets
        .iter()
        .map(|target| Escaped {
            pid: target.info.pid,
            command: target.command.clone(),
            killed: !target.alive(),
        })
        .collect()
}

fn terminate(pgid: i32) {
    signal_group(pgid, Signal::SIGTERM);
    // A stopped process does not run its TERM handler until it is continued.
    signal_group(pgid, Signal::SIGCONT);
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_of_self_parses() {
        let me = std::process::id() as i32;
        let info = read_proc_stat(me).expect("own stat");
        assert_eq!(info.pid, me);
        assert!(matches!(info.state, 'R' | 'S'), "{info:?}");
        assert_eq!(info.pgid, nix::unistd::getpgrp().as_raw());
        assert!(info.start_ticks > 0, "{info:?}");
        let child = std::process::Command::new("sleep")
            .arg("5")
            .env("CLOWDER_TEST_MARK", "yes")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        let mut child = child;
        let info_child = read_proc_stat(pid).expect("child stat");
        assert!(info_child.start_ticks >= info.start_ticks);
        // Until the child has exec'd, /proc shows the parent's environment: poll.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !environ_has(pid, "CLOWDER_TEST_MARK", "yes") && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(environ_has(pid, "CLOWDER_TEST_MARK", "yes"));
        assert!(!environ_has(pid, "CLOWDER_TEST_MARK", "no"));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn descent_follows_parents_and_stops_at_init_and_loops() {
        let parents = HashMap::from([(10, 5), (11, 10), (12, 1), (20, 21), (21, 20)]);
        assert!(descends_from(11, 5, &parents));
        assert!(descends_from(10, 5, &parents));
        assert!(!descends_from(12, 5, &parents));
        assert!(!descends_from(20, 5, &parents), "a cycle ends");
        assert!(!descends_from(99, 5, &parents));
    }

    #[test]
    fn only_descendants_with_the_session_environment_are_found() {
        use std::os::unix::process::CommandExt;
        let me = std::process::id() as i32;
        // No process group has id 0: here no process is in the session's group.
        let no_group = 0;
        let since = read_proc_stat(me).expect("own stat").start_ticks;
        let spawn = |value: &str| {
            std::process::Command::new("sleep")
                .arg("30")
                .env(TOKEN_ENV, value)
                .process_group(0)
                .spawn()
                .expect("spawn sleep")
        };
        let mut ours = spawn("/tmp/clowder-test-session-a.jsonl");
        let mut other = spawn("/tmp/clowder-test-session-b.jsonl");
        let (ours_pid, other_pid) = (ours.id() as i32, other.id() as i32);
        // Until a child has exec'd, /proc shows the parent's environment: poll.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut found = Vec::new();
        while std::time::Instant::now() < deadline {
            found = find_escaped(me, no_group, "/tmp/clowder-test-session-a.jsonl", since)
                .into_iter()
                .map(|p| p.pid)
                .collect();
            if found.contains(&ours_pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(found.contains(&ours_pid), "{found:?}");
        assert!(!found.contains(&other_pid), "{found:?}");
        // Started before `since`: not the session's, whatever its environment.
        let later = read_proc_stat(ours_pid).expect("stat").start_ticks + 1;
        let none = find_escaped(me, no_group, "/tmp/clowder-test-session-a.jsonl", later);
        assert!(none.iter().all(|p| p.pid != ours_pid), "{none:?}");
        // In the session's own group: the group kill's business, not an escape.
        let in_group = find_escaped(me, ours_pid, "/tmp/clowder-test-session-a.jsonl", since);
        assert!(in_group.iter().all(|p| p.pid != ours_pid), "{in_group:?}");
        for child in [&mut ours, &mut other] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

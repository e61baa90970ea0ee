//! Per-session cgroups (v2): where clowder may write a cgroup2 hierarchy, each
//! session and hook runs in a cgroup of its own, ended with `cgroup.kill` as
//! systemd's `KillMode=control-group` does, so no process escapes by `setsid` or
//! by clearing its environment. Elsewhere the process group plus the session's
//! token (`CLOWDER_SESSION`) is the fallback; `CLOWDER_KILL_METHOD=group` forces it.
//!
//! The tree is `<own cgroup>/clowder-<pid>/<name>`: several clowders each have
//! their own `clowder-<pid>`, and touch no other one except to remove an empty
//! one whose clowder is dead.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::{Instant, sleep};

/// The environment variable that forces a kill method (`group` or `cgroup`).
pub const KILL_METHOD_ENV: &str = "CLOWDER_KILL_METHOD";
/// How long a killed cgroup may take to empty before it is left behind.
const EMPTY_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

/// How the processes of a session are ended.
#[derive(Debug, Clone)]
pub enum KillMethod {
    /// Every session in a cgroup under `root` (this clowder's `clowder-<pid>`).
    Cgroup { root: PathBuf },
    /// Process group plus the `CLOWDER_SESSION` token; `why` says why not cgroups.
    GroupToken { why: String },
}

impl KillMethod {
    /// The name used in `--dry-run` and the `loop_start` event.
    pub fn name(&self) -> &'static str {
        match self {
            KillMethod::Cgroup { .. } => "cgroup",
            KillMethod::GroupToken { .. } => "group+token",
        }
    }

    /// Where (the cgroup tree) or why not (the reason for the fallback).
    pub fn detail(&self) -> String {
        match self {
            KillMethod::Cgroup { root } => root.display().to_string(),
            KillMethod::GroupToken { why } => why.clone(),
        }
    }

    /// The kill method of one lane of a fleet: its sessions and hooks get cgroups
    /// in a subtree of their own, so that two lanes' `session-1` never meet.
    pub fn for_lane(&self, lane: &str) -> KillMethod {
        match self {
            KillMethod::Cgroup { root } => {
                let root = root.join(format!("lane-{lane}"));
                match std::fs::create_dir(&root) {
                    Ok(()) => KillMethod::Cgroup { root },
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                        KillMethod::Cgroup { root }
                    }
                    Err(err) => KillMethod::GroupToken {
                        why: format!("cannot create {}: {err}", root.display()),
                    },
                }
            }
            KillMethod::GroupToken { why } => KillMethod::GroupToken { why: why.clone() },
        }
    }

    /// Creates the cgroup `name` for one session or hook; `None` without cgroups.
    pub fn create(&self, name: &str) -> io::Result<Option<PathBuf>> {
        match self {
            KillMethod::Cgroup { root } => {
                let dir = root.join(name);
                match std::fs::create_dir(&dir) {
                    Ok(()) => Ok(Some(dir)),
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(Some(dir)),
                    Err(err) => Err(err),
                }
            }
            KillMethod::GroupToken { .. } => Ok(None),
        }
    }

    /// Removes this clowder's own tree at exit (only what is empty).
    pub fn teardown(&self) {
        if let KillMethod::Cgroup { root } = self {
            remove_tree(root);
        }
    }
}

/// The cgroup2 mount point, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    cgroup2_mount_in(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
}

fn cgroup2_mount_in(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let mount_point = left.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(unescape_mountinfo(mount_point)))
    })
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape_mountinfo(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// This process's own cgroup2 directory (the `0::` line of `/proc/self/cgroup`).
fn own_cgroup_dir() -> Result<PathBuf, String> {
    let mount = cgroup2_mount().ok_or("no cgroup2 file system is mounted")?;
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|err| format!("cannot read /proc/self/cgroup: {err}"))?;
    let own = text
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or("this process is in no cgroup2 cgroup")?;
    let own = own.trim_matches('/');
    Ok(if own.is_empty() {
        mount
    } else {
        mount.join(own)
    })
}

/// What `--dry-run` says: the method a loop started now would try, without
/// creating anything.
pub fn describe() -> String {
    if forced_group() {
        return format!("group+token ({KILL_METHOD_ENV}=group)");
    }
    match own_cgroup_dir() {
        Ok(dir) if nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok() => {
            format!("cgroup (under {})", dir.display())
        }
        Ok(dir) => format!("group+token ({} is not writable)", dir.display()),
        Err(why) => format!("group+token ({why})"),
    }
}

fn forced_group() -> bool {
    std::env::var(KILL_METHOD_ENV).is_ok_and(|v| v == "group" || v == "group+token")
}

/// Chooses the kill method for this run: creates `clowder-<pid>` and proves
/// with a short-lived child that a process can be moved into a cgroup under
/// it. Stale `clowder-<pid>` trees of dead clowders are removed where empty.
pub fn setup() -> KillMethod {
    if forced_group() {
        return KillMethod::GroupToken {
            why: format!("{KILL_METHOD_ENV}=group"),
        };
    }
    match try_setup() {
        Ok(root) => KillMethod::Cgroup { root },
        Err(why) => KillMethod::GroupToken { why },
    }
}

/// The tree [`setup`] made for this clowder's sessions, when it made one: other
/// commands of this run that must be contained as sessions are get cgroups in it.
pub fn this_run_tree() -> Option<PathBuf> {
    if forced_group() {
        return None;
    }
    let root = own_cgroup_dir()
        .ok()?
        .join(format!("clowder-{}", std::process::id()));
    root.is_dir().then_some(root)
}

fn try_setup() -> Result<PathBuf, String> {
    let own = own_cgroup_dir()?;
    remove_stale_trees(&own);
    let root = own.join(format!("clowder-{}", std::process::id()));
    // A tree left by a dead clowder that had this pid: reuse what can be reused.
    remove_tree(&root);
    if let Err(err) = std::fs::create_dir(&root)
        && err.kind() != io::ErrorKind::AlreadyExists
    {
        return Err(format!("cannot create {}: {err}", root.display()));
    }
    let probe = root.join("probe");
    let proved = prove_move(&probe);
    let _ = std::fs::remove_dir(&probe);
    if let Err(why) = proved {
        remove_tree(&root);
        return Err(why);
    }
    Ok(root)
}

fn prove_move(probe: &Path) -> Result<(), String> {
    std::fs::create_dir(probe)
        .map_err(|err| format!("cannot create {}: {err}", probe.display()))?;
    if !probe.join("cgroup.kill").exists() {
        return Err("the kernel has no cgroup.kill (Linux 5.14 or later)".into());
    }
    let mut command = std::process::Command::new("true");
    join_on_exec(&mut command, probe)
        .map_err(|err| format!("cannot prepare a move into {}: {err}", probe.display()))?;
    let status = command
        .status()
        .map_err(|err| format!("cannot move a process into {}: {err}", probe.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("a test process in {} failed", probe.display()))
    }
}

/// Removes the `clowder-<pid>` trees under `own` whose clowder is dead and
/// which are empty; a populated one holds an abandoned session, which the
/// next start in its own folder ends.
fn remove_stale_trees(own: &Path) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("clowder-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() as i32 && !Path::new(&format!("/proc/{pid}")).exists() {
            remove_tree(&entry.path());
        }
    }
}

/// Removes a cgroup and its empty descendants, deepest first; a populated
/// cgroup stays (rmdir refuses it).
pub fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Arranges for `command`'s child to move itself into `cgroup` before it
/// execs, so that nothing it starts is ever outside it.
pub fn join_on_exec(command: &mut std::process::Command, cgroup: &Path) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let procs = cgroup_procs_path(cgroup)?;
    // SAFETY: between fork and exec the closure calls only open, write and close,
    // which are async-signal-safe, on a path prepared before the fork.
    unsafe {
        command.pre_exec(move || join_self(&procs));
    }
    Ok(())
}

/// The `cgroup.procs` file of `cgroup`, as a C string for [`join_self`].
pub fn cgroup_procs_path(cgroup: &Path) -> io::Result<CString> {
    CString::new(cgroup.join("cgroup.procs").as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a cgroup path holds a NUL byte"))
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`
/// ("0" names the writer). Only async-signal-safe calls: for `pre_exec`.
pub fn join_self(procs: &CString) -> io::Result<()> {
    // SAFETY: open/write/close on a valid NUL-terminated path and a static buffer.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(err);
        }
    }
    Ok(())
}

/// The live processes of `cgroup` and of its descendants.
pub fn members(cgroup: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_to_string(cgroup.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if let Ok(entries) = std::fs::read_dir(cgroup) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pids.extend(members(&entry.path()));
            }
        }
    }
    pids
}

/// SIGKILLs every process of `cgroup` and its descendants (`cgroup.kill`),
/// waits for it to empty and removes it. Returns how many processes were in it.
pub async fn kill_and_remove(cgroup: &Path) -> usize {
    let found = members(cgroup).len();
    if found > 0
        && let Err(err) = std::fs::write(cgroup.join("cgroup.kill"), "1")
    {
        tracing::warn!("cgroup.kill in {}: {err}", cgroup.display());
    }
    let deadline = Instant::now() + EMPTY_WAIT;
    while !members(cgroup).is_empty() && Instant::now() < deadline {
        // Orphans come to clowder (their subreaper) as zombies: reap them.
        super::reaper::reap_orphans();
        sleep(POLL).await;
    }
    remove_tree(cgroup);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_among_v1_mounts() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu
";
        assert_eq!(
            cgroup2_mount_in(mountinfo),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount_in("32 30 0:28 / /x rw - cgroup cgroup rw\n"),
            None
        );
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo("/a\\040b\\134c"), "/a b\\c");
    }
}

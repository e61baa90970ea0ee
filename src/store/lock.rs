//! One loop per folder: `.clowder/lock`, held with `flock` for as long as the
//! loop runs, with the holder's PID written in it.
//!
//! The kernel drops the lock when the process dies, however it dies, so a crash
//! never leaves a stale lock behind. The file is opened close-on-exec: neither
//! the agent nor a hook inherits it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

pub use super::paths::STATE_DIR;
/// The lock file, in [`STATE_DIR`].
pub const LOCK_FILE: &str = "lock";

/// Why the lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it; its PID if the file names one.
    Held {
        path: PathBuf,
        pid: Option<u32>,
    },
    Io {
        path: PathBuf,
        error: io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { path, pid } => {
                let holder =
                    pid.map_or_else(|| "another process".to_string(), |pid| format!("PID {pid}"));
                write!(
                    f,
                    "another clowder loop is already running in this folder ({holder} holds {})",
                    path.display()
                )
            }
            LockError::Io { path, error } => {
                write!(f, "cannot take the lock {}: {error}", path.display())
            }
        }
    }
}

/// How many times (50 ms apart) to try again while the PID in the lock file is
/// not a live process.
const HOLDER_GONE_RETRIES: u32 = 40;

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct InstanceLock {
    file: File,
    path: PathBuf,
}

impl InstanceLock {
    /// Takes `working_dir/.clowder/lock` without waiting, creating `.clowder`
    /// (mode 0700) if needed, and writes this process's PID in it.
    pub fn acquire(working_dir: &Path) -> Result<InstanceLock, LockError> {
        InstanceLock::acquire_file(&super::paths::state_dir(working_dir).join(LOCK_FILE))
    }

    /// Takes the lock file `path` as [`InstanceLock::acquire`] does, creating
    /// its folder (mode 0700) if needed: a fleet's lane holds one of its own.
    pub fn acquire_file(path: &Path) -> Result<InstanceLock, LockError> {
        let path = path.to_path_buf();
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let io_error = |error| LockError::Io {
            path: path.clone(),
            error,
        };
        if !dir.is_dir() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(io_error)?;
        }
        // Not truncated on open: until the lock is ours, the holder's PID is in it.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_error)?;
        // A holder that is gone may still have the lock for a moment: a child it
        // was forking shares the open file until that child execs (or exits).
        let mut attempts_left = HOLDER_GONE_RETRIES;
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is passed.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io_error(error));
            }
            let mut text = String::new();
            let _ = file.seek(SeekFrom::Start(0));
            let _ = file.read_to_string(&mut text);
            let pid: Option<u32> = text.trim().parse().ok();
            let holder_alive = pid.is_some_and(process_is_running);
            if holder_alive || attempts_left == 0 {
                return Err(LockError::Held { pid, path });
            }
            attempts_left -= 1;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut lock = InstanceLock {
            file,
            path: path.clone(),
        };
        lock.write_holder().map_err(io_error)?;
        Ok(lock)
    }

    /// Writes this process's PID as the holder's: after a fork, the process
    /// that goes on holds the lock (the open file is shared).
    pub fn write_holder(&mut self) -> io::Result<()> {
        let pid = format!("{}\n", std::process::id());
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(pid.as_bytes())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes this process's PID into the lock file of `working_dir`, which it
/// holds through an open file a fork shared with it (see
/// [`InstanceLock::write_holder`]). Best effort: the PID only informs.
pub fn record_holder(working_dir: &Path) {
    let path = super::paths::state_dir(working_dir).join(LOCK_FILE);
    if let Ok(mut file) = OpenOptions::new().write(true).open(path) {
        let _ = file.set_len(0);
        let _ = file.write_all(format!("{}\n", std::process::id()).as_bytes());
    }
}

/// Whether a live process holds the lock file `path`, without creating it or
/// its folder (a probe from outside, e.g. the gate in an agent's folder).
pub fn is_held(path: &Path) -> bool {
    let Ok(file) = OpenOptions::new().read(true).open(path) else {
        return false;
    };
    // A shared lock is refused while anyone holds the exclusive one.
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// Whether `pid` is a live process (a zombie holds no files any more).
fn process_is_running(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(crate::proc_stat::read_proc_stat)
        .is_some_and(|info| info.is_live())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_sees_a_held_lock_and_creates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(STATE_DIR).join(LOCK_FILE);
        assert!(!is_held(&path));
        assert!(!dir.path().join(STATE_DIR).exists());
        let lock = InstanceLock::acquire(dir.path()).expect("lock");
        assert!(is_held(&path));
        drop(lock);
        assert!(!is_held(&path));
    }

    #[test]
    fn a_second_lock_in_the_same_folder_is_refused_with_the_holder_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = InstanceLock::acquire(dir.path()).expect("first");
        let text = std::fs::read_to_string(first.path()).expect("read");
        assert_eq!(text.trim(), std::process::id().to_string());
        // flock locks belong to the open file: a second open conflicts even in one process.
        match InstanceLock::acquire(dir.path()) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        InstanceLock::acquire(dir.path()).expect("free again once dropped");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(STATE_DIR))
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}

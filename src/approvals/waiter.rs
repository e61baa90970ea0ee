//! A waiting producer's doorbell and proof of life: a Unix datagram socket bound at
//! `waiting/<id>.sock` for exactly as long as the producer waits.
//!
//! Whoever writes a decision rings the bell of that one request (one datagram), so a
//! waiter sleeps until its own decision comes, whatever happens to the other
//! requests, and needs no inotify instance (there are 128 per user by default). The
//! kernel closes the socket when its process dies, however it dies: connecting to it
//! is then refused, which is how a request whose waiter is gone is told from a live
//! one. A reused pid cannot revive it.
//!
//! A socket is bound through `/proc/self/fd/<dir>/<name>`: the queue's own
//! directory handle, whatever the length of the folder's path (a socket path is
//! limited to 107 bytes). One that is rung or probed is first opened by itself
//! (`O_PATH`, never through a symbolic link) and checked to be a socket of this
//! user, then reached through `/proc/self/fd/<that fd>`: the very file checked,
//! so a `waiting/<id>.sock` replaced by a link to a socket elsewhere is not rung.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};

use super::safe_read::DirHandle;

/// Whether the process that asked for a request still waits for the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Its socket answers.
    Waiting,
    /// Its socket is there but nobody holds it: the waiter died.
    Gone,
    /// No socket (a producer that does not use one): assumed to wait.
    Unknown,
}

/// The bound socket of one waiting request; unlinked when dropped.
pub struct Doorbell {
    socket: UnixDatagram,
    waiting: DirHandle,
    name: String,
}

fn socket_name(id: &str) -> String {
    format!("{id}.sock")
}

fn through_proc(dir: &DirHandle, name: &str) -> PathBuf {
    PathBuf::from(format!(
        "/proc/self/fd/{}/{name}",
        dir.fd().as_fd().as_raw_fd()
    ))
}

impl Doorbell {
    /// Binds the socket of request `id` in `waiting` (the queue's `waiting/`).
    pub fn bind(waiting: DirHandle, id: &str) -> io::Result<Doorbell> {
        let name = socket_name(id);
        let socket = UnixDatagram::bind(through_proc(&waiting, &name))?;
        Ok(Doorbell {
            socket,
            waiting,
            name,
        })
    }

    /// Sleeps until the bell rings, a signal arrives, or `nap` has passed; then
    /// takes every ring already queued, so a burst wakes the waiter once.
    pub fn nap(&self, nap: Duration) {
        let nap = nap.max(Duration::from_millis(1));
        let mut buf = [0u8; 16];
        if self.socket.set_read_timeout(Some(nap)).is_ok() {
            // A ring, a timeout or EINTR (a socket with a timeout is never restarted
            // after a signal): each ends the nap, and the caller looks again.
            let _ = self.socket.recv(&mut buf);
        } else {
            std::thread::sleep(nap);
        }
        if self.socket.set_nonblocking(true).is_ok() {
            while self.socket.recv(&mut buf).is_ok() {}
            let _ = self.socket.set_nonblocking(false);
        }
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        let _ = nix::unistd::unlinkat(
            self.waiting.fd(),
            self.name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
}

/// What `waiting/<id>.sock` is, opened by itself.
enum SocketFile {
    Missing,
    /// Not a socket of this user: a symbolic link, another file, another
    /// user's socket. Never rung, never probed.
    Foreign,
    Ours(OwnedFd),
}

fn open_socket(waiting: &DirHandle, id: &str) -> SocketFile {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match openat(waiting.fd(), socket_name(id).as_str(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return SocketFile::Missing,
        Err(_) => return SocketFile::Foreign,
    };
    let Ok(stat) = fstat(&fd) else {
        return SocketFile::Foreign;
    };
    let is_socket =
        SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFSOCK;
    if is_socket && stat.st_uid == nix::unistd::geteuid().as_raw() {
        SocketFile::Ours(fd)
    } else {
        SocketFile::Foreign
    }
}

fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Rings the bell of request `id`, if someone waits on it; never blocks.
pub fn ring(waiting: &DirHandle, id: &str) {
    let SocketFile::Ours(file) = open_socket(waiting, id) else {
        return;
    };
    let Ok(socket) = UnixDatagram::unbound() else {
        return;
    };
    if socket.set_nonblocking(true).is_ok() {
        let _ = socket.send_to(b"!", fd_path(&file));
    }
}

/// Whether request `id`'s waiter is alive. Connecting sends nothing: the waiter
/// does not wake.
pub fn liveness(waiting: &DirHandle, id: &str) -> Liveness {
    let SocketFile::Ours(file) = open_socket(waiting, id) else {
        return Liveness::Unknown;
    };
    let Ok(socket) = UnixDatagram::unbound() else {
        return Liveness::Unknown;
    };
    match socket.connect(fd_path(&file)) {
        Ok(()) => Liveness::Waiting,
        Err(err) if err.raw_os_error() == Some(libc::ECONNREFUSED) => Liveness::Gone,
        Err(_) => Liveness::Unknown,
    }
}

/// The request ids among the file names of `waiting/`.
pub fn socket_ids(names: impl IntoIterator<Item = String>) -> Vec<String> {
    names
        .into_iter()
        .filter_map(|name| name.strip_suffix(".sock").map(str::to_string))
        .filter(|id| super::valid_id(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_bell_is_alive_and_a_dropped_one_is_not_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let handle = || DirHandle::open(dir.path()).expect("open");
        let bell = Doorbell::bind(handle(), "abc").expect("bind");
        assert_eq!(liveness(&handle(), "abc"), Liveness::Waiting);
        ring(&handle(), "abc");
        let started = std::time::Instant::now();
        bell.nap(Duration::from_secs(30));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the ring woke it"
        );
        drop(bell);
        assert_eq!(liveness(&handle(), "abc"), Liveness::Unknown);
        assert!(!dir.path().join("abc.sock").exists());
    }

    #[test]
    fn a_socket_nobody_holds_is_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("dead.sock");
        // A socket left behind by a process that died: bound, then closed.
        drop(UnixDatagram::bind(&path).expect("bind"));
        let handle = DirHandle::open(dir.path()).expect("open");
        assert_eq!(liveness(&handle, "dead"), Liveness::Gone);
        std::fs::write(dir.path().join("file.sock"), b"x").expect("write");
        assert_eq!(liveness(&handle, "file"), Liveness::Unknown);
    }

    #[test]
    fn a_link_in_place_of_a_socket_is_neither_rung_nor_probed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let target = elsewhere.path().join("victim.sock");
        let victim = UnixDatagram::bind(&target).expect("bind");
        victim.set_nonblocking(true).expect("nonblocking");
        std::os::unix::fs::symlink(&target, dir.path().join("abc.sock")).expect("symlink");
        let handle = DirHandle::open(dir.path()).expect("open");
        assert_eq!(liveness(&handle, "abc"), Liveness::Unknown);
        ring(&handle, "abc");
        let mut buf = [0u8; 4];
        assert!(victim.recv(&mut buf).is_err(), "the linked socket was rung");
    }
}

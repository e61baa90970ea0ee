//! Reading a queue file without trusting it: relative to an open directory, never
//! through a symbolic link, never from a FIFO or device (no blocking open), never a
//! hard-linked file, never more than [`MAX_FILE_BYTES`].

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

/// The largest request or decision file read: room for a whole hook input
/// (at most 1 MiB) as a request, and for its finished record.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A directory of the queue, held open so every file is looked up inside it.
pub struct DirHandle {
    fd: OwnedFd,
}

impl DirHandle {
    /// Opens `path` as a directory; a symbolic link in its last component is refused.
    pub fn open(path: &Path) -> nix::Result<DirHandle> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(DirHandle { fd })
    }

    pub fn fd(&self) -> impl AsFd + '_ {
        self.fd.as_fd()
    }

    /// The bytes of the regular file `name` in this directory, or why it was refused.
    /// `Ok(None)`: there is no such file.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let stat = match fstatat(
            self.fd.as_fd(),
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => stat,
            Err(nix::errno::Errno::ENOENT) => return Ok(None),
            Err(err) => return Err(format!("cannot inspect: {err}")),
        };
        check_stat(&stat)?;
        let fd = match openat(
            self.fd.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => return Ok(None),
            Err(nix::errno::Errno::ELOOP) => return Err("a symbolic link".into()),
            Err(err) => return Err(format!("cannot open: {err}")),
        };
        let opened = fstat(fd.as_fd()).map_err(|err| format!("cannot inspect: {err}"))?;
        // What was opened must be what was inspected (no swap in between).
        if opened.st_ino != stat.st_ino || opened.st_dev != stat.st_dev {
            return Err("replaced while being read".into());
        }
        check_stat(&opened)?;
        let mut bytes = Vec::new();
        File::from(fd)
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| format!("cannot read: {err}"))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
        }
        Ok(Some(bytes))
    }
}

fn check_stat(stat: &FileStat) -> Result<(), String> {
    let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
    let what = match kind {
        SFlag::S_IFREG => None,
        SFlag::S_IFLNK => Some("a symbolic link"),
        SFlag::S_IFDIR => Some("a directory"),
        SFlag::S_IFIFO => Some("a FIFO"),
        SFlag::S_IFSOCK => Some("a socket"),
        SFlag::S_IFCHR | SFlag::S_IFBLK => Some("a device"),
        _ => Some("not a regular file"),
    };
    if let Some(what) = what {
        return Err(format!("{what}, not a regular file"));
    }
    if stat.st_nlink != 1 {
        return Err(format!("a hard link ({} links)", stat.st_nlink));
    }
    if stat.st_size < 0 || stat.st_size as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    Ok(())
}

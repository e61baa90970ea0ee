//! Reading a config or state file without trusting what its path leads to: a
//! regular file only, never more than [`MAX_BYTES`]. A FIFO would hang the reader
//! and `/dev/zero` would fill the memory; both are refused with an error that says
//! what was found. Drop-in for `std::fs::read` and `std::fs::read_to_string`: a
//! missing file is still `NotFound`, which callers take as "no file yet".

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest config or state file read; clowder's own are kilobytes.
pub const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of the regular file at `path` (a symbolic link to one is fine).
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    if file.metadata()?.len() > MAX_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    // A file that grows while it is read stops at the limit all the same.
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Opens `path` for reading if it is a regular file, without waiting on a FIFO.
pub fn open(path: &Path) -> io::Result<File> {
    // Non-blocking: opening a FIFO with no writer would wait for one forever.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("something else")
    };
    if let Some(what) = what {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what}, not a regular file"),
        ));
    }
    Ok(file)
}

/// As [`read`], for UTF-8 text.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|err| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid bytes at offset {})",
                err.utf8_error().valid_up_to()
            ),
        )
    })
}

/// The last `max` bytes of the regular file at `path`, as text (invalid UTF-8
/// replaced, a first line cut mid-way kept): the end of a log or an output file,
/// however large it has grown.
pub fn tail(path: &Path, max: u64) -> io::Result<String> {
    let mut file = open(path)?;
    let length = file.metadata()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(max)))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than {} MiB", MAX_BYTES / (1024 * 1024)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_small_regular_file_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.toml");
        std::fs::write(&file, "x = 1\n").expect("write");
        assert_eq!(read_to_string(&file).expect("read"), "x = 1\n");
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert_eq!(read_to_string(&link).expect("read"), "x = 1\n");
        let missing = read(&dir.path().join("none")).expect_err("missing");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let refused = read(&fifo).expect_err("fifo");
        assert!(refused.to_string().contains("a FIFO"), "{refused}");
        let zero = read(Path::new("/dev/zero")).expect_err("device");
        assert!(zero.to_string().contains("a device"), "{zero}");
        let folder = read(dir.path()).expect_err("folder");
        assert!(folder.to_string().contains("a folder"), "{folder}");

        let big = dir.path().join("big");
        let handle = File::create(&big).expect("create");
        handle.set_len(MAX_BYTES + 1).expect("grow");
        let large = read(&big).expect_err("large");
        assert!(large.to_string().contains("larger than 4 MiB"), "{large}");
        let invalid = dir.path().join("bad");
        std::fs::write(&invalid, b"ok\xff").expect("write");
        let text = read_to_string(&invalid).expect_err("utf-8");
        assert!(text.to_string().contains("offset 2"), "{text}");
    }
}

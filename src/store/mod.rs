//! Everything clowder keeps on disk: the status file, the event log and the global
//! iteration counter. Each owns its format; writers never truncate what a reader
//! may need.

pub mod control;
pub mod counter;
pub mod events;
pub mod lock;
pub mod notes;
pub mod paths;
pub mod running;
pub mod small_file;
pub mod spend;
pub mod status;
pub mod status_pointer;
pub mod versioned;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Random characters in a temp file's name: `.{file}.XXXXXX.tmp`.
const TEMP_RANDOM_LEN: usize = 6;
const TEMP_SUFFIX: &str = ".tmp";

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

fn temp_prefix(path: &Path) -> String {
    format!(
        ".{}.",
        path.file_name()
            .map_or_else(|| "clowder".into(), |n| n.to_string_lossy())
    )
}

/// Writes `bytes` to `path` so that a reader sees the old content or the new, never
/// a mix: a temp file in the same directory, fsync, rename over, fsync the directory.
///
/// A process killed between the temp file's creation and the rename leaves the
/// temp file behind; [`remove_interrupted_writes`] clears those.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// As [`write_atomically`], without waiting for the disk: for a file that only
/// shows what the process knows and is written again at every start (the status
/// file). A reader still sees the old content or the new; after a power cut the
/// file may be the old one, or empty. A busy session refreshes it every few
/// seconds, and two fsyncs each time cost more than everything else it does.
pub fn replace_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let dir = parent_dir(path);
    let mut temp = tempfile::Builder::new()
        .prefix(&temp_prefix(path))
        .rand_bytes(TEMP_RANDOM_LEN)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    if durable {
        temp.as_file().sync_all()?;
    }
    temp.persist(path).map_err(|err| err.error)?;
    if durable {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Deletes the temp files that interrupted [`write_atomically`] calls for `path`
/// left next to it (`.{file}.XXXXXX.tmp`) and returns how many there were. A
/// SIGKILL cannot be caught, so the writer cannot clean up after itself: the next
/// start does. Only for files no other process writes meanwhile (clowder holds the
/// instance lock): another writer's temp file in flight would be taken from it.
pub fn remove_interrupted_writes(path: &Path) -> io::Result<usize> {
    remove_interrupted_writes_before(path, std::time::SystemTime::now() + ONE_DAY)
}

const ONE_DAY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// As [`remove_interrupted_writes`], only the temp files last written before
/// `before`: for a file that others write too, whose temp file in flight is
/// seconds old at most.
pub fn remove_interrupted_writes_before(
    path: &Path,
    before: std::time::SystemTime,
) -> io::Result<usize> {
    let prefix = temp_prefix(path);
    let entries = match std::fs::read_dir(parent_dir(path)) {
        Ok(entries) => entries,
        // No directory, so no file and no temp file either.
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let is_ours = name
            .to_str()
            .and_then(|name| name.strip_prefix(&prefix)?.strip_suffix(TEMP_SUFFIX))
            .is_some_and(|random| {
                random.len() == TEMP_RANDOM_LEN && random.bytes().all(|b| b.is_ascii_alphanumeric())
            });
        if !is_ours || !entry.file_type()?.is_file() {
            continue;
        }
        match entry.metadata().and_then(|meta| meta.modified()) {
            Ok(written) if written < before => {}
            _ => continue,
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => removed += 1,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_temp_files_of_the_named_file_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = dir.path().join("harness.status");
        write_atomically(&status, b"{}").expect("write");
        let keep = [
            "harness.status",
            ".harness.status.tmp",
            ".harness.status.abc.tmp",
            ".harness.status.abcdefg.tmp",
            ".harness.status.ab-def.tmp",
            ".other.abcdef.tmp",
            "harness.status.abcdef.tmp",
        ];
        for name in &keep[1..] {
            std::fs::write(dir.path().join(name), "x").expect("write");
        }
        // What a write killed before its rename leaves behind.
        let left = tempfile::Builder::new()
            .prefix(&temp_prefix(&status))
            .rand_bytes(TEMP_RANDOM_LEN)
            .suffix(TEMP_SUFFIX)
            .tempfile_in(dir.path())
            .expect("temp")
            .into_temp_path()
            .keep()
            .expect("keep");
        std::fs::create_dir(dir.path().join(".harness.status.Dir123.tmp")).expect("mkdir");
        assert_eq!(remove_interrupted_writes(&status).expect("remove"), 1);
        assert!(!left.exists());
        for name in keep {
            assert!(dir.path().join(name).exists(), "{name} was removed");
        }
        assert!(dir.path().join(".harness.status.Dir123.tmp").is_dir());
        assert_eq!(
            remove_interrupted_writes(&dir.path().join("missing/harness.status")).expect("none"),
            0
        );
    }
}

//! Everything clowder keeps on disk: the status file, the event log and the global
//! iteration counter. Each owns its format; writers never truncate what a reader
//! may need.

pub mod counter;
pub mod events;
pub mod lock;
pub mod status;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` so that a reader sees the old content or the new, never
/// a mix: a temp file in the same directory, fsync, rename over, fsync the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(
            ".{}.",
            path.file_name()
                .map_or_else(|| "clowder".into(), |n| n.to_string_lossy())
        ))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

//! The approval queue's directory, read-only for now: what is pending.

use std::path::Path;

/// Where requests wait, relative to the working directory.
pub const DEFAULT_DIR: &str = ".clowder/approvals";

/// The names of the pending requests (sorted), and whether the queue exists at all.
pub fn list_pending(dir: &Path) -> (bool, Vec<String>) {
    let pending = dir.join("pending");
    let Ok(entries) = std::fs::read_dir(&pending) else {
        return (dir.is_dir(), Vec::new());
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    (true, names)
}

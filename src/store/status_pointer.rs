//! `.clowder/status-file`: where the loop last started in this folder writes its
//! status, so that a plain `clowder --status` finds a loop started with `-c`.

use std::path::{Path, PathBuf};

/// The pointer's name in `.clowder/`.
pub const POINTER_FILE: &str = "status-file";

fn pointer(working_dir: &Path) -> PathBuf {
    super::paths::state_dir(working_dir).join(POINTER_FILE)
}

/// Records `status_file` (absolute) as the status of the loop starting in
/// `working_dir`. Only a convenience for `--status`: a failure is logged, not fatal.
pub fn record(working_dir: &Path, status_file: &Path) {
    let path = pointer(working_dir);
    let absolute = working_dir.join(status_file);
    let written = std::fs::create_dir_all(super::paths::state_dir(working_dir))
        .and_then(|()| super::replace_atomically(&path, absolute.as_os_str().as_encoded_bytes()));
    if let Err(err) = written {
        tracing::warn!("cannot write {}: {err}", path.display());
    }
}

/// The status file the last loop started in `working_dir` named, if it still exists.
pub fn recorded(working_dir: &Path) -> Option<PathBuf> {
    let text = super::small_file::read_to_string(&pointer(working_dir)).ok()?;
    let path = PathBuf::from(text.trim_end_matches('\n'));
    (path.is_absolute() && path.exists()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_status_file_is_found_while_it_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(recorded(dir.path()), None);
        record(dir.path(), Path::new("conf/loop.status"));
        assert_eq!(recorded(dir.path()), None, "no status file yet");
        std::fs::create_dir(dir.path().join("conf")).expect("mkdir");
        std::fs::write(dir.path().join("conf/loop.status"), "{}").expect("write");
        assert_eq!(
            recorded(dir.path()),
            Some(dir.path().join("conf/loop.status"))
        );
    }
}

//! Requests to a running loop from another terminal (`clowder pause`, `clowder
//! resume`): an empty file in `.clowder/` that the loop takes (removes) at its
//! next look, at most a second later, like the STOP file.

use std::io;
use std::path::{Path, PathBuf};

/// Pause the running session.
pub const PAUSE_REQUEST: &str = "pause";
/// Resume a paused session, or a loop held by a rejected session gate.
pub const RESUME_REQUEST: &str = "resume";

/// Where `request` is left for the loop in `working_dir`.
pub fn request_path(working_dir: &Path, request: &str) -> PathBuf {
    super::paths::state_dir(working_dir).join(request)
}

/// Leaves `request` for the loop in `working_dir`.
pub fn request(working_dir: &Path, request: &str) -> io::Result<PathBuf> {
    let path = request_path(working_dir, request);
    std::fs::write(&path, b"").map_err(|err| {
        io::Error::new(
            err.kind(),
            format!("cannot write {}: {err}", path.display()),
        )
    })?;
    Ok(path)
}

/// Takes `request` if it was left: true once per request.
pub fn take(working_dir: &Path, request: &str) -> bool {
    std::fs::remove_file(request_path(working_dir, request)).is_ok()
}

/// Takes `request` from `dir` itself (a fleet lane's files folder).
pub fn take_in(dir: &Path, request: &str) -> bool {
    std::fs::remove_file(dir.join(request)).is_ok()
}

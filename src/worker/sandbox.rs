//! Where the tools may touch: each allowed path opened once as a capability
//! ([`cap_std::fs::Dir`]); every tool path is resolved inside one of them, so `..`,
//! an absolute path elsewhere or a symlink leading out cannot reach anything else.
//!
//! Allowed paths are written relative to the task directory (or absolute). A tool
//! path names the allowed path it is in as its first components (`artifacts/a.md`),
//! and what follows must be plain names: the kernel-backed resolution in cap-std
//! then refuses any symlink that would leave the allowed directory.

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// Why a path cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PathError {
    /// Outside the allowed paths: a security violation.
    Forbidden(String),
    /// Inside, but the operation failed (missing file, not a directory, …).
    Failed(String),
}

struct Root {
    /// The allowed path as written in `task.json`, `.` components dropped.
    prefix: PathBuf,
    dir: Dir,
}

pub(crate) struct Sandbox {
    /// Longest prefix first, so that a nested allowed path wins.
    roots: Vec<Root>,
}

/// A resolved tool path: the allowed directory and the plain relative rest
/// (empty for the allowed directory itself).
pub(crate) struct Resolved<'a> {
    pub dir: &'a Dir,
    pub rest: PathBuf,
}

impl Sandbox {
    /// Opens every allowed path; each must be an existing directory.
    pub(crate) fn open(task_dir: &Path, allowed: &[String]) -> Result<Sandbox, String> {
        let mut roots = Vec::new();
        for path in allowed {
            let prefix = drop_cur_dir(Path::new(path));
            let dir = Dir::open_ambient_dir(task_dir.join(&prefix), ambient_authority()).map_err(
                |err| {
                    format!(
                        "allowed path {path:?} (relative to {}): {err}",
                        task_dir.display()
                    )
                },
            )?;
            roots.push(Root { prefix, dir });
        }
        roots.sort_by_key(|root| std::cmp::Reverse(root.prefix.components().count()));
        Ok(Sandbox { roots })
    }

    pub(crate) fn resolve(&self, path: &str) -> Result<Resolved<'_>, PathError> {
        if path.contains('\0') {
            return Err(PathError::Forbidden(format!(
                "path {path:?} holds a NUL byte"
            )));
        }
        let wanted = drop_cur_dir(Path::new(path));
        for root in &self.roots {
            let Ok(rest) = wanted.strip_prefix(&root.prefix) else {
                continue;
            };
            if !rest.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(PathError::Forbidden(format!(
                    "path {path:?}: `..` is not allowed inside an allowed path"
                )));
            }
            return Ok(Resolved {
                dir: &root.dir,
                rest: rest.to_path_buf(),
            });
        }
        Err(PathError::Forbidden(format!(
            "path {path:?} is outside the allowed paths ({})",
            self.prefixes().join(", ")
        )))
    }

    pub(crate) fn prefixes(&self) -> Vec<String> {
        self.roots
            .iter()
            .map(|root| match root.prefix.as_os_str().is_empty() {
                true => ".".to_string(),
                false => root.prefix.display().to_string(),
            })
            .collect()
    }
}

fn drop_cur_dir(path: &Path) -> PathBuf {
    let kept: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    kept
}

/// Sorts an error from cap-std: an escape attempt (a symlink leading out) is a
/// security violation, anything else an ordinary failure.
pub(crate) fn classify(path: &str, err: io::Error) -> PathError {
    let text = err.to_string();
    // cap-std reports every escape with this one message (cap-primitives `escape_attempt`).
    if err.kind() == io::ErrorKind::PermissionDenied && text.contains("outside of the filesystem") {
        PathError::Forbidden(format!("path {path:?} leads outside the allowed paths"))
    } else {
        PathError::Failed(format!("{path}: {text}"))
    }
}

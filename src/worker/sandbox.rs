//! Where the tools may touch: each allowed path opened once as a capability
//! ([`cap_std::fs::Dir`]); every tool path is resolved inside one of them, so `..`,
//! an absolute path elsewhere or a symlink leading out cannot reach anything else.
//!
//! Allowed paths are written relative to the task directory (or absolute). A tool
//! path names the allowed path it is in as its first components (`artifacts/a.md`),
//! and what follows must be plain names: the kernel-backed resolution in cap-std
//! then refuses any symlink that would leave the allowed directory.
//!
//! Inside, the tools touch regular files and folders only, each with one link: a
//! FIFO would hang the worker, a device node or a hard link reaches past the
//! allowed paths. The worker's own files (`task.json`, `state.json`, …, and its
//! config file) are never written, whatever the allowed paths.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::{Dir, FileTypeExt, Metadata, MetadataExt};

/// A tool path longer than this is refused: the kernel's own `PATH_MAX`, which a
/// folder made one level at a time would otherwise go past.
pub(crate) const MAX_PATH_BYTES: usize = 4096;

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

/// A name in one folder (known by its device and inode) that the tools never
/// write: the file itself, and the temporary files (`.NAME.…`) it is replaced through.
struct Guarded {
    dev: u64,
    ino: u64,
    name: OsString,
}

impl Guarded {
    fn covers(&self, name: &OsStr) -> bool {
        let name = name.as_encoded_bytes();
        let guarded = self.name.as_encoded_bytes();
        name == guarded
            || name
                .strip_prefix(b".")
                .and_then(|rest| rest.strip_prefix(guarded))
                .is_some_and(|rest| rest.starts_with(b"."))
    }
}

pub(crate) struct Sandbox {
    /// Longest prefix first, so that a nested allowed path wins.
    roots: Vec<Root>,
    guarded: Vec<Guarded>,
    /// The task directory as an absolute path, as given and with its links
    /// resolved: an absolute tool path inside it is taken as relative to it.
    task_dir: Vec<PathBuf>,
}

/// A resolved tool path: the allowed directory and the plain relative rest
/// (empty for the allowed directory itself).
pub(crate) struct Resolved<'a> {
    pub dir: &'a Dir,
    pub rest: PathBuf,
}

impl Sandbox {
    /// Opens every allowed path; each must be an existing directory, and not a
    /// symbolic link. `never_written`: the files the tools never write, whatever
    /// the allowed paths (the worker's own).
    pub(crate) fn open(
        task_dir: &Path,
        allowed: &[String],
        never_written: &[PathBuf],
    ) -> Result<Sandbox, String> {
        let mut roots = Vec::new();
        for path in allowed {
            let prefix = drop_cur_dir(Path::new(path));
            let dir = open_root(&task_dir.join(&prefix), prefix.as_os_str().is_empty()).map_err(
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
        let mut guarded = Vec::new();
        for file in never_written {
            let (Some(name), Some(parent)) = (file.file_name(), file.parent()) else {
                continue;
            };
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            // A file whose folder is not there cannot be written through it; an
            // existing folder is guarded.
            if let Ok(entry) = guard(parent, name) {
                guarded.push(entry);
            }
        }
        let mut task_dirs: Vec<PathBuf> = std::path::absolute(task_dir).into_iter().collect();
        task_dirs.extend(task_dir.canonicalize());
        task_dirs.dedup();
        Ok(Sandbox {
            roots,
            guarded,
            task_dir: task_dirs,
        })
    }

    pub(crate) fn resolve(&self, path: &str) -> Result<Resolved<'_>, PathError> {
        if path.contains('\0') {
            return Err(PathError::Forbidden(format!(
                "path {path:?} holds a NUL byte"
            )));
        }
        if path.len() > MAX_PATH_BYTES {
            return Err(PathError::Failed(format!(
                "path of {} bytes is over the {MAX_PATH_BYTES}-byte limit",
                path.len()
            )));
        }
        let wanted = drop_cur_dir(Path::new(path));
        // An absolute path is matched against absolute allowed paths, then, if it
        // is inside the task directory, as the relative path it names there.
        let relative = match wanted.is_absolute() {
            true => self
                .task_dir
                .iter()
                .find_map(|dir| wanted.strip_prefix(dir).ok())
                .map(Path::to_path_buf),
            false => None,
        };
        for wanted in std::iter::once(&wanted).chain(relative.as_ref()) {
            let roots = self
                .roots
                .iter()
                .filter(|root| root.prefix.is_absolute() == wanted.is_absolute());
            for root in roots {
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
        }
        Err(PathError::Forbidden(format!(
            "path {path:?} is outside the allowed paths ({})",
            self.prefixes().join(", ")
        )))
    }

    /// `Err(Forbidden)` when `name` in `dir` is one of the worker's own files.
    pub(crate) fn refuse_guarded(
        &self,
        dir: &Dir,
        name: &OsStr,
        path: &str,
    ) -> Result<(), PathError> {
        let meta = dir.dir_metadata().map_err(|err| classify(path, err))?;
        let hit = self
            .guarded
            .iter()
            .any(|g| g.dev == meta.dev() && g.ino == meta.ino() && g.covers(name));
        match hit {
            true => Err(PathError::Forbidden(format!(
                "path {path:?} is the worker's own file ({}): the tools never write it",
                name.to_string_lossy()
            ))),
            false => Ok(()),
        }
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

/// Opens an allowed directory; one that is a symbolic link is refused rather than
/// followed (`is_task_dir`: the task directory itself, named by the user).
fn open_root(path: &Path, is_task_dir: bool) -> Result<Dir, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    let flags = match is_task_dir {
        true => libc::O_DIRECTORY,
        false => libc::O_DIRECTORY | libc::O_NOFOLLOW,
    };
    options.custom_flags(flags);
    let err = match options.open(path) {
        Ok(file) => return Ok(Dir::from_std_file(file)),
        Err(err) => err,
    };
    // Linux says ENOTDIR (or ELOOP) for a symbolic link under O_NOFOLLOW.
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link && !is_task_dir {
        let target = std::fs::read_link(path)
            .map(|t| format!(" to {}", t.display()))
            .unwrap_or_default();
        return Err(format!(
            "is a symbolic link{target}: an allowed path must be a folder itself, never followed; give the folder it leads to instead"
        ));
    }
    match err.raw_os_error() {
        Some(libc::ENOTDIR) => Err("not a folder".to_string()),
        _ => Err(err.to_string()),
    }
}

fn guard(dir: &Path, name: &OsStr) -> io::Result<Guarded> {
    let meta = std::fs::metadata(dir)?;
    Ok(Guarded {
        dev: meta.dev(),
        ino: meta.ino(),
        name: name.to_os_string(),
    })
}

fn drop_cur_dir(path: &Path) -> PathBuf {
    let kept: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    kept
}

/// `Ok` for a regular file with one link, the only kind the tools read or write.
pub(crate) fn check_file(path: &str, meta: &Metadata) -> Result<(), PathError> {
    let kind = meta.file_type();
    let what = if kind.is_dir() {
        return Err(PathError::Failed(format!(
            "{path}: is a folder, not a file"
        )));
    } else if kind.is_file() {
        None
    } else if kind.is_symlink() {
        Some("a symbolic link (the tools never write through one)")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device node")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    };
    if let Some(what) = what {
        return Err(PathError::Forbidden(format!(
            "path {path:?} is {what}: the tools use regular files and folders only"
        )));
    }
    if meta.nlink() > 1 {
        return Err(PathError::Forbidden(format!(
            "path {path:?} has {} hard links: a file with more than one may be one outside the allowed paths",
            meta.nlink()
        )));
    }
    Ok(())
}

/// `Ok` when what was opened is what was looked at before (nothing swapped in
/// between) and still a regular file with one link.
pub(crate) fn check_opened(
    path: &str,
    looked_at: &Metadata,
    opened: &Metadata,
) -> Result<(), PathError> {
    if looked_at.dev() != opened.dev() || looked_at.ino() != opened.ino() {
        return Err(PathError::Forbidden(format!(
            "path {path:?} was replaced while it was opened"
        )));
    }
    check_file(path, opened)
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

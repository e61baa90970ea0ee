//! `.clowder/web-url`: the page's address (never its token) while it serves
//! a folder, for the host's notices. One page names itself there at a time:
//! the file is held with `flock` for as long as that page runs, so that a
//! second `serve` in the same folder neither overwrites it nor removes it.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// A `web-url` this page wrote and holds; removed when dropped.
pub struct WebUrl {
    path: PathBuf,
    file: Flock<File>,
}

/// How naming the page in a folder went.
pub enum Claim {
    Named(WebUrl),
    /// Another page that still runs names itself there: its address.
    Taken(String),
    /// The folder has no `.clowder` (no host was ever there), or the file
    /// cannot be written: nothing to name.
    Skipped,
}

/// Names the page `base` in `path`, unless another running page does.
pub fn claim(path: &Path, base: &str) -> Claim {
    if !path.parent().is_some_and(Path::is_dir) {
        return Claim::Skipped;
    }
    // The file may be removed by the page that held it between our open and
    // our lock: then the lock is on a file nobody reads, and we try again.
    for _ in 0..3 {
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
        else {
            return Claim::Skipped;
        };
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(file) => file,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                let named = std::fs::read_to_string(path).unwrap_or_default();
                return Claim::Taken(named.trim().to_string());
            }
            Err(_) => return Claim::Skipped,
        };
        if !same_file(&file, path) {
            continue;
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.write_all(format!("{base}\n").as_bytes()));
        return match written {
            Ok(()) => Claim::Named(WebUrl {
                path: path.to_path_buf(),
                file,
            }),
            Err(_) => Claim::Skipped,
        };
    }
    Claim::Skipped
}

/// Whether `path` still names the open `file`.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

impl Drop for WebUrl {
    fn drop(&mut self) {
        // Removed while still locked: a page that starts now either finds
        // the file locked or makes a new one.
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_page_neither_overwrites_nor_removes_the_first_ones_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("web-url");
        let Claim::Named(first) = claim(&path, "http://127.0.0.1:1/") else {
            panic!("the first page names itself");
        };
        match claim(&path, "http://127.0.0.1:2/") {
            Claim::Taken(named) => assert_eq!(named, "http://127.0.0.1:1/"),
            _ => panic!("the second page must find the name taken"),
        }
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "http://127.0.0.1:1/\n"
        );
        drop(first);
        assert!(!path.exists());
        assert!(matches!(
            claim(&path, "http://127.0.0.1:2/"),
            Claim::Named(_)
        ));
        assert!(matches!(
            claim(&dir.path().join("no/web-url"), "x"),
            Claim::Skipped
        ));
    }
}

//! Before anything runs (and in `--dry-run`): every place clowder will write can
//! be written — the output folder, the status file, the event log, the counter.
//!
//! Nothing is created, truncated or overwritten: a folder is tried with a temp
//! file deleted at once, an existing file is opened for append and closed unwritten.
//! Trying, rather than reading permission bits, also catches what root cannot
//! write: a read-only mount, an immutable file.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use super::Config;

/// How clowder writes a file, which decides what must be writable.
#[derive(Clone, Copy, PartialEq)]
enum Writes {
    /// Temp file + rename: the folder must take new files.
    Atomically,
    /// Opened for append: the file itself (or, while missing, its folder).
    Appending,
}

/// The first place clowder could not write, as `key `DOTTED.KEY`: what, expected what`.
pub fn check(config: &Config, cwd: &Path) -> Result<(), String> {
    let output_dir = cwd.join(&config.session.output_dir.0);
    check_folder(
        "session.output_dir",
        &config.session.output_dir.0,
        &output_dir,
    )?;
    let files = [
        (
            "output.status_file",
            Some(config.output.status_file.0.as_path()),
            Writes::Atomically,
        ),
        (
            "output.event_log",
            config.event_log_path(),
            Writes::Appending,
        ),
        (
            "session.counter_file",
            Some(config.session.counter_file.0.as_path()),
            Writes::Atomically,
        ),
    ];
    for (key, shown, writes) in files {
        if let Some(shown) = shown {
            check_file(key, shown, &cwd.join(shown), writes, &output_dir)?;
        }
    }
    Ok(())
}

/// The output folder: an existing folder clowder can write in, or a path whose
/// nearest existing ancestor is one (clowder makes the rest at start).
fn check_folder(key: &str, shown: &Path, path: &Path) -> Result<(), String> {
    let shown = shown.display();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => try_folder(path).map_err(|err| {
            format!("key `{key}`: cannot write in the folder {shown} ({err}), expected a folder clowder can write in")
        }),
        Ok(_) => Err(format!(
            "key `{key}`: {shown} is a file, expected a folder clowder can write in (or a path where one can be made)"
        )),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            let ancestor = existing_ancestor(path);
            if !ancestor.is_dir() {
                return Err(format!(
                    "key `{key}`: the folder {shown} cannot be made, {} is a file; expected a folder clowder can write in (or a path where one can be made)",
                    ancestor.display()
                ));
            }
            try_folder(ancestor).map_err(|err| {
                format!(
                    "key `{key}`: the folder {shown} cannot be made in {} ({err}), expected a folder clowder can write in (or a path where one can be made)",
                    ancestor.display()
                )
            })
        }
        Err(err) => Err(format!(
            "key `{key}`: cannot read {shown} ({err}), expected a folder clowder can write in"
        )),
    }
}

fn check_file(
    key: &str,
    shown: &Path,
    path: &Path,
    writes: Writes,
    output_dir: &Path,
) -> Result<(), String> {
    let expected = "expected a file clowder can write, in a folder it can write in";
    let shown = shown.display();
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let exists = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("key `{key}`: {shown} is a folder, {expected}"));
        }
        Ok(_) => true,
        Err(err) if err.kind() == io::ErrorKind::NotFound => false,
        Err(err) => {
            return Err(format!(
                "key `{key}`: cannot read {shown} ({err}), {expected}"
            ));
        }
    };
    if exists {
        // Append mode, never written: the content and its length stay as they are.
        OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|err| format!("key `{key}`: cannot write {shown} ({err}), {expected}"))?;
        if writes == Writes::Appending {
            return Ok(());
        }
    }
    if !folder.exists() {
        // The output folder (and the folders above it) are made at start.
        if output_dir.starts_with(folder) {
            return Ok(());
        }
        return Err(format!(
            "key `{key}`: the folder of {shown} does not exist, {expected}"
        ));
    }
    try_folder(folder).map_err(|err| {
        format!("key `{key}`: cannot write in the folder of {shown} ({err}), {expected}")
    })
}

/// Whether a new file can be made in `dir`: made (a new name, never an existing
/// file), then deleted.
fn try_folder(dir: &Path) -> io::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let probe = dir.join(format!(".clowder-preflight.{}.{nanos}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

fn existing_ancestor(path: &Path) -> &Path {
    path.ancestors()
        .skip(1)
        .find(|p| !p.as_os_str().is_empty() && std::fs::metadata(p).is_ok())
        .unwrap_or(Path::new("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, Path::new("harness.toml")).expect("valid config")
    }

    #[test]
    fn defaults_in_an_empty_folder_pass_and_leave_it_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        check(&Config::default(), dir.path()).expect("writable");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn an_output_dir_that_is_a_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("out"), "x").expect("write");
        let err =
            check(&config("[session]\noutput_dir = \"out\"\n"), dir.path()).expect_err("a file");
        assert!(
            err.starts_with("key `session.output_dir`: out is a file"),
            "{err}"
        );
        let err = check(
            &config("[session]\noutput_dir = \"out/deeper\"\n"),
            dir.path(),
        )
        .expect_err("under a file");
        assert!(err.starts_with("key `session.output_dir`: "), "{err}");
    }

    #[test]
    fn a_missing_output_dir_may_hold_the_status_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = "[session]\noutput_dir = \"a/b\"\n[output]\nstatus_file = \"a/b/s.json\"\n";
        check(&config(text), dir.path()).expect("made at start");
        let err = check(
            &config("[output]\nstatus_file = \"nowhere/s.json\"\n"),
            dir.path(),
        )
        .expect_err("missing folder");
        assert!(err.starts_with("key `output.status_file`: "), "{err}");
    }

    #[test]
    fn files_that_are_folders_are_named_by_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, key) in [
            ("harness.status", "output.status_file"),
            ("harness-events.jsonl", "output.event_log"),
            (".iteration_counter", "session.counter_file"),
        ] {
            std::fs::create_dir(dir.path().join(name)).expect("mkdir");
            let err = check(&Config::default(), dir.path()).expect_err("a folder");
            assert!(
                err.starts_with(&format!("key `{key}`: {name} is a folder")),
                "{err}"
            );
            std::fs::remove_dir(dir.path().join(name)).expect("rmdir");
        }
    }

    #[test]
    fn existing_files_are_left_as_they_were() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("harness-events.jsonl");
        std::fs::write(&log, "{\"a\":1}").expect("write");
        check(&Config::default(), dir.path()).expect("writable");
        assert_eq!(std::fs::read_to_string(&log).expect("read"), "{\"a\":1}");
    }
}

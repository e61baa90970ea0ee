//! Notes from the human to a loop or a lane (`clowder tell`, `clowder lane
//! tell`, `t` in the control room): one small JSON file each in the loop's
//! `notes/` folder, kept there until a session's prompt has taken them, so that
//! a restart loses none.
//!
//! A note is written as `ID.note` by whoever leaves it. The loop renames it to
//! `ID.queued` once it has logged `note_queued` (so a restart logs it once),
//! and removes it once a session started with it in its prompt. IDs sort in
//! the order the notes were left.

use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The folder of the notes, in the loop's control folder (`.clowder/` of a
/// single loop, `.clowder/lanes/NAME/` of a lane).
pub const NOTES_DIR: &str = "notes";
/// A note nobody has logged yet.
const NEW: &str = "note";
/// A note the loop has logged as `note_queued`.
const QUEUED: &str = "queued";
/// The longest note taken: a note is a word to the agent, not a document.
pub const MAX_NOTE_BYTES: usize = 16 * 1024;
const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct NoteFile {
    version: u32,
    queued_at: DateTime<Utc>,
    text: String,
}

/// One note waiting for a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub id: String,
    pub queued_at: DateTime<Utc>,
    pub text: String,
    /// `note_queued` was logged for it.
    pub announced: bool,
    pub path: PathBuf,
}

/// The notes folder of the loop whose control folder is `control_dir`.
pub fn dir(control_dir: &Path) -> PathBuf {
    control_dir.join(NOTES_DIR)
}

/// Leaves `text` for the loop whose control folder is `control_dir`; it comes
/// after every note already there.
pub fn leave(control_dir: &Path, text: &str, now: DateTime<Utc>) -> Result<Note, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the note is empty".into());
    }
    if text.len() > MAX_NOTE_BYTES {
        return Err(format!(
            "the note is {} bytes; at most {} KiB is taken",
            text.len(),
            MAX_NOTE_BYTES / 1024
        ));
    }
    let dir = dir(control_dir);
    std::fs::create_dir_all(&dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    // After the last note there, even if the clock went back meanwhile.
    let last = ids(&dir).last().and_then(|id| nanos_of(id));
    let nanos = now.timestamp_nanos_opt().unwrap_or(i64::MAX).max(0) as u128;
    let nanos = last.map_or(nanos, |last| nanos.max(last + 1));
    let id = format!("{nanos:020}-{:010}", std::process::id());
    let path = dir.join(format!("{id}.{NEW}"));
    let file = NoteFile {
        version: VERSION,
        queued_at: now,
        text: text.to_string(),
    };
    let bytes =
        serde_json::to_vec_pretty(&file).map_err(|err| format!("cannot encode the note: {err}"))?;
    super::write_atomically(&path, &bytes)
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(Note {
        id,
        queued_at: now,
        text: text.to_string(),
        announced: false,
        path,
    })
}

/// The notes waiting in `control_dir`, oldest first, and a line for each file
/// that could not be read (left where it is).
pub fn pending(control_dir: &Path) -> (Vec<Note>, Vec<String>) {
    let dir = dir(control_dir);
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    for name in names(&dir) {
        let Some((id, suffix)) = name.rsplit_once('.') else {
            continue;
        };
        let announced = match suffix {
            NEW => false,
            QUEUED => true,
            _ => continue,
        };
        let path = dir.join(&name);
        match read(&path) {
            Ok(file) => notes.push(Note {
                id: id.to_string(),
                queued_at: file.queued_at,
                text: file.text,
                announced,
                path,
            }),
            // Gone meanwhile: taken by the loop.
            Err(None) => {}
            Err(Some(problem)) => problems.push(format!("note {}: {problem}", path.display())),
        }
    }
    notes.sort_by(|a, b| a.id.cmp(&b.id));
    (notes, problems)
}

fn read(path: &Path) -> Result<NoteFile, Option<String>> {
    let bytes = match super::small_file::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(None),
        Err(err) => return Err(Some(format!("cannot read it: {err}"))),
    };
    let file: NoteFile = serde_json::from_slice(&bytes).map_err(|err| {
        Some(format!(
            "line {} column {}: {err}",
            err.line(),
            err.column()
        ))
    })?;
    if file.version != VERSION {
        return Err(Some(format!(
            "version {} (this clowder reads version {VERSION})",
            file.version
        )));
    }
    Ok(file)
}

/// Records that `note_queued` was logged for `note`.
pub fn mark_announced(note: &mut Note) -> io::Result<()> {
    if note.announced {
        return Ok(());
    }
    let queued = note.path.with_extension(QUEUED);
    std::fs::rename(&note.path, &queued)?;
    note.path = queued;
    note.announced = true;
    Ok(())
}

/// Removes a delivered note.
pub fn remove(note: &Note) -> io::Result<()> {
    match std::fs::remove_file(&note.path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// The notes as they go at the top of a session's prompt, oldest first, each
/// marked as the human's.
pub fn prompt_block(texts: &[String]) -> String {
    texts
        .iter()
        .map(|text| format!("## Note from your human operator\n{}", text.trim_end()))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A note's text on one line, as log lines and the events pane show it.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The file names in `dir` but temp files, sorted.
fn names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

fn ids(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter_map(|name| Some(name.rsplit_once('.')?.0.to_string()))
        .collect()
}

fn nanos_of(id: &str) -> Option<u128> {
    id.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_keep_their_order_and_their_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = Utc::now();
        let first = leave(dir.path(), "  first  ", now).expect("first");
        // A clock set back still puts the second note after the first.
        let earlier = now - chrono::Duration::seconds(60);
        let second = leave(dir.path(), "second", earlier).expect("second");
        assert!(first.id < second.id);
        let (mut notes, problems) = pending(dir.path());
        assert!(problems.is_empty(), "{problems:?}");
        let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(texts, ["first", "second"]);
        mark_announced(&mut notes[0]).expect("mark");
        let (again, _) = pending(dir.path());
        assert!(again[0].announced && !again[1].announced);
        remove(&again[0]).expect("remove");
        let (left, _) = pending(dir.path());
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].text, "second");
    }

    #[test]
    fn bad_notes_are_refused_or_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(leave(dir.path(), "  \n", Utc::now()).is_err());
        let long = "x".repeat(MAX_NOTE_BYTES + 1);
        assert!(leave(dir.path(), &long, Utc::now()).is_err());
        std::fs::create_dir_all(dir.path().join(NOTES_DIR)).expect("mkdir");
        std::fs::write(dir.path().join("notes/1-1.note"), "{\"version\": ").expect("write");
        std::fs::write(dir.path().join("notes/.1-1.note.abcdef.tmp"), "x").expect("write");
        let (notes, problems) = pending(dir.path());
        assert!(notes.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("1-1.note: line 1"), "{problems:?}");
    }

    #[test]
    fn each_note_is_marked_as_the_humans() {
        let block = prompt_block(&["one".into(), "two\n".into()]);
        assert_eq!(
            block,
            "## Note from your human operator\none\n\n## Note from your human operator\ntwo"
        );
    }
}

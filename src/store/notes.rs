//! Notes from the human to a loop or a lane (`clowder tell`, `clowder lane
//! tell`, `t` in the control room): one small JSON file each in the loop's
//! `notes/` folder, kept there until a session's prompt has taken them, so that
//! a restart loses none.
//!
//! A note is written as `ID.note` by whoever leaves it, who then touches
//! [`BELL`] to wake the loop. The loop decides each new note once: where the
//! running session takes input while it runs (see
//! [`crate::agent::live_input`]) it renames the note `ID.sending-G` (claimed
//! for session G), writes it to the session's stdin, and renames it
//! `ID.told-G` (the teller's answer, removed later); otherwise it renames it
//! `ID.queued` once it has logged `note_queued` (so a restart logs it once),
//! and removes it once a session started with it in its prompt. A teller that
//! stops waiting for the loop's answer renames `ID.note` to `ID.held`: that
//! note waits for the next session. IDs sort in the order the notes were left.

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
/// A new note its teller stopped waiting for: it waits for the next session.
const HELD: &str = "held";
/// `ID.sending-G`: being written to session G's stdin.
const SENDING: &str = "sending-";
/// `ID.told-G`: written to session G's stdin; kept a while as the teller's answer.
const TOLD: &str = "told-";
/// Touched by whoever leaves a note, to wake the loop (which watches it).
pub const BELL: &str = ".bell";
/// Present while the loop's agent takes notes while a session runs.
const LIVE_MARK: &str = ".live";
/// What `clowder tell`, `t` and the web page answer for a note the running
/// session takes now.
pub const TOLD_NOW: &str = "told now (the session reads it at its next step)";
/// The reason given for a note that waits because the agent reads notes at start only.
pub const ONLY_AT_START: &str = "this agent reads notes only at start";
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
    /// Nobody decided yet whether it goes to the running session or the next.
    pub fresh: bool,
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
    // A wake-up only: without it the loop finds the note at its next look.
    let _ = std::fs::write(dir.join(BELL), b"");
    Ok(Note {
        id,
        queued_at: now,
        text: text.to_string(),
        announced: false,
        fresh: true,
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
            NEW | HELD => false,
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
                fresh: suffix == NEW,
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

/// Claims `note` for session `global`'s stdin: no prompt takes it meanwhile.
/// `Ok(false)`: its teller took it back first (it waits for the next session).
pub fn claim(note: &mut Note, global: u64) -> io::Result<bool> {
    let claimed = note.path.with_extension(format!("{SENDING}{global}"));
    match std::fs::rename(&note.path, &claimed) {
        Ok(()) => {
            note.path = claimed;
            note.fresh = false;
            Ok(true)
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

/// Records that the claimed `note` was written to its session's stdin.
pub fn mark_told(note: &mut Note) -> io::Result<()> {
    let Some(global) = claimed_by(&note.path) else {
        return Ok(());
    };
    let told = note.path.with_extension(format!("{TOLD}{global}"));
    std::fs::rename(&note.path, &told)?;
    note.path = told;
    Ok(())
}

/// A claimed note its session did not take: it waits for the next session,
/// as logged (`note_queued`).
pub fn unclaim(note: &mut Note) -> io::Result<()> {
    let queued = note.path.with_extension(QUEUED);
    std::fs::rename(&note.path, &queued)?;
    note.path = queued;
    note.announced = true;
    Ok(())
}

/// The session a claimed note's file names.
fn claimed_by(path: &Path) -> Option<u64> {
    let suffix = path.extension()?.to_str()?;
    suffix.strip_prefix(SENDING)?.parse().ok()
}

/// The notes left claimed (`ID.sending-G`) by a run that died while it
/// wrote them, with their session; and the answers (`ID.told-G`) kept,
/// which are removed.
pub fn left_claimed(control_dir: &Path) -> Vec<(Note, u64)> {
    let dir = dir(control_dir);
    let mut claimed = Vec::new();
    for name in names(&dir) {
        let path = dir.join(&name);
        let Some((id, suffix)) = name.rsplit_once('.') else {
            continue;
        };
        if suffix.starts_with(TOLD) {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let Some(global) = claimed_by(&path) else {
            continue;
        };
        if let Ok(file) = read(&path) {
            let note = Note {
                id: id.to_string(),
                queued_at: file.queued_at,
                text: file.text,
                announced: true,
                fresh: false,
                path,
            };
            claimed.push((note, global));
        }
    }
    claimed
}

/// Removes the answers (`ID.told-G`) older than `age`: their tellers have
/// read them or stopped waiting.
pub fn clear_answers(control_dir: &Path, age: std::time::Duration) {
    let dir = dir(control_dir);
    for name in names(&dir) {
        let told = name
            .rsplit_once('.')
            .is_some_and(|(_, suffix)| suffix.starts_with(TOLD));
        let path = dir.join(&name);
        let old = std::fs::metadata(&path)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|elapsed| elapsed >= age);
        if told && old {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Says whether the loop's agent takes notes while a session runs, for
/// tellers to give the reason a note waits.
pub fn mark_live(control_dir: &Path, live: bool) {
    let mark = dir(control_dir).join(LIVE_MARK);
    if live {
        let _ = std::fs::create_dir_all(dir(control_dir));
        let _ = std::fs::write(mark, b"");
    } else {
        let _ = std::fs::remove_file(mark);
    }
}

/// What became of a note, as its teller is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The running session took it.
    Now,
    /// It waits for the next session, for this reason.
    Next(String),
}

impl Verdict {
    /// The answer's words: `told now (…)` or `left for the next session (…)`.
    pub fn answer(&self) -> String {
        match self {
            Verdict::Now => TOLD_NOW.to_string(),
            Verdict::Next(why) => format!("left for the next session ({why})"),
        }
    }
}

/// Why a note waits for the next session, when the loop runs.
fn why_next(control_dir: &Path) -> String {
    if dir(control_dir).join(LIVE_MARK).exists() {
        "no session takes notes now".to_string()
    } else {
        ONLY_AT_START.to_string()
    }
}

/// What the loop decided for note `id`, if it did.
pub fn verdict(control_dir: &Path, id: &str) -> Option<Verdict> {
    let dir = dir(control_dir);
    let mine: Vec<String> = names(&dir)
        .into_iter()
        .filter(|name| name.rsplit_once('.').is_some_and(|(i, _)| i == id))
        .collect();
    let suffix = |name: &String| name.rsplit_once('.').map(|(_, s)| s.to_string());
    match mine.first().and_then(suffix) {
        Some(s) if s == NEW || s.starts_with(SENDING) => None,
        Some(s) if s.starts_with(TOLD) => Some(Verdict::Now),
        // Queued or held; or gone: a session started with it in its prompt.
        _ => Some(Verdict::Next(why_next(control_dir))),
    }
}

/// The teller stops waiting for the loop: the note, if still undecided,
/// waits for the next session. `None`: the loop decided meanwhile.
pub fn hold(control_dir: &Path, id: &str) -> Option<Verdict> {
    let new = dir(control_dir).join(format!("{id}.{NEW}"));
    match std::fs::rename(&new, new.with_extension(HELD)) {
        Ok(()) => Some(Verdict::Next(why_next(control_dir))),
        Err(_) => None,
    }
}

/// The answer for a note left where no loop runs now, `why` saying so.
pub fn not_running(why: &str) -> Verdict {
    Verdict::Next(why.to_string())
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
        .map(|text| {
            let heading = crate::agent::live_input::NOTE_HEADING;
            format!("{heading}\n{}", text.trim_end())
        })
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

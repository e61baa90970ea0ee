//! The task directory's files: `task.json` (immutable), `state.json` (the truth),
//! `heartbeat.json`, and `actions.jsonl` (one line per iteration, appended); the
//! iteration under way is in [`super::journal`]'s file.

use std::fs::OpenOptions;
use std::io::{self, BufRead, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::tools::ActionResult;
use crate::store::small_file;
use crate::store::versioned::{self, Format};

/// The formats of the files this module writes. Version 0 is a file written
/// before versions were kept (or by hand): the same fields, without the number.
const TASK_FORMAT: Format = unchanged_since_0(1);
const STATE_FORMAT: Format = unchanged_since_0(1);
const HEARTBEAT_FORMAT: Format = unchanged_since_0(1);
/// A line of `actions.jsonl`. Version 1 no longer repeats the answer's reasoning
/// beside the answer itself (`llm_response`, which holds it).
const ACTIONS_FORMAT: Format = Format {
    current: 1,
    first: 0,
    unversioned: Some(0),
    migrate: actions_migrate,
    in_struct: false,
};

fn actions_migrate(from: u64, value: &mut serde_json::Value) -> Result<(), String> {
    if from == 0
        && let Some(line) = value.as_object_mut()
    {
        line.remove("reasoning");
    }
    Ok(())
}

const fn unchanged_since_0(current: u64) -> Format {
    Format {
        current,
        first: 0,
        unversioned: Some(0),
        migrate: versioned::no_changes,
        in_struct: false,
    }
}

pub(crate) const TASK_FILE: &str = "task.json";
pub(crate) const STATE_FILE: &str = "state.json";
pub(crate) const HEARTBEAT_FILE: &str = "heartbeat.json";
pub(crate) const ACTIONS_FILE: &str = "actions.jsonl";
pub(crate) const JOURNAL_FILE: &str = "iteration.jsonl";
pub(crate) const ARTIFACTS_DIR: &str = "artifacts";
/// The worker's files in a task directory, which its tools never write.
pub(crate) const OWN_FILES: [&str; 5] = [
    TASK_FILE,
    STATE_FILE,
    HEARTBEAT_FILE,
    ACTIONS_FILE,
    JOURNAL_FILE,
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Task {
    pub task_id: String,
    pub prompt: String,
    pub constraints: Constraints,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Constraints {
    pub max_iterations: u64,
    pub timeout_seconds: u64,
    /// Relative to the task directory (or absolute); see [`super::sandbox`].
    pub allowed_paths: Vec<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Running,
    Stopped,
    Completed,
    Failed,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Stopped => "stopped",
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }
}

/// What went wrong how often, over the task's whole life.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct Counters {
    /// Answers that were empty, not JSON, or not the expected shape.
    pub invalid_answers: u64,
    /// LLM calls that took longer than `llm_timeout`.
    pub llm_timeouts: u64,
    pub unknown_tools: u64,
    pub tool_errors: u64,
    pub security_violations: u64,
}

/// `state.json`. Anyone may write `"status": "stopped"` into it; the other fields
/// default so that such a hand-written file still reads.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct State {
    pub status: Status,
    #[serde(default)]
    pub iteration: u64,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub updated_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub termination_reason: Option<String>,
    #[serde(default)]
    pub counters: Counters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `constraints.allowed_paths` as they were when the task first started: a
    /// `task.json` changed since is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_paths: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Heartbeat {
    pub iteration: u64,
    pub timestamp: DateTime<Utc>,
    /// The phase: `starting`, `calling_llm`, `llm_busy`, `executing_action`, `idle`,
    /// or the final status.
    pub status: String,
    #[serde(default)]
    pub pid: Option<u32>,
    /// What the phase waits for, when there is more to say (a busy LLM's next try).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One line of `actions.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ActionRecord {
    pub iteration: u64,
    pub timestamp: DateTime<Utc>,
    /// The LLM's answer as it came (after unwrapping a `{"result": …}` envelope).
    pub llm_response: String,
    /// Why the answer was refused; then no action ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub results: Vec<ActionResult>,
    /// What a worker found when it went on with this iteration after its worker
    /// was killed while the actions ran: which had run, which was under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<String>,
}

impl ActionRecord {
    /// The answer's reasoning, read from the answer itself.
    pub(crate) fn reasoning(&self) -> Option<String> {
        match self.error {
            Some(_) => None,
            None => super::answer::reasoning_of(&self.llm_response),
        }
    }
}

/// One line of `actions.jsonl` read, of any version this clowder reads.
pub(crate) fn parse_action_line(line: &str) -> Option<ActionRecord> {
    ACTIONS_FORMAT.parse(line).ok()
}

/// A task file that cannot be used: which file, and what is wrong.
#[derive(Debug)]
pub(crate) struct FileError {
    pub path: PathBuf,
    pub message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> FileError {
    FileError {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

pub(crate) fn read_task(dir: &Path) -> Result<Task, FileError> {
    let path = dir.join(TASK_FILE);
    let text = small_file::read_to_string(&path).map_err(|err| file_error(&path, err))?;
    let mut value = serde_json::from_str::<serde_json::Value>(&text).map_err(|err| {
        file_error(
            &path,
            format!("line {} column {}: {err}", err.line(), err.column()),
        )
    })?;
    TASK_FORMAT
        .upgrade_value(&mut value)
        .map_err(|err| file_error(&path, err))?;
    serde_path_to_error::deserialize(value).map_err(|err| {
        let key = err.path().to_string();
        file_error(&path, format!("key `{key}`: {}", err.into_inner()))
    })
}

/// `Ok(None)` when there is no state yet (a task never started).
pub(crate) fn read_state(dir: &Path) -> Result<Option<State>, FileError> {
    let path = dir.join(STATE_FILE);
    let text = match small_file::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(file_error(&path, err)),
    };
    STATE_FORMAT.parse(&text).map(Some).map_err(|err| {
        if versioned::is_newer(&err) {
            file_error(&path, err)
        } else {
            file_error(&path, format!("corrupt (not a task state): {err}"))
        }
    })
}

pub(crate) fn write_state(dir: &Path, state: &State) -> Result<(), FileError> {
    write_json(&dir.join(STATE_FILE), &STATE_FORMAT, state)
}

/// Writes `state.json` atomically if `still_wanted()`, asked after the new content
/// is synced and right before the rename; returns whether it was written.
pub(crate) fn write_state_if(
    dir: &Path,
    state: &State,
    still_wanted: impl FnOnce() -> bool,
) -> Result<bool, FileError> {
    let path = dir.join(STATE_FILE);
    let temp = synced_temp(dir, &path, &STATE_FORMAT, state)?;
    if !still_wanted() {
        return Ok(false);
    }
    temp.persist(&path)
        .map_err(|err| file_error(&path, err.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|err| file_error(dir, err))?;
    Ok(true)
}

/// Writes a first `state.json` unless there is one; returns whether it did.
pub(crate) fn create_state(dir: &Path, state: &State) -> Result<bool, FileError> {
    let path = dir.join(STATE_FILE);
    let temp = synced_temp(dir, &path, &STATE_FORMAT, state)?;
    match temp.persist_noclobber(&path) {
        Ok(_) => {}
        Err(err) if err.error.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
        Err(err) => return Err(file_error(&path, err.error)),
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|err| file_error(dir, err))?;
    Ok(true)
}

/// What became of a request to stop a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopAsked {
    /// `"status": "stopped"` is in state.json: its worker ends at its next check.
    Asked,
    /// The task had ended already, in this status; nothing was written.
    AlreadyEnded(Status),
    /// No state.json yet: one saying `stopped` was written, which the worker
    /// that starts (or is starting) honours; `clowder task resume` undoes it.
    BeforeStart,
}

/// Writes `"status": "stopped"` with `reason` into the task's state.json,
/// atomically and keeping its other fields, if the task runs or has not started.
pub(crate) fn request_stop(dir: &Path, reason: &str) -> Result<StopAsked, FileError> {
    // A worker starting meanwhile may make state.json between the look and the write.
    for _ in 0..3 {
        let Some(state) = read_state(dir)? else {
            let stopped = State {
                status: Status::Stopped,
                iteration: 0,
                started_at: None,
                updated_at: Some(Utc::now()),
                termination_reason: Some(reason.to_string()),
                counters: Counters::default(),
                pid: None,
                allowed_paths: None,
            };
            match create_state(dir, &stopped)? {
                true => return Ok(StopAsked::BeforeStart),
                false => continue,
            }
        };
        if state.status != Status::Running {
            return Ok(StopAsked::AlreadyEnded(state.status));
        }
        let stopped = State {
            status: Status::Stopped,
            termination_reason: Some(reason.to_string()),
            updated_at: Some(Utc::now()),
            ..state
        };
        write_state(dir, &stopped)?;
        return Ok(StopAsked::Asked);
    }
    Err(file_error(
        &dir.join(STATE_FILE),
        "kept changing while a stop was written: try again",
    ))
}

/// What became of a request to let a task go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResumeAsked {
    /// state.json says `running` again: `clowder worker` goes on with it.
    Resumed { was: Status, reason: String },
    /// Nothing to do: it runs, or has not started (`clowder worker` starts it).
    NotNeeded(&'static str),
    /// It ended for good (completed, or timed out): why.
    Refused(String),
}

/// Sets a failed or stopped task's state.json back to `running`, keeping its
/// iteration and counters, so that the next `clowder worker` goes on with it.
pub(crate) fn request_resume(dir: &Path) -> Result<ResumeAsked, FileError> {
    let Some(state) = read_state(dir)? else {
        return Ok(ResumeAsked::NotNeeded("it has not started"));
    };
    let reason = state.termination_reason.clone().unwrap_or_default();
    match state.status {
        Status::Running => return Ok(ResumeAsked::NotNeeded("it is running")),
        Status::Completed => {
            return Ok(ResumeAsked::Refused(format!(
                "it is completed ({reason}, iteration {})",
                state.iteration
            )));
        }
        Status::Stopped if reason == "timeout" => {
            return Ok(ResumeAsked::Refused(
                "it timed out (timeout_seconds after started_at): make a new task to go on".into(),
            ));
        }
        Status::Stopped | Status::Failed => {}
    }
    let was = state.status;
    let running = State {
        status: Status::Running,
        termination_reason: None,
        pid: None,
        updated_at: Some(Utc::now()),
        ..state
    };
    write_state(dir, &running)?;
    Ok(ResumeAsked::Resumed { was, reason })
}

pub(crate) fn write_heartbeat(dir: &Path, heartbeat: &Heartbeat) -> Result<(), FileError> {
    write_json(&dir.join(HEARTBEAT_FILE), &HEARTBEAT_FORMAT, heartbeat)
}

pub(crate) fn read_heartbeat(dir: &Path) -> Option<Heartbeat> {
    let text = small_file::read_to_string(&dir.join(HEARTBEAT_FILE)).ok()?;
    HEARTBEAT_FORMAT.parse(&text).ok()
}

/// `value` as pretty JSON in a synced temporary file beside `path` (named
/// `.NAME.…tmp`), for the caller to rename into place as it sees fit.
fn synced_temp<T: Serialize>(
    dir: &Path,
    path: &Path,
    format: &Format,
    value: &T,
) -> Result<tempfile::NamedTempFile, FileError> {
    let mut bytes = format
        .to_vec_pretty(value)
        .map_err(|err| file_error(path, err))?;
    bytes.push(b'\n');
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|err| file_error(dir, err))?;
    temp.write_all(&bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|err| file_error(path, err))?;
    Ok(temp)
}

fn write_json<T: Serialize>(path: &Path, format: &Format, value: &T) -> Result<(), FileError> {
    let mut bytes = format
        .to_vec_pretty(value)
        .map_err(|err| file_error(path, err))?;
    bytes.push(b'\n');
    crate::store::write_atomically(path, &bytes).map_err(|err| file_error(path, err))
}

/// Appends one line and syncs it before returning: the log is never behind the state.
pub(crate) fn append_action(dir: &Path, record: &ActionRecord) -> Result<(), FileError> {
    let path = dir.join(ACTIONS_FILE);
    let mut line = ACTIONS_FORMAT
        .to_vec(record)
        .map_err(|err| file_error(&path, err))?;
    line.push(b'\n');
    // Non-blocking: a FIFO put in its place must not hang the worker.
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ENXIO) => file_error(&path, "a FIFO, not a regular file"),
            _ => file_error(&path, err),
        })?;
    if !file
        .metadata()
        .map_err(|err| file_error(&path, err))?
        .is_file()
    {
        return Err(file_error(&path, "not a regular file"));
    }
    // A worker killed in the middle of a line leaves it cut: end it, so that the
    // new line is whole (the cut one is skipped when read).
    let cut = std::fs::File::open(&path)
        .and_then(|reader| ends_a_line(&reader))
        .map_err(|err| file_error(&path, err))?;
    if !cut {
        line.insert(0, b'\n');
    }
    file.write_all(&line)
        .and_then(|()| file.sync_data())
        .map_err(|err| file_error(&path, err))
}

/// Whether the file `reader` reads is empty or ends with a newline.
pub(crate) fn ends_a_line(reader: &std::fs::File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = reader.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    reader.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

/// The last `keep` records of `actions.jsonl` (unreadable lines skipped), read in one
/// pass that holds at most `keep` records.
pub(crate) fn recent_actions(dir: &Path, keep: usize) -> Vec<ActionRecord> {
    let Ok(file) = small_file::open(&dir.join(ACTIONS_FILE)) else {
        return Vec::new();
    };
    let mut recent = std::collections::VecDeque::with_capacity(keep + 1);
    for line in io::BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        if let Some(record) = parse_action_line(&line) {
            recent.push_back(record);
            if recent.len() > keep {
                recent.pop_front();
            }
        }
    }
    recent.into()
}

/// Writes a new task directory; refuses one that already holds a `task.json`.
pub(crate) fn create(dir: &Path, task: &Task) -> Result<(), FileError> {
    std::fs::create_dir_all(dir).map_err(|err| file_error(dir, err))?;
    let path = dir.join(TASK_FILE);
    let temp = synced_temp(dir, &path, &TASK_FORMAT, task)?;
    // persist_noclobber: an existing task.json is never replaced, even in a race.
    temp.persist_noclobber(&path).map_err(|err| {
        if err.error.kind() == io::ErrorKind::AlreadyExists {
            file_error(
                &path,
                "already exists: a task directory is never overwritten",
            )
        } else {
            file_error(&path, err.error)
        }
    })?;
    for allowed in &task.constraints.allowed_paths {
        let rel = Path::new(allowed);
        let inside = rel.is_relative()
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if inside {
            std::fs::create_dir_all(dir.join(rel))
                .map_err(|err| file_error(&dir.join(rel), err))?;
        }
    }
    std::fs::create_dir_all(dir.join(ARTIFACTS_DIR))
        .map_err(|err| file_error(&dir.join(ARTIFACTS_DIR), err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(iteration: u64) -> ActionRecord {
        ActionRecord {
            iteration,
            timestamp: Utc::now(),
            llm_response: String::new(),
            error: None,
            results: Vec::new(),
            resumed: None,
        }
    }

    #[test]
    fn recent_actions_keeps_the_last_lines_and_skips_broken_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        for n in 1..=7 {
            append_action(dir.path(), &record(n)).expect("append");
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(ACTIONS_FILE))
            .expect("open");
        file.write_all(b"{half a line\n").expect("write");
        let kept: Vec<u64> = recent_actions(dir.path(), 3)
            .iter()
            .map(|r| r.iteration)
            .collect();
        assert_eq!(kept, [5, 6, 7]);
        assert!(recent_actions(&dir.path().join("none"), 3).is_empty());
    }

    #[test]
    fn action_lines_of_version_0_read_and_the_reasoning_comes_from_the_answer() {
        let answer = r#"{"reasoning":"look","actions":[]}"#;
        let old = serde_json::json!({"iteration": 2, "timestamp": "2026-01-01T00:00:00Z",
            "llm_response": answer, "reasoning": "look", "results": []});
        let record = parse_action_line(&old.to_string()).expect("a v0 line");
        assert_eq!(record.reasoning().as_deref(), Some("look"));
        let line =
            String::from_utf8(ACTIONS_FORMAT.to_vec(&record).expect("encode")).expect("utf8");
        assert!(
            line.starts_with(r#"{"schema_version":1,"#) && !line.contains(r#""reasoning":"look""#)
        );
        assert!(
            parse_action_line(&line.replace(r#""schema_version":1"#, r#""schema_version":2"#))
                .is_none()
        );
    }

    #[test]
    fn a_line_cut_by_a_kill_does_not_swallow_the_next_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        append_action(dir.path(), &record(1)).expect("append");
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(ACTIONS_FILE))
            .expect("open");
        file.write_all(br#"{"iteration":2,"timest"#)
            .expect("a cut line");
        append_action(dir.path(), &record(2)).expect("append");
        let kept: Vec<u64> = recent_actions(dir.path(), 5)
            .iter()
            .map(|r| r.iteration)
            .collect();
        assert_eq!(kept, [1, 2]);
    }

    #[test]
    fn a_hand_written_stop_reads_and_a_broken_state_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read_state(dir.path()).expect("no state").is_none());
        std::fs::write(dir.path().join(STATE_FILE), r#"{"status":"stopped"}"#).expect("write");
        let state = read_state(dir.path()).expect("reads").expect("some");
        assert_eq!(state.status, Status::Stopped);
        std::fs::write(dir.path().join(STATE_FILE), r#"{"status":"paused"}"#).expect("write");
        let err = read_state(dir.path()).expect_err("unknown status");
        assert!(err.to_string().contains("state.json: corrupt"), "{err}");
    }

    #[test]
    fn task_json_errors_name_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(TASK_FILE),
            r#"{"task_id":"t","prompt":"p","constraints":{"max_iterations":"ten","timeout_seconds":1,"allowed_paths":[]},"created_at":"2026-01-01T00:00:00Z"}"#,
        )
        .expect("write");
        let err = read_task(dir.path()).expect_err("bad");
        assert!(
            err.to_string().contains("constraints.max_iterations"),
            "{err}"
        );
    }
}

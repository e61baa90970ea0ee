//! Gathering what the reviewer reads about a call, from what the gate has: the
//! session's prompt file (`HARNESS_PROMPT_FILE`, which the loop gives every
//! session), the notes the loop delivered (its event log), the rules, and the
//! script files a Bash call runs from its working folder.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::prompt::Context;
use crate::approvals::shell::analyze;
use crate::config::ApprovalsConfig;

/// The variable the loop names the session's prompt file in.
pub const PROMPT_FILE_ENV: &str = "HARNESS_PROMPT_FILE";
/// Most bytes of a prompt or script file read.
const FILE_CAP: u64 = 64 * 1024;
/// How much of the event log's end is searched for delivered notes.
const EVENTS_TAIL: u64 = 256 * 1024;
/// Most script files read for one call.
const MAX_SCRIPTS: usize = 4;
/// Programs whose first word that is not an option is a script they run.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "python", "python3", "node", "deno", "bun", "ruby", "perl",
    "php", "source", ".",
];

/// The parts of a call's context that the gate knows directly.
pub struct Call<'a> {
    pub tool: &'a str,
    pub input: Option<&'a Value>,
    pub cwd: Option<&'a str>,
    pub lane: Option<&'a str>,
    pub event_log: Option<&'a Path>,
}

/// Everything the reviewer reads about `call`.
pub fn gather(call: &Call, config: &ApprovalsConfig) -> Context {
    let cwd = call.cwd.map(PathBuf::from);
    let mut task = std::env::var_os(PROMPT_FILE_ENV)
        .map(|path| resolve(cwd.as_deref(), Path::new(&path)))
        .and_then(|path| read_capped(&path))
        .unwrap_or_default();
    let notes = call.event_log.map(delivered_notes).unwrap_or_default();
    if !notes.is_empty() {
        task.push_str("\n\nNotes the user told this agent since:\n");
        for note in notes {
            task.push_str(&format!("- {note}\n"));
        }
    }
    let input = call.input.cloned().unwrap_or(Value::Null);
    let scripts = match (call.tool, input["command"].as_str(), cwd.as_deref()) {
        ("Bash", Some(command), Some(cwd)) => scripts_run(command, cwd),
        _ => Vec::new(),
    };
    Context {
        task,
        lane: call.lane.map(str::to_string),
        cwd: call.cwd.map(str::to_string),
        rules: rules_text(config),
        tool: call.tool.to_string(),
        input,
        scripts,
    }
}

fn resolve(cwd: Option<&Path>, path: &Path) -> PathBuf {
    match cwd {
        Some(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

/// A regular file's text, at most [`FILE_CAP`] bytes of it.
fn read_capped(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(FILE_CAP).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The texts of the notes delivered lately (`note_delivered` in the log's end).
fn delivered_notes(log: &Path) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(EVENTS_TAIL)));
    let mut bytes = Vec::new();
    let _ = file.take(EVENTS_TAIL).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|line| line.contains("\"note_delivered\""))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "note_delivered")
        .filter_map(|event| event["text"].as_str().map(str::to_string))
        .collect()
}

/// The rules, one a line, deny first.
fn rules_text(config: &ApprovalsConfig) -> String {
    let deny = config
        .deny
        .iter()
        .map(|r| format!("deny: {}", r.describe()));
    let allow = config
        .allow
        .iter()
        .map(|r| format!("allow: {}", r.describe()));
    deny.chain(allow).collect::<Vec<_>>().join("\n")
}

/// The script files inside `cwd` that `command` runs (`./x.sh`, `bash x.sh`,
/// `python3 tools/y.py`), with their text.
fn scripts_run(command: &str, cwd: &Path) -> Vec<(String, String)> {
    let Ok(root) = cwd.canonicalize() else {
        return Vec::new();
    };
    let mut found: Vec<(String, String)> = Vec::new();
    for simple in analyze(command).commands {
        let words: Vec<&str> = simple.words.iter().map(|w| w.text.as_str()).collect();
        let Some(program) = words.first() else {
            continue;
        };
        let base = program.rsplit('/').next().unwrap_or_default();
        let script = if INTERPRETERS.contains(&base) {
            words[1..].iter().find(|w| !w.starts_with('-')).copied()
        } else {
            program.contains('/').then_some(*program)
        };
        let Some(script) = script else { continue };
        let Ok(path) = root.join(script).canonicalize() else {
            continue;
        };
        if !path.starts_with(&root) || found.iter().any(|(p, _)| p == script) {
            continue;
        }
        if let Some(text) = read_capped(&path) {
            found.push((script.to_string(), text));
        }
        if found.len() == MAX_SCRIPTS {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_in_the_folder_are_read_and_others_are_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("run.sh"), "rm -rf build\n").expect("write");
        std::fs::create_dir(dir.path().join("tools")).expect("mkdir");
        std::fs::write(dir.path().join("tools/y.py"), "print(1)\n").expect("write");
        let found = scripts_run(
            "./run.sh && python3 -u tools/y.py; cat /etc/passwd; bash ../x.sh",
            dir.path(),
        );
        let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["./run.sh", "tools/y.py"]);
        assert_eq!(found[0].1, "rm -rf build\n");
    }

    #[test]
    fn delivered_notes_are_read_from_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("events.jsonl");
        std::fs::write(
            &log,
            "{\"event\":\"note_queued\",\"text\":\"a\"}\n{\"event\":\"note_delivered\",\"text\":\"fix the test first\"}\nnot json\n",
        )
        .expect("write");
        assert_eq!(delivered_notes(&log), ["fix the test first"]);
    }
}

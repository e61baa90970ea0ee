//! The file tools the LLM may ask for, and nothing else (no shell, no network):
//! read_file, write_file, create_file, list_directory, find_files. Every size is
//! bounded, and a result says when it was cut.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::answer::Action;
use super::sandbox::{PathError, Sandbox, classify};

pub(crate) const TOOL_NAMES: [&str; 5] = [
    "read_file",
    "write_file",
    "create_file",
    "list_directory",
    "find_files",
];
/// read_file returns at most this many bytes of a file.
pub(crate) const READ_CAP: u64 = 64 * 1024;
/// write_file and create_file refuse larger contents.
pub(crate) const WRITE_CAP: usize = 1024 * 1024;
/// list_directory and find_files return at most this many entries.
pub(crate) const LIST_CAP: usize = 200;
pub(crate) const MAX_FIND_DEPTH: u64 = 3;

/// What became of one action, as logged and shown to the LLM next time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ActionResult {
    pub tool: String,
    pub args: Map<String, Value>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub security_violation: bool,
    /// An unknown tool: nothing was run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FindArgs {
    pattern: String,
    start_path: String,
    #[serde(default)]
    max_depth: Option<u64>,
}

enum Failure {
    Path(PathError),
    Unknown,
}

impl From<PathError> for Failure {
    fn from(err: PathError) -> Self {
        Failure::Path(err)
    }
}

pub(crate) fn execute(sandbox: &Sandbox, action: &Action) -> ActionResult {
    let outcome = match action.tool.as_str() {
        "read_file" => args(action).and_then(|a: PathArgs| read_file(sandbox, &a.path)),
        "write_file" => args(action).and_then(|a: WriteArgs| write(sandbox, &a, false)),
        "create_file" => args(action).and_then(|a: WriteArgs| write(sandbox, &a, true)),
        "list_directory" => args(action).and_then(|a: PathArgs| list_directory(sandbox, &a.path)),
        "find_files" => args(action).and_then(|a: FindArgs| find_files(sandbox, &a)),
        _ => Err(Failure::Unknown),
    };
    let mut result = ActionResult {
        tool: action.tool.clone(),
        args: action.args.clone(),
        ok: false,
        output: None,
        error: None,
        security_violation: false,
        skipped: false,
    };
    match outcome {
        Ok(output) => {
            result.ok = true;
            result.output = Some(output);
        }
        Err(Failure::Unknown) => {
            result.skipped = true;
            result.error = Some(format!(
                "unknown tool {:?}: skipped (the tools are {})",
                action.tool,
                TOOL_NAMES.join(", ")
            ));
        }
        Err(Failure::Path(PathError::Forbidden(message))) => {
            result.security_violation = true;
            result.error = Some(format!("security violation: {message}"));
        }
        Err(Failure::Path(PathError::Failed(message))) => result.error = Some(message),
    }
    result
}

fn args<T: DeserializeOwned>(action: &Action) -> Result<T, Failure> {
    serde_json::from_value(Value::Object(action.args.clone())).map_err(|err| {
        Failure::Path(PathError::Failed(format!(
            "bad arguments for {}: {err}",
            action.tool
        )))
    })
}

fn read_file(sandbox: &Sandbox, path: &str) -> Result<String, Failure> {
    let at = sandbox.resolve(path)?;
    let fail = |err| classify(path, err);
    let file = at.dir.open(&at.rest).map_err(fail)?;
    let size = file.metadata().map_err(fail)?.len();
    let mut bytes = Vec::new();
    file.take(READ_CAP).read_to_end(&mut bytes).map_err(fail)?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if size > READ_CAP {
        text.push_str(&format!(
            "\n[truncated: the first {READ_CAP} of {size} bytes]"
        ));
    }
    Ok(text)
}

fn write(sandbox: &Sandbox, args: &WriteArgs, create_new: bool) -> Result<String, Failure> {
    let path = args.path.as_str();
    if args.content.len() > WRITE_CAP {
        return Err(PathError::Failed(format!(
            "{path}: content of {} bytes is over the {WRITE_CAP}-byte limit",
            args.content.len()
        ))
        .into());
    }
    let at = sandbox.resolve(path)?;
    if at.rest.as_os_str().is_empty() {
        return Err(
            PathError::Failed(format!("{path}: is an allowed directory, not a file")).into(),
        );
    }
    let fail = |err| classify(path, err);
    if let Some(parent) = at.rest.parent().filter(|p| !p.as_os_str().is_empty()) {
        at.dir.create_dir_all(parent).map_err(fail)?;
    }
    let mut options = OpenOptions::new();
    options.write(true);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    let mut file = at.dir.open_with(&at.rest, &options).map_err(fail)?;
    file.write_all(args.content.as_bytes()).map_err(fail)?;
    let verb = if create_new { "created" } else { "wrote" };
    Ok(format!("{verb} {path} ({} bytes)", args.content.len()))
}

fn open_dir(sandbox: &Sandbox, path: &str) -> Result<Dir, Failure> {
    let at = sandbox.resolve(path)?;
    let rest: &Path = &at.rest;
    let dir = if rest.as_os_str().is_empty() {
        at.dir.try_clone()
    } else {
        at.dir.open_dir(rest)
    };
    Ok(dir.map_err(|err| classify(path, err))?)
}

fn list_directory(sandbox: &Sandbox, path: &str) -> Result<String, Failure> {
    let dir = open_dir(sandbox, path)?;
    let mut lines = Vec::new();
    for entry in dir.entries().map_err(|err| classify(path, err))? {
        let entry = entry.map_err(|err| classify(path, err))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let line = match entry.file_type() {
            Ok(kind) if kind.is_dir() => format!("{name}/"),
            Ok(kind) if kind.is_symlink() => format!("{name} (symlink)"),
            _ => match entry.metadata() {
                Ok(meta) => format!("{name} ({} bytes)", meta.len()),
                Err(_) => name,
            },
        };
        lines.push(line);
    }
    lines.sort();
    let total = lines.len();
    Ok(capped(lines, total, &format!("{path} is empty")))
}

/// At most [`LIST_CAP`] lines of `total`, saying so when some were left out.
fn capped(mut lines: Vec<String>, total: usize, empty: &str) -> String {
    if lines.is_empty() {
        return format!("({empty})");
    }
    lines.truncate(LIST_CAP);
    let mut text = lines.join("\n");
    if total > LIST_CAP {
        text.push_str(&format!("\n[truncated: {LIST_CAP} of {total} entries]"));
    }
    text
}

fn find_files(sandbox: &Sandbox, args: &FindArgs) -> Result<String, Failure> {
    let pattern = glob::Pattern::new(&args.pattern)
        .map_err(|err| PathError::Failed(format!("bad pattern {:?}: {err}", args.pattern)))?;
    let depth = args
        .max_depth
        .unwrap_or(MAX_FIND_DEPTH)
        .clamp(1, MAX_FIND_DEPTH);
    let start = open_dir(sandbox, &args.start_path)?;
    let mut found = Vec::new();
    let mut total = 0;
    walk(&start, Path::new(""), depth, &mut |rel: &Path, is_dir| {
        let name = rel.file_name().unwrap_or_default().to_string_lossy();
        let subject = if args.pattern.contains('/') {
            rel.to_string_lossy()
        } else {
            name
        };
        if pattern.matches(&subject) {
            total += 1;
            if found.len() < LIST_CAP {
                let shown = Path::new(&args.start_path).join(rel);
                let slash = if is_dir { "/" } else { "" };
                found.push(format!("{}{slash}", shown.display()));
            }
        }
    });
    found.sort();
    let mut text = capped(found, total, "no match");
    if args.max_depth.is_some_and(|d| d > MAX_FIND_DEPTH) {
        text.push_str(&format!("\n[max_depth is at most {MAX_FIND_DEPTH}]"));
    }
    Ok(text)
}

/// Every entry under an allowed path, as find_files shows it (for the context).
pub(crate) fn listing(sandbox: &Sandbox, path: &str) -> String {
    let args = FindArgs {
        pattern: "*".into(),
        start_path: path.into(),
        max_depth: None,
    };
    match find_files(sandbox, &args) {
        Ok(text) => text,
        Err(Failure::Path(PathError::Forbidden(m) | PathError::Failed(m))) => {
            format!("(cannot list: {m})")
        }
        Err(Failure::Unknown) => String::new(),
    }
}

/// Visits entries down to `depth` levels; symlinks are listed, never followed.
/// Stops looking once far more than can be shown has been seen.
fn walk(dir: &Dir, rel: &Path, depth: u64, visit: &mut dyn FnMut(&Path, bool)) {
    let Ok(entries) = dir.entries() else { return };
    for entry in entries.flatten().take(LIST_CAP * 20) {
        let path: PathBuf = rel.join(entry.file_name());
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        visit(&path, is_dir);
        if is_dir
            && depth > 1
            && let Ok(sub) = entry.open_dir()
        {
            walk(&sub, &path, depth - 1, visit);
        }
    }
}

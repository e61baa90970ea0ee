//! The file tools the LLM may ask for, and nothing else (no shell, no network):
//! read_file, write_file, create_file, list_directory, find_files. Every size is
//! bounded, and a result says when it was cut.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::answer::Action;
use super::sandbox::{PathError, Resolved, Sandbox, check_file, check_opened, classify};

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
    /// Under way when its worker was killed: not run again, its effect unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl ActionResult {
    /// The result of `action` when it was under way as its worker was killed.
    pub(crate) fn interrupted(action: &Action) -> ActionResult {
        ActionResult {
            tool: action.tool.clone(),
            args: action.args.clone(),
            ok: false,
            output: None,
            error: Some(
                "interrupted: the worker was killed while this action ran; it was not run again, and what it did (if anything) stays".to_string(),
            ),
            security_violation: false,
            skipped: false,
            interrupted: true,
        }
    }
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
        interrupted: false,
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
    // Looked at before it is opened: a device is never opened, a FIFO never waited on.
    let looked_at = at.dir.metadata(&at.rest).map_err(fail)?;
    check_file(path, &looked_at)?;
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK);
    let file = at.dir.open_with(&at.rest, &options).map_err(fail)?;
    let opened = file.metadata().map_err(fail)?;
    check_opened(path, &looked_at, &opened)?;
    let size = opened.len();
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
    let Some(name) = at.rest.file_name() else {
        return Err(
            PathError::Failed(format!("{path}: is an allowed directory, not a file")).into(),
        );
    };
    let fail = |err| classify(path, err);
    let parent = parent_dir(sandbox, &at, path)?;
    sandbox.refuse_guarded(&parent, name, path)?;
    let mut options = OpenOptions::new();
    options
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    let existing = match parent.symlink_metadata(name) {
        Ok(meta) => Some(meta),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(fail(err).into()),
    };
    let mut file = match existing {
        Some(looked_at) if !create_new => {
            check_file(path, &looked_at)?;
            // Emptied only once it is known to be the regular file looked at.
            let file = parent.open_with(name, &options).map_err(fail)?;
            check_opened(path, &looked_at, &file.metadata().map_err(fail)?)?;
            file.set_len(0).map_err(fail)?;
            file
        }
        // O_EXCL: a new file, never a link followed nor a file replaced.
        _ => parent
            .open_with(name, options.create_new(true))
            .map_err(fail)?,
    };
    file.write_all(args.content.as_bytes()).map_err(fail)?;
    let verb = if create_new { "created" } else { "wrote" };
    Ok(format!("{verb} {path} ({} bytes)", args.content.len()))
}

/// The folder a tool path's last name is in, its missing folders made one level at
/// a time, so that none is made under the name of one of the worker's own files.
fn parent_dir(sandbox: &Sandbox, at: &Resolved<'_>, path: &str) -> Result<Dir, PathError> {
    let fail = |err| classify(path, err);
    let mut dir = at.dir.try_clone().map_err(fail)?;
    let Some(parents) = at.rest.parent() else {
        return Ok(dir);
    };
    for part in parents.components() {
        let name = part.as_os_str();
        dir = match dir.open_dir(name) {
            Ok(sub) => sub,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                sandbox.refuse_guarded(&dir, name, path)?;
                match dir.create_dir(name) {
                    Ok(()) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(fail(err)),
                }
                dir.open_dir(name).map_err(fail)?
            }
            Err(err) => return Err(fail(err)),
        };
    }
    Ok(dir)
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
        Ok(text) if text == "(no match)" => "(empty)".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::symlink;

    /// A task directory beside an `outside/` folder, with symlinks from
    /// `artifacts/` both inside and out.
    struct Fixture {
        root: tempfile::TempDir,
        sandbox: Sandbox,
    }

    impl Fixture {
        fn new() -> Fixture {
            let root = tempfile::tempdir().expect("tempdir");
            let r = root.path();
            std::fs::create_dir_all(r.join("outside/deep")).expect("mkdir");
            std::fs::write(r.join("outside/secret.txt"), "secret").expect("write");
            std::fs::write(r.join("outside/deep/more.txt"), "more").expect("write");
            let art = r.join("task/artifacts");
            std::fs::create_dir_all(art.join("sub")).expect("mkdir");
            std::fs::write(r.join("task/task.json"), "{}").expect("write");
            std::fs::write(art.join("sub/a.txt"), "inside").expect("write");
            symlink("../../outside", art.join("out_dir")).expect("symlink");
            symlink(r.join("outside/secret.txt"), art.join("out_file")).expect("symlink");
            symlink(r.join("outside/new.txt"), art.join("dangling_out")).expect("symlink");
            symlink("sub", art.join("in_dir")).expect("symlink");
            symlink("sub/a.txt", art.join("in_file")).expect("symlink");
            let sandbox =
                Sandbox::open(&r.join("task"), &["artifacts".to_string()], &[]).expect("sandbox");
            Fixture { root, sandbox }
        }

        fn run(&self, tool: &str, args: Value) -> ActionResult {
            let Value::Object(args) = args else {
                panic!("args must be an object")
            };
            execute(
                &self.sandbox,
                &Action {
                    tool: tool.into(),
                    args,
                },
            )
        }

        /// Every entry outside `task/artifacts`, with file contents and link targets.
        fn outside(&self) -> BTreeMap<PathBuf, String> {
            let mut seen = BTreeMap::new();
            snapshot(self.root.path(), self.root.path(), &mut seen);
            seen
        }
    }

    fn snapshot(root: &Path, dir: &Path, seen: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).expect("under root").to_path_buf();
            if rel.starts_with("task/artifacts") {
                continue;
            }
            let kind = entry.file_type().expect("file type");
            let value = if kind.is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).expect("readlink"))
            } else if kind.is_dir() {
                snapshot(root, &path, seen);
                "dir".to_string()
            } else {
                format!("file {:?}", std::fs::read(&path).expect("read"))
            };
            seen.insert(rel, value);
        }
    }

    fn forbidden(result: &ActionResult) -> bool {
        !result.ok && result.security_violation
    }

    #[test]
    fn escapes_are_security_violations() {
        let f = Fixture::new();
        let before = f.outside();
        for path in [
            "artifacts/../task.json",
            "artifacts/sub/../../task.json",
            "../outside/secret.txt",
            "task.json",
            "/etc/passwd",
            &f.root
                .path()
                .join("outside/secret.txt")
                .display()
                .to_string(),
            "artifacts/out_file",
            "artifacts/out_dir/secret.txt",
            "artifacts/out_dir/deep/more.txt",
            "",
        ] {
            let read = f.run("read_file", serde_json::json!({"path": path}));
            assert!(forbidden(&read), "read {path:?}: {read:?}");
            let write = f.run(
                "write_file",
                serde_json::json!({"path": path, "content": "x"}),
            );
            assert!(forbidden(&write), "write {path:?}: {write:?}");
        }
        for path in ["artifacts/out_dir", "artifacts/..", "/", "."] {
            let list = f.run("list_directory", serde_json::json!({"path": path}));
            assert!(forbidden(&list), "list {path:?}: {list:?}");
        }
        let created = f.run(
            "create_file",
            serde_json::json!({"path": "artifacts/out_dir/new.txt", "content": "x"}),
        );
        assert!(forbidden(&created), "{created:?}");
        let found = f.run(
            "find_files",
            serde_json::json!({"pattern": "*", "start_path": "artifacts/out_dir"}),
        );
        assert!(forbidden(&found), "{found:?}");
        assert_eq!(f.outside(), before);
    }

    #[test]
    fn a_dangling_symlink_out_is_not_written_through() {
        let f = Fixture::new();
        let before = f.outside();
        for tool in ["write_file", "create_file"] {
            let result = f.run(
                tool,
                serde_json::json!({"path": "artifacts/dangling_out", "content": "x"}),
            );
            assert!(!result.ok, "{tool}: {result:?}");
        }
        assert_eq!(f.outside(), before);
        assert!(!f.root.path().join("outside/new.txt").exists());
    }

    #[test]
    fn symlinks_inside_work() {
        let f = Fixture::new();
        let read = f.run(
            "read_file",
            serde_json::json!({"path": "artifacts/in_file"}),
        );
        assert_eq!(read.output.as_deref(), Some("inside"), "{read:?}");
        let read = f.run(
            "read_file",
            serde_json::json!({"path": "./artifacts/in_dir/a.txt"}),
        );
        assert_eq!(read.output.as_deref(), Some("inside"), "{read:?}");
        let list = f.run("list_directory", serde_json::json!({"path": "artifacts"}));
        let text = list.output.expect("listing");
        assert!(
            text.contains("sub/") && text.contains("in_dir (symlink)"),
            "{text}"
        );
    }

    #[test]
    fn the_tools_do_what_they_say() {
        let f = Fixture::new();
        let write = |path: &str, content: &str| {
            f.run(
                "write_file",
                serde_json::json!({"path": path, "content": content}),
            )
        };
        assert!(write("artifacts/new/deeper/n.md", "one").ok);
        assert!(write("artifacts/new/deeper/n.md", "two").ok);
        let art = f.root.path().join("task/artifacts");
        assert_eq!(
            std::fs::read_to_string(art.join("new/deeper/n.md")).expect("read"),
            "two"
        );
        let again = f.run(
            "create_file",
            serde_json::json!({"path": "artifacts/sub/a.txt", "content": "x"}),
        );
        assert!(!again.ok && !again.security_violation, "{again:?}");
        assert_eq!(
            std::fs::read_to_string(art.join("sub/a.txt")).expect("read"),
            "inside"
        );
        let found = f.run(
            "find_files",
            serde_json::json!({"pattern": "*.md", "start_path": "artifacts", "max_depth": 9}),
        );
        let text = found.output.expect("found");
        assert!(text.contains("artifacts/new/deeper/n.md"), "{text}");
        assert!(text.contains("max_depth is at most 3"), "{text}");
        let shallow = f.run(
            "find_files",
            serde_json::json!({"pattern": "*.md", "start_path": "artifacts", "max_depth": 2}),
        );
        assert_eq!(shallow.output.as_deref(), Some("(no match)"));
        let bad = f.run(
            "read_file",
            serde_json::json!({"path": "artifacts/sub/a.txt", "x": 1}),
        );
        assert!(!bad.ok && !bad.security_violation, "{bad:?}");
        let unknown = f.run("run_shell", serde_json::json!({"command": "ls"}));
        assert!(unknown.skipped && !unknown.ok, "{unknown:?}");
    }

    #[test]
    fn sizes_are_bounded_and_say_so() {
        let f = Fixture::new();
        let art = f.root.path().join("task/artifacts");
        std::fs::write(art.join("big.txt"), "x".repeat(READ_CAP as usize + 10)).expect("write");
        let read = f.run(
            "read_file",
            serde_json::json!({"path": "artifacts/big.txt"}),
        );
        let text = read.output.expect("read");
        assert!(text.ends_with(&format!(
            "[truncated: the first {READ_CAP} of {} bytes]",
            READ_CAP + 10
        )));
        for i in 0..LIST_CAP + 5 {
            std::fs::write(art.join(format!("sub/f{i:03}")), "").expect("write");
        }
        let list = f.run(
            "list_directory",
            serde_json::json!({"path": "artifacts/sub"}),
        );
        let text = list.output.expect("list");
        assert!(
            text.ends_with(&format!(
                "[truncated: {LIST_CAP} of {} entries]",
                LIST_CAP + 6
            )),
            "{text}"
        );
        let huge = "y".repeat(WRITE_CAP + 1);
        let write = f.run(
            "write_file",
            serde_json::json!({"path": "artifacts/h", "content": huge}),
        );
        assert!(!write.ok && !art.join("h").exists());
    }

    #[test]
    fn unicode_and_very_long_paths() {
        let f = Fixture::new();
        let path = "artifacts/ünïcödé/日本語 😀.txt";
        let write = f.run(
            "write_file",
            serde_json::json!({"path": path, "content": "é"}),
        );
        assert!(write.ok, "{write:?}");
        let read = f.run("read_file", serde_json::json!({"path": path}));
        assert_eq!(read.output.as_deref(), Some("é"));
        let before = f.outside();
        let long_name = format!("artifacts/{}", "n".repeat(300));
        let deep = format!("artifacts/{}", vec!["abcdefgh"; 600].join("/"));
        let up = format!("artifacts/{}", vec![".."; 600].join("/"));
        for path in [long_name, deep, up] {
            let result = f.run(
                "write_file",
                serde_json::json!({"path": path, "content": "x"}),
            );
            assert!(!result.ok, "{result:?}");
        }
        assert_eq!(f.outside(), before);
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just("".to_string()),
            Just("artifacts".to_string()),
            Just("sub".to_string()),
            Just("out_dir".to_string()),
            Just("out_file".to_string()),
            Just("dangling_out".to_string()),
            Just("in_dir".to_string()),
            Just("task.json".to_string()),
            Just("secret.txt".to_string()),
            "[a-zé😀]{1,6}",
        ]
    }

    fn tool_path() -> impl Strategy<Value = String> {
        (any::<bool>(), prop::collection::vec(segment(), 0..7)).prop_map(|(absolute, parts)| {
            let joined = parts.join("/");
            if absolute {
                format!("/{joined}")
            } else {
                joined
            }
        })
    }

    fn own_file_path() -> impl Strategy<Value = String> {
        let own = prop_oneof![
            Just("task.json"),
            Just("state.json"),
            Just("heartbeat.json"),
            Just("actions.jsonl"),
            Just("iteration.jsonl"),
            Just(".state.json.abc123.tmp"),
            Just(".task.json.x"),
        ];
        let lead = prop_oneof![
            Just(""),
            Just("./"),
            Just("artifacts/../"),
            Just("artifacts/in_dir/../../"),
        ];
        let tail = prop_oneof![Just(""), Just("/x"), Just("/a/b")];
        (lead, own, tail).prop_map(|(lead, own, tail)| format!("{lead}{own}{tail}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// With the task folder itself allowed, the worker's own files are never
        /// written, nor a folder made under their names.
        #[test]
        fn the_workers_own_files_are_never_written(
            calls in prop::collection::vec((any::<bool>(), own_file_path()), 1..8)
        ) {
            let f = Fixture::new();
            let task = f.root.path().join("task");
            std::fs::write(task.join("state.json"), "{}").expect("write");
            let own: Vec<PathBuf> = super::super::task::OWN_FILES.iter().map(|f| task.join(f)).collect();
            let sandbox = Sandbox::open(&task, &[".".to_string()], &own).expect("sandbox");
            for (create, path) in calls {
                let tool = if create { "create_file" } else { "write_file" };
                let Value::Object(args) = serde_json::json!({"path": path, "content": "w"}) else {
                    unreachable!("an object literal")
                };
                let result = execute(&sandbox, &Action { tool: tool.into(), args });
                prop_assert!(!result.ok, "{tool} {path}: {result:?}");
            }
            prop_assert_eq!(std::fs::read_to_string(task.join("task.json")).expect("read"), "{}");
            prop_assert_eq!(std::fs::read_to_string(task.join("state.json")).expect("read"), "{}");
            for name in ["heartbeat.json", "actions.jsonl", ".state.json.abc123.tmp", ".task.json.x"] {
                prop_assert!(!task.join(name).exists(), "{} was made", name);
            }
        }

        /// Whatever paths the tools get, nothing outside `artifacts/` changes, and
        /// whatever is written lands inside it.
        #[test]
        fn nothing_outside_is_ever_touched(
            calls in prop::collection::vec((0..5usize, tool_path()), 1..12)
        ) {
            let f = Fixture::new();
            let before = f.outside();
            let art = f.root.path().join("task/artifacts").canonicalize().expect("canonical");
            for (tool, path) in calls {
                let (name, args) = match tool {
                    0 => ("read_file", serde_json::json!({"path": path})),
                    1 => ("write_file", serde_json::json!({"path": path, "content": "w"})),
                    2 => ("create_file", serde_json::json!({"path": path, "content": "c"})),
                    3 => ("list_directory", serde_json::json!({"path": path})),
                    _ => ("find_files", serde_json::json!({"pattern": "*", "start_path": path})),
                };
                let result = f.run(name, args);
                if result.ok && tool == 1 {
                    // `./artifacts/x` names the same file as `artifacts/x`.
                    let plain: PathBuf = Path::new(&path)
                        .components()
                        .filter(|part| *part != std::path::Component::CurDir)
                        .collect();
                    let rest = plain.strip_prefix("artifacts").expect("inside");
                    let written = art.join(rest).canonicalize().expect("written");
                    prop_assert!(written.starts_with(&art), "{path} -> {written:?}");
                }
                if result.ok && tool == 0 {
                    prop_assert_ne!(result.output.as_deref(), Some("secret"));
                }
            }
            prop_assert_eq!(f.outside(), before);
        }
    }
}

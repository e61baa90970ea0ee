//! Codex's PreToolUse hook: the `[[hooks.PreToolUse]]` entry that sends Codex's
//! shell commands and file edits (`apply_patch`) through `clowder gate`, merged
//! into the project's `.codex/config.toml`, and which Codex runs hooks at all.
//! A loop hands its Codex the same entry itself (see [`super::handed`]).
//!
//! Codex (0.124 and later) sends the same PreToolUse JSON as Claude Code and
//! reads the same answer. It runs a hook only once the hook is trusted: saved
//! trust (reviewed once in `/hooks`), or `--dangerously-bypass-hook-trust` on
//! the `codex exec` line. Codex before 0.124 has no hooks at all.

use std::path::{Path, PathBuf};

/// The project file the entry goes in.
pub const CONFIG: &str = ".codex/config.toml";
/// The tools the hook is called for: Codex names its shell `Bash`, and its one
/// file-editing tool `apply_patch`.
pub const MATCHER: &str = "Bash|apply_patch";
/// Seconds Codex waits for the hook: as for Claude Code, longer than the gate's
/// own default wait, so that the gate's answer, not Codex's timer, ends a wait.
pub const TIMEOUT_SECS: i64 = 600;
/// The flag that makes `codex exec` run hooks nobody reviewed.
pub const BYPASS_TRUST: &str = "--dangerously-bypass-hook-trust";

/// How the hook runs clowder: its absolute path, so that Codex finds it
/// whatever PATH its shell has, quoted for the shell when it must be.
pub fn gate_command() -> Result<String, String> {
    let exe =
        std::env::current_exe().map_err(|err| format!("cannot find clowder's own path: {err}"))?;
    let exe = exe.to_str().ok_or_else(|| {
        format!(
            "clowder's path {} is not UTF-8; write the hook by hand",
            exe.display()
        )
    })?;
    Ok(format!("{} gate", shell_quoted(exe)))
}

fn shell_quoted(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The entry as TOML, as `clowder init --codex-hook` prints it.
pub fn snippet(command: &str) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    let mut hooks = toml_edit::Table::new();
    hooks.set_implicit(true);
    let mut groups = toml_edit::ArrayOfTables::new();
    groups.push(entry(command));
    hooks.insert("PreToolUse", toml_edit::Item::ArrayOfTables(groups));
    doc.insert("hooks", toml_edit::Item::Table(hooks));
    doc.to_string()
}

/// One matcher group: the tools, and the command hook that runs the gate.
fn entry(command: &str) -> toml_edit::Table {
    let mut handler = toml_edit::Table::new();
    handler.insert("type", toml_edit::value("command"));
    handler.insert("command", toml_edit::value(command));
    handler.insert("timeout", toml_edit::value(TIMEOUT_SECS));
    let mut handlers = toml_edit::ArrayOfTables::new();
    handlers.push(handler);
    let mut group = toml_edit::Table::new();
    group.insert("matcher", toml_edit::value(MATCHER));
    group.insert("hooks", toml_edit::Item::ArrayOfTables(handlers));
    group
}

/// Whether a hook command runs `clowder gate` (by any path to clowder).
pub fn runs_gate(command: &str) -> bool {
    let words = crate::approvals::shell::shell_words(command);
    match words.as_slice() {
        [program, sub, ..] => {
            sub == "gate"
                && Path::new(program)
                    .file_name()
                    .is_some_and(|n| n == "clowder")
        }
        _ => false,
    }
}

/// Adds the entry to the config file at `path`, keeping everything else in it
/// as written. `Ok(false)`: a `clowder gate` hook was already there.
pub fn merge(path: &Path, command: &str) -> Result<bool, String> {
    let shown = path.display();
    let text = match crate::store::small_file::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(format!("cannot read {shown}: {err}")),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|err: toml_edit::TomlError| {
        let at = err.span().map_or(String::new(), |span| {
            let (line, column) = crate::config::line_column(&text, span.start);
            format!(":{line}:{column}")
        });
        let why = err.message().trim().to_string();
        format!("{shown}{at}: not valid TOML ({why}); it was not changed")
    })?;
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            toml_edit::Item::Table(table)
        })
        .as_table_like_mut()
        .ok_or_else(|| format!("{shown}: `hooks` is not a table; it was not changed"))?;
    if commands_in(hooks.get("PreToolUse"))
        .iter()
        .any(|c| runs_gate(c))
    {
        return Ok(false);
    }
    let groups = hooks
        .entry("PreToolUse")
        .or_insert(toml_edit::Item::ArrayOfTables(
            toml_edit::ArrayOfTables::new(),
        ))
        .as_array_of_tables_mut()
        .ok_or_else(|| {
            format!(
                "{shown}: `hooks.PreToolUse` is not written as [[hooks.PreToolUse]] tables; it was not changed (add the entry `clowder init --codex-hook` prints by hand)"
            )
        })?;
    groups.push(entry(command));
    let mut updated = doc.to_string();
    if !updated.ends_with('\n') {
        updated.push('\n');
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    }
    crate::store::write_atomically(path, updated.as_bytes())
        .map_err(|err| format!("cannot write {shown}: {err}"))?;
    Ok(true)
}

/// Every hook command under a `PreToolUse` item, in either TOML form.
fn commands_in(item: Option<&toml_edit::Item>) -> Vec<String> {
    let Some(item) = item else {
        return Vec::new();
    };
    let groups: Vec<&dyn toml_edit::TableLike> = match item {
        toml_edit::Item::ArrayOfTables(groups) => groups
            .iter()
            .map(|t| t as &dyn toml_edit::TableLike)
            .collect(),
        toml_edit::Item::Value(toml_edit::Value::Array(groups)) => groups
            .iter()
            .filter_map(|v| v.as_inline_table())
            .map(|t| t as &dyn toml_edit::TableLike)
            .collect(),
        _ => Vec::new(),
    };
    let mut commands = Vec::new();
    for group in groups {
        let handlers: Vec<&dyn toml_edit::TableLike> = match group.get("hooks") {
            Some(toml_edit::Item::ArrayOfTables(handlers)) => handlers
                .iter()
                .map(|t| t as &dyn toml_edit::TableLike)
                .collect(),
            Some(toml_edit::Item::Value(toml_edit::Value::Array(handlers))) => handlers
                .iter()
                .filter_map(|v| v.as_inline_table())
                .map(|t| t as &dyn toml_edit::TableLike)
                .collect(),
            _ => Vec::new(),
        };
        commands.extend(
            handlers
                .iter()
                .filter_map(|h| h.get("command")?.as_str().map(str::to_string)),
        );
    }
    commands
}

/// Whether the Codex config folder `folder` (a project's `.codex`, or the
/// user's Codex home) registers `clowder gate` as a PreToolUse hook, in its
/// `config.toml` or its `hooks.json`.
pub(crate) fn folder_registers(folder: &Path) -> bool {
    let in_toml = read_toml(&folder.join("config.toml")).is_some_and(|doc| {
        let pre = doc.get("hooks").and_then(|h| h.get("PreToolUse"));
        commands_in(pre).iter().any(|c| runs_gate(c))
    });
    in_toml || json_registers(&folder.join("hooks.json"))
}

fn read_toml(path: &Path) -> Option<toml_edit::DocumentMut> {
    crate::store::small_file::read_to_string(path)
        .ok()?
        .parse()
        .ok()
}

/// Whether the JSON hooks file at `path` (Codex's `hooks.json`, Claude Code's
/// `settings.json`: the same shape) registers `clowder gate` as a PreToolUse hook.
pub(crate) fn json_registers(path: &Path) -> bool {
    let Ok(text) = crate::store::small_file::read_to_string(path) else {
        return false;
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    let groups = json["hooks"]["PreToolUse"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    groups.iter().any(|group| {
        group["hooks"].as_array().is_some_and(|handlers| {
            handlers
                .iter()
                .any(|h| h["command"].as_str().is_some_and(runs_gate))
        })
    })
}

/// The user's Codex home: `$CODEX_HOME`, else `~/.codex`.
pub(crate) fn codex_home() -> Option<PathBuf> {
    match std::env::var_os("CODEX_HOME") {
        Some(home) if !home.is_empty() => Some(PathBuf::from(home)),
        _ => std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".codex")),
    }
}

/// The first Codex release that runs PreToolUse hooks.
const FIRST_WITH_HOOKS: (u64, u64) = (0, 124);

/// The version `program --version` reports (`codex-cli 0.101.0`), when it is
/// one without hooks. Anything else (no answer within a few seconds, another
/// text) says nothing.
pub(crate) fn version_without_hooks(program: &str, project: &Path) -> Option<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .arg("--version")
        .current_dir(project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    child
        .stdout
        .take()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    let version = text.trim().strip_prefix("codex-cli ")?.trim();
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let (major, minor) = (parts.next()??, parts.next()??);
    ((major, minor) < FIRST_WITH_HOOKS).then(|| version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_is_known_by_any_path_to_clowder() {
        assert!(runs_gate("clowder gate"));
        assert!(runs_gate("/usr/local/bin/clowder gate --timeout 5m"));
        assert!(runs_gate("'/opt/my tools/clowder' gate"));
        assert!(!runs_gate("clowder queue"));
        assert!(!runs_gate("echo clowder gate"));
        assert!(!runs_gate("/bin/notclowder gate"));
    }

    #[test]
    fn paths_are_quoted_for_the_shell_only_when_they_must_be() {
        assert_eq!(shell_quoted("/usr/bin/clowder"), "/usr/bin/clowder");
        assert_eq!(shell_quoted("/a b/it's"), r"'/a b/it'\''s'");
    }

    #[test]
    fn the_snippet_is_what_merge_writes_into_an_empty_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".codex/config.toml");
        assert_eq!(merge(&path, "/x/clowder gate"), Ok(true));
        let written = std::fs::read_to_string(&path).expect("written");
        assert_eq!(written, snippet("/x/clowder gate"));
        assert_eq!(merge(&path, "/y/clowder gate"), Ok(false));
    }
}

//! Claude Code's side of the gate: the PreToolUse hook entry that sends Bash,
//! Edit and Write calls through `clowder gate`, and merging it into a project's
//! `.claude/settings.json` without touching anything else there.

use std::path::Path;

/// What `clowder init --claude-hook` prints: the `.claude/settings.json` hook.
pub const CLAUDE_HOOK_SNIPPET: &str = r#"{"hooks":{"PreToolUse":[{"matcher":"Bash|Edit|Write","hooks":[{"type":"command","command":"clowder gate","timeout":600}]}]}}"#;

/// The hook registration `clowder init --claude-hook --write` merges.
pub fn claude_hook_entry() -> serde_json::Value {
    serde_json::json!({
        "matcher": "Bash|Edit|Write",
        "hooks": [{"type": "command", "command": "clowder gate", "timeout": 600}]
    })
}

/// The project file Claude Code reads its hooks from.
pub const CLAUDE_SETTINGS: &str = ".claude/settings.json";

/// Adds the hook running `command` to the settings file, keeping everything
/// else. `Ok(false)`: a `clowder gate` hook (by any path) was already there.
pub fn merge_hook(path: &Path, command: &str) -> Result<bool, String> {
    let mut settings = match crate::store::small_file::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => serde_json::json!({}),
        Ok(text) => serde_json::from_str::<serde_json::Value>(&text).map_err(|err| {
            format!(
                "{} is not valid JSON ({err}); it was not changed",
                path.display()
            )
        })?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    let not_object = |what: &str| {
        format!(
            "{}: {what} is not a JSON object; it was not changed",
            path.display()
        )
    };
    let root = settings
        .as_object_mut()
        .ok_or_else(|| not_object("the file"))?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .ok_or_else(|| not_object("`hooks`"))?;
    let pre = hooks
        .entry("PreToolUse")
        .or_insert_with(|| serde_json::json!([]))
        .as_array_mut()
        .ok_or_else(|| {
            format!(
                "{}: `hooks.PreToolUse` is not a list; it was not changed",
                path.display()
            )
        })?;
    let present = pre.iter().any(|entry| {
        entry["hooks"].as_array().is_some_and(|hooks| {
            hooks.iter().any(|h| {
                h["command"]
                    .as_str()
                    .is_some_and(super::codex_hook::runs_gate)
            })
        })
    });
    if present {
        return Ok(false);
    }
    let mut entry = claude_hook_entry();
    entry["hooks"][0]["command"] = serde_json::Value::from(command);
    pre.push(entry);
    let mut text = serde_json::to_string_pretty(&settings).map_err(|e| e.to_string())?;
    text.push('\n');
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    }
    crate::store::write_atomically(path, text.as_bytes())
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_snippet_is_the_merged_entry() {
        let snippet: serde_json::Value = serde_json::from_str(CLAUDE_HOOK_SNIPPET).expect("json");
        assert_eq!(snippet["hooks"]["PreToolUse"][0], claude_hook_entry());
    }
}

//! What a tool call acts on: the one table of which input field each tool really
//! uses, read by the rules (`policy`) and by every view of a request alike, so
//! that what is judged and what is shown cannot differ.

use serde_json::Value;

/// How the rules read a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Shell code: `command` of Bash.
    Shell,
    /// A file path, compared by whole components.
    Path,
    /// A URL, parsed as a browser does (WHATWG).
    Url,
    /// Free text: a search pattern or query.
    Text,
    /// A Codex `apply_patch` patch: each file it touches is a path.
    Patch,
    /// The whole input as JSON: a tool this table does not know (an MCP tool),
    /// or a known tool whose field is missing or not text. No field is guessed.
    Json,
}

/// The field each known tool acts on, from Claude Code's tool input schemas and
/// the hook input of Codex (which names its shell `Bash` too, and sends an
/// `apply_patch` call's patch as `command`).
const FIELDS: &[(&str, &str, Kind)] = &[
    ("Bash", "command", Kind::Shell),
    ("apply_patch", "command", Kind::Patch),
    ("Write", "file_path", Kind::Path),
    ("Edit", "file_path", Kind::Path),
    ("MultiEdit", "file_path", Kind::Path),
    ("Read", "file_path", Kind::Path),
    ("NotebookEdit", "notebook_path", Kind::Path),
    ("NotebookRead", "notebook_path", Kind::Path),
    ("LS", "path", Kind::Path),
    ("WebFetch", "url", Kind::Url),
    ("Grep", "pattern", Kind::Text),
    ("Glob", "pattern", Kind::Text),
    ("WebSearch", "query", Kind::Text),
];

/// Fields that some tool acts on: any of them beside the real one is shown with
/// it, so that a decoy field cannot stand in for the real one.
const SUBJECT_LIKE: &[&str] = &[
    "command",
    "file_path",
    "path",
    "notebook_path",
    "url",
    "pattern",
    "query",
];

/// The subject of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    pub kind: Kind,
    /// The field it was taken from (`None`: the whole input).
    pub field: Option<&'static str>,
    /// The field's text, or the whole input as compact JSON.
    pub text: String,
    /// Every other subject-like field in the input, by name.
    pub others: Vec<(&'static str, Value)>,
}

/// The subject of `tool` called with `input`.
pub fn of(tool: &str, input: Option<&Value>) -> Subject {
    let known = FIELDS.iter().find(|(name, _, _)| *name == tool);
    let found = known.and_then(|(_, field, kind)| {
        let text = input?.get(field)?.as_str()?;
        Some((*field, *kind, text.to_string()))
    });
    match found {
        Some((field, kind, text)) => Subject {
            kind,
            field: Some(field),
            text,
            others: others(input, field),
        },
        None => Subject {
            kind: Kind::Json,
            field: None,
            text: input.map(Value::to_string).unwrap_or_default(),
            others: Vec::new(),
        },
    }
}

fn others(input: Option<&Value>, field: &str) -> Vec<(&'static str, Value)> {
    SUBJECT_LIKE
        .iter()
        .filter(|key| **key != field)
        .filter_map(|key| Some((*key, input?.get(key)?.clone())))
        .collect()
}

/// Every string in `value`, however deep: what a deny rule looks at in an
/// input whose meaning is not known.
pub fn texts(value: &Value) -> Vec<&str> {
    match value {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().flat_map(texts).collect(),
        Value::Object(map) => map.values().flat_map(texts).collect(),
        _ => Vec::new(),
    }
}

impl Subject {
    /// The subject in one line for people, unescaped: the text, then every other
    /// field that could be taken for it (`/root/.bashrc  [also command="x"]`).
    pub fn shown(&self) -> String {
        let text = match self.kind {
            Kind::Patch => super::patch::summary(&self.text),
            _ => self.text.clone(),
        };
        if self.others.is_empty() {
            return text;
        }
        let also: Vec<String> = self
            .others
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        format!("{text}  [also {}]", also.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_field_the_tool_uses_is_the_subject_and_decoys_are_shown() {
        let decoy = json!({"file_path": "/root/.bashrc", "command": "src/lib.rs", "content": "x"});
        let subject = of("Write", Some(&decoy));
        assert_eq!(subject.kind, Kind::Path);
        assert_eq!(subject.text, "/root/.bashrc");
        assert_eq!(
            subject.shown(),
            "/root/.bashrc  [also command=\"src/lib.rs\"]"
        );
        let bash = of(
            "Bash",
            Some(&json!({"command": "ls", "description": "list"})),
        );
        assert_eq!(bash.shown(), "ls");
    }

    #[test]
    fn a_codex_patch_is_shown_by_the_files_it_touches() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Delete File: b.txt\n*** End Patch";
        let subject = of("apply_patch", Some(&json!({"command": patch})));
        assert_eq!(subject.kind, Kind::Patch);
        assert_eq!(subject.text, patch);
        assert_eq!(subject.shown(), "update src/a.rs, delete b.txt");
        let bad = of("apply_patch", Some(&json!({"command": "rm -rf /"})));
        assert!(
            bad.shown().starts_with("unreadable patch ("),
            "{}",
            bad.shown()
        );
    }

    #[test]
    fn an_unknown_tool_or_a_missing_field_is_the_whole_input() {
        let input = json!({"path": "/etc", "url": "https://x"});
        let mcp = of("mcp__files__read", Some(&input));
        assert_eq!(mcp.kind, Kind::Json);
        assert_eq!(mcp.shown(), input.to_string());
        let missing = of("Write", Some(&json!({"command": "src/lib.rs"})));
        assert_eq!(missing.kind, Kind::Json);
        assert_eq!(missing.field, None);
    }
}

//! Display lines: constructors, tool summaries and number formatting.

use serde_json::value::RawValue;

use super::decode::{Obj, json_text};
use super::*;

pub(super) fn line(kind: LineKind, text: String) -> Rendered {
    Rendered {
        kind,
        text,
        detail: None,
        tool_use_id: None,
        is_error: false,
    }
}

impl Rendered {
    pub(super) fn with_detail(mut self, detail: Option<Detail>) -> Self {
        self.detail = detail;
        self
    }

    pub(super) fn with_id(mut self, id: Option<String>) -> Self {
        self.tool_use_id = id.filter(|id| !id.is_empty());
        self
    }

    pub(super) fn with_error(mut self, is_error: bool) -> Self {
        self.is_error = is_error;
        self
    }
}

pub(super) fn plain(text: &str) -> Rendered {
    line(LineKind::Plain, sanitize_line(text, true, MAX_TEXT_CHARS))
}

/// One display line per line of agent text; leading/trailing blank lines are
/// dropped and runs of blank lines collapse to one.
pub(super) fn push_text_lines(text: &str, out: &mut Vec<Rendered>) {
    let text = text.trim_end();
    // Starting as if after a blank line also drops leading blank lines.
    let mut previous_blank = true;
    let mut shown = 0;
    let mut offset = 0;
    for raw in text.split('\n') {
        let at = offset;
        offset += raw.len() + 1;
        let cleaned = clean(raw);
        let blank = cleaned.trim().is_empty();
        if blank && previous_blank {
            continue;
        }
        previous_blank = blank;
        if shown == MAX_LINES_PER_BLOCK {
            let rest = &text[at..];
            let count = rest.split('\n').count() as u64;
            out.push(
                line(LineKind::Text, format!("… (+{})", plural(count, "line")))
                    .with_detail(Some(Detail::text(rest.to_owned(), true))),
            );
            return;
        }
        out.push(line(
            LineKind::Text,
            if blank { String::new() } else { cleaned },
        ));
        shown += 1;
    }
}

/// "▶ Name  summary".
pub(super) fn call_text(name: &str, summary: &str) -> String {
    if summary.is_empty() {
        fit(format!("▶ {name}"))
    } else {
        fit(format!("▶ {name}  {summary}"))
    }
}

/// The input field that says most about a call, by tool.
pub(super) fn tool_summary(name: &str, input: &RawValue) -> String {
    let fields = Obj::of(Some(input)).unwrap_or_default();
    if name == "TodoWrite"
        && fields
            .get("todos")
            .is_some_and(|t| t.get().starts_with('['))
    {
        let todos: Vec<Obj<'_>> = fields
            .items("todos")
            .into_iter()
            .map(|t| Obj::of(Some(t)).unwrap_or_default())
            .collect();
        let status = |s: &str| {
            todos
                .iter()
                .filter(|t| t.scalar("status").str() == Some(s))
                .count()
        };
        let mut text = format!(
            "{} · {} done",
            plural(todos.len() as u64, "todo"),
            status("completed")
        );
        if let Some(now) = todos
            .iter()
            .find(|t| t.scalar("status").str() == Some("in_progress"))
            .and_then(|t| t.str("activeForm").or_else(|| t.str("content")))
        {
            text.push_str(&format!(" · now: {}", one_line(&now)));
        }
        return text;
    }
    let field = match name {
        "Bash" | "SlashCommand" => "command",
        "Edit" | "Write" | "Read" | "MultiEdit" => "file_path",
        "NotebookEdit" | "NotebookRead" => "notebook_path",
        "Grep" | "Glob" => "pattern",
        "WebFetch" => "url",
        "WebSearch" => "query",
        "Task" | "Agent" => "description",
        "Skill" => "skill",
        "LS" => "path",
        "BashOutput" => "bash_id",
        "KillShell" | "KillBash" => "shell_id",
        _ => "",
    };
    if !field.is_empty()
        && let Some(value) = fields.str(field)
    {
        return one_line(&value);
    }
    compact_summary(input)
}

pub(super) fn compact_summary(input: &RawValue) -> String {
    match input.get().trim() {
        "null" | "{}" => String::new(),
        _ => {
            let (compact, _) = json_text(input, false);
            let end = floor_char_boundary(&compact, MAX_TEXT_CHARS * 4);
            clean(&compact[..end])
        }
    }
}

/// `bash -lc 'cmd'` → `cmd`: Codex wraps every command in a login shell, which
/// says nothing on a one-line display. The script is shown as the shell runs
/// it, its quoting undone by a shell-words reader (a `"…"` script holding `$`
/// or a backtick keeps them, and loses its `\"`). Anything else, or a command
/// that does not split as shell words, is shown as written.
pub(super) fn unwrap_shell(command: &str) -> Cow<'_, str> {
    let command = command.trim();
    let Some(words) = shlex::split(command) else {
        return Cow::Borrowed(command);
    };
    match shell_script(&words) {
        Some(script) => Cow::Owned(script.to_owned()),
        None => Cow::Borrowed(command),
    }
}

/// The script of `[shell, -c|-lc, script]` when `shell` is a POSIX shell.
pub(super) fn shell_script(words: &[String]) -> Option<&str> {
    const SHELLS: &[&str] = &["bash", "zsh", "sh", "dash"];
    const FLAGS: &[&str] = &["-c", "-lc", "-cl"];
    let [shell, flag, script] = words else {
        return None;
    };
    let name = shell.rsplit('/').next().unwrap_or(shell);
    (SHELLS.contains(&name) && FLAGS.contains(&flag.as_str())).then_some(script.as_str())
}

/// First non-blank line of what the agent asks for (a command, a path, a
/// query), with every invisible character in it, escape sequences and
/// carriage returns included, shown escaped ([`crate::escape::visible`]):
/// nothing in it may hide the rest. " …" when more non-blank lines follow.
pub(super) fn one_line(text: &str) -> String {
    let blank = |l: &str| l.trim_matches([' ', '\t']).is_empty();
    let mut lines = text.split('\n').filter(|l| !blank(l));
    let Some(first) = lines.next() else {
        return String::new();
    };
    // One character past the cap is enough for `fit` to end it with `…`.
    let head: String = first
        .trim_matches([' ', '\t'])
        .chars()
        .take(MAX_TEXT_CHARS + 1)
        .collect();
    let mut shown = fit(crate::escape::visible(&head).into_owned());
    if lines.next().is_some() {
        shown.push_str(" …");
    }
    shown
}

/// First non-blank line and how many other lines there are (a trailing
/// newline does not start a line).
pub(super) fn first_line(text: &str) -> (&str, usize) {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let total = body.split('\n').count();
    let first = body
        .split('\n')
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    (first, total.saturating_sub(1))
}

/// Whether a line would lose characters to the display cap.
pub(super) fn text_is_cut(line: &str) -> bool {
    line.len() > MAX_TEXT_CHARS && line.chars().count() > MAX_TEXT_CHARS
}

/// Reset times are documented in seconds; a millisecond value is accepted too.
pub(super) fn epoch_seconds(value: i64) -> Option<i64> {
    match value {
        v if v <= 0 => None,
        v if v >= 100_000_000_000 => Some(v / 1000),
        v => Some(v),
    }
}

pub(super) fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{} {word}s", group(n))
    }
}

/// 1234567 → "1,234,567".
pub(super) fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

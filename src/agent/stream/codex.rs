//! Codex `exec --json`: the typed event of a line, and the display lines and
//! statistics read from it.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::classify::Signals;
use super::decode::{ErrorField, Loose, Obj, Scalar, scalar};
use super::detail::{Collected, Detail, Gather, json_str};
use super::*;

/// One line of `codex exec --json`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct CodexEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Scalar<'a>,
    #[serde(borrow)]
    pub(super) thread_id: Scalar<'a>,
    /// An `error` event's text.
    #[serde(borrow)]
    pub(super) message: Scalar<'a>,
    #[serde(borrow)]
    pub(super) usage: Option<&'a RawValue>,
    /// A `turn.failed` event's `{message}`.
    #[serde(borrow)]
    pub(super) error: ErrorField<'a>,
    // Claude's result members, should a Claude event come through: what
    // classification reads is read whatever the format.
    #[serde(borrow)]
    pub(super) subtype: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) is_error: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) api_error_status: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) result: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) rate_limit_info: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) item: Loose<Item<'a>>,
}

/// A thread item (message, command, file change, tool call…).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Item<'a> {
    #[serde(borrow)]
    pub(super) id: Scalar<'a>,
    #[serde(rename = "type", borrow)]
    pub(super) kind: Scalar<'a>,
    #[serde(borrow)]
    pub(super) item_type: Scalar<'a>,
    #[serde(borrow)]
    pub(super) text: Scalar<'a>,
    #[serde(borrow)]
    pub(super) command: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) aggregated_output: Scalar<'a>,
    #[serde(borrow)]
    pub(super) exit_code: Scalar<'a>,
    #[serde(borrow)]
    pub(super) status: Scalar<'a>,
    #[serde(borrow)]
    pub(super) server: Scalar<'a>,
    #[serde(borrow)]
    pub(super) tool: Scalar<'a>,
    #[serde(borrow)]
    pub(super) query: Scalar<'a>,
    #[serde(borrow)]
    pub(super) prompt: Scalar<'a>,
    #[serde(borrow)]
    pub(super) message: Scalar<'a>,
    #[serde(borrow)]
    pub(super) arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) result: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) error: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) changes: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) items: Option<&'a RawValue>,
}

/// Whether an event `type` is Codex's.
pub(super) fn owns(kind: &str) -> bool {
    matches!(kind, "error" | "request_user_input")
        || ["thread.", "turn.", "item."]
            .iter()
            .any(|prefix| kind.starts_with(prefix))
}

/// Reads one line holding a JSON object: statistics and display lines, and
/// what classification needs of it.
pub(super) fn decode<'a>(
    parser: &mut StreamParser,
    body: &'a str,
    out: &mut Vec<Rendered>,
) -> serde_json::Result<Signals<'a>> {
    let event = serde_json::from_str::<CodexEvent<'a>>(body)?;
    parser.codex_event(&event, out);
    Ok(Signals {
        kind: event.kind,
        subtype: event.subtype,
        is_error: event.is_error,
        api_error_status: event.api_error_status,
        result: event.result,
        message: event.message,
        error: event.error,
        rate_limit_info: event.rate_limit_info,
    })
}

impl StreamParser {
    fn codex_event(&mut self, event: &CodexEvent<'_>, out: &mut Vec<Rendered>) {
        match event.kind.str() {
            Some("thread.started") => {
                let id = event.thread_id.str().map(clean);
                let mut text = String::from("● session started");
                if let Some(id) = id.filter(|id| !id.is_empty()) {
                    text.push_str(&format!(" · thread {id}"));
                    self.stats.agent_session_id = Some(id);
                }
                out.push(line(LineKind::System, fit(text)));
            }
            Some("turn.completed") => {
                self.stats.acted = true;
                self.stats.turns += 1;
                self.stats.ended = true;
                // The run's verdict is its last turn's.
                self.stats.result_subtype = Some("success".to_owned());
                self.stats.result_is_error = Some(false);
                self.stats.result_text = None;
                let usage = Obj::of(event.usage).unwrap_or_default();
                let field = |key: &str| usage.scalar(key).u64();
                let (input, cached, output) = (
                    field("input_tokens"),
                    field("cached_input_tokens"),
                    field("output_tokens"),
                );
                let stats = &mut self.stats;
                // Codex 0.101 has no `cache_write_input_tokens`.
                let written = field("cache_write_input_tokens").unwrap_or(0);
                stats.cache_write_tokens = stats.cache_write_tokens.saturating_add(written);
                stats.input_tokens = stats.input_tokens.saturating_add(input.unwrap_or(0));
                stats.cache_read_tokens =
                    stats.cache_read_tokens.saturating_add(cached.unwrap_or(0));
                stats.output_tokens = stats.output_tokens.saturating_add(output.unwrap_or(0));
                let mut text = String::from("● turn completed");
                if let Some(input) = input {
                    text.push_str(&format!(" · {} in", group(input)));
                    if let Some(cached) = cached {
                        text.push_str(&format!(" ({} cached)", group(cached)));
                    }
                }
                if let Some(output) = output {
                    text.push_str(&format!(" · {} out", group(output)));
                }
                out.push(line(LineKind::System, fit(text)));
            }
            Some("turn.failed") => {
                let message = match &event.error {
                    ErrorField::Object { message } => message.clone().unwrap_or_default(),
                    _ => Cow::Borrowed(""),
                };
                // The failed turn's tokens are not reported: the ending that
                // makes turns and tokens known is `turn.completed` alone.
                self.stats.result_subtype = Some("error".to_owned());
                self.stats.result_is_error = Some(true);
                self.stats.result_text = (!message.is_empty())
                    .then(|| cap_bytes(sanitize_block(message.as_ref()), MAX_STATS_TEXT_BYTES));
                out.push(self.error_line("turn failed", &message));
            }
            Some("error") => {
                let message = event.message.str().unwrap_or_default();
                if is_reconnecting(message) {
                    // Codex retrying inside the session: a notice, not a failure.
                    out.push(line(
                        LineKind::System,
                        fit(format!("⟳ {}", one_line(message))),
                    ));
                } else {
                    out.push(self.error_line("", message));
                }
            }
            Some(phase @ ("item.started" | "item.updated" | "item.completed")) => {
                if let Some(item) = &event.item.0 {
                    self.codex_item(item, phase == "item.completed", out);
                }
            }
            _ => {}
        }
    }

    pub(super) fn error_line(&self, what: &str, message: &str) -> Rendered {
        let first = one_line(message);
        let text = match (what.is_empty(), first.is_empty()) {
            (true, true) => "✗ error".to_owned(),
            (true, false) => format!("✗ {first}"),
            (false, true) => format!("✗ {what}"),
            (false, false) => format!("✗ {what}: {first}"),
        };
        let detail = self
            .detail(message, true)
            .filter(|_| message.trim() != first);
        line(LineKind::Error, fit(text))
            .with_detail(detail)
            .with_error(true)
    }

    fn notice_line(&self, message: &str) -> Rendered {
        let first = one_line(message);
        let text = if first.is_empty() {
            "⚠ notice".to_owned()
        } else {
            format!("⚠ {first}")
        };
        let detail = self
            .detail(message, true)
            .filter(|_| message.trim() != first);
        line(LineKind::System, fit(text)).with_detail(detail)
    }

    fn codex_item(&mut self, item: &Item<'_>, completed: bool, out: &mut Vec<Rendered>) {
        let id = item.id.str().map(clean);
        let kind = item
            .kind
            .str()
            .or_else(|| item.item_type.str())
            .unwrap_or_default();
        // An `error` item is one of Codex's warnings, printed at start-up.
        if kind != "error" {
            self.stats.acted = true;
        }
        match kind {
            "agent_message" | "assistant_message" | "plan" if completed => {
                let text = item.text.str().unwrap_or_default();
                if kind == "agent_message" || kind == "assistant_message" {
                    self.stats.last_agent_message =
                        Some(cap_bytes(sanitize_block(text), MAX_STATS_TEXT_BYTES));
                    self.note_final_text(Some(text));
                }
                push_text_lines(text, out);
            }
            "reasoning" if completed => {
                let text = item.text.cow().unwrap_or_default();
                out.push(self.thinking(text));
            }
            "command_execution" | "mcp_tool_call" => {
                // The call is shown as soon as it starts (commands can run for
                // minutes), the result when it completes, each exactly once.
                let shown = id
                    .as_ref()
                    .is_some_and(|id| self.codex.started.contains(id));
                if !shown {
                    out.push(self.codex_call(item, kind, id.clone()));
                    if !completed && let Some(id) = &id {
                        self.codex.started.insert(id.clone());
                    }
                }
                if completed {
                    if let Some(id) = &id {
                        self.codex.started.remove(id);
                    }
                    out.push(self.codex_result(item, kind, id));
                }
            }
            "file_change" if completed => {
                let changes: Vec<Obj<'_>> = decode::items(item.changes)
                    .into_iter()
                    .map(|c| Obj::of(Some(c)).unwrap_or_default())
                    .collect();
                let mut summary = changes
                    .first()
                    .and_then(|c| c.str("path"))
                    .map(|p| clean(&p))
                    .unwrap_or_default();
                if changes.len() > 1 {
                    summary.push_str(&format!(" (+{} more)", changes.len() - 1));
                }
                let detail: Vec<String> = changes
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {}",
                            c.str("kind").unwrap_or_default(),
                            c.str("path").unwrap_or_default()
                        )
                    })
                    .collect();
                self.count_tool("patch");
                out.push(
                    line(LineKind::ToolCall, call_text("patch", &summary))
                        .with_detail(self.detail(detail.join("\n"), true))
                        .with_id(id.clone()),
                );
                if item.status.str() == Some("failed") {
                    self.stats.tool_errors += 1;
                    out.push(
                        line(LineKind::ToolResult, "  ✗ patch failed".to_owned())
                            .with_id(id)
                            .with_error(true),
                    );
                }
            }
            "web_search" if completed => {
                let query = item.query.str().map(one_line).unwrap_or_default();
                self.count_tool("web_search");
                out.push(line(LineKind::ToolCall, call_text("web_search", &query)).with_id(id));
            }
            "collab_tool_call" if completed => {
                let tool = item
                    .tool
                    .str()
                    .map(clean)
                    .unwrap_or_else(|| "agent".to_owned());
                let prompt = item.prompt.str().map(one_line).unwrap_or_default();
                self.count_tool(&tool);
                out.push(line(LineKind::ToolCall, call_text(&tool, &prompt)).with_id(id.clone()));
                if item.status.str() == Some("failed") {
                    self.stats.tool_errors += 1;
                    out.push(
                        line(LineKind::ToolResult, format!("  ✗ {tool} failed"))
                            .with_id(id)
                            .with_error(true),
                    );
                }
            }
            "todo_list" if completed => {
                let items: Vec<Obj<'_>> = decode::items(item.items)
                    .into_iter()
                    .map(|i| Obj::of(Some(i)).unwrap_or_default())
                    .collect();
                let is_done = |i: &Obj<'_>| i.scalar("completed").bool() == Some(true);
                let done = items.iter().filter(|i| is_done(i)).count();
                let mut text = format!("☑ plan {done}/{} done", items.len());
                if let Some(next) = items
                    .iter()
                    .find(|i| !is_done(i))
                    .and_then(|i| i.str("text"))
                {
                    text.push_str(&format!(" · next: {}", one_line(&next)));
                }
                let detail: Vec<String> = items
                    .iter()
                    .map(|i| {
                        let mark = if is_done(i) { "[x]" } else { "[ ]" };
                        format!("{mark} {}", i.str("text").unwrap_or_default())
                    })
                    .collect();
                out.push(
                    line(LineKind::Text, fit(text))
                        .with_detail(self.detail(detail.join("\n"), true)),
                );
            }
            "error" if completed => {
                // Codex reports its warnings as `error` items ("Model metadata
                // for `x` not found", "Skill descriptions were shortened"):
                // the turn goes on. Failures end it (`turn.failed`, a
                // top-level `error`).
                let message = item.message.str().unwrap_or_default();
                out.push(self.notice_line(message));
            }
            _ => {}
        }
    }

    fn codex_call(&mut self, item: &Item<'_>, kind: &str, id: Option<String>) -> Rendered {
        if kind == "command_execution" {
            let command = command_text(item.command);
            self.count_tool("exec");
            let summary = one_line(&command_summary(item.command, &command));
            self.log_tool_call("exec", &summary, item.command);
            return line(LineKind::ToolCall, call_text("exec", &summary))
                .with_detail(self.detail(command, true))
                .with_id(id);
        }
        let server = item.server.str().unwrap_or_default();
        let tool = item.tool.str().unwrap_or_default();
        let name = clean(&format!("mcp__{server}__{tool}"));
        self.count_tool(&name);
        let arguments = item.arguments.filter(|raw| raw.get() != "null");
        let summary = arguments.map(compact_summary).unwrap_or_default();
        self.log_tool_call(&name, &summary, arguments);
        let detail = arguments.map(|args| Detail::json(args, !self.line_cut));
        line(LineKind::ToolCall, call_text(&name, &summary))
            .with_detail(detail)
            .with_id(id)
    }

    fn codex_result(&mut self, item: &Item<'_>, kind: &str, id: Option<String>) -> Rendered {
        let status = item.status.str();
        let mut body = Collected::default();
        if kind == "command_execution" {
            let exit = item.exit_code.i64();
            if let Some(output) = item.aggregated_output.str() {
                body.push_str(output);
            }
            let label = match (exit, status) {
                (Some(code), _) if code != 0 => Some(format!("exit {code}")),
                (_, Some("declined")) => Some("declined".to_owned()),
                (_, Some("failed")) => Some("failed".to_owned()),
                _ => None,
            };
            if label.is_some() {
                self.stats.tool_errors += 1;
            }
            return self.result_line(body, None, label.is_some(), label.as_deref(), id);
        }
        let error = Obj::of(item.error)
            .and_then(|e| e.str("message"))
            .or_else(|| scalar(item.error).cow());
        let failed = error.is_some() || status == Some("failed");
        let mut source = None;
        if let Some(error) = &error {
            body.push_str(error);
        } else if let Some(result) = item.result {
            body = Collected::summary();
            mcp_result(result, &mut body);
            source = Some((result, mcp_result as Gather));
        }
        if failed {
            self.stats.tool_errors += 1;
        }
        self.result_line(body, source, failed, None, id)
    }
}

/// An MCP tool call's result, its content blocks, as text.
fn mcp_result(result: &RawValue, body: &mut Collected) {
    let Some(result) = Obj::of(Some(result)) else {
        return;
    };
    for part in result.items("content") {
        let part = Obj::of(Some(part)).unwrap_or_default();
        match json_str(part.get("text")) {
            Some(text) => body.push_block(|c| c.push_json_str(text)),
            None => {
                if let Some(kind) = part.str("type") {
                    let label = format!("[{}]", clean(&kind));
                    body.push_block(|c| c.push_str(&label));
                }
            }
        }
    }
}

/// A command as written: a string, or an argument list joined as shell words.
fn command_text(command: Option<&RawValue>) -> Cow<'_, str> {
    if let Some(text) = scalar(command).cow() {
        return text;
    }
    let words = argv(command);
    match shlex::try_join(words.iter().map(String::as_str)) {
        Ok(joined) => Cow::Owned(joined),
        Err(_) => Cow::Owned(words.join(" ")),
    }
}

/// What a command's line shows: the script a login shell is given, as the
/// shell runs it, else the command.
fn command_summary<'a>(command: Option<&RawValue>, text: &'a str) -> Cow<'a, str> {
    let words = argv(command);
    match shell_script(&words) {
        Some(script) => Cow::Owned(script.to_owned()),
        None => unwrap_shell(text),
    }
}

/// An argument list's strings (empty for anything else).
fn argv(command: Option<&RawValue>) -> Vec<String> {
    decode::items(command)
        .into_iter()
        .filter_map(|word| scalar(Some(word)).cow().map(Cow::into_owned))
        .collect()
}

/// `Reconnecting... 2/5 (…)`: Codex retrying a dropped stream by itself.
impl StreamParser {
    /// A line of Codex's own log (stderr, in the same file): a call the
    /// PreToolUse hook blocked appears only there (`ERROR
    /// codex_core::tools::router: error=Command blocked by PreToolUse hook:
    /// REASON. Command: …`), yet it is a tool call, and a failed one.
    pub(super) fn codex_log_line(&mut self, line: &str) {
        if line.contains("codex_core::tools") && line.contains("blocked by PreToolUse hook") {
            self.count_tool("exec");
            self.stats.tool_errors += 1;
        }
    }
}

fn is_reconnecting(message: &str) -> bool {
    message
        .trim_start()
        .get(..12)
        .is_some_and(|s| s.eq_ignore_ascii_case("reconnecting"))
}

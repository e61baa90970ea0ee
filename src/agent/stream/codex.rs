//! Codex `exec --json` events: display lines and statistics.

use super::*;

impl StreamParser {
    pub(super) fn codex_event(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        match event.get_str("type").as_deref() {
            Some("thread.started") => {
                let id = event.get_str("thread_id").map(|id| clean(&id));
                let mut text = String::from("● session started");
                if let Some(id) = id.filter(|id| !id.is_empty()) {
                    text.push_str(&format!(" · thread {id}"));
                    self.stats.agent_session_id = Some(id);
                }
                out.push(line(LineKind::System, fit(text)));
            }
            Some("turn.completed") => {
                self.stats.turns += 1;
                self.stats.ended = true;
                let usage = event.get("usage");
                let field = |key: &str| usage.and_then(|u| u.get_u64(key));
                let (input, cached, output) = (
                    field("input_tokens"),
                    field("cached_input_tokens"),
                    field("output_tokens"),
                );
                let stats = &mut self.stats;
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
                let message = event
                    .get("error")
                    .and_then(|e| e.get_str("message"))
                    .unwrap_or_default();
                out.push(self.error_line("turn failed", &message));
            }
            Some("error") => {
                let message = event.get_str("message").unwrap_or_default();
                if is_reconnecting(&message) {
                    // Codex retrying inside the session: a notice, not a failure.
                    out.push(line(
                        LineKind::System,
                        fit(format!("⟳ {}", one_line(&message))),
                    ));
                } else {
                    out.push(self.error_line("", &message));
                }
            }
            Some(phase @ ("item.started" | "item.updated" | "item.completed")) => {
                if let Some(item @ Json::Obj(_)) = event.get("item") {
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

    pub(super) fn codex_item(&mut self, item: &Json<'_>, completed: bool, out: &mut Vec<Rendered>) {
        let id = item.get_str("id").map(|id| clean(&id));
        let kind = item
            .get_str("type")
            .or_else(|| item.get_str("item_type"))
            .unwrap_or_default();
        match kind.as_ref() {
            "agent_message" | "assistant_message" | "plan" if completed => {
                let text = item.get_str("text").unwrap_or_default();
                if kind == "agent_message" || kind == "assistant_message" {
                    self.stats.last_agent_message =
                        Some(cap_bytes(sanitize_block(&*text), MAX_STATS_TEXT_BYTES));
                    self.note_final_text(Some(&text));
                }
                push_text_lines(&text, out);
            }
            "reasoning" if completed => {
                let text = item.get_str("text").unwrap_or_default();
                out.push(self.thinking(text));
            }
            "command_execution" | "mcp_tool_call" => {
                // The call is shown as soon as it starts (commands can run for
                // minutes), the result when it completes, each exactly once.
                let shown = id
                    .as_ref()
                    .is_some_and(|id| self.codex.started.contains(id));
                if !shown {
                    out.push(self.codex_call(item, &kind, id.clone()));
                    if !completed && let Some(id) = &id {
                        self.codex.started.insert(id.clone());
                    }
                }
                if completed {
                    if let Some(id) = &id {
                        self.codex.started.remove(id);
                    }
                    out.push(self.codex_result(item, &kind, id));
                }
            }
            "file_change" if completed => {
                let changes = item.get("changes").map(Json::items).unwrap_or_default();
                let mut summary = changes
                    .first()
                    .and_then(|c| c.get_str("path"))
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
                            c.get_str("kind").unwrap_or_default(),
                            c.get_str("path").unwrap_or_default()
                        )
                    })
                    .collect();
                self.count_tool("patch");
                out.push(
                    line(LineKind::ToolCall, call_text("patch", &summary))
                        .with_detail(self.detail(detail.join("\n"), true))
                        .with_id(id.clone()),
                );
                if item.get_str("status").as_deref() == Some("failed") {
                    self.stats.tool_errors += 1;
                    out.push(
                        line(LineKind::ToolResult, "  ✗ patch failed".to_owned())
                            .with_id(id)
                            .with_error(true),
                    );
                }
            }
            "web_search" if completed => {
                let query = item
                    .get_str("query")
                    .map(|q| one_line(&q))
                    .unwrap_or_default();
                self.count_tool("web_search");
                out.push(line(LineKind::ToolCall, call_text("web_search", &query)).with_id(id));
            }
            "collab_tool_call" if completed => {
                let tool = item
                    .get_str("tool")
                    .map(|t| clean(&t))
                    .unwrap_or_else(|| "agent".to_owned());
                let prompt = item
                    .get_str("prompt")
                    .map(|p| one_line(&p))
                    .unwrap_or_default();
                self.count_tool(&tool);
                out.push(line(LineKind::ToolCall, call_text(&tool, &prompt)).with_id(id.clone()));
                if item.get_str("status").as_deref() == Some("failed") {
                    self.stats.tool_errors += 1;
                    out.push(
                        line(LineKind::ToolResult, format!("  ✗ {tool} failed"))
                            .with_id(id)
                            .with_error(true),
                    );
                }
            }
            "todo_list" if completed => {
                let items = item.get("items").map(Json::items).unwrap_or_default();
                let done = items
                    .iter()
                    .filter(|i| i.get("completed").and_then(Json::bool) == Some(true))
                    .count();
                let mut text = format!("☑ plan {done}/{} done", items.len());
                if let Some(next) = items
                    .iter()
                    .find(|i| i.get("completed").and_then(Json::bool) != Some(true))
                    .and_then(|i| i.get_str("text"))
                {
                    text.push_str(&format!(" · next: {}", one_line(&next)));
                }
                let detail: Vec<String> = items
                    .iter()
                    .map(|i| {
                        let mark = if i.get("completed").and_then(Json::bool) == Some(true) {
                            "[x]"
                        } else {
                            "[ ]"
                        };
                        format!("{mark} {}", i.get_str("text").unwrap_or_default())
                    })
                    .collect();
                out.push(
                    line(LineKind::Text, fit(text))
                        .with_detail(self.detail(detail.join("\n"), true)),
                );
            }
            "error" if completed => {
                let message = item.get_str("message").unwrap_or_default();
                out.push(self.error_line("", &message));
            }
            _ => {}
        }
    }

    pub(super) fn codex_call(
        &mut self,
        item: &Json<'_>,
        kind: &str,
        id: Option<String>,
    ) -> Rendered {
        if kind == "command_execution" {
            let command = item.get_str("command").unwrap_or_default();
            self.count_tool("exec");
            let summary = one_line(&unwrap_shell(&command));
            if self.tool_call_log.is_some() {
                let input = item.get("command").cloned().unwrap_or(Json::Null);
                self.log_tool_call("exec", &summary, &input);
            }
            return line(LineKind::ToolCall, call_text("exec", &summary))
                .with_detail(self.detail(&*command, true))
                .with_id(id);
        }
        let server = item.get_str("server").unwrap_or_default();
        let tool = item.get_str("tool").unwrap_or_default();
        let name = clean(&format!("mcp__{server}__{tool}"));
        self.count_tool(&name);
        let arguments = item.get("arguments").unwrap_or(&Json::Null);
        let summary = compact_summary(arguments);
        self.log_tool_call(&name, &summary, arguments);
        let detail = match arguments {
            Json::Null => None,
            args => {
                let (pretty, complete) = json_text(args, true);
                self.detail(pretty, complete)
            }
        };
        line(LineKind::ToolCall, call_text(&name, &summary))
            .with_detail(detail)
            .with_id(id)
    }

    pub(super) fn codex_result(
        &mut self,
        item: &Json<'_>,
        kind: &str,
        id: Option<String>,
    ) -> Rendered {
        let status = item.get_str("status");
        let mut body = Collected::default();
        if kind == "command_execution" {
            let exit = item.get("exit_code").and_then(Json::i64);
            if let Some(Json::Str(output)) = item.get("aggregated_output") {
                body.push_jstr(*output);
            }
            let label = match (exit, status.as_deref()) {
                (Some(code), _) if code != 0 => Some(format!("exit {code}")),
                (_, Some("declined")) => Some("declined".to_owned()),
                (_, Some("failed")) => Some("failed".to_owned()),
                _ => None,
            };
            if label.is_some() {
                self.stats.tool_errors += 1;
            }
            return self.result_line(body, label.is_some(), label.as_deref(), id);
        }
        let error = item
            .get("error")
            .and_then(|e| e.get_str("message").or_else(|| e.str()));
        let failed = error.is_some() || status.as_deref() == Some("failed");
        if let Some(error) = &error {
            body.push_str(error);
        } else if let Some(content) = item.get("result").and_then(|r| r.get("content")) {
            for part in content.items() {
                match part.get("text") {
                    Some(Json::Str(s)) => body.push_block(|c| c.push_jstr(*s)),
                    _ => {
                        if let Some(kind) = part.get_str("type") {
                            let label = format!("[{}]", clean(&kind));
                            body.push_block(|c| c.push_str(&label));
                        }
                    }
                }
            }
        }
        if failed {
            self.stats.tool_errors += 1;
        }
        self.result_line(body, failed, None, id)
    }
}

/// `Reconnecting... 2/5 (…)`: Codex retrying a dropped stream by itself.
fn is_reconnecting(message: &str) -> bool {
    message
        .trim_start()
        .get(..12)
        .is_some_and(|s| s.eq_ignore_ascii_case("reconnecting"))
}

//! Claude Code `--output-format stream-json` events: display lines and statistics.

use super::*;

impl StreamParser {
    pub(super) fn claude_event(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        if self.stats.agent_session_id.is_none()
            && let Some(id) = event.get_str("session_id")
            && !id.is_empty()
        {
            self.stats.agent_session_id = Some(clean(&id));
        }
        let first = out.len();
        let before = self.usage_fingerprint();
        let kind = event.get_str("type");
        match kind.as_deref() {
            Some("system") => self.claude_system(event, out),
            Some("assistant") => self.claude_assistant(event, out),
            Some("user") => self.claude_user(event, out),
            Some("result") => self.claude_result(event, out),
            Some("rate_limit_event") => self.claude_rate_limit(event, out),
            _ => {}
        }
        // Subagent (Task) traffic interleaves with the main agent's; a margin
        // mark keeps the two apart in the pane.
        if event
            .get_str("parent_tool_use_id")
            .is_some_and(|id| !id.is_empty())
        {
            for line in &mut out[first..] {
                line.text.insert_str(0, "┆ ");
            }
        }
        // Most events change no count: the totals are redone only when one did.
        if kind.as_deref() != Some("result") && self.usage_fingerprint() == before {
            return;
        }
        let main = self.stats.model.as_deref();
        let total = self.claude.total_usage(main);
        self.stats.tokens_by_model = self.claude.tokens_by_model(main);
        self.set_tokens(total);
        self.stats.turns = self
            .claude
            .result_turns
            .unwrap_or(self.claude.usage_by_message.len() as u64);
    }

    /// What the token and turn totals are made of, outside a result: the
    /// messages seen, their summed usage (which moves whenever one model's
    /// does) and whether the main model is known.
    fn usage_fingerprint(&self) -> (usize, Usage, bool) {
        (
            self.claude.usage_by_message.len(),
            self.claude.summed,
            self.stats.model.is_some(),
        )
    }

    pub(super) fn set_tokens(&mut self, usage: Usage) {
        self.stats.input_tokens = usage.input;
        self.stats.output_tokens = usage.output;
        self.stats.cache_read_tokens = usage.cache_read;
        self.stats.cache_write_tokens = usage.cache_write;
    }

    pub(super) fn claude_system(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        match event.get_str("subtype").as_deref() {
            Some("init") => {
                if let Some(id) = event.get_str("session_id").filter(|id| !id.is_empty()) {
                    self.stats.agent_session_id = Some(clean(&id));
                }
                let mut text = String::from("● session started");
                if let Some(model) = event.get_str("model").filter(|m| !m.is_empty()) {
                    let model = clean(&model);
                    text.push_str(" · model ");
                    text.push_str(&model);
                    self.stats.model = Some(model);
                }
                if let Some(Json::Arr(tools)) = event.get("tools") {
                    text.push_str(&format!(" · {}", plural(tools.len() as u64, "tool")));
                }
                let detail = self.detail(init_detail(event), true);
                out.push(line(LineKind::System, fit(text)).with_detail(detail));
            }
            Some("api_retry") => {
                let mut text = String::from("⟳ API retry");
                if let Some(attempt) = event.get_u64("attempt") {
                    text.push_str(&format!(" {attempt}"));
                    if let Some(max) = event.get_u64("max_retries") {
                        text.push_str(&format!("/{max}"));
                    }
                }
                if let Some(delay) = event.get("retry_delay_ms").and_then(Json::f64) {
                    text.push_str(&format!(" in {:.1}s", delay / 1000.0));
                }
                let status = event
                    .get_u64("error_status")
                    .map(|s| s.to_string())
                    .or_else(|| event.get_str("error").map(|e| clean(&e)));
                if let Some(status) = status.filter(|s| !s.is_empty()) {
                    text.push_str(&format!(" ({status})"));
                }
                out.push(line(LineKind::System, fit(text)));
            }
            Some("compact_boundary") => {
                let meta = event.get("compact_metadata");
                let mut parts = Vec::new();
                if let Some(trigger) = meta.and_then(|m| m.get_str("trigger")) {
                    parts.push(clean(&trigger));
                }
                if let Some(tokens) = meta.and_then(|m| m.get_u64("pre_tokens")) {
                    parts.push(format!("{} tokens before", group(tokens)));
                }
                let mut text = String::from("⋯ context compacted");
                if !parts.is_empty() {
                    text.push_str(&format!(" ({})", parts.join(", ")));
                }
                out.push(line(LineKind::System, fit(text)));
            }
            Some("task_started") => {
                let what = event
                    .get_str("description")
                    .map(|d| one_line(&d))
                    .unwrap_or_default();
                let text = if what.is_empty() {
                    "◆ task started".to_owned()
                } else {
                    format!("◆ task started: {what}")
                };
                let detail = event.get_str("prompt").and_then(|p| self.detail(&*p, true));
                out.push(
                    line(LineKind::System, fit(text))
                        .with_detail(detail)
                        .with_id(event.get_str("tool_use_id").map(|id| clean(&id))),
                );
            }
            Some("task_notification") => {
                let status = event
                    .get_str("status")
                    .map(|s| clean(&s))
                    .unwrap_or_else(|| "finished".to_owned());
                let summary = event.get_str("summary").unwrap_or_default();
                let first = one_line(&summary);
                let text = if first.is_empty() {
                    format!("◆ task {status}")
                } else {
                    format!("◆ task {status}: {first}")
                };
                let failed = matches!(status.as_str(), "failed" | "error");
                out.push(
                    line(LineKind::System, fit(text))
                        .with_detail(self.detail(&*summary, true))
                        .with_id(event.get_str("tool_use_id").map(|id| clean(&id)))
                        .with_error(failed),
                );
            }
            Some("hook_response") => {
                // Successful hooks are routine (they run on every tool call);
                // only a failing or blocking one is worth a line.
                let outcome = event.get_str("outcome");
                let exit = event.get("exit_code").and_then(Json::i64);
                let failed = outcome.as_deref().is_some_and(|o| o != "success")
                    || exit.is_some_and(|code| code != 0);
                if !failed {
                    return;
                }
                let mut text = String::from("⚑ hook");
                for key in ["hook_event", "hook_name"] {
                    if let Some(v) = event.get_str(key).filter(|v| !v.is_empty()) {
                        text.push(' ');
                        text.push_str(&clean(&v));
                    }
                }
                if let Some(o) = outcome.filter(|o| !o.is_empty()) {
                    text.push_str(&format!(" {}", clean(&o)));
                }
                if let Some(code) = exit {
                    text.push_str(&format!(" (exit {code})"));
                }
                let said = ["stderr", "output", "stdout"]
                    .iter()
                    .filter_map(|key| event.get_str(key))
                    .find(|s| !s.trim().is_empty())
                    .unwrap_or_default();
                let first = one_line(&said);
                if !first.is_empty() {
                    text.push_str(": ");
                    text.push_str(&first);
                }
                out.push(
                    line(LineKind::System, fit(text))
                        .with_detail(self.detail(&*said, true))
                        .with_error(true),
                );
            }
            // hook_started, task_progress, status, …: progress noise.
            _ => {}
        }
    }

    pub(super) fn claude_assistant(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        let Some(message) = event.get("message") else {
            return;
        };
        let error = event.get_str("error").filter(|e| !e.is_empty());
        let model = message.get_str("model");
        // Synthetic messages (API errors reported as assistant text) are not
        // model turns and carry zero usage.
        let synthetic = error.is_some() || model.as_deref() == Some("<synthetic>");
        if !synthetic {
            if self.stats.model.is_none()
                && let Some(model) = model.as_ref().filter(|m| !m.is_empty())
            {
                self.stats.model = Some(clean(model));
            }
            if let Some(id) = message.get_str("id") {
                let usage = message.get("usage").and_then(claude_usage);
                let claude = &mut self.claude;
                let entry = claude.usage_by_message.entry(id.into_owned()).or_default();
                if let Some(usage) = usage {
                    entry.replace_in(&mut claude.summed, usage);
                    let name = model
                        .as_deref()
                        .filter(|m| !m.is_empty())
                        .map(clean)
                        .or_else(|| self.stats.model.clone())
                        .unwrap_or_default();
                    let by_model = claude.by_model.entry(name).or_default();
                    entry.replace_in(by_model, usage);
                    *entry = usage;
                }
            }
        }

        let blocks: &[Json<'_>] = match message.get("content") {
            Some(Json::Arr(blocks)) => blocks,
            Some(text @ Json::Str(_)) => std::slice::from_ref(text),
            _ => &[],
        };
        if !self.render {
            for block in blocks {
                if matches!(
                    block.get_str("type").as_deref(),
                    Some("tool_use" | "server_tool_use" | "mcp_tool_use")
                ) {
                    self.claude_tool_use(block, out);
                }
            }
            return;
        }
        if let Some(error) = &error {
            let said = blocks
                .iter()
                .filter_map(|b| match b {
                    Json::Str(_) => b.str(),
                    _ if b.get_str("type").as_deref() == Some("text") => b.get_str("text"),
                    _ => None,
                })
                .next()
                .unwrap_or_default();
            let first = one_line(&said);
            let mut text = format!("✗ {}", clean(error));
            if !first.is_empty() {
                text.push_str(": ");
                text.push_str(&first);
            }
            out.push(
                line(LineKind::Error, fit(text))
                    .with_detail(self.detail(&*said, true))
                    .with_error(true),
            );
        }
        for block in blocks {
            if let Json::Str(_) = block {
                if error.is_none() {
                    push_text_lines(&block.str().unwrap_or_default(), out);
                }
                continue;
            }
            match block.get_str("type").as_deref() {
                Some("text") if error.is_none() => {
                    push_text_lines(&block.get_str("text").unwrap_or_default(), out);
                }
                Some("thinking") => {
                    let thinking = block.get_str("thinking").unwrap_or_default();
                    out.push(self.thinking(thinking));
                }
                Some("redacted_thinking") => {
                    out.push(line(LineKind::Thinking, "✻ thinking (redacted)".to_owned()));
                }
                Some("tool_use" | "server_tool_use" | "mcp_tool_use") => {
                    self.claude_tool_use(block, out);
                }
                _ => {}
            }
        }
    }

    pub(super) fn thinking(&self, text: Cow<'_, str>) -> Rendered {
        let chars = text.chars().count();
        if text.trim().is_empty() {
            return line(LineKind::Thinking, "✻ thinking".to_owned());
        }
        line(LineKind::Thinking, format!("✻ thinking ({chars} chars)"))
            .with_detail(self.detail(text, true))
    }

    pub(super) fn claude_tool_use(&mut self, block: &Json<'_>, out: &mut Vec<Rendered>) {
        let id = block.get_str("id").map(|id| clean(&id));
        if let Some(id) = &id
            && !self.claude.seen_tool_uses.insert(id.clone())
        {
            return;
        }
        let name = clean(&block.get_str("name").unwrap_or_default());
        let name = if name.is_empty() {
            "tool".to_owned()
        } else {
            name
        };
        self.count_tool(&name);
        let input = block.get("input").unwrap_or(&Json::Null);
        if !self.render && self.tool_call_log.is_none() {
            return;
        }
        let summary = tool_summary(&name, input);
        self.log_tool_call(&name, &summary, input);
        if !self.render {
            return;
        }
        let detail = match input {
            Json::Null => None,
            input => match readable_input(input) {
                Some(text) => self.detail(text, true),
                None => {
                    let (pretty, complete) = json_text(input, true);
                    self.detail(pretty, complete)
                }
            },
        };
        out.push(
            line(LineKind::ToolCall, call_text(&name, &summary))
                .with_detail(detail)
                .with_id(id),
        );
    }

    pub(super) fn count_tool(&mut self, name: &str) {
        self.stats.tool_calls += 1;
        *self
            .stats
            .tool_calls_by_name
            .entry(name.to_owned())
            .or_default() += 1;
    }

    pub(super) fn claude_user(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        let Some(Json::Arr(blocks)) = event.get("message").and_then(|m| m.get("content")) else {
            // A plain string is the prompt echoed back: nothing new to show.
            return;
        };
        for block in blocks {
            if block.get_str("type").as_deref() != Some("tool_result") {
                continue;
            }
            let is_error = block.get("is_error").and_then(Json::bool) == Some(true);
            if is_error {
                self.stats.tool_errors += 1;
            }
            if !self.render {
                continue;
            }
            let mut body = Collected::default();
            match block.get("content") {
                Some(Json::Str(s)) => body.push_jstr(*s),
                Some(Json::Arr(parts)) => {
                    for part in parts {
                        match part {
                            Json::Str(s) => body.push_block(|c| c.push_jstr(*s)),
                            _ => match part.get_str("type").as_deref() {
                                Some("text") => {
                                    if let Some(Json::Str(s)) = part.get("text") {
                                        body.push_block(|c| c.push_jstr(*s));
                                    }
                                }
                                Some("image") => body.push_block(|c| c.push_str("[image]")),
                                Some(other) => {
                                    let label = format!("[{}]", clean(other));
                                    body.push_block(|c| c.push_str(&label));
                                }
                                None => {}
                            },
                        }
                    }
                }
                _ => {}
            }
            let id = block.get_str("tool_use_id").map(|id| clean(&id));
            out.push(self.result_line(body, is_error, None, id));
        }
    }

    /// "  ↳ first line (+N lines)" / "  ✗ label · first line", detail = the output.
    pub(super) fn result_line(
        &self,
        body: Collected,
        is_error: bool,
        label: Option<&str>,
        id: Option<String>,
    ) -> Rendered {
        let (first, more) = body.first_line();
        let mut first = clean(first);
        if is_error {
            // Claude wraps tool failures in a pseudo-tag that only adds noise.
            if let Some(inner) = first.strip_prefix("<tool_use_error>") {
                first = inner
                    .strip_suffix("</tool_use_error>")
                    .unwrap_or(inner)
                    .trim()
                    .to_owned();
            }
        }
        let mut text = String::from(if is_error { "  ✗ " } else { "  ↳ " });
        if let Some(label) = label {
            text.push_str(label);
            if !first.is_empty() {
                text.push_str(" · ");
            }
        }
        if !first.is_empty() {
            text.push_str(&first);
        } else if label.is_none() {
            text.push_str("(no output)");
        }
        if more > 0 {
            text.push_str(&format!(" (+{})", plural(more as u64, "line")));
        }
        line(LineKind::ToolResult, fit(text))
            .with_detail(self.detail(body.text, body.complete))
            .with_id(id)
            .with_error(is_error)
    }

    pub(super) fn claude_result(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        let subtype = event.get_str("subtype").map(|s| clean(&s));
        let is_error = event.get("is_error").and_then(Json::bool);
        let turns = event.get_u64("num_turns");
        let cost = event
            .get("total_cost_usd")
            .or_else(|| event.get("cost_usd"))
            .and_then(Json::f64);
        let duration = event.get_u64("duration_ms");
        let result = event.get_str("result");
        let api_status = event.get_u64("api_error_status");

        if let Some(id) = event.get_str("session_id").filter(|id| !id.is_empty()) {
            self.stats.agent_session_id = Some(clean(&id));
        }
        self.stats.ended = true;
        let failed =
            is_error == Some(true) || subtype.as_deref().is_some_and(|s| s.starts_with("error"));
        // Each result reports the session so far; a later one (Claude Code
        // 2.1 may add an empty `error_during_execution` after a success)
        // never takes back what an earlier one reported.
        let did_nothing = failed && turns == Some(0);
        let first_result =
            self.stats.result_subtype.is_none() && self.stats.result_is_error.is_none();
        if let Some(Json::Obj(models)) = event.get("modelUsage") {
            for (name, usage) in models {
                let Some(usage) = model_usage(usage) else {
                    continue;
                };
                let kept = self
                    .claude
                    .result_by_model
                    .entry(clean(&name.decode()))
                    .or_default();
                *kept = kept.max(usage);
            }
        }
        if let Some(usage) = event.get("usage").and_then(claude_usage) {
            self.claude.result_usage =
                Some(self.claude.result_usage.unwrap_or_default().max(usage));
        }
        self.claude.result_turns = self.claude.result_turns.max(turns);
        self.stats.cost_usd = match (self.stats.cost_usd, cost) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.stats.duration_ms = self.stats.duration_ms.max(duration);
        if first_result || !did_nothing {
            self.stats.result_subtype = subtype.clone();
            self.stats.result_is_error = is_error;
            self.stats.result_text = result
                .as_deref()
                .map(|r| cap_bytes(sanitize_block(r), MAX_STATS_TEXT_BYTES));
            self.note_final_text(result.as_deref());
        }
        if !self.render {
            return;
        }
        // API failures arrive as subtype "success" with is_error true: the
        // subtype alone would call them a success.
        let mut label = match subtype.as_deref() {
            Some(s) if s != "success" && !s.is_empty() => s.to_owned(),
            _ if failed => "error".to_owned(),
            _ => "success".to_owned(),
        };
        if let Some(status) = api_status.filter(|_| failed) {
            label.push_str(&format!(" ({status})"));
        }
        let mut parts = vec![format!("■ result: {label}")];
        if let Some(turns) = turns {
            parts.push(plural(turns, "turn"));
        }
        if let Some(cost) = cost {
            parts.push(format!("${cost:.4}"));
        }
        if let Some(ms) = duration {
            parts.push(crate::fmt::duration_ms(ms));
        }
        let main = self.stats.model.as_deref();
        let mut detail = usage_text(self.claude.total_usage(main));
        let by_model = self.claude.tokens_by_model(main);
        if by_model.len() > 1 {
            for (model, tokens) in &by_model {
                detail.push_str(&format!("\n\n{model}\n"));
                detail.push_str(&usage_text(Usage::from(*tokens)));
            }
        }
        out.push(
            line(LineKind::Result, fit(parts.join(" · ")))
                .with_detail(Some(detail))
                .with_error(failed),
        );
        if let Some(result) = result.filter(|r| !r.trim().is_empty()) {
            let (first, more) = first_line(&result);
            let mut text = clean(first);
            if more > 0 {
                text.push_str(&format!(" (+{})", plural(more as u64, "line")));
            }
            out.push(
                line(LineKind::Text, fit(text))
                    .with_detail(
                        self.detail(&*result, true)
                            .filter(|_| more > 0 || text_is_cut(first)),
                    )
                    .with_error(failed),
            );
        }
    }

    pub(super) fn claude_rate_limit(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        let Some(info @ Json::Obj(_)) = event.get("rate_limit_info") else {
            return;
        };
        let Some(status) = info.get_str("status").filter(|s| !s.is_empty()) else {
            return;
        };
        if status == "allowed" {
            return;
        }
        let mut text = format!("⚠ rate limit {}", clean(&status));
        let kind = info.get_str("rateLimitType").map(|k| clean(&k));
        if let Some(kind) = &kind {
            text.push_str(&format!(" ({kind})"));
        }
        if let Some(at) = info
            .get("resetsAt")
            .and_then(Json::i64)
            .and_then(epoch_seconds)
            .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        {
            // A five-hour window resets today or tomorrow; longer windows need the day.
            let long = kind
                .as_deref()
                .is_some_and(|k| k.contains("day") || k.contains("week") || k.contains("month"));
            let when = if long {
                at.format("%b %-d %H:%M")
            } else {
                at.format("%H:%M")
            };
            text.push_str(&format!(" resets {when} UTC"));
        }
        // Past the limit but paying for overage: the agent goes on working.
        let overage = info.get("isUsingOverage").and_then(Json::bool) == Some(true);
        if overage {
            text.push_str(" · using overage");
            self.stats.overage_events += 1;
        }
        let (pretty, complete) = json_text(info, true);
        out.push(
            line(LineKind::RateLimit, fit(text))
                .with_detail(self.detail(pretty, complete))
                .with_error(status == "rejected" && !overage),
        );
    }
}

/// The four token counts, one per line, for a detail view.
fn usage_text(usage: Usage) -> String {
    format!(
        "input tokens: {}\noutput tokens: {}\ncache read tokens: {}\ncache write tokens: {}",
        group(usage.input),
        group(usage.output),
        group(usage.cache_read),
        group(usage.cache_write)
    )
}

/// One model's entry of a result's `modelUsage` (camel-case keys).
fn model_usage(usage: &Json<'_>) -> Option<Usage> {
    if !matches!(usage, Json::Obj(_)) {
        return None;
    }
    let field = |key: &str| usage.get_u64(key).unwrap_or(0);
    Some(Usage {
        input: field("inputTokens"),
        output: field("outputTokens"),
        cache_read: field("cacheReadInputTokens"),
        cache_write: field("cacheCreationInputTokens"),
    })
}

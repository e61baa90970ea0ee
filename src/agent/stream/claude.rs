//! Claude Code `--output-format stream-json`: the typed event of a line, and the
//! display lines and statistics read from it.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::classify::Signals;
use super::decode::{ErrorField, ListOrText, Loose, Obj, ObjOrText, Scalar, scalar};
use super::detail::{Collected, Detail, Gather, json_str};
use super::*;

/// One line of Claude Code's stream-json. Only what some reader needs is
/// decoded; tool inputs and results stay raw until they are shown.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ClaudeEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Scalar<'a>,
    #[serde(borrow)]
    pub(super) subtype: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) session_id: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) parent_tool_use_id: Option<&'a RawValue>,
    /// An assistant line's API error (`rate_limit`, `authentication_failed`…).
    #[serde(borrow)]
    pub(super) error: ErrorField<'a>,
    #[serde(borrow)]
    pub(super) message: ObjOrText<'a, Message<'a>>,
    #[serde(borrow)]
    pub(super) is_error: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) num_turns: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) total_cost_usd: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) cost_usd: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) duration_ms: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) api_error_status: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) result: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) usage: Option<&'a RawValue>,
    #[serde(rename = "modelUsage", borrow)]
    pub(super) model_usage: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) rate_limit_info: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Message<'a> {
    #[serde(borrow)]
    pub(super) id: Scalar<'a>,
    #[serde(borrow)]
    pub(super) model: Scalar<'a>,
    #[serde(borrow)]
    pub(super) usage: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) content: Content<'a>,
}

/// One block of a message's content.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Scalar<'a>,
    #[serde(borrow)]
    pub(super) id: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) name: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) tool_use_id: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) is_error: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) text: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) thinking: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) input: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) content: Option<&'a RawValue>,
}

/// A message's content: a plain string or blocks (those that are objects).
#[derive(Debug)]
pub(super) enum Content<'a> {
    Text(Scalar<'a>),
    Blocks(Vec<Block<'a>>),
}

impl Default for Content<'_> {
    fn default() -> Self {
        Content::Blocks(Vec::new())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match ListOrText::<Loose<Block<'a>>>::deserialize(d)? {
            ListOrText::Text(text) => Ok(Content::Text(Scalar::Str(text))),
            ListOrText::List(blocks) => Ok(Content::Blocks(
                blocks.into_iter().filter_map(|b| b.0).collect(),
            )),
            ListOrText::Absent => Ok(Content::default()),
        }
    }
}

/// A note the human told the running session, as the agent echoed the
/// message that took it in (`--replay-user-messages`), on one line.
fn told_note(content: &Content<'_>) -> Option<String> {
    let text = match content {
        Content::Text(text) => text.cow()?,
        Content::Blocks(blocks) => {
            let block = blocks.iter().find(|b| b.kind.str() == Some("text"))?;
            text_of(block.text)
        }
    };
    let note = text
        .trim_start()
        .strip_prefix(crate::agent::live_input::NOTE_HEADING)?;
    Some(note.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether an event `type` is Claude Code's.
pub(super) fn owns(kind: &str) -> bool {
    matches!(
        kind,
        "system"
            | "assistant"
            | "user"
            | "result"
            | "rate_limit_event"
            | "stream_event"
            | "control_request"
            | "control_response"
            | "control_cancel_request"
            | "keep_alive"
            | "tool_progress"
            | "auth_status"
    )
}

/// Reads one line holding a JSON object: statistics and display lines, and
/// what classification needs of it.
pub(super) fn decode<'a>(
    parser: &mut StreamParser,
    body: &'a str,
    out: &mut Vec<Rendered>,
) -> serde_json::Result<Signals<'a>> {
    let event = serde_json::from_str::<ClaudeEvent<'a>>(body)?;
    parser.claude_event(&event, body, out);
    Ok(Signals {
        message: event.message.text().map(Scalar::Str).unwrap_or_default(),
        kind: event.kind,
        subtype: event.subtype,
        is_error: event.is_error,
        api_error_status: event.api_error_status,
        result: event.result,
        error: event.error,
        rate_limit_info: event.rate_limit_info,
    })
}

fn text_of(raw: Option<&RawValue>) -> Cow<'_, str> {
    scalar(raw).cow().unwrap_or_default()
}

impl StreamParser {
    fn claude_event(&mut self, event: &ClaudeEvent<'_>, body: &str, out: &mut Vec<Rendered>) {
        let session = scalar(event.session_id);
        if self.stats.agent_session_id.is_none()
            && let Some(id) = session.text()
        {
            self.stats.agent_session_id = Some(clean(id));
        }
        self.claude.enter(session.text());
        let first = out.len();
        let before = self.usage_fingerprint();
        let kind = event.kind.str();
        match kind {
            Some("system") => {
                if let Ok(obj) = serde_json::from_str::<Obj<'_>>(body) {
                    self.claude_system(&obj, out);
                }
            }
            Some("assistant") => self.claude_assistant(event, out),
            Some("user") => self.claude_user(event, out),
            Some("result") => self.claude_result(event, out),
            Some("rate_limit_event") => self.claude_rate_limit(event, out),
            // Partial messages (`--include-partial-messages`): the model is
            // answering, before its whole message is written.
            Some("stream_event") => self.stats.acted = true,
            _ => {}
        }
        // Subagent (Task) traffic interleaves with the main agent's; a margin
        // mark keeps the two apart in the pane.
        if scalar(event.parent_tool_use_id).text().is_some() {
            for line in &mut out[first..] {
                line.text.insert_str(0, "┆ ");
            }
        }
        // Most events change no count: the totals are redone only when one did.
        if kind != Some("result") && self.usage_fingerprint() == before {
            return;
        }
        let main = self.stats.model.as_deref();
        let total = self.claude.total_usage(main);
        self.stats.tokens_by_model = self.claude.tokens_by_model(main);
        self.set_tokens(total);
        self.stats.turns = self.claude.turns();
        self.stats.cost_usd = self.claude.cost();
        self.stats.duration_ms = self.claude.duration_ms();
        // A later run without its result yet leaves the file's figures partial.
        self.stats.ended = self.claude.ended();
    }

    /// What the token and turn totals are made of, outside a result: the
    /// messages seen, their summed usage (which moves whenever one model's
    /// does) and whether the main model is known.
    fn usage_fingerprint(&self) -> (usize, Usage, bool, usize) {
        (
            self.claude.usage_by_message.len(),
            self.claude.summed,
            self.stats.model.is_some(),
            self.claude.parts.len() + self.claude.runs.len(),
        )
    }

    fn set_tokens(&mut self, usage: Usage) {
        self.stats.input_tokens = usage.input;
        self.stats.output_tokens = usage.output;
        self.stats.cache_read_tokens = usage.cache_read;
        self.stats.cache_write_tokens = usage.cache_write;
    }

    fn claude_system(&mut self, event: &Obj<'_>, out: &mut Vec<Rendered>) {
        match event.scalar("subtype").str() {
            Some("init") => self.claude_init(event, out),
            Some("api_retry") => {
                let mut text = String::from("⟳ API retry");
                if let Some(attempt) = event.scalar("attempt").u64() {
                    text.push_str(&format!(" {attempt}"));
                    if let Some(max) = event.scalar("max_retries").u64() {
                        text.push_str(&format!("/{max}"));
                    }
                }
                if let Some(delay) = event.scalar("retry_delay_ms").f64() {
                    text.push_str(&format!(" in {:.1}s", delay / 1000.0));
                }
                let status = event
                    .scalar("error_status")
                    .u64()
                    .map(|s| s.to_string())
                    .or_else(|| event.str("error").map(|e| clean(&e)));
                if let Some(status) = status.filter(|s| !s.is_empty()) {
                    text.push_str(&format!(" ({status})"));
                }
                out.push(line(LineKind::System, fit(text)));
            }
            Some("compact_boundary") => {
                let meta = event.obj("compact_metadata").unwrap_or_default();
                let mut parts = Vec::new();
                if let Some(trigger) = meta.str("trigger") {
                    parts.push(clean(&trigger));
                }
                if let Some(tokens) = meta.scalar("pre_tokens").u64() {
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
                    .str("description")
                    .map(|d| one_line(&d))
                    .unwrap_or_default();
                let text = if what.is_empty() {
                    "◆ task started".to_owned()
                } else {
                    format!("◆ task started: {what}")
                };
                let detail = event.str("prompt").and_then(|p| self.detail(p, true));
                out.push(
                    line(LineKind::System, fit(text))
                        .with_detail(detail)
                        .with_id(event.str("tool_use_id").map(|id| clean(&id))),
                );
            }
            Some("task_notification") => {
                let status = event
                    .str("status")
                    .map(|s| clean(&s))
                    .unwrap_or_else(|| "finished".to_owned());
                let summary = event.str("summary").unwrap_or_default();
                let first = one_line(&summary);
                let text = if first.is_empty() {
                    format!("◆ task {status}")
                } else {
                    format!("◆ task {status}: {first}")
                };
                let failed = matches!(status.as_str(), "failed" | "error");
                out.push(
                    line(LineKind::System, fit(text))
                        .with_detail(self.detail(summary, true))
                        .with_id(event.str("tool_use_id").map(|id| clean(&id)))
                        .with_error(failed),
                );
            }
            Some("hook_response") => self.claude_hook(event, out),
            // hook_started, task_progress, status, …: progress noise.
            _ => {}
        }
    }

    fn claude_init(&mut self, event: &Obj<'_>, out: &mut Vec<Rendered>) {
        if self.claude.start_run() {
            // The agent runs again (a resumed session): its own result decides
            // the verdict, the text and the promise, not an earlier run's.
            self.stats.result_subtype = None;
            self.stats.result_is_error = None;
            self.stats.result_text = None;
            self.note_final_text(None);
        }
        if let Some(id) = event.str("session_id").filter(|id| !id.is_empty()) {
            self.stats.agent_session_id = Some(clean(&id));
        }
        let mut text = String::from("● session started");
        if let Some(model) = event.str("model").filter(|m| !m.is_empty()) {
            let model = clean(&model);
            text.push_str(" · model ");
            text.push_str(&model);
            let part = self.claude.part();
            if part.main.is_none() {
                part.main = Some(model.clone());
            }
            if self.stats.model.is_none() {
                self.stats.model = Some(model);
            }
        }
        if let Some(tools) = event.get("tools").filter(|t| t.get().starts_with('[')) {
            let count = decode::items(Some(tools)).len() as u64;
            text.push_str(&format!(" · {}", plural(count, "tool")));
        }
        let detail = self.detail(init_detail(event), true);
        out.push(line(LineKind::System, fit(text)).with_detail(detail));
    }

    /// Successful hooks are routine (they run on every tool call); only a
    /// failing or blocking one is worth a line.
    fn claude_hook(&mut self, event: &Obj<'_>, out: &mut Vec<Rendered>) {
        let outcome = event.str("outcome");
        let exit = event.scalar("exit_code").i64();
        let failed = outcome.as_deref().is_some_and(|o| o != "success")
            || exit.is_some_and(|code| code != 0);
        if !failed {
            return;
        }
        let mut text = String::from("⚑ hook");
        for key in ["hook_event", "hook_name"] {
            if let Some(v) = event.str(key).filter(|v| !v.is_empty()) {
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
            .filter_map(|key| event.str(key))
            .find(|s| !s.trim().is_empty())
            .unwrap_or_default();
        let first = one_line(&said);
        if !first.is_empty() {
            text.push_str(": ");
            text.push_str(&first);
        }
        out.push(
            line(LineKind::System, fit(text))
                .with_detail(self.detail(said, true))
                .with_error(true),
        );
    }

    fn claude_assistant(&mut self, event: &ClaudeEvent<'_>, out: &mut Vec<Rendered>) {
        let Some(message) = event.message.object() else {
            return;
        };
        let error = match &event.error {
            ErrorField::Text(error) if !error.is_empty() => Some(error.as_ref()),
            _ => None,
        };
        let model = message.model.str();
        // Synthetic messages (API errors reported as assistant text) are not
        // model turns and carry zero usage.
        let synthetic = error.is_some() || model == Some("<synthetic>");
        if !synthetic {
            self.stats.acted = true;
            self.count_message(message);
        }
        let blocks: &[Block<'_>] = match &message.content {
            Content::Text(text) => {
                if self.render && error.is_none() {
                    push_text_lines(text.str().unwrap_or_default(), out);
                }
                &[]
            }
            Content::Blocks(blocks) => blocks,
        };
        if !self.render {
            for block in blocks {
                if matches!(
                    block.kind.str(),
                    Some("tool_use" | "server_tool_use" | "mcp_tool_use")
                ) {
                    self.claude_tool_use(block, out);
                }
            }
            return;
        }
        if let Some(error) = error {
            let said = match &message.content {
                Content::Text(text) => text.cow().unwrap_or_default(),
                Content::Blocks(_) => blocks
                    .iter()
                    .find(|b| b.kind.str() == Some("text"))
                    .map(|b| text_of(b.text))
                    .unwrap_or_default(),
            };
            let first = one_line(&said);
            let mut text = format!("✗ {}", clean(error));
            if !first.is_empty() {
                text.push_str(": ");
                text.push_str(&first);
            }
            out.push(
                line(LineKind::Error, fit(text))
                    .with_detail(self.detail(said, true))
                    .with_error(true),
            );
        }
        for block in blocks {
            match block.kind.str() {
                Some("text") if error.is_none() => push_text_lines(&text_of(block.text), out),
                Some("thinking") => out.push(self.thinking(text_of(block.thinking))),
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

    /// Usage of one API message, which Claude Code may split over several
    /// lines that all repeat it: the last one seen counts.
    fn count_message(&mut self, message: &Message<'_>) {
        if self.stats.model.is_none()
            && let Some(model) = message.model.text()
        {
            self.stats.model = Some(clean(model));
        }
        let Some(id) = message.id.str() else {
            return;
        };
        let usage = claude_usage(message.usage);
        let main = self.stats.model.as_deref();
        let claude = &mut self.claude;
        claude.part();
        let current = claude.current;
        if !claude.usage_by_message.contains_key(id) {
            claude
                .usage_by_message
                .insert(id.to_owned(), (current, Usage::default()));
            claude.run().messages += 1;
        }
        let Some(usage) = usage else {
            return;
        };
        let Some((part, entry)) = claude.usage_by_message.get_mut(id) else {
            return;
        };
        let Some(part) = claude.parts.get_mut(*part) else {
            return;
        };
        // Every line of a busy stream comes here: the model's name is made
        // safe (a new string) only the first time it is seen.
        let model = message.model.text().or(main).map(model_key);
        let known = model.filter(|name| part.by_model.contains_key(*name));
        let name = match known {
            Some(name) => name.to_owned(),
            None => model.map(clean).unwrap_or_default(),
        };
        entry.replace_in(&mut claude.summed, usage);
        let by_model = part.by_model.entry(name).or_default();
        entry.replace_in(by_model, usage);
        *entry = usage;
    }

    pub(super) fn thinking(&self, text: Cow<'_, str>) -> Rendered {
        let chars = text.chars().count();
        if text.trim().is_empty() {
            return line(LineKind::Thinking, "✻ thinking".to_owned());
        }
        line(LineKind::Thinking, format!("✻ thinking ({chars} chars)"))
            .with_detail(self.detail(text, true))
    }

    fn claude_tool_use(&mut self, block: &Block<'_>, out: &mut Vec<Rendered>) {
        let raw_id = scalar(block.id);
        // A call already counted is dropped before anything is allocated for
        // it (ids are kept made safe; a safe id reads the same either way).
        if raw_id
            .str()
            .is_some_and(|id| self.claude.seen_tool_uses.contains(id))
        {
            return;
        }
        let id = raw_id.str().map(clean);
        if let Some(id) = &id
            && !self.claude.seen_tool_uses.insert(id.clone())
        {
            return;
        }
        let name = scalar(block.name).text().map(clean).unwrap_or_default();
        let name = if name.is_empty() {
            "tool".to_owned()
        } else {
            name
        };
        self.count_tool(&name);
        if !self.render && self.tool_call_log.is_none() {
            return;
        }
        let input = block.input.filter(|raw| raw.get() != "null");
        let summary = input
            .map(|raw| tool_summary(&name, raw))
            .unwrap_or_default();
        self.log_tool_call(&name, &summary, input);
        if !self.render {
            return;
        }
        let detail = input.map(|input| Detail::input(input, !self.line_cut));
        out.push(
            line(LineKind::ToolCall, call_text(&name, &summary))
                .with_detail(detail)
                .with_id(id),
        );
    }

    pub(super) fn count_tool(&mut self, name: &str) {
        self.stats.acted = true;
        self.stats.tool_calls += 1;
        *self
            .stats
            .tool_calls_by_name
            .entry(name.to_owned())
            .or_default() += 1;
    }

    fn claude_user(&mut self, event: &ClaudeEvent<'_>, out: &mut Vec<Rendered>) {
        let content = event.message.object().map(|m| &m.content);
        if self.render
            && let Some(note) = content.and_then(told_note)
        {
            out.push(line(LineKind::System, fit(format!("✉ your note: {note}"))));
            return;
        }
        // A plain string is the prompt echoed back: nothing new to show.
        let Some(Content::Blocks(blocks)) = content else {
            return;
        };
        for block in blocks {
            if block.kind.str() != Some("tool_result") {
                continue;
            }
            let is_error = scalar(block.is_error).bool() == Some(true);
            if is_error {
                self.stats.tool_errors += 1;
            }
            if !self.render {
                continue;
            }
            let mut body = Collected::summary();
            if let Some(content) = block.content {
                result_content(content, &mut body);
            }
            let detail = block.content.map(|raw| (raw, result_content as Gather));
            let id = scalar(block.tool_use_id).str().map(clean);
            out.push(self.result_line(body, detail, is_error, None, id));
        }
    }

    /// "  ↳ first line (+N lines)" / "  ✗ label · first line", detail = the
    /// output: `body`'s text, or gathered from `source` when `body` is a summary.
    pub(super) fn result_line(
        &self,
        body: Collected,
        source: Option<(&RawValue, Gather)>,
        is_error: bool,
        label: Option<&str>,
        id: Option<String>,
    ) -> Rendered {
        let (first, more) = body.first_line();
        let shown = !first.is_empty();
        let mut first = clean(first);
        let detail = shown.then(|| match source {
            Some((raw, gather)) => Detail::output(raw, gather, !self.line_cut),
            None => Detail::text(body.text, body.complete && !self.line_cut),
        });
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
            .with_detail(detail)
            .with_id(id)
            .with_error(is_error)
    }

    fn claude_result(&mut self, event: &ClaudeEvent<'_>, out: &mut Vec<Rendered>) {
        let subtype = scalar(event.subtype).str().map(clean);
        let is_error = scalar(event.is_error).bool();
        let turns = scalar(event.num_turns).u64();
        let cost = scalar(event.total_cost_usd)
            .f64()
            .or_else(|| scalar(event.cost_usd).f64());
        let duration = scalar(event.duration_ms).u64();
        let result = scalar(event.result);
        let result = result.str();
        let api_status = scalar(event.api_error_status).u64();

        let session = scalar(event.session_id);
        if let Some(id) = session.text() {
            self.stats.agent_session_id = Some(clean(id));
        }
        let failed =
            is_error == Some(true) || subtype.as_deref().is_some_and(|s| s.starts_with("error"));
        // Each result reports its invocation so far; a later one (Claude Code
        // 2.1 may add an empty `error_during_execution` after a success)
        // never takes back what an earlier one reported.
        let did_nothing = failed && turns == Some(0);
        let first_result =
            self.stats.result_subtype.is_none() && self.stats.result_is_error.is_none();
        self.stats.acted = true;
        let run = self.claude.run();
        run.ended = true;
        run.result_turns = run.result_turns.max(turns);
        run.duration_ms = run.duration_ms.max(duration);
        let part = self.claude.part();
        if let Some(models) = Obj::of(event.model_usage) {
            for (name, usage) in models.members() {
                let Some(usage) = model_usage(usage) else {
                    continue;
                };
                let kept = part
                    .result_by_model
                    .entry(clean(model_key(name)))
                    .or_default();
                *kept = kept.max(usage);
            }
        }
        if let Some(usage) = claude_usage(event.usage) {
            part.result_usage = Some(part.result_usage.unwrap_or_default().max(usage));
        }
        part.cost = match (part.cost, cost) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if first_result || !did_nothing {
            self.stats.result_subtype = subtype.clone();
            self.stats.result_is_error = is_error;
            self.stats.result_text =
                result.map(|r| cap_bytes(sanitize_block(r), MAX_STATS_TEXT_BYTES));
            self.note_final_text(result);
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
                .with_detail(Some(Detail::from(detail)))
                .with_error(failed),
        );
        if let Some(result) = result.filter(|r| !r.trim().is_empty()) {
            let (first, more) = first_line(result);
            let mut text = clean(first);
            if more > 0 {
                text.push_str(&format!(" (+{})", plural(more as u64, "line")));
            }
            out.push(
                line(LineKind::Text, fit(text))
                    .with_detail(
                        self.detail(result, true)
                            .filter(|_| more > 0 || text_is_cut(first)),
                    )
                    .with_error(failed),
            );
        }
    }

    fn claude_rate_limit(&mut self, event: &ClaudeEvent<'_>, out: &mut Vec<Rendered>) {
        let Some(info) = Obj::of(event.rate_limit_info) else {
            return;
        };
        let Some(status) = info.str("status").filter(|s| !s.is_empty()) else {
            return;
        };
        if status == "allowed" {
            return;
        }
        let mut text = format!("⚠ rate limit {}", clean(&status));
        let kind = info.str("rateLimitType").map(|k| clean(&k));
        if let Some(kind) = &kind {
            text.push_str(&format!(" ({kind})"));
        }
        if let Some(at) = info
            .scalar("resetsAt")
            .i64()
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
        let overage = info.scalar("isUsingOverage").bool() == Some(true);
        if overage {
            text.push_str(" · using overage");
            self.stats.overage_events += 1;
        }
        let detail = event
            .rate_limit_info
            .map(|raw| Detail::json(raw, !self.line_cut));
        out.push(
            line(LineKind::RateLimit, fit(text))
                .with_detail(detail)
                .with_error(status == "rejected" && !overage),
        );
    }
}

/// A `tool_result`'s content, a string or content blocks, as text.
fn result_content(content: &RawValue, body: &mut Collected) {
    if content.get().starts_with('"') {
        body.push_json_str(content);
        return;
    }
    for part in decode::items(Some(content)) {
        if part.get().starts_with('"') {
            body.push_block(|c| c.push_json_str(part));
            continue;
        }
        let Some(part) = Obj::of(Some(part)) else {
            continue;
        };
        match part.scalar("type").str() {
            Some("text") => {
                if let Some(text) = json_str(part.get("text")) {
                    body.push_block(|c| c.push_json_str(text));
                }
            }
            Some("image") => body.push_block(|c| c.push_str("[image]")),
            Some(other) => {
                let label = format!("[{}]", clean(other));
                body.push_block(|c| c.push_str(&label));
            }
            None => {}
        }
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

/// A message's or a result's `usage` (snake-case keys).
fn claude_usage(usage: Option<&RawValue>) -> Option<Usage> {
    let usage = Obj::of(usage)?;
    let field = |key: &str| usage.scalar(key).u64().unwrap_or(0);
    Some(Usage {
        input: field("input_tokens"),
        output: field("output_tokens"),
        cache_read: field("cache_read_input_tokens"),
        cache_write: field("cache_creation_input_tokens"),
    })
}

/// One model's entry of a result's `modelUsage` (camel-case keys).
fn model_usage(usage: &RawValue) -> Option<Usage> {
    let usage = Obj::of(Some(usage))?;
    let field = |key: &str| usage.scalar(key).u64().unwrap_or(0);
    Some(Usage {
        input: field("inputTokens"),
        output: field("outputTokens"),
        cache_read: field("cacheReadInputTokens"),
        cache_write: field("cacheCreationInputTokens"),
    })
}

/// Header fields of `system/init` for the expanded view.
fn init_detail(event: &Obj<'_>) -> String {
    let mut detail = String::new();
    for (key, label) in [
        ("cwd", "cwd"),
        ("claude_code_version", "version"),
        ("permissionMode", "permission mode"),
        ("model", "model"),
        ("session_id", "session"),
    ] {
        if let Some(value) = event.str(key) {
            detail.push_str(&format!("{label}: {value}\n"));
        }
    }
    let tools: Vec<Cow<'_, str>> = event
        .items("tools")
        .into_iter()
        .filter_map(|t| scalar(Some(t)).cow())
        .collect();
    if event.get("tools").is_some_and(|t| t.get().starts_with('[')) {
        detail.push_str(&format!("tools: {}\n", tools.join(", ")));
    }
    let names: Vec<String> = event
        .items("mcp_servers")
        .into_iter()
        .map(|s| {
            let s = Obj::of(Some(s)).unwrap_or_default();
            let name = s.str("name").unwrap_or_default();
            match s.str("status") {
                Some(status) => format!("{name} ({status})"),
                None => name.into_owned(),
            }
        })
        .collect();
    if !names.is_empty() {
        detail.push_str(&format!("mcp servers: {}\n", names.join(", ")));
    }
    detail
}

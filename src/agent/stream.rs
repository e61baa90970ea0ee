//! Live reading of an agent's output stream: display lines and session statistics.
//!
//! While a session runs, the supervisor's UI tails the session's output file and
//! hands every new chunk of bytes to a [`StreamParser`]. The parser turns Claude
//! Code `--output-format stream-json` events, Codex `exec --json` events or plain
//! terminal text into short, safe display lines ([`Rendered`]) and keeps running
//! [`SessionStats`] (turns, tool calls, tokens, cost, the final result).
//!
//! Design points, each forced by what agents actually write:
//! - Chunks arrive at arbitrary byte boundaries, so partial lines are buffered;
//!   the result never depends on how the bytes were split.
//! - One line can be many megabytes (a tool result holding a whole file, a base64
//!   image). The pending line is capped at 1 MiB; a longer JSON line is still
//!   read, from its kept start, by a parser that closes whatever the cut left
//!   open, so the event keeps its kind and id and the line is counted.
//! - Agent output is untrusted terminal content. Every displayed string is
//!   stripped of control characters and escape sequences (only colour SGR
//!   survives, and only on plain text lines), so nothing the agent printed can
//!   move the cursor, retitle the terminal or hide text.
//! - Event lines are large and mostly uninteresting to a display, so JSON is read
//!   by a small borrowing parser that keeps strings in their escaped form and
//!   decodes only the parts that are shown, not by building `serde_json::Value`s.
//! - Formats change between agent versions: unknown event types and fields are
//!   skipped, values of unexpected types are treated as absent, and nothing here
//!   ever fails or panics on any input.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use std::sync::LazyLock;

use memchr::{memchr, memchr2, memmem};

/// Longest part of one line kept in memory; the rest of a longer line is dropped.
const MAX_PENDING_BYTES: usize = 1 << 20;

/// Cap for [`Rendered::detail`]: enough to read a tool's output, small enough for a UI.
const MAX_DETAIL_BYTES: usize = 64 * 1024;

/// Longest [`Rendered::text`], in characters, including the ellipsis.
const MAX_TEXT_CHARS: usize = 500;

/// Cap for texts kept in [`SessionStats`] (they end up in status files).
const MAX_STATS_TEXT_BYTES: usize = 4 * 1024;

/// Non-empty lines after which a stream with no JSON object is taken for text.
const AUTO_DETECT_LINES: u32 = 20;

/// Nesting limit of the JSON reader (as serde_json's), so hostile input cannot
/// exhaust the stack.
const MAX_JSON_DEPTH: usize = 128;

/// Display lines produced from one text block; a pasted log of thousands of
/// lines would otherwise flood the output pane.
const MAX_LINES_PER_BLOCK: usize = 1000;

/// Tab stops for expanding tabs, as in a terminal.
const TAB_WIDTH: usize = 8;

/// Colour sequences a plain line may keep in total; a line made of nothing but
/// SGR codes must not slip past the length cap.
const MAX_SGR_BYTES_PER_LINE: usize = 2048;

/// Longest single SGR sequence that is kept.
const MAX_SGR_SEQUENCE_BYTES: usize = 64;

/// Appended to a detail that was cut.
const TRUNCATED_MARK: &str = "\n… (truncated)";

/// Which event format the agent writes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AgentFormat {
    /// Decide from the stream itself (see [`StreamParser::format`]).
    #[default]
    Auto,
    /// `claude -p --output-format stream-json --verbose`.
    ClaudeStreamJson,
    /// `codex exec --json`.
    CodexJson,
    /// Anything else: every line is shown as terminal text.
    Text,
}

/// One display line for the output pane.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub kind: LineKind,
    /// One line, no control characters except that for LineKind::Plain ANSI SGR colour sequences (ESC [ ... m) are kept for the UI to convert; every other control char, CR-overwrite (keep the text after the last \r), BEL, cursor movement etc. removed or made visible harmlessly. Truncated to ~500 chars with an ellipsis.
    pub text: String,
    /// Full content for "expand" (tool input pretty-printed + its result; capped at 64 KiB), if any.
    ///
    /// A `ToolCall` carries its input and the matching `ToolResult` (same
    /// `tool_use_id`) carries the output. Newlines and tabs are kept; other
    /// control characters and all escape sequences are removed.
    pub detail: Option<String>,
    /// Ties a ToolCall to its ToolResult.
    pub tool_use_id: Option<String>,
    pub is_error: bool,
}

/// What a [`Rendered`] line shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    System,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    Result,
    RateLimit,
    Error,
    Plain,
}

/// Running totals for one session, as far as the stream has been read.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SessionStats {
    /// Claude: result.num_turns if present, else count of distinct assistant message ids; Codex: turn.completed count
    pub turns: u64,
    pub tool_calls: u64,
    pub tool_calls_by_name: BTreeMap<String, u64>,
    /// tool_result is_error true / codex command exit != 0
    pub tool_errors: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// result.total_cost_usd, older cost_usd
    pub cost_usd: Option<f64>,
    pub result_subtype: Option<String>,
    pub result_is_error: Option<bool>,
    /// Capped at 4 KiB.
    pub result_text: Option<String>,
    /// Codex last agent_message text (capped 4 KiB)
    pub last_agent_message: Option<String>,
    pub model: Option<String>,
    pub agent_session_id: Option<String>,
    pub duration_ms: Option<u64>,
    /// Every line, empty ones and a final line without newline included.
    pub lines: u64,
    /// Lines read as JSON objects (not counted once the format is `Text`).
    pub json_lines: u64,
}

/// One tool call as the doom-loop detector compares them: the same name and the
/// same input (object keys in any order) give the same signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallSig {
    pub name: String,
    /// The one-line summary shown for the call (`npm test`, a file path…).
    pub summary: String,
    /// Hash of the canonical input.
    pub input_hash: u64,
}

/// Incremental reader of one session's output; see the module documentation.
#[derive(Debug)]
pub struct StreamParser {
    format: AgentFormat,
    /// Start of a line that continues in a later chunk (at most MAX_PENDING_BYTES).
    pending: Vec<u8>,
    /// The pending line has lost bytes past MAX_PENDING_BYTES.
    pending_truncated: bool,
    /// While `Auto`: non-empty lines seen, and whether one was a JSON object.
    auto_lines: u32,
    auto_saw_object: bool,
    /// The line being handled was cut at MAX_PENDING_BYTES (details say so).
    line_cut: bool,
    stats: SessionStats,
    claude: ClaudeState,
    codex: CodexState,
    /// See [`StreamParser::watch_final_text`].
    watched: Option<String>,
    watched_in_final: bool,
    /// Tool calls not yet taken, when recording (see [`StreamParser::record_tool_calls`]).
    tool_call_log: Option<Vec<ToolCallSig>>,
}

#[derive(Debug, Default)]
struct ClaudeState {
    /// Last usage seen per assistant message id: Claude Code splits one API
    /// message over several lines that all repeat the same usage.
    usage_by_message: HashMap<String, Usage>,
    /// Sum of `usage_by_message`, kept current so no event re-sums the map.
    summed: Usage,
    /// The result line's usage is the session total and wins when present.
    result_usage: Option<Usage>,
    result_turns: Option<u64>,
    /// tool_use ids already shown and counted.
    seen_tool_uses: HashSet<String>,
}

#[derive(Debug, Default)]
struct CodexState {
    /// Items whose call line was shown at item.started, so item.completed only
    /// adds the result.
    started: HashSet<String>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Usage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl Usage {
    fn replace_in(self, total: &mut Usage, new: Usage) {
        total.input = total
            .input
            .saturating_sub(self.input)
            .saturating_add(new.input);
        total.output = total
            .output
            .saturating_sub(self.output)
            .saturating_add(new.output);
        total.cache_read = total
            .cache_read
            .saturating_sub(self.cache_read)
            .saturating_add(new.cache_read);
        total.cache_write = total
            .cache_write
            .saturating_sub(self.cache_write)
            .saturating_add(new.cache_write);
    }
}

impl Default for StreamParser {
    fn default() -> Self {
        Self::new(AgentFormat::Auto)
    }
}

impl StreamParser {
    pub fn new(format: AgentFormat) -> Self {
        Self {
            format,
            pending: Vec::new(),
            pending_truncated: false,
            auto_lines: 0,
            auto_saw_object: false,
            line_cut: false,
            stats: SessionStats::default(),
            claude: ClaudeState::default(),
            codex: CodexState::default(),
            watched: None,
            watched_in_final: false,
            tool_call_log: None,
        }
    }

    /// Keep a [`ToolCallSig`] of every tool call from now on, for
    /// [`StreamParser::take_tool_calls`].
    pub fn record_tool_calls(&mut self) {
        self.tool_call_log.get_or_insert_with(Vec::new);
    }

    /// The tool calls read since the last call, in order (empty unless recording).
    pub fn take_tool_calls(&mut self) -> Vec<ToolCallSig> {
        self.tool_call_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn log_tool_call(&mut self, name: &str, summary: &str, input: &Json<'_>) {
        if let Some(log) = &mut self.tool_call_log {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hash_canonical(input, &mut hasher);
            log.push(ToolCallSig {
                name: name.to_owned(),
                summary: summary.to_owned(),
                input_hash: std::hash::Hasher::finish(&hasher),
            });
        }
    }

    /// Watch the agent's final message (Claude's last `result` text, Codex's last
    /// `agent_message`) for `needle`, in full: the copies kept in [`SessionStats`]
    /// are capped. Tool results, tool inputs and the prompt never count.
    pub fn watch_final_text(&mut self, needle: &str) {
        self.watched = (!needle.is_empty()).then(|| needle.to_owned());
    }

    /// Whether the final message read so far holds the watched text.
    pub fn final_text_has_watched(&self) -> bool {
        self.watched_in_final
    }

    fn note_final_text(&mut self, text: Option<&str>) {
        self.watched_in_final = match (&self.watched, text) {
            (Some(needle), Some(text)) => text.contains(needle.as_str()),
            _ => false,
        };
    }

    /// Feed the next bytes of the output file (any chunking: partial lines are buffered; a line over 64 KiB is truncated for display but still counted; never holds more than ~1 MiB of a pending line).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Rendered> {
        let mut out = Vec::new();
        let mut chunk = bytes;
        while let Some(i) = memchr(b'\n', chunk) {
            let (line, rest) = chunk.split_at(i);
            if self.pending.is_empty() && !self.pending_truncated {
                // Common case: the whole line is in this chunk, no copy needed.
                let keep = line.len().min(MAX_PENDING_BYTES);
                self.process_line(&line[..keep], line.len() > keep, &mut out);
            } else {
                self.append(line);
                let pending = std::mem::take(&mut self.pending);
                let truncated = std::mem::replace(&mut self.pending_truncated, false);
                self.process_line(&pending, truncated, &mut out);
                // Reuse the buffer, but do not sit on a megabyte after one huge line.
                self.pending = pending;
                self.pending.clear();
                self.pending.shrink_to(MAX_DETAIL_BYTES);
            }
            chunk = &rest[1..];
        }
        self.append(chunk);
        out
    }

    /// End of session: flush a partial last line.
    pub fn finish(&mut self) -> Vec<Rendered> {
        let mut out = Vec::new();
        if !self.pending.is_empty() || self.pending_truncated {
            let pending = std::mem::take(&mut self.pending);
            let truncated = std::mem::replace(&mut self.pending_truncated, false);
            self.process_line(&pending, truncated, &mut out);
        }
        out
    }

    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Auto resolves on the first JSON object line (Claude: has "type" among system/assistant/user/result/rate_limit_event...; Codex: type like "thread.started"/"turn.started"/"item.*"); a stream with no JSON object in its first 20 non-empty lines is Text.
    ///
    /// A JSON object whose `type` belongs to neither format does not resolve
    /// the format; it is skipped like any unknown event.
    pub fn format(&self) -> AgentFormat {
        self.format
    }

    /// Buffers part of an unfinished line without ever growing past the cap
    /// (plain `extend` may double the allocation beyond it).
    fn append(&mut self, data: &[u8]) {
        let room = MAX_PENDING_BYTES - self.pending.len();
        let take = data.len().min(room);
        if take < data.len() {
            self.pending_truncated = true;
        }
        if take == 0 {
            return;
        }
        let needed = self.pending.len() + take;
        if needed > self.pending.capacity() {
            let target = needed
                .max(self.pending.capacity().saturating_mul(2))
                .min(MAX_PENDING_BYTES);
            self.pending.reserve_exact(target - self.pending.len());
        }
        self.pending.extend_from_slice(&data[..take]);
    }

    fn process_line(&mut self, raw: &[u8], truncated: bool, out: &mut Vec<Rendered>) {
        self.stats.lines += 1;
        self.line_cut = truncated;
        let raw = if truncated {
            raw
        } else {
            raw.strip_suffix(b"\r").unwrap_or(raw)
        };
        let text = decode_utf8(raw, truncated);
        let line = text.strip_prefix('\u{feff}').unwrap_or(&text);
        match self.format {
            AgentFormat::Text => out.push(plain(line)),
            AgentFormat::Auto => self.auto_line(line, truncated, out),
            format => {
                let body = line.trim_matches(is_json_ws);
                if body.is_empty() {
                    return;
                }
                match parse_object(body, truncated) {
                    Some(event) => {
                        self.stats.json_lines += 1;
                        self.dispatch(format, &event, out);
                    }
                    None => out.push(plain(line)),
                }
            }
        }
    }

    fn auto_line(&mut self, line: &str, truncated: bool, out: &mut Vec<Rendered>) {
        let body = line.trim_matches(is_json_ws);
        if body.is_empty() {
            return;
        }
        self.auto_lines = self.auto_lines.saturating_add(1);
        if let Some(event) = parse_object(body, truncated) {
            self.stats.json_lines += 1;
            self.auto_saw_object = true;
            if let Some(format) = event.get_str("type").and_then(|kind| classify(&kind)) {
                self.format = format;
                self.dispatch(format, &event, out);
            }
            return;
        }
        out.push(plain(line));
        if self.auto_lines >= AUTO_DETECT_LINES && !self.auto_saw_object {
            self.format = AgentFormat::Text;
        }
    }

    fn dispatch(&mut self, format: AgentFormat, event: &Json<'_>, out: &mut Vec<Rendered>) {
        match format {
            AgentFormat::ClaudeStreamJson => self.claude_event(event, out),
            AgentFormat::CodexJson => self.codex_event(event, out),
            AgentFormat::Auto | AgentFormat::Text => {}
        }
    }

    /// Detail text of a shown value: sanitised, capped, and marked when either
    /// the value or the line it came from was cut.
    fn detail<'t>(&self, text: impl Into<Cow<'t, str>>, complete: bool) -> Option<String> {
        let text = text.into();
        if text.trim().is_empty() {
            return None;
        }
        Some(cap_detail(sanitize_block(text), complete && !self.line_cut))
    }

    // -----------------------------------------------------------------------
    // Claude Code stream-json
    // -----------------------------------------------------------------------

    fn claude_event(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
        if self.stats.agent_session_id.is_none()
            && let Some(id) = event.get_str("session_id")
            && !id.is_empty()
        {
            self.stats.agent_session_id = Some(clean(&id));
        }
        let first = out.len();
        match event.get_str("type").as_deref() {
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
        let usage = self.claude.result_usage.unwrap_or(self.claude.summed);
        self.set_tokens(usage);
        self.stats.turns = self
            .claude
            .result_turns
            .unwrap_or(self.claude.usage_by_message.len() as u64);
    }

    fn set_tokens(&mut self, usage: Usage) {
        self.stats.input_tokens = usage.input;
        self.stats.output_tokens = usage.output;
        self.stats.cache_read_tokens = usage.cache_read;
        self.stats.cache_write_tokens = usage.cache_write;
    }

    fn claude_system(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
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

    fn claude_assistant(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
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
                && let Some(model) = model.filter(|m| !m.is_empty())
            {
                self.stats.model = Some(clean(&model));
            }
            if let Some(id) = message.get_str("id") {
                let usage = message.get("usage").and_then(claude_usage);
                let claude = &mut self.claude;
                let entry = claude.usage_by_message.entry(id.into_owned()).or_default();
                if let Some(usage) = usage {
                    entry.replace_in(&mut claude.summed, usage);
                    *entry = usage;
                }
            }
        }

        let blocks: &[Json<'_>] = match message.get("content") {
            Some(Json::Arr(blocks)) => blocks,
            Some(text @ Json::Str(_)) => std::slice::from_ref(text),
            _ => &[],
        };
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

    fn thinking(&self, text: Cow<'_, str>) -> Rendered {
        let chars = text.chars().count();
        if text.trim().is_empty() {
            return line(LineKind::Thinking, "✻ thinking".to_owned());
        }
        line(LineKind::Thinking, format!("✻ thinking ({chars} chars)"))
            .with_detail(self.detail(text, true))
    }

    fn claude_tool_use(&mut self, block: &Json<'_>, out: &mut Vec<Rendered>) {
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
        let summary = tool_summary(&name, input);
        self.log_tool_call(&name, &summary, input);
        let detail = match input {
            Json::Null => None,
            input => {
                let (pretty, complete) = json_text(input, true);
                self.detail(pretty, complete)
            }
        };
        out.push(
            line(LineKind::ToolCall, call_text(&name, &summary))
                .with_detail(detail)
                .with_id(id),
        );
    }

    fn count_tool(&mut self, name: &str) {
        self.stats.tool_calls += 1;
        *self
            .stats
            .tool_calls_by_name
            .entry(name.to_owned())
            .or_default() += 1;
    }

    fn claude_user(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
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
    fn result_line(
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

    fn claude_result(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
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
        if let Some(usage) = event.get("usage").and_then(claude_usage) {
            self.claude.result_usage = Some(usage);
        }
        if turns.is_some() {
            self.claude.result_turns = turns;
        }
        if cost.is_some() {
            self.stats.cost_usd = cost;
        }
        if duration.is_some() {
            self.stats.duration_ms = duration;
        }
        self.stats.result_subtype = subtype.clone();
        self.stats.result_is_error = is_error;
        self.stats.result_text = result
            .as_deref()
            .map(|r| cap_bytes(sanitize_block(r), MAX_STATS_TEXT_BYTES));
        self.note_final_text(result.as_deref());

        let failed =
            is_error == Some(true) || subtype.as_deref().is_some_and(|s| s.starts_with("error"));
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
        let usage = self.claude.result_usage.unwrap_or(self.claude.summed);
        let detail = format!(
            "input tokens: {}\noutput tokens: {}\ncache read tokens: {}\ncache write tokens: {}",
            group(usage.input),
            group(usage.output),
            group(usage.cache_read),
            group(usage.cache_write)
        );
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

    fn claude_rate_limit(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
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
        let (pretty, complete) = json_text(info, true);
        out.push(
            line(LineKind::RateLimit, fit(text))
                .with_detail(self.detail(pretty, complete))
                .with_error(status == "rejected"),
        );
    }

    // -----------------------------------------------------------------------
    // Codex exec --json
    // -----------------------------------------------------------------------

    fn codex_event(&mut self, event: &Json<'_>, out: &mut Vec<Rendered>) {
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
                out.push(self.error_line("", &message));
            }
            Some(phase @ ("item.started" | "item.updated" | "item.completed")) => {
                if let Some(item @ Json::Obj(_)) = event.get("item") {
                    self.codex_item(item, phase == "item.completed", out);
                }
            }
            _ => {}
        }
    }

    fn error_line(&self, what: &str, message: &str) -> Rendered {
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

    fn codex_item(&mut self, item: &Json<'_>, completed: bool, out: &mut Vec<Rendered>) {
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

    fn codex_call(&mut self, item: &Json<'_>, kind: &str, id: Option<String>) -> Rendered {
        if kind == "command_execution" {
            let command = item.get_str("command").unwrap_or_default();
            self.count_tool("exec");
            let summary = one_line(unwrap_shell(&command));
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

    fn codex_result(&mut self, item: &Json<'_>, kind: &str, id: Option<String>) -> Rendered {
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

// ---------------------------------------------------------------------------
// Rendering helpers
// ---------------------------------------------------------------------------

fn line(kind: LineKind, text: String) -> Rendered {
    Rendered {
        kind,
        text,
        detail: None,
        tool_use_id: None,
        is_error: false,
    }
}

impl Rendered {
    fn with_detail(mut self, detail: Option<String>) -> Self {
        self.detail = detail;
        self
    }

    fn with_id(mut self, id: Option<String>) -> Self {
        self.tool_use_id = id.filter(|id| !id.is_empty());
        self
    }

    fn with_error(mut self, is_error: bool) -> Self {
        self.is_error = is_error;
        self
    }
}

fn plain(text: &str) -> Rendered {
    line(LineKind::Plain, sanitize_line(text, true, MAX_TEXT_CHARS))
}

/// One display line per line of agent text; leading/trailing blank lines are
/// dropped and runs of blank lines collapse to one.
fn push_text_lines(text: &str, out: &mut Vec<Rendered>) {
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
                    .with_detail(Some(cap_detail(sanitize_block(rest), true))),
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
fn call_text(name: &str, summary: &str) -> String {
    if summary.is_empty() {
        fit(format!("▶ {name}"))
    } else {
        fit(format!("▶ {name}  {summary}"))
    }
}

/// The input field that says most about a call, by tool.
fn tool_summary(name: &str, input: &Json<'_>) -> String {
    if name == "TodoWrite"
        && let Some(Json::Arr(todos)) = input.get("todos")
    {
        let status = |s: &str| {
            todos
                .iter()
                .filter(|t| t.get_str("status").as_deref() == Some(s))
                .count()
        };
        let mut text = format!(
            "{} · {} done",
            plural(todos.len() as u64, "todo"),
            status("completed")
        );
        if let Some(now) = todos
            .iter()
            .find(|t| t.get_str("status").as_deref() == Some("in_progress"))
            .and_then(|t| t.get_str("activeForm").or_else(|| t.get_str("content")))
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
        && let Some(value) = input.get_str(field)
    {
        return one_line(&value);
    }
    compact_summary(input)
}

fn compact_summary(input: &Json<'_>) -> String {
    match input {
        Json::Null => String::new(),
        Json::Obj(members) if members.is_empty() => String::new(),
        input => {
            let mut text = String::new();
            write_json(input, false, 0, &mut text, MAX_TEXT_CHARS * 4);
            clean(&text)
        }
    }
}

/// Header fields of `system/init` for the expanded view.
fn init_detail(event: &Json<'_>) -> String {
    let mut detail = String::new();
    for (key, label) in [
        ("cwd", "cwd"),
        ("claude_code_version", "version"),
        ("permissionMode", "permission mode"),
        ("model", "model"),
        ("session_id", "session"),
    ] {
        if let Some(value) = event.get_str(key) {
            detail.push_str(&format!("{label}: {value}\n"));
        }
    }
    if let Some(Json::Arr(tools)) = event.get("tools") {
        let names: Vec<Cow<'_, str>> = tools.iter().filter_map(Json::str).collect();
        detail.push_str(&format!("tools: {}\n", names.join(", ")));
    }
    if let Some(Json::Arr(servers)) = event.get("mcp_servers") {
        let names: Vec<String> = servers
            .iter()
            .map(|s| {
                let name = s.get_str("name").unwrap_or_default();
                match s.get_str("status") {
                    Some(status) => format!("{name} ({status})"),
                    None => name.into_owned(),
                }
            })
            .collect();
        if !names.is_empty() {
            detail.push_str(&format!("mcp servers: {}\n", names.join(", ")));
        }
    }
    detail
}

fn claude_usage(usage: &Json<'_>) -> Option<Usage> {
    if !matches!(usage, Json::Obj(_)) {
        return None;
    }
    let field = |key: &str| usage.get_u64(key).unwrap_or(0);
    Some(Usage {
        input: field("input_tokens"),
        output: field("output_tokens"),
        cache_read: field("cache_read_input_tokens"),
        cache_write: field("cache_creation_input_tokens"),
    })
}

/// Which format an event `type` belongs to, if either.
fn classify(kind: &str) -> Option<AgentFormat> {
    match kind {
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
        | "auth_status" => Some(AgentFormat::ClaudeStreamJson),
        "error" | "request_user_input" => Some(AgentFormat::CodexJson),
        k if k.starts_with("thread.") || k.starts_with("turn.") || k.starts_with("item.") => {
            Some(AgentFormat::CodexJson)
        }
        _ => None,
    }
}

/// `bash -lc 'cmd'` → `cmd`: Codex wraps every command in a login shell, which
/// says nothing on a one-line display.
fn unwrap_shell(command: &str) -> &str {
    const SHELLS: &[&str] = &[
        "bash -lc ",
        "/bin/bash -lc ",
        "/usr/bin/bash -lc ",
        "bash -c ",
        "/bin/bash -c ",
        "zsh -lc ",
        "/bin/zsh -lc ",
        "sh -c ",
        "/bin/sh -c ",
    ];
    let command = command.trim();
    let Some(rest) = SHELLS.iter().find_map(|s| command.strip_prefix(s)) else {
        return command;
    };
    let rest = rest.trim();
    if let Some(inner) = rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\''))
        && !inner.contains('\'')
    {
        return inner;
    }
    if let Some(inner) = rest.strip_prefix('"').and_then(|r| r.strip_suffix('"'))
        && !inner.contains(['"', '\\', '$', '`'])
    {
        return inner;
    }
    rest
}

/// First non-blank line, cleaned; " …" when more non-blank lines follow.
fn one_line(text: &str) -> String {
    let mut lines = text.split('\n').filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return String::new();
    };
    let mut shown = clean(first.trim());
    if lines.next().is_some() {
        shown.push_str(" …");
    }
    shown
}

/// First non-blank line and how many other lines there are (a trailing
/// newline does not start a line).
fn first_line(text: &str) -> (&str, usize) {
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
fn text_is_cut(line: &str) -> bool {
    line.len() > MAX_TEXT_CHARS && line.chars().count() > MAX_TEXT_CHARS
}

/// Reset times are documented in seconds; a millisecond value is accepted too.
fn epoch_seconds(value: i64) -> Option<i64> {
    match value {
        v if v <= 0 => None,
        v if v >= 100_000_000_000 => Some(v / 1000),
        v => Some(v),
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{} {word}s", group(n))
    }
}

/// 1234567 → "1,234,567".
fn group(n: u64) -> String {
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

// ---------------------------------------------------------------------------
// Text sanitising
// ---------------------------------------------------------------------------

/// A dynamic part of a display line: sanitised, without colour, capped.
fn clean(text: &str) -> String {
    sanitize_line(text, false, MAX_TEXT_CHARS)
}

/// Caps a composed display line at MAX_TEXT_CHARS, ending it with an ellipsis.
fn fit(text: String) -> String {
    if text.len() <= MAX_TEXT_CHARS {
        return text;
    }
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        None => text,
        Some(_) => {
            let cut = text
                .char_indices()
                .nth(MAX_TEXT_CHARS - 1)
                .map_or(text.len(), |(i, _)| i);
            let mut text = text;
            text.truncate(cut);
            text.push('…');
            text
        }
    }
}

/// Length of the character at `at` if it is one display text must not carry
/// as is: a C1 control (an 8-bit CSI can drive a terminal), a bidi override or
/// isolate (they make text read differently from what it is), or a line or
/// paragraph separator (it would break the line).
fn special_len(bytes: &[u8], at: usize) -> Option<usize> {
    match (bytes.get(at), bytes.get(at + 1), bytes.get(at + 2)) {
        (Some(0xc2), Some(0x80..=0x9f), _) => Some(2),
        (Some(0xe2), Some(0x80), Some(0xa8..=0xae)) => Some(3),
        (Some(0xe2), Some(0x81), Some(0xa6..=0xa9)) => Some(3),
        _ => None,
    }
}

/// Whether text can be shown as it is (newlines allowed or not). Most text
/// can, so this is built to be fast: a branch-free control scan per block, then
/// a look at the few lead bytes that can start a special character.
fn is_safe_text(bytes: &[u8], allow_newline: bool) -> bool {
    let newline = if allow_newline { b'\n' } else { 0xff };
    let has_control = bytes.chunks(256).any(|block| {
        block.iter().fold(false, |seen, &b| {
            seen | ((b < 0x20 && b != newline) | (b == 0x7f))
        })
    });
    if has_control {
        return false;
    }
    let mut i = 0;
    while let Some(j) = memchr2(0xc2, 0xe2, &bytes[i..]) {
        let at = i + j;
        if special_len(bytes, at).is_some() {
            return false;
        }
        i = at + 1;
    }
    true
}

fn char_count(text: &str) -> usize {
    // Every byte that is not a UTF-8 continuation byte starts a char.
    text.bytes().filter(|b| (b & 0xc0) != 0x80).count()
}

/// One display line from one line of agent output: the text after the last
/// carriage return (what a terminal would show, roughly), without control
/// characters and escape sequences (colour SGR kept only with `keep_sgr`),
/// tabs expanded, at most `max_chars` visible characters with an ellipsis.
fn sanitize_line(text: &str, keep_sgr: bool, max_chars: usize) -> String {
    let mut out = String::new();
    sanitize_into(text, keep_sgr, max_chars, &mut out);
    out
}

fn sanitize_into(text: &str, keep_sgr: bool, max_chars: usize, out: &mut String) {
    let text = text.trim_end_matches(['\r', '\n']);
    let (before, tail) = match memchr::memrchr(b'\r', text.as_bytes()) {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => ("", text),
    };
    if keep_sgr && before.contains('\x1b') {
        carry_sgr(before, out);
    }
    if is_safe_text(tail.as_bytes(), false)
        && (tail.len() <= max_chars || char_count(tail) <= max_chars)
    {
        out.push_str(tail);
        return;
    }
    sanitize_run(tail, keep_sgr, max_chars, false, out);
}

/// The careful path: copies runs of ordinary text whole and deals with each
/// control, escape sequence or special character between them.
fn sanitize_run(
    text: &str,
    keep_sgr: bool,
    max_chars: usize,
    keep_newlines: bool,
    out: &mut String,
) {
    let bytes = text.as_bytes();
    let mut sink = Sink {
        out,
        visible: 0,
        column: 0,
        last_char_at: None,
        max_chars,
    };
    let mut sgr_bytes = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let mut j = i;
        while let Some(&b) = bytes.get(j) {
            if b < 0x20
                || b == 0x7f
                || ((b == 0xc2 || b == 0xe2) && special_len(bytes, j).is_some())
            {
                break;
            }
            j += 1;
        }
        // Both ends are char boundaries: `j` stops at an ASCII byte, a lead
        // byte or the end.
        if j > i && !sink.push_run(&text[i..j]) {
            return;
        }
        i = j;
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            0x1b => {
                let end = escape_end(bytes, i);
                if keep_sgr
                    && is_sgr(&bytes[i..end])
                    && sgr_bytes + (end - i) <= MAX_SGR_BYTES_PER_LINE
                {
                    sgr_bytes += end - i;
                    sink.out.push_str(&text[i..end]);
                }
                i = end;
            }
            b'\t' => {
                let spaces = TAB_WIDTH - sink.column % TAB_WIDTH;
                if !sink.push_run(&"        "[..spaces]) {
                    return;
                }
                i += 1;
            }
            b'\n' if keep_newlines => {
                sink.out.push('\n');
                sink.column = 0;
                i += 1;
            }
            0..0x20 | 0x7f => i += 1,
            _ => {
                let len = special_len(bytes, i).unwrap_or(1);
                // U+2028/U+2029 separate words; the rest are dropped.
                if bytes.get(i + 1) == Some(&0x80)
                    && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9))
                    && !sink.push_run(" ")
                {
                    return;
                }
                i += len;
            }
        }
    }
}

/// Visible characters going into a display line, up to a cap.
struct Sink<'o> {
    out: &'o mut String,
    visible: usize,
    /// Characters since the last kept newline, for tab stops.
    column: usize,
    /// Where the last visible char starts in `out`: it becomes the ellipsis
    /// when one more would exceed the cap.
    last_char_at: Option<usize>,
    max_chars: usize,
}

impl Sink<'_> {
    /// Adds a run of ordinary text; false once the cap is reached (the
    /// ellipsis is then in place).
    fn push_run(&mut self, run: &str) -> bool {
        let chars = char_count(run);
        let room = self.max_chars.saturating_sub(self.visible);
        let (kept, complete) = if chars <= room {
            (run, true)
        } else {
            let cut = run.char_indices().nth(room).map_or(run.len(), |(k, _)| k);
            (&run[..cut], false)
        };
        if let Some((last, _)) = kept.char_indices().next_back() {
            self.last_char_at = Some(self.out.len() + last);
        }
        self.out.push_str(kept);
        if complete {
            self.visible += chars;
            self.column += chars;
            return true;
        }
        if let Some(at) = self.last_char_at {
            self.out.truncate(at);
        }
        self.out.push('…');
        false
    }
}

/// Keeps the colour state set before a carriage return, so that overwritten
/// progress text does not take its colour with it.
fn carry_sgr(before: &str, out: &mut String) {
    let bytes = before.as_bytes();
    let mut found: Vec<&str> = Vec::new();
    let mut i = 0;
    while let Some(j) = memchr(0x1b, &bytes[i..]) {
        let start = i + j;
        let end = escape_end(bytes, start);
        if is_sgr(&bytes[start..end]) {
            found.push(&before[start..end]);
        }
        i = end;
    }
    // Only the latest few matter for the state the tail is drawn in.
    let mut budget = 128usize;
    let mut keep = found.len();
    while keep > 0 && found[keep - 1].len() <= budget {
        budget -= found[keep - 1].len();
        keep -= 1;
    }
    for seq in &found[keep..] {
        out.push_str(seq);
    }
}

/// `ESC [ digits;… m` with nothing else in it, short.
fn is_sgr(seq: &[u8]) -> bool {
    seq.len() >= 3
        && seq.len() <= MAX_SGR_SEQUENCE_BYTES
        && seq.starts_with(b"\x1b[")
        && seq.ends_with(b"m")
        && seq[2..seq.len() - 1]
            .iter()
            .all(|c| c.is_ascii_digit() || *c == b';' || *c == b':')
}

/// End (exclusive) of the escape sequence starting at `bytes[start] == ESC`.
/// Always ends on an ASCII byte or the end, so slicing there is safe.
fn escape_end(bytes: &[u8], start: usize) -> usize {
    let Some(&next) = bytes.get(start + 1) else {
        return start + 1;
    };
    match next {
        // CSI: parameters, intermediates, one final byte.
        b'[' => {
            let mut j = start + 2;
            while bytes.get(j).is_some_and(|c| (0x30..=0x3f).contains(c)) {
                j += 1;
            }
            while bytes.get(j).is_some_and(|c| (0x20..=0x2f).contains(c)) {
                j += 1;
            }
            if bytes.get(j).is_some_and(|c| (0x40..=0x7e).contains(c)) {
                j + 1
            } else {
                j
            }
        }
        // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \).
        b']' | b'P' | b'X' | b'^' | b'_' => {
            let mut j = start + 2;
            loop {
                match bytes.get(j) {
                    None => return j,
                    Some(0x07) => return j + 1,
                    Some(0x1b) if bytes.get(j + 1) == Some(&b'\\') => return j + 2,
                    Some(0x1b) => return j,
                    Some(_) => j += 1,
                }
            }
        }
        // nF sequences (charset selection …): intermediates then a final byte.
        0x20..=0x2f => {
            let mut j = start + 1;
            while bytes.get(j).is_some_and(|c| (0x20..=0x2f).contains(c)) {
                j += 1;
            }
            if bytes.get(j).is_some_and(|c| (0x30..=0x7e).contains(c)) {
                j + 1
            } else {
                j
            }
        }
        0x30..=0x7e => start + 2,
        _ => start + 1,
    }
}

/// Multi-line text for a detail view: sanitised like display lines, but
/// newlines kept and nothing cut. Text that needs no change is not copied.
fn sanitize_block<'t>(text: impl Into<Cow<'t, str>>) -> String {
    let text = text.into();
    let end = text.trim_end_matches(['\n', '\r']).len();
    if is_safe_text(&text.as_bytes()[..end], true) {
        let mut text = text.into_owned();
        text.truncate(end);
        return text;
    }
    let text = &text[..end];
    let mut out = String::with_capacity(text.len());
    if memchr(b'\r', text.as_bytes()).is_none() {
        sanitize_run(text, false, usize::MAX, true, &mut out);
        return out;
    }
    // Carriage returns overwrite within their own line only.
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        sanitize_into(line, false, usize::MAX, &mut out);
    }
    out
}

/// Caps a detail at MAX_DETAIL_BYTES including the truncation mark.
fn cap_detail(mut text: String, complete: bool) -> String {
    if complete && text.len() <= MAX_DETAIL_BYTES {
        return text;
    }
    let limit = MAX_DETAIL_BYTES - TRUNCATED_MARK.len();
    if text.len() > limit {
        text.truncate(floor_char_boundary(&text, limit));
    }
    text.push_str(TRUNCATED_MARK);
    text
}

fn cap_bytes(mut text: String, cap: usize) -> String {
    if text.len() > cap {
        text.truncate(floor_char_boundary(&text, cap - '…'.len_utf8()));
        text.push('…');
    }
    text
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn decode_utf8(raw: &[u8], truncated: bool) -> Cow<'_, str> {
    match std::str::from_utf8(raw) {
        Ok(text) => Cow::Borrowed(text),
        // A line cut at the cap may end inside a character: drop that part
        // rather than show a replacement char.
        Err(e) if truncated && e.error_len().is_none() => {
            Cow::Borrowed(std::str::from_utf8(&raw[..e.valid_up_to()]).unwrap_or_default())
        }
        Err(_) => String::from_utf8_lossy(raw),
    }
}

// ---------------------------------------------------------------------------
// Text gathered from JSON strings, bounded
// ---------------------------------------------------------------------------

/// The text of a tool output: decoded up to the detail cap, with the line
/// count of the whole (which may be far larger).
#[derive(Debug)]
struct Collected {
    text: String,
    /// Everything was decoded into `text`.
    complete: bool,
    newlines: usize,
    ends_with_newline: bool,
    any: bool,
}

impl Default for Collected {
    fn default() -> Self {
        Self {
            text: String::new(),
            complete: true,
            newlines: 0,
            ends_with_newline: false,
            any: false,
        }
    }
}

impl Collected {
    fn push_jstr(&mut self, s: JStr<'_>) {
        let (newlines, ends) = escaped_newlines(s);
        self.newlines += newlines;
        self.note(!s.raw.is_empty(), ends);
        if self.complete {
            // Decoding only shrinks text: one reservation is enough.
            self.text.reserve(
                s.raw
                    .len()
                    .min(MAX_DETAIL_BYTES.saturating_sub(self.text.len())),
            );
            let done = if s.escaped {
                unescape_into(s.raw, &mut self.text, MAX_DETAIL_BYTES)
            } else {
                push_capped(&mut self.text, s.raw, MAX_DETAIL_BYTES)
            };
            self.complete = done;
        }
    }

    fn push_str(&mut self, s: &str) {
        self.newlines += s.matches('\n').count();
        self.note(!s.is_empty(), s.ends_with('\n'));
        if self.complete {
            self.complete = push_capped(&mut self.text, s, MAX_DETAIL_BYTES);
        }
    }

    fn note(&mut self, non_empty: bool, ends_with_newline: bool) {
        if non_empty {
            self.any = true;
            self.ends_with_newline = ends_with_newline;
        }
    }

    /// Adds one content block, on its own line after the previous one.
    fn push_block(&mut self, add: impl FnOnce(&mut Self)) {
        if self.any && !self.ends_with_newline {
            self.push_str("\n");
        }
        add(self);
    }

    /// First non-blank line (of the decoded part) and the number of other lines
    /// in the whole.
    fn first_line(&self) -> (&str, usize) {
        if !self.any {
            return ("", 0);
        }
        let total = self.newlines + 1 - usize::from(self.ends_with_newline);
        let first = self
            .text
            .split('\n')
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        (first, total.saturating_sub(1))
    }
}

/// Newline escapes in a raw JSON string, and whether it ends with one.
fn escaped_newlines(s: JStr<'_>) -> (usize, bool) {
    static NEWLINE: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\\n"));
    if !s.escaped {
        return (0, false);
    }
    let bytes = s.raw.as_bytes();
    let mut count = 0;
    let mut last_end = usize::MAX;
    for at in NEWLINE.find_iter(bytes) {
        // `\\n` is an escaped backslash and a letter: the backslash before the
        // `n` starts an escape only if an even number of backslashes precede it.
        let preceding = bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if preceding.is_multiple_of(2) {
            count += 1;
            last_end = at + 2;
        }
    }
    (count, last_end == bytes.len())
}

fn push_capped(out: &mut String, s: &str, cap: usize) -> bool {
    let room = cap.saturating_sub(out.len());
    if s.len() <= room {
        out.push_str(s);
        true
    } else {
        out.push_str(&s[..floor_char_boundary(s, room)]);
        false
    }
}

// ---------------------------------------------------------------------------
// A borrowing JSON reader
//
// Strings stay slices of the line in their escaped form: most of a stream's
// bytes are strings nobody displays in full (file contents, command output),
// and decoding only what is shown keeps the parse near memory speed. The
// reader can also close a line that was cut at the pending-line cap, so a
// multi-megabyte event still yields its kind, ids and the start of its text.
// ---------------------------------------------------------------------------

/// A JSON string as it appears between its quotes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct JStr<'a> {
    raw: &'a str,
    escaped: bool,
}

impl<'a> JStr<'a> {
    fn decode(self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let mut out = String::with_capacity(self.raw.len());
        unescape_into(self.raw, &mut out, usize::MAX);
        Cow::Owned(out)
    }

    fn is(self, key: &str) -> bool {
        if self.escaped {
            self.decode() == key
        } else {
            self.raw == key
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Json<'a> {
    Null,
    Bool(bool),
    Num(&'a str),
    Str(JStr<'a>),
    Arr(Vec<Json<'a>>),
    Obj(Vec<(JStr<'a>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// Member of an object; the last one wins if a key repeats.
    fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Obj(members) => members
                .iter()
                .rev()
                .find(|(k, _)| k.is(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn str(&self) -> Option<Cow<'a, str>> {
        match self {
            Json::Str(s) => Some(s.decode()),
            _ => None,
        }
    }

    fn get_str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key)?.str()
    }

    fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.u64()
    }

    /// Numbers and numeric strings alike: `429` and `"429"` both occur.
    fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => n.parse().ok().or_else(|| {
                n.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && *f >= 0.0 && *f < 1.8e19)
                    .map(|f| f as u64)
            }),
            Json::Str(s) => s.decode().trim().parse().ok(),
            _ => None,
        }
    }

    fn i64(&self) -> Option<i64> {
        match self {
            Json::Num(n) => n.parse().ok().or_else(|| {
                n.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && f.abs() < 9.0e18)
                    .map(|f| f as i64)
            }),
            Json::Str(s) => s.decode().trim().parse().ok(),
            _ => None,
        }
    }

    fn f64(&self) -> Option<f64> {
        let value: Option<f64> = match self {
            Json::Num(n) => n.parse().ok(),
            Json::Str(s) => s.decode().trim().parse().ok(),
            _ => None,
        };
        value.filter(|f| f.is_finite())
    }

    fn bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn items(&self) -> &[Json<'a>] {
        match self {
            Json::Arr(items) => items,
            _ => &[],
        }
    }
}

fn is_json_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// Parses a line holding one JSON object. With `partial`, the line was cut:
/// whatever is open at its end is closed (a cut string keeps its start, a cut
/// number, literal or key is dropped).
fn parse_object(line: &str, partial: bool) -> Option<Json<'_>> {
    let body = line.trim_start_matches(is_json_ws);
    if !body.starts_with('{') {
        return None;
    }
    let mut parser = Parser {
        src: body,
        pos: 0,
        partial,
        cut: false,
    };
    let value = parser.object(1).ok()?;
    if !parser.cut {
        parser.skip_ws();
        if parser.pos != body.len() {
            return None;
        }
    }
    Some(value)
}

enum Stop {
    Invalid,
    Eof,
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    partial: bool,
    /// The input ended inside the value (only with `partial`).
    cut: bool,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        let bytes = self.src.as_bytes();
        while bytes
            .get(self.pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.pos += 1;
        }
    }

    /// The input ended: with `partial` the value read so far stands.
    fn eof<T>(&mut self, value: T) -> Result<T, Stop> {
        if self.partial {
            self.cut = true;
            Ok(value)
        } else {
            Err(Stop::Eof)
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json<'a>, Stop> {
        self.skip_ws();
        match self.peek() {
            None => Err(Stop::Eof),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::Str),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(Stop::Invalid),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json<'a>, Stop> {
        if depth > MAX_JSON_DEPTH {
            return Err(Stop::Invalid);
        }
        self.pos += 1;
        // Event objects have a handful of members; this saves regrowing.
        let mut members = Vec::with_capacity(8);
        self.skip_ws();
        match self.peek() {
            None => return self.eof(Json::Obj(members)),
            Some(b'}') => {
                self.pos += 1;
                return Ok(Json::Obj(members));
            }
            _ => {}
        }
        loop {
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Obj(members)),
                Some(b'"') => {}
                Some(_) => return Err(Stop::Invalid),
            }
            let key = self.string()?;
            if self.cut {
                return Ok(Json::Obj(members));
            }
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Obj(members)),
                Some(b':') => self.pos += 1,
                Some(_) => return Err(Stop::Invalid),
            }
            match self.value(depth) {
                Ok(value) => members.push((key, value)),
                Err(Stop::Eof) => return self.eof(Json::Obj(members)),
                Err(e) => return Err(e),
            }
            if self.cut {
                return Ok(Json::Obj(members));
            }
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Obj(members)),
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Obj(members));
                }
                Some(_) => return Err(Stop::Invalid),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json<'a>, Stop> {
        if depth > MAX_JSON_DEPTH {
            return Err(Stop::Invalid);
        }
        self.pos += 1;
        let mut items = Vec::with_capacity(4);
        self.skip_ws();
        match self.peek() {
            None => return self.eof(Json::Arr(items)),
            Some(b']') => {
                self.pos += 1;
                return Ok(Json::Arr(items));
            }
            _ => {}
        }
        loop {
            match self.value(depth) {
                Ok(value) => items.push(value),
                Err(Stop::Eof) => return self.eof(Json::Arr(items)),
                Err(e) => return Err(e),
            }
            if self.cut {
                return Ok(Json::Arr(items));
            }
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Arr(items)),
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Arr(items));
                }
                Some(_) => return Err(Stop::Invalid),
            }
        }
    }

    /// At an opening quote. Escapes are not checked here: decoding is lenient.
    fn string(&mut self) -> Result<JStr<'a>, Stop> {
        let bytes = self.src.as_bytes();
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            let found = bytes.get(i..).and_then(|rest| memchr2(b'"', b'\\', rest));
            match found {
                Some(j) if bytes[i + j] == b'"' => {
                    let end = i + j;
                    self.pos = end + 1;
                    return Ok(JStr {
                        raw: &self.src[start..end],
                        escaped,
                    });
                }
                Some(j) => {
                    escaped = true;
                    i += j + 2;
                }
                None => {
                    self.pos = bytes.len();
                    let raw = self.src.get(start..).unwrap_or("");
                    return self.eof(JStr { raw, escaped });
                }
            }
        }
    }

    fn literal(&mut self, word: &str, value: Json<'a>) -> Result<Json<'a>, Stop> {
        let rest = &self.src.as_bytes()[self.pos..];
        if rest.starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else if word.as_bytes().starts_with(rest) {
            Err(Stop::Eof)
        } else {
            Err(Stop::Invalid)
        }
    }

    fn number(&mut self) -> Result<Json<'a>, Stop> {
        let bytes = self.src.as_bytes();
        let start = self.pos;
        let mut i = start;
        let digits = |i: &mut usize| {
            let from = *i;
            while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - from
        };
        let stop = |i: usize| {
            if i >= bytes.len() {
                Stop::Eof
            } else {
                Stop::Invalid
            }
        };
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(stop(i)),
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return Err(stop(i));
            }
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return Err(stop(i));
            }
        }
        if i >= bytes.len() {
            // A number that runs into the end of the input may have been cut.
            return Err(Stop::Eof);
        }
        self.pos = i;
        Ok(Json::Num(&self.src[start..i]))
    }
}

/// Decodes JSON escapes into `out`, up to `cap` bytes of it; false if it
/// stopped at the cap. Malformed escapes become U+FFFD, a dangling one at the
/// end (a cut line) is dropped.
fn unescape_into(raw: &str, out: &mut String, cap: usize) -> bool {
    let bytes = raw.as_bytes();
    let mut i = 0;
    loop {
        let next = memchr(b'\\', &bytes[i..]).map_or(bytes.len(), |j| i + j);
        if !push_capped(out, &raw[i..next], cap) {
            return false;
        }
        let Some(&c) = bytes.get(next + 1) else {
            return true;
        };
        let (ch, used) = match c {
            b'n' => ('\n', 2),
            b't' => ('\t', 2),
            b'r' => ('\r', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            // A `\\u` escape cut by the end of a truncated line.
            b'u' if bytes.len() < next + 6 => return true,
            b'u' => unicode_escape(bytes, next),
            _ => {
                let ch = raw[next + 1..].chars().next().unwrap_or('\u{fffd}');
                ('\u{fffd}', 1 + ch.len_utf8())
            }
        };
        if out.len() + ch.len_utf8() > cap {
            return false;
        }
        out.push(ch);
        i = next + used;
        if i >= bytes.len() {
            return true;
        }
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits
        .iter()
        .try_fold(0u32, |v, &d| Some(v * 16 + char::from(d).to_digit(16)?))
}

/// `\uXXXX` at `at` (the backslash), with surrogate pairs; (char, bytes used).
fn unicode_escape(bytes: &[u8], at: usize) -> (char, usize) {
    let Some(high) = hex4(bytes, at + 2) else {
        return ('\u{fffd}', 2);
    };
    if (0xd800..0xdc00).contains(&high) {
        if bytes.get(at + 6..at + 8) == Some(b"\\u")
            && let Some(low) = hex4(bytes, at + 8)
            && (0xdc00..0xe000).contains(&low)
        {
            let c = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
            return (char::from_u32(c).unwrap_or('\u{fffd}'), 12);
        }
        return ('\u{fffd}', 6);
    }
    (char::from_u32(high).unwrap_or('\u{fffd}'), 6)
}

/// Re-serialises a parsed value (strings stay as escaped in the input), pretty
/// or compact, up to about `cap` bytes; false if it stopped there.
fn write_json(value: &Json<'_>, pretty: bool, indent: usize, out: &mut String, cap: usize) -> bool {
    if out.len() > cap {
        return false;
    }
    let newline = |out: &mut String, level: usize| {
        if pretty {
            out.push('\n');
            for _ in 0..level {
                out.push_str("  ");
            }
        }
    };
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(n) => out.push_str(n),
        Json::Str(s) => {
            out.push('"');
            if !push_capped(out, s.raw, cap) {
                return false;
            }
            out.push('"');
        }
        Json::Arr(items) if items.is_empty() => out.push_str("[]"),
        Json::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent + 1);
                if !write_json(item, pretty, indent + 1, out, cap) {
                    return false;
                }
            }
            newline(out, indent);
            out.push(']');
        }
        Json::Obj(members) if members.is_empty() => out.push_str("{}"),
        Json::Obj(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent + 1);
                out.push('"');
                if !push_capped(out, key.raw, cap) {
                    return false;
                }
                out.push_str(if pretty { "\": " } else { "\":" });
                if !write_json(item, pretty, indent + 1, out, cap) {
                    return false;
                }
            }
            newline(out, indent);
            out.push('}');
        }
    }
    out.len() <= cap
}

/// Feeds a value to `hasher` canonically: strings decoded, object members sorted
/// by key (the last of a repeated key wins, as in [`Json::get`]).
fn hash_canonical(value: &Json<'_>, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    match value {
        Json::Null => 0u8.hash(hasher),
        Json::Bool(b) => (1u8, *b).hash(hasher),
        Json::Num(n) => (2u8, *n).hash(hasher),
        Json::Str(s) => (3u8, &*s.decode()).hash(hasher),
        Json::Arr(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_canonical(item, hasher);
            }
        }
        Json::Obj(members) => {
            let mut sorted: Vec<(Cow<'_, str>, &Json<'_>)> =
                members.iter().map(|(k, v)| (k.decode(), v)).collect();
            // Stable sort, then keep the last of each key.
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let mut unique: Vec<(Cow<'_, str>, &Json<'_>)> = Vec::with_capacity(sorted.len());
            for (key, item) in sorted {
                match unique.last_mut() {
                    Some(last) if last.0 == key => last.1 = item,
                    _ => unique.push((key, item)),
                }
            }
            (5u8, unique.len()).hash(hasher);
            for (key, item) in unique {
                key.hash(hasher);
                hash_canonical(item, hasher);
            }
        }
    }
}

/// A value as JSON text for a detail view; (text, complete).
fn json_text(value: &Json<'_>, pretty: bool) -> (String, bool) {
    let mut text = String::new();
    let complete = write_json(value, pretty, 0, &mut text, MAX_DETAIL_BYTES);
    (text, complete)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/public");

    const CLAUDE_FIXTURE: &str = "claude/gleam-2.1.7-basic_query.ndjson";
    const CODEX_FIXTURES: &[&str] = &[
        "codex/agentcmd-0.46-stream-output-2.jsonl",
        "codex/agentcmd-0.46-stream-output-3.jsonl",
        "codex/agentcmd-0.46-stream-output-4.jsonl",
    ];

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{FIXTURES}/{name}")).unwrap()
    }

    /// Whole input at once, then finish.
    fn run(format: AgentFormat, input: &[u8]) -> (Vec<Rendered>, StreamParser) {
        let mut parser = StreamParser::new(format);
        let mut out = parser.feed(input);
        out.extend(parser.finish());
        (out, parser)
    }

    fn run_auto(input: &str) -> (Vec<Rendered>, StreamParser) {
        run(AgentFormat::Auto, input.as_bytes())
    }

    fn watched(input: &str) -> bool {
        let mut parser = StreamParser::new(AgentFormat::Auto);
        parser.watch_final_text("TASK_COMPLETE");
        parser.feed(input.as_bytes());
        parser.finish();
        parser.final_text_has_watched()
    }

    #[test]
    fn the_watched_text_counts_only_in_the_final_message() {
        let result = |text: &str| {
            format!(
                r#"{{"type":"result","subtype":"success","is_error":false,"result":{}}}"#,
                serde_json::to_string(text).unwrap()
            )
        };
        assert!(watched(&result("Done.\n\nTASK_COMPLETE")));
        // Past the 4 KiB kept in the stats: the whole text is searched.
        assert!(watched(&result(&format!(
            "{}TASK_COMPLETE",
            "x".repeat(10_000)
        ))));
        assert!(!watched(&result("Done, more to do.")));
        // Only the last result counts.
        assert!(!watched(&format!(
            "{}\n{}\n",
            result("TASK_COMPLETE"),
            result("Not yet.")
        )));
        // The prompt echo, a tool input, a tool result, assistant prose: never.
        assert!(!watched(&[
            r#"{"type":"user","message":{"role":"user","content":"End with TASK_COMPLETE."}}"#,
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"I will write TASK_COMPLETE at the end."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"echo TASK_COMPLETE"}}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"TASK_COMPLETE"}]}}"#,
            &result("Halfway."),
        ].join("\n")));
        // Codex: the last agent_message.
        let codex = |text: &str| {
            format!(
                r#"{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":{}}}}}"#,
                serde_json::to_string(text).unwrap()
            )
        };
        assert!(watched(&format!("{}\n", codex("All done. TASK_COMPLETE"))));
        assert!(!watched(&format!(
            "{}\n{}\n",
            codex("TASK_COMPLETE"),
            codex("Wait, one more thing.")
        )));
        // Nothing watched: never.
        let mut parser = StreamParser::new(AgentFormat::Auto);
        parser.feed(result("TASK_COMPLETE").as_bytes());
        parser.finish();
        assert!(!parser.final_text_has_watched());
    }

    fn texts(lines: &[Rendered]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    fn kinds(lines: &[Rendered]) -> Vec<LineKind> {
        lines.iter().map(|l| l.kind).collect()
    }

    fn only(lines: &[Rendered]) -> &Rendered {
        assert_eq!(lines.len(), 1, "{lines:#?}");
        &lines[0]
    }

    /// What the sanitiser must have removed besides control characters.
    fn is_hidden(c: char) -> bool {
        matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
    }

    /// No control characters at all in a display string (Plain lines may keep SGR).
    fn assert_clean(line: &Rendered) {
        let mut text = line.text.clone();
        if line.kind == LineKind::Plain {
            let sgr = regex::Regex::new(r"\x1b\[[0-9;:]*m").unwrap();
            text = sgr.replace_all(&text, "").into_owned();
        }
        assert!(
            !text.chars().any(|c| c.is_control() || is_hidden(c)),
            "control char in {line:?}"
        );
        assert!(line.text.chars().count() <= MAX_TEXT_CHARS + 2, "{line:?}");
        if let Some(detail) = &line.detail {
            assert!(detail.len() <= MAX_DETAIL_BYTES, "detail {}", detail.len());
            assert!(
                !detail
                    .chars()
                    .any(|c| (c.is_control() && c != '\n') || is_hidden(c)),
                "control char in detail of {line:?}"
            );
        }
    }

    const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"sess-1","tools":["Bash","Read"],"mcp_servers":[],"model":"claude-sonnet-4-5","permissionMode":"bypassPermissions","claude_code_version":"2.1.7"}"#;

    // ---- fixtures ----

    #[test]
    fn claude_fixture() {
        let (out, parser) = run(AgentFormat::Auto, &fixture(CLAUDE_FIXTURE));
        assert_eq!(parser.format(), AgentFormat::ClaudeStreamJson);
        assert_eq!(
            texts(&out),
            [
                "● session started · model claude-opus-4-5-20251101 · 7 tools",
                "4",
                "■ result: success · 1 turn · $0.1355 · 2.4s",
                "4",
            ]
        );
        assert_eq!(
            kinds(&out),
            [
                LineKind::System,
                LineKind::Text,
                LineKind::Result,
                LineKind::Text
            ]
        );
        assert!(out.iter().all(|l| !l.is_error));
        let detail = out[0].detail.as_deref().unwrap();
        assert!(
            detail.contains("cwd: /home/cyou/claude-agent-sdk-gleam"),
            "{detail}"
        );
        assert!(detail.contains("version: 2.1.7"), "{detail}");

        let s = parser.stats();
        assert_eq!(s.cost_usd, Some(0.1354875));
        assert_eq!(s.turns, 1);
        assert_eq!(s.model.as_deref(), Some("claude-opus-4-5-20251101"));
        assert_eq!(
            s.agent_session_id.as_deref(),
            Some("1d1e46f9-35c7-4834-b529-846d5bb82288")
        );
        // The result's usage is the session total (25 output tokens, not the 5
        // of the single assistant line).
        assert_eq!(
            (
                s.input_tokens,
                s.output_tokens,
                s.cache_read_tokens,
                s.cache_write_tokens
            ),
            (10, 25, 0, 21570)
        );
        assert_eq!(s.duration_ms, Some(2360));
        assert_eq!(s.result_subtype.as_deref(), Some("success"));
        assert_eq!(s.result_is_error, Some(false));
        assert_eq!(s.result_text.as_deref(), Some("4"));
        assert_eq!((s.lines, s.json_lines), (3, 3));
        assert_eq!(s.tool_calls, 0);
    }

    #[test]
    fn codex_fixture_with_command() {
        let (out, parser) = run(AgentFormat::Auto, &fixture(CODEX_FIXTURES[0]));
        assert_eq!(parser.format(), AgentFormat::CodexJson);
        assert_eq!(
            texts(&out),
            [
                "● session started · thread 019a2d7a-6455-7170-a661-c6d8b94c630a",
                "✻ thinking (43 chars)",
                "▶ exec  ls",
                "  ↳ stream-output-1.jsonl (+2 lines)",
                "Files here: `stream-output-1.jsonl`, `stream-output-2.jsonl`, `test.js`.",
                "● turn completed · 6,040 in (4,992 cached) · 129 out",
            ]
        );
        assert_eq!(
            kinds(&out),
            [
                LineKind::System,
                LineKind::Thinking,
                LineKind::ToolCall,
                LineKind::ToolResult,
                LineKind::Text,
                LineKind::System
            ]
        );
        assert_eq!(
            out[1].detail.as_deref(),
            Some("**Preparing to list files with bash shell**")
        );
        assert_eq!(out[2].tool_use_id.as_deref(), Some("item_1"));
        assert_eq!(out[3].tool_use_id.as_deref(), Some("item_1"));
        assert_eq!(out[2].detail.as_deref(), Some("bash -lc ls"));
        assert_eq!(
            out[3].detail.as_deref(),
            Some("stream-output-1.jsonl\nstream-output-2.jsonl\ntest.js")
        );
        let s = parser.stats();
        assert_eq!(s.turns, 1);
        assert_eq!(
            (
                s.input_tokens,
                s.cache_read_tokens,
                s.output_tokens,
                s.cache_write_tokens
            ),
            (6040, 4992, 129, 0)
        );
        assert_eq!(s.tool_calls, 1);
        assert_eq!(s.tool_calls_by_name.get("exec"), Some(&1));
        assert_eq!(s.tool_errors, 0);
        assert_eq!(
            s.agent_session_id.as_deref(),
            Some("019a2d7a-6455-7170-a661-c6d8b94c630a")
        );
        assert_eq!(
            s.last_agent_message.as_deref(),
            Some("Files here: `stream-output-1.jsonl`, `stream-output-2.jsonl`, `test.js`.")
        );
        assert_eq!(s.cost_usd, None);
        assert_eq!((s.lines, s.json_lines), (7, 7));
    }

    #[test]
    fn codex_fixture_with_file_change() {
        let (out, parser) = run(AgentFormat::Auto, &fixture(CODEX_FIXTURES[1]));
        assert_eq!(parser.format(), AgentFormat::CodexJson);
        let patch = out.iter().find(|l| l.kind == LineKind::ToolCall).unwrap();
        assert_eq!(
            patch.text,
            "▶ patch  /private/tmp/codex-research-test/hello.txt"
        );
        assert_eq!(
            patch.detail.as_deref(),
            Some("add /private/tmp/codex-research-test/hello.txt")
        );
        let s = parser.stats();
        assert_eq!(s.tool_calls_by_name.get("patch"), Some(&1));
        assert_eq!(
            (s.input_tokens, s.cache_read_tokens, s.output_tokens),
            (6008, 4096, 51)
        );
        assert_eq!(s.turns, 1);
    }

    #[test]
    fn codex_fixture_with_reasoning_items() {
        let (out, parser) = run(AgentFormat::Auto, &fixture(CODEX_FIXTURES[2]));
        assert_eq!(
            texts(&out)[1..5],
            [
                "✻ thinking (42 chars)",
                "▶ exec  cat test.js",
                "  ↳ console.log('Hello World');",
                "✻ thinking (34 chars)",
            ]
        );
        assert!(out[5].text.starts_with("`test.js` simply contains"));
        let s = parser.stats();
        assert_eq!(
            (s.input_tokens, s.cache_read_tokens, s.output_tokens),
            (6087, 5120, 204)
        );
        assert_eq!(s.tool_calls, 1);
    }

    #[test]
    fn fixtures_render_clean_lines() {
        for name in std::iter::once(&CLAUDE_FIXTURE).chain(CODEX_FIXTURES) {
            let (out, _) = run(AgentFormat::Auto, &fixture(name));
            assert!(!out.is_empty(), "{name}");
            out.iter().for_each(assert_clean);
        }
    }

    // ---- Claude details ----

    #[test]
    fn message_id_dedupe_keeps_the_last_usage_per_message() {
        let line = |id: &str, block: &str, output: u64| {
            format!(
                r#"{{"type":"assistant","message":{{"id":"{id}","model":"claude-sonnet-4-5","role":"assistant","content":[{block}],"usage":{{"input_tokens":100,"cache_creation_input_tokens":50,"cache_read_input_tokens":1000,"output_tokens":{output}}}}},"parent_tool_use_id":null,"session_id":"s"}}"#
            )
        };
        let text = r#"{"type":"text","text":"Let me look."}"#;
        let tool = r#"{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/src/main.rs"}}"#;
        let input = [
            INIT.to_owned(),
            line("msg_a", text, 8),
            line("msg_a", tool, 8),
            // Claude Code repeats the usage; a later line may carry the final count.
            line("msg_a", tool.replace("toolu_1", "toolu_2").as_str(), 40),
            line("msg_b", text, 7),
        ]
        .join("\n");
        let (out, parser) = run_auto(&input);
        let s = parser.stats();
        assert_eq!(s.turns, 2);
        assert_eq!(
            (
                s.input_tokens,
                s.output_tokens,
                s.cache_read_tokens,
                s.cache_write_tokens
            ),
            (200, 47, 2000, 100)
        );
        assert_eq!(s.tool_calls, 2);
        assert_eq!(s.tool_calls_by_name.get("Read"), Some(&2));
        assert_eq!(
            texts(&out)[1..3],
            ["Let me look.", "▶ Read  /w/src/main.rs"]
        );

        // A result with usage replaces the per-message sum; num_turns wins too.
        let result = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":65000,"num_turns":6,"result":"Done.\nAll good.","total_cost_usd":0.0123,"usage":{"input_tokens":300,"cache_creation_input_tokens":10,"cache_read_input_tokens":5000,"output_tokens":99}}"#;
        let (out, parser) = run_auto(&format!("{input}\n{result}\n"));
        let s = parser.stats();
        assert_eq!(s.turns, 6);
        assert_eq!(
            (
                s.input_tokens,
                s.output_tokens,
                s.cache_read_tokens,
                s.cache_write_tokens
            ),
            (300, 99, 5000, 10)
        );
        let n = out.len();
        assert_eq!(
            out[n - 2].text,
            "■ result: success · 6 turns · $0.0123 · 1m 5s"
        );
        assert_eq!(out[n - 1].text, "Done. (+1 line)");
        assert_eq!(out[n - 1].detail.as_deref(), Some("Done.\nAll good."));
        assert_eq!(s.result_text.as_deref(), Some("Done.\nAll good."));
    }

    #[test]
    fn repeated_tool_use_block_is_shown_and_counted_once() {
        let tool = r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_9","name":"Bash","input":{"command":"npm test"}}]}}"#;
        let (out, parser) = run_auto(&format!("{tool}\n{tool}\n"));
        assert_eq!(texts(&out), ["▶ Bash  npm test"]);
        assert_eq!(parser.stats().tool_calls, 1);
    }

    #[test]
    fn tool_use_summaries_and_details() {
        let cases = [
            (
                r#""name":"Bash","input":{"command":"npm test","description":"Run tests"}"#,
                "▶ Bash  npm test",
            ),
            (
                r#""name":"Bash","input":{"command":"cat > f <<'EOF'\nhello\nEOF"}"#,
                "▶ Bash  cat > f <<'EOF' …",
            ),
            (
                r#""name":"Edit","input":{"file_path":"/w/a.rs","old_string":"a","new_string":"b"}"#,
                "▶ Edit  /w/a.rs",
            ),
            (
                r#""name":"Write","input":{"file_path":"/w/b.rs","content":"fn main() {}\n"}"#,
                "▶ Write  /w/b.rs",
            ),
            (
                r#""name":"Read","input":{"file_path":"/w/c.rs","offset":10}"#,
                "▶ Read  /w/c.rs",
            ),
            (
                r#""name":"Grep","input":{"pattern":"fn \\w+","path":"src"}"#,
                "▶ Grep  fn \\w+",
            ),
            (
                r#""name":"Glob","input":{"pattern":"**/*.rs"}"#,
                "▶ Glob  **/*.rs",
            ),
            (
                r#""name":"WebFetch","input":{"url":"https://example.com","prompt":"x"}"#,
                "▶ WebFetch  https://example.com",
            ),
            (
                r#""name":"Task","input":{"description":"Explore the repo","prompt":"…","subagent_type":"Explore"}"#,
                "▶ Task  Explore the repo",
            ),
            (
                r#""name":"mcp__gh__issue","input":{"number":12,"labels":["bug"]}"#,
                r#"▶ mcp__gh__issue  {"number":12,"labels":["bug"]}"#,
            ),
            (r#""name":"ExitPlanMode","input":{}"#, "▶ ExitPlanMode"),
            (
                r#""name":"TodoWrite","input":{"todos":[{"content":"A","status":"completed","activeForm":"Doing A"},{"content":"B","status":"in_progress","activeForm":"Doing B"},{"content":"C","status":"pending","activeForm":"Doing C"}]}"#,
                "▶ TodoWrite  3 todos · 1 done · now: Doing B",
            ),
        ];
        for (i, (fields, expected)) in cases.iter().enumerate() {
            let input = format!(
                r#"{{"type":"assistant","message":{{"id":"m{i}","content":[{{"type":"tool_use","id":"t{i}",{fields}}}]}}}}"#
            );
            let (out, _) = run_auto(&input);
            let call = only(&out);
            assert_eq!(call.kind, LineKind::ToolCall);
            assert_eq!(call.text, *expected);
            assert_eq!(call.tool_use_id.as_deref(), Some(format!("t{i}").as_str()));
            assert_clean(call);
        }
        let (out, _) = run_auto(
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls -la","timeout":5000}}]}}"#,
        );
        assert_eq!(
            only(&out).detail.as_deref(),
            Some("{\n  \"command\": \"ls -la\",\n  \"timeout\": 5000\n}")
        );
    }

    #[test]
    fn thinking_is_collapsed() {
        let (out, _) = run_auto(
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"First, read the tests.\nThen fix the bug — carefully.","signature":"abc"}]}}"#,
        );
        let line = only(&out);
        assert_eq!(line.kind, LineKind::Thinking);
        assert_eq!(line.text, "✻ thinking (52 chars)");
        assert_eq!(
            line.detail.as_deref(),
            Some("First, read the tests.\nThen fix the bug — carefully.")
        );
        // Signature-only thinking (redacted display) has nothing to expand.
        let (out, _) = run_auto(
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"","signature":"abc"}]}}"#,
        );
        assert_eq!(only(&out).text, "✻ thinking");
        assert_eq!(only(&out).detail, None);
    }

    #[test]
    fn multi_line_assistant_text_is_one_line_each() {
        let (out, _) = run_auto(
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"\n\nHere is the plan:\n\n\n1. Read\n\t2. Fix\n\n"}]}}"#,
        );
        assert_eq!(
            texts(&out),
            ["Here is the plan:", "", "1. Read", "        2. Fix"]
        );
        assert!(
            out.iter()
                .all(|l| l.kind == LineKind::Text && l.detail.is_none())
        );
    }

    #[test]
    fn very_long_text_blocks_are_capped() {
        let body: Vec<String> = (0..MAX_LINES_PER_BLOCK + 50)
            .map(|i| format!("line {i}"))
            .collect();
        let event = serde_json::json!({"type":"assistant","message":{"id":"m","content":[{"type":"text","text": body.join("\n")}]}});
        let (out, _) = run_auto(&event.to_string());
        assert_eq!(out.len(), MAX_LINES_PER_BLOCK + 1);
        assert_eq!(out[MAX_LINES_PER_BLOCK].text, "… (+50 lines)");
        assert!(
            out[MAX_LINES_PER_BLOCK]
                .detail
                .as_deref()
                .unwrap()
                .starts_with("line 1000\nline 1001")
        );
    }

    #[test]
    fn tool_result_string_and_error() {
        let input = [
            r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"PASS src/a.test.js\nPASS src/b.test.js\nTests: 2 passed\n","is_error":false}]},"session_id":"s"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>","is_error":true,"tool_use_id":"toolu_2"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Exit code 1\nnpm ERR! Test failed.","is_error":true,"tool_use_id":"toolu_3"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"","tool_use_id":"toolu_4"}]}}"#,
        ]
        .join("\n");
        let (out, parser) = run(AgentFormat::ClaudeStreamJson, input.as_bytes());
        assert_eq!(
            texts(&out),
            [
                "  ↳ PASS src/a.test.js (+2 lines)",
                "  ✗ File has not been read yet. Read it first before writing to it.",
                "  ✗ Exit code 1 (+1 line)",
                "  ↳ (no output)",
            ]
        );
        assert!(out.iter().all(|l| l.kind == LineKind::ToolResult));
        assert_eq!(
            out.iter().map(|l| l.is_error).collect::<Vec<_>>(),
            [false, true, true, false]
        );
        assert_eq!(out[0].tool_use_id.as_deref(), Some("toolu_1"));
        assert_eq!(
            out[0].detail.as_deref(),
            Some("PASS src/a.test.js\nPASS src/b.test.js\nTests: 2 passed")
        );
        assert_eq!(out[3].detail, None);
        assert_eq!(parser.stats().tool_errors, 2);
    }

    #[test]
    fn tool_result_content_blocks() {
        let (out, _) = run_auto(
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_5","content":[{"type":"text","text":"Agent report:\nfound 3 issues"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"done"}]}]}}"#,
        );
        let line = only(&out);
        assert_eq!(line.text, "  ↳ Agent report: (+3 lines)");
        assert_eq!(
            line.detail.as_deref(),
            Some("Agent report:\nfound 3 issues\n[image]\ndone")
        );
        let (out, _) = run_auto(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{}}]}]}}"#,
        );
        assert_eq!(only(&out).text, "  ↳ [image]");
    }

    #[test]
    fn a_200_kib_tool_result() {
        let content: String = (0..4000)
            .map(|i| format!("{i:>6}\tfn item_{i}() {{ println!(\"value {{}}\", {i}); }}\n"))
            .collect();
        assert!(content.len() > 200 * 1024);
        let event = serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_big","content": content, "is_error": false}]}});
        let input = format!("{INIT}\n{event}\n{INIT}\n");
        let (out, parser) = run(AgentFormat::Auto, input.as_bytes());
        assert_eq!(out.len(), 3);
        let result = &out[1];
        // "     0\t": the tab stop after the trimmed "0" is 7 columns on.
        assert_eq!(
            result.text,
            "  ↳ 0       fn item_0() { println!(\"value {}\", 0); } (+3,999 lines)"
        );
        let detail = result.detail.as_deref().unwrap();
        assert!(detail.len() <= MAX_DETAIL_BYTES);
        assert!(detail.len() > MAX_DETAIL_BYTES - 100);
        assert!(detail.ends_with(TRUNCATED_MARK));
        assert_clean(result);
        assert_eq!((parser.stats().lines, parser.stats().json_lines), (3, 3));
    }

    #[test]
    fn tool_result_beyond_the_line_cap_keeps_its_id() {
        // Key order as Claude Code writes it (json! would sort the keys).
        let content = serde_json::to_string(&"x".repeat(3 * MAX_PENDING_BYTES)).unwrap();
        let event = format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_huge","type":"tool_result","content":{content},"is_error":true}}]}}}}"#
        );
        let input = format!(
            "{INIT}\n{event}\n{}\n",
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"ok"}"#
        );
        for step in [input.len(), 65536, 4093] {
            let mut parser = StreamParser::new(AgentFormat::Auto);
            let mut out = Vec::new();
            for chunk in input.as_bytes().chunks(step) {
                out.extend(parser.feed(chunk));
                assert!(parser.pending.capacity() <= MAX_PENDING_BYTES);
            }
            out.extend(parser.finish());
            assert_eq!(
                kinds(&out),
                [
                    LineKind::System,
                    LineKind::ToolResult,
                    LineKind::Result,
                    LineKind::Text
                ]
            );
            let big = &out[1];
            assert_eq!(big.tool_use_id.as_deref(), Some("toolu_huge"));
            assert!(big.text.starts_with("  ↳ xxxx"), "{}", big.text);
            assert!(big.text.ends_with('…'));
            // is_error came after the cut: unknown, so not an error.
            assert!(!big.is_error);
            assert!(big.detail.as_deref().unwrap().ends_with(TRUNCATED_MARK));
            let s = parser.stats();
            assert_eq!((s.lines, s.json_lines, s.turns), (3, 3, 2));
        }
    }

    #[test]
    fn subagent_lines_are_marked() {
        let input = [
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_task","name":"Task","input":{"description":"Find callers","prompt":"Find all callers of parse()","subagent_type":"Explore"}}]},"parent_tool_use_id":null}"#,
            r#"{"type":"system","subtype":"task_started","task_id":"task_1","tool_use_id":"toolu_task","description":"Find callers","task_type":"local_agent","session_id":"s","uuid":"u1"}"#,
            r#"{"type":"system","subtype":"task_progress","task_id":"task_1","tool_use_id":"toolu_task","usage":{"total_tokens":1200,"tool_uses":1},"session_id":"s"}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"toolu_sub","name":"Grep","input":{"pattern":"parse\\("}}]},"parent_tool_use_id":"toolu_task"}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_sub","content":"src/a.rs:10: parse(x)"}]},"parent_tool_use_id":"toolu_task"}"#,
            r#"{"type":"system","subtype":"task_notification","task_id":"task_1","tool_use_id":"toolu_task","status":"completed","output_file":"/tmp/t.out","summary":"Found 1 caller\nin src/a.rs","usage":{"total_tokens":5000,"tool_uses":1,"duration_ms":15000},"session_id":"s"}"#,
            r#"{"type":"system","subtype":"task_notification","task_id":"task_2","status":"failed","summary":"Agent crashed"}"#,
        ]
        .join("\n");
        let (out, parser) = run_auto(&input);
        assert_eq!(
            texts(&out),
            [
                "▶ Task  Find callers",
                "◆ task started: Find callers",
                "┆ ▶ Grep  parse\\(",
                "┆   ↳ src/a.rs:10: parse(x)",
                "◆ task completed: Found 1 caller …",
                "◆ task failed: Agent crashed",
            ]
        );
        assert_eq!(out[1].tool_use_id.as_deref(), Some("toolu_task"));
        assert_eq!(
            out[4].detail.as_deref(),
            Some("Found 1 caller\nin src/a.rs")
        );
        assert!(out[5].is_error && !out[4].is_error);
        assert_eq!(parser.stats().tool_calls, 2);
    }

    #[test]
    fn api_retry_hooks_and_compaction() {
        let input = [
            r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":5000,"error_status":529,"error":"server_error","session_id":"s","uuid":"u"}"#,
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1234,"error_status":null,"error":"unknown"}"#,
            r#"{"type":"system","subtype":"hook_started","hook_id":"h1","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","session_id":"s"}"#,
            r#"{"type":"system","subtype":"hook_response","hook_id":"h1","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","output":"","stdout":"","stderr":"","exit_code":0,"outcome":"success"}"#,
            r#"{"type":"system","subtype":"hook_response","hook_id":"h2","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","output":"","stdout":"","stderr":"blocked: rm -rf is not allowed\nsee policy","exit_code":2,"outcome":"error"}"#,
            r#"{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":155000},"session_id":"s"}"#,
            r#"{"type":"system","subtype":"status","status":"compacting"}"#,
            r#"{"type":"system","subtype":"something_new","x":[1,2,{"y":null}]}"#,
        ]
        .join("\n");
        let (out, _) = run(AgentFormat::ClaudeStreamJson, input.as_bytes());
        assert_eq!(
            texts(&out),
            [
                "⟳ API retry 2/10 in 5.0s (529)",
                "⟳ API retry 1/10 in 1.2s (unknown)",
                "⚑ hook PreToolUse PreToolUse:Bash error (exit 2): blocked: rm -rf is not allowed …",
                "⋯ context compacted (auto, 155,000 tokens before)",
            ]
        );
        assert!(out.iter().all(|l| l.kind == LineKind::System));
        assert!(out[2].is_error);
    }

    #[test]
    fn rate_limit_events() {
        let input = [
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1755806400,"rateLimitType":"five_hour"},"session_id":"s"}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1755806400,"rateLimitType":"five_hour","utilization":0.91},"session_id":"s"}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"rateLimitType":"seven_day","status":"rejected","resetsAt":1755806400000}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected"}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":"rejected"}"#,
        ]
        .join("\n");
        let (out, _) = run_auto(&input);
        assert_eq!(
            texts(&out),
            [
                "⚠ rate limit allowed_warning (five_hour) resets 20:00 UTC",
                "⚠ rate limit rejected (seven_day) resets Aug 21 20:00 UTC",
                "⚠ rate limit rejected",
            ]
        );
        assert!(out.iter().all(|l| l.kind == LineKind::RateLimit));
        assert_eq!(
            out.iter().map(|l| l.is_error).collect::<Vec<_>>(),
            [false, true, true]
        );
        assert!(
            out[0]
                .detail
                .as_deref()
                .unwrap()
                .contains("\"utilization\": 0.91")
        );
    }

    #[test]
    fn synthetic_assistant_errors() {
        let input = [
            INIT,
            r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: Rate limit reached"}],"usage":{"input_tokens":0,"output_tokens":0}},"error":"rate_limit","session_id":"sess-1"}"#,
            r#"{"type":"assistant","message":{"id":"e2","model":"<synthetic>","content":[{"type":"text","text":"Invalid API key · Please run /login"}]},"error":"authentication_failed"}"#,
            r#"{"type":"assistant","message":{"content":[]},"error":"billing_error"}"#,
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":393,"num_turns":1,"result":"API Error: Rate limit reached","total_cost_usd":0}"#,
        ]
        .join("\n");
        let (out, parser) = run_auto(&input);
        assert_eq!(
            texts(&out)[1..],
            [
                "✗ rate_limit: API Error: Rate limit reached",
                "✗ authentication_failed: Invalid API key · Please run /login",
                "✗ billing_error",
                "■ result: error (429) · 1 turn · $0.0000 · 0.4s",
                "API Error: Rate limit reached",
            ]
        );
        assert_eq!(
            kinds(&out)[1..],
            [
                LineKind::Error,
                LineKind::Error,
                LineKind::Error,
                LineKind::Result,
                LineKind::Text
            ]
        );
        assert!(out[1..].iter().all(|l| l.is_error));
        let s = parser.stats();
        assert_eq!(s.result_subtype.as_deref(), Some("success"));
        assert_eq!(s.result_is_error, Some(true));
        assert_eq!(s.cost_usd, Some(0.0));
        assert_eq!(s.model.as_deref(), Some("claude-sonnet-4-5"));
    }

    #[test]
    fn synthetic_messages_are_not_turns() {
        let input = [
            r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}]},"error":"server_error"}"#,
            r#"{"type":"assistant","message":{"id":"m1","model":"claude-haiku-4-5","content":[{"type":"text","text":"ok"}]}}"#,
        ]
        .join("\n");
        let (_, parser) = run_auto(&input);
        assert_eq!(parser.stats().turns, 1);
        assert_eq!(parser.stats().model.as_deref(), Some("claude-haiku-4-5"));
    }

    #[test]
    fn result_with_is_error_and_success_subtype() {
        let (out, parser) = run_auto(
            r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":9000,"num_turns":6,"result":"API Error: 401 {\"type\":\"error\"}","total_cost_usd":0.0123,"session_id":"s2"}"#,
        );
        assert_eq!(
            texts(&out),
            [
                "■ result: error · 6 turns · $0.0123 · 9.0s",
                "API Error: 401 {\"type\":\"error\"}"
            ]
        );
        assert!(out.iter().all(|l| l.is_error));
        let s = parser.stats();
        assert_eq!(s.result_is_error, Some(true));
        assert_eq!(s.result_subtype.as_deref(), Some("success"));
        assert_eq!(s.agent_session_id.as_deref(), Some("s2"));

        let (out, parser) = run_auto(
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":50,"cost_usd":1.5}"#,
        );
        assert_eq!(
            texts(&out),
            ["■ result: error_max_turns · 50 turns · $1.5000"]
        );
        assert!(out[0].is_error);
        assert_eq!(parser.stats().cost_usd, Some(1.5));
        assert_eq!(parser.stats().result_text, None);
    }

    #[test]
    fn result_text_in_stats_is_capped() {
        let text = "é".repeat(10_000);
        let event = serde_json::json!({"type":"result","subtype":"success","result": text});
        let (_, parser) = run_auto(&event.to_string());
        let kept = parser.stats().result_text.as_deref().unwrap();
        assert!(kept.len() <= MAX_STATS_TEXT_BYTES);
        assert!(kept.ends_with('…'));
    }

    #[test]
    fn unknown_types_and_odd_field_types_are_skipped() {
        let input = [
            INIT,
            r#"{"type":"stream_event","event":{"type":"content_block_delta","delta":{"text":"he"}}}"#,
            r#"{"type":"keep_alive"}"#,
            r#"{"type":"assistant","message":"not an object"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":7,"input":"x"}]}}"#,
            r#"{"type":"user","message":{"content":"the prompt"}}"#,
            r#"{"type":"result","num_turns":"x","total_cost_usd":"0.5","usage":[1]}"#,
            r#"{"no_type":true}"#,
            r#"{"type":42}"#,
        ]
        .join("\n");
        let (out, parser) = run_auto(&input);
        assert_eq!(
            texts(&out)[1..],
            ["▶ tool  \"x\"", "■ result: success · $0.5000"]
        );
        assert_eq!(parser.stats().json_lines, 9);
    }

    #[test]
    fn non_json_lines_in_a_json_stream_are_plain() {
        let input = format!(
            "{INIT}\nWarning: \x1b[33mdeprecated\x1b[0m flag\n{{\"type\":\"assistant\" broken\n[1,2]\n\n{}\n",
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"hi"}]}}"#
        );
        let (out, parser) = run_auto(&input);
        assert_eq!(
            texts(&out)[1..],
            [
                "Warning: \x1b[33mdeprecated\x1b[0m flag",
                "{\"type\":\"assistant\" broken",
                "[1,2]",
                "hi",
            ]
        );
        assert_eq!(kinds(&out)[1..4], [LineKind::Plain; 3]);
        assert_eq!((parser.stats().lines, parser.stats().json_lines), (6, 2));
    }

    // ---- Codex details ----

    #[test]
    fn codex_items_without_duplicates() {
        let input = [
            r#"{"type":"thread.started","thread_id":"th"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.updated","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"Compiling","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"error[E0425]: cannot find value `x`\n  --> src/lib.rs:3:5\n","exit_code":101,"status":"failed"}}"#,
            // Completed without a started event: call and result together.
            r#"{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \"git status --short\"","aggregated_output":"","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_d","type":"command_execution","command":"bash -lc 'rm -rf /'","aggregated_output":"","exit_code":null,"status":"declined"}}"#,
            r#"{"type":"item.started","item":{"id":"item_3","type":"todo_list","items":[{"text":"Read code","completed":false}]}}"#,
            r#"{"type":"item.updated","item":{"id":"item_3","type":"todo_list","items":[{"text":"Read code","completed":true},{"text":"Fix bug","completed":false}]}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"todo_list","items":[{"text":"Read code","completed":true},{"text":"Fix bug","completed":false},{"text":"Test","completed":false}]}}"#,
            r#"{"type":"item.started","item":{"id":"item_4","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":null,"error":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_4","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":{"content":[{"type":"text","text":"serde 1.0\nA framework"}],"structured_content":null},"error":null,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_5","type":"mcp_tool_call","server":"docs","tool":"fetch","arguments":{},"result":null,"error":{"message":"timeout after 30s"},"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_6","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"},{"path":"src/b.rs","kind":"add"},{"path":"old.rs","kind":"delete"}],"status":"failed"}}"#,
            r#"{"type":"item.started","item":{"id":"item_7","type":"web_search","query":""}}"#,
            r#"{"type":"item.completed","item":{"id":"item_7","type":"web_search","query":"rust memchr"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_8","type":"error","message":"command timed out"}}"#,
            r#"{"type":"item.updated","item":{"id":"item_9","type":"agent_message","text":"partial"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_9","type":"agent_message","text":"All done.\n\nSee `src/a.rs`."}}"#,
            r#"{"type":"error","message":"Reconnecting... 1/5"}"#,
            r#"{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":5}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":50,"cached_input_tokens":25,"output_tokens":10}}"#,
            r#"{"type":"turn.completed"}"#,
        ]
        .join("\n");
        let (out, parser) = run_auto(&input);
        assert_eq!(
            texts(&out),
            [
                "● session started · thread th",
                "▶ exec  cargo test",
                "  ✗ exit 101 · error[E0425]: cannot find value `x` (+1 line)",
                "▶ exec  git status --short",
                "  ↳ (no output)",
                "▶ exec  rm -rf /",
                "  ✗ declined",
                "☑ plan 1/3 done · next: Fix bug",
                "▶ mcp__docs__search  {\"q\":\"serde\"}",
                "  ↳ serde 1.0 (+1 line)",
                "▶ mcp__docs__fetch",
                "  ✗ timeout after 30s",
                "▶ patch  src/a.rs (+2 more)",
                "  ✗ patch failed",
                "▶ web_search  rust memchr",
                "✗ command timed out",
                "All done.",
                "",
                "See `src/a.rs`.",
                "✗ Reconnecting... 1/5",
                "✗ turn failed: stream disconnected before completion",
                "● turn completed · 100 in · 5 out",
                "● turn completed · 50 in (25 cached) · 10 out",
                "● turn completed",
            ]
        );
        assert_eq!(out[1].tool_use_id, out[2].tool_use_id);
        assert!(out[2].is_error && out[6].is_error && out[11].is_error && out[13].is_error);
        assert_eq!(
            out[7].detail.as_deref(),
            Some("[x] Read code\n[ ] Fix bug\n[ ] Test")
        );
        assert_eq!(
            out[12].detail.as_deref(),
            Some("update src/a.rs\nadd src/b.rs\ndelete old.rs")
        );
        let s = parser.stats();
        assert_eq!(s.turns, 3);
        assert_eq!(
            (s.input_tokens, s.cache_read_tokens, s.output_tokens),
            (150, 25, 15)
        );
        assert_eq!(s.tool_calls, 7);
        assert_eq!(s.tool_calls_by_name.get("exec"), Some(&3));
        assert_eq!(s.tool_errors, 4);
        assert_eq!(
            s.last_agent_message.as_deref(),
            Some("All done.\n\nSee `src/a.rs`.")
        );
    }

    // ---- text mode and sanitising ----

    #[test]
    fn text_mode_sanitising() {
        let input = concat!(
            "\x1b[1;32m✓\x1b[0m compiled \x1b]0;window title\x07ok\n",
            "Downloading  10%\rDownloading  50%\rDownloading 100%\n",
            "\x1b[2K\x1b[1Aredrawn\x1b[?25l line\x07\x1b[5G!\n",
            "a\tb\x00c\x08d\x7f\u{9b}e\u{202e}f\n",
            "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ text\x1b(B\x1b=\n",
            "\x1b[31mred\rblue\n",
            "crlf line\r\n",
            "\n",
            "\x1b[38;2;255;0;0mtruecolor\x1b[0m \x1b[38:5:208morange\n",
        );
        let (out, parser) = run(AgentFormat::Text, input.as_bytes());
        assert_eq!(
            texts(&out),
            [
                "\x1b[1;32m✓\x1b[0m compiled ok",
                "Downloading 100%",
                "redrawn line!",
                "a       bcdef",
                "link text",
                "\x1b[31mblue",
                "crlf line",
                "",
                "\x1b[38;2;255;0;0mtruecolor\x1b[0m \x1b[38:5:208morange",
            ]
        );
        assert!(out.iter().all(|l| l.kind == LineKind::Plain));
        out.iter().for_each(assert_clean);
        assert_eq!((parser.stats().lines, parser.stats().json_lines), (9, 0));
    }

    #[test]
    fn json_text_never_keeps_escapes() {
        let (out, _) = run_auto(
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"\u001b[31mred\u001b[0m and \u0007bell\u001b]0;t\u0007 ok"}]}}"#,
        );
        assert_eq!(only(&out).text, "red and bell ok");
    }

    #[test]
    fn long_lines_are_cut_with_an_ellipsis() {
        let long = "ab".repeat(600);
        let (out, _) = run(AgentFormat::Text, long.as_bytes());
        let text = &only(&out).text;
        assert_eq!(text.chars().count(), MAX_TEXT_CHARS);
        assert!(text.ends_with("ab…") || text.ends_with("ba…"));
        let colored = format!("\x1b[32m{}\x1b[0m", "é".repeat(700));
        let (out, _) = run(AgentFormat::Text, colored.as_bytes());
        let text = &only(&out).text;
        assert!(text.starts_with("\x1b[32m"));
        assert_eq!(
            text.chars().filter(|c| *c == 'é').count(),
            MAX_TEXT_CHARS - 1
        );
        assert!(text.ends_with('…'));
        // Exactly at the cap: untouched.
        let exact = "x".repeat(MAX_TEXT_CHARS);
        assert_eq!(
            only(&run(AgentFormat::Text, exact.as_bytes()).0).text,
            exact
        );
        // SGR floods do not escape the cap.
        let flood = "\x1b[1m".repeat(100_000);
        let (out, _) = run(AgentFormat::Text, flood.as_bytes());
        assert!(only(&out).text.len() <= MAX_SGR_BYTES_PER_LINE);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let (out, _) = run(AgentFormat::Text, b"ok \xff\xfe bytes\n");
        assert_eq!(only(&out).text, "ok \u{fffd}\u{fffd} bytes");
    }

    #[test]
    fn auto_falls_back_to_text_after_twenty_lines() {
        let mut input = String::new();
        for i in 0..25 {
            input.push_str(&format!("log line {i}\n\n"));
        }
        // Once Text, JSON lines are text too.
        input.push_str(INIT);
        let (out, parser) = run_auto(&input);
        assert_eq!(parser.format(), AgentFormat::Text);
        // Blank lines are shown once the stream is known to be text.
        assert_eq!(out.len(), 20 + 1 + 5 * 2 + 1);
        assert_eq!(out.last().unwrap().kind, LineKind::Plain);

        // Noise before the first event does not stop detection.
        let (out, parser) = run_auto(&format!("npm warn something\n\n{INIT}\n"));
        assert_eq!(parser.format(), AgentFormat::ClaudeStreamJson);
        assert_eq!(kinds(&out), [LineKind::Plain, LineKind::System]);

        // An object of neither format neither resolves nor is shown.
        let (out, parser) = run_auto("{\"level\":\"info\",\"msg\":\"hi\"}\n");
        assert_eq!(parser.format(), AgentFormat::Auto);
        assert!(out.is_empty());
        assert_eq!(parser.stats().json_lines, 1);
    }

    #[test]
    fn explicit_format_is_kept() {
        let (out, parser) = run(AgentFormat::CodexJson, &fixture(CLAUDE_FIXTURE));
        assert_eq!(parser.format(), AgentFormat::CodexJson);
        assert!(out.is_empty());
        let (out, _) = run(AgentFormat::Text, &fixture(CODEX_FIXTURES[0]));
        assert_eq!(out.len(), 7);
        assert!(out.iter().all(|l| l.kind == LineKind::Plain));
    }

    #[test]
    fn partial_last_line_is_flushed_by_finish() {
        let mut parser = StreamParser::new(AgentFormat::Auto);
        let data = fixture(CLAUDE_FIXTURE);
        let text = String::from_utf8(data).unwrap();
        let without_newline = text.trim_end();
        let out = parser.feed(without_newline.as_bytes());
        assert_eq!(out.len(), 2);
        let out = parser.finish();
        assert_eq!(
            texts(&out),
            ["■ result: success · 1 turn · $0.1355 · 2.4s", "4"]
        );
        assert!(parser.finish().is_empty());
        assert_eq!(parser.stats().lines, 3);
        // A last line cut mid-object is plain text.
        let mut parser = StreamParser::new(AgentFormat::ClaudeStreamJson);
        parser.feed(br#"{"type":"assistant","message":{"content":[{"type":"text","te"#);
        assert_eq!(kinds(&parser.finish()), [LineKind::Plain]);
    }

    #[test]
    fn agent_format_serde_names() {
        for (format, name) in [
            (AgentFormat::Auto, "\"auto\""),
            (AgentFormat::ClaudeStreamJson, "\"claude-stream-json\""),
            (AgentFormat::CodexJson, "\"codex-json\""),
            (AgentFormat::Text, "\"text\""),
        ] {
            assert_eq!(serde_json::to_string(&format).unwrap(), name);
            assert_eq!(serde_json::from_str::<AgentFormat>(name).unwrap(), format);
        }
    }

    // ---- the JSON reader ----

    #[test]
    fn json_reader_accepts_and_rejects() {
        let ok = [
            r#"{}"#,
            r#" { "a" : [ 1 , -2.5e+3 , true , false , null , "x" , { } , [ ] ] } "#,
            r#"{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}"#,
            r#"{"a":0,"b":-0.0,"c":1E9}"#,
        ];
        for line in ok {
            assert!(parse_object(line, false).is_some(), "{line}");
            assert!(
                serde_json::from_str::<serde_json::Value>(line).is_ok(),
                "{line}"
            );
        }
        let bad = [
            "",
            "{",
            "[]",
            "\"x\"",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{,}",
            "{\"a\":01}",
            "{\"a\":1.}",
            "{\"a\":-}",
            "{\"a\":tru}",
            "{\"a\":1} x",
            "{\"a\":[1 2]}",
            "{\"a\":nul}",
            "{'a':1}",
            "{\"a\":1e}",
            "{\"a\":.5}",
        ];
        for line in bad {
            assert!(parse_object(line, false).is_none(), "{line}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(parse_object(&deep, false).is_none());
        let fine = format!("{{\"a\":{}{}}}", "[".repeat(100), "]".repeat(100));
        assert!(parse_object(&fine, false).is_some());
    }

    #[test]
    fn json_reader_decodes_strings() {
        let value = parse_object(
            r#"{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\u12zz","k\u0065y":1}"#,
            false,
        )
        .unwrap();
        assert_eq!(
            value.get_str("a").unwrap(),
            "\"\\/\u{8}\u{c}\n\r\té😀\u{fffd}x\u{fffd}12zz"
        );
        assert_eq!(value.get_u64("key"), Some(1));
    }

    #[test]
    fn json_reader_closes_cut_lines() {
        let full = r#"{"type":"user","n":12345,"message":{"content":[{"tool_use_id":"t","type":"tool_result","content":"abc\ndef\u00e9","is_error":true}]}}"#;
        for cut in 1..full.len() {
            let prefix = &full[..cut];
            let value = parse_object(prefix, true);
            if cut >= r#"{"type":"user""#.len() {
                let value = value.unwrap_or_else(|| panic!("{prefix}"));
                assert_eq!(value.get_str("type").as_deref(), Some("user"), "{prefix}");
                // A number is only kept once it is known to be complete.
                if let Some(n) = value.get_u64("n") {
                    assert_eq!(n, 12345, "{prefix}");
                }
            }
        }
        let value = parse_object(r#"{"a":"xy\"#, true).unwrap();
        assert_eq!(value.get_str("a").as_deref(), Some("xy"));
        let value = parse_object(r#"{"a":"xy\u00"#, true).unwrap();
        assert_eq!(value.get_str("a").as_deref(), Some("xy"));
        assert!(parse_object(r#"{"a":"x"}}"#, true).is_none());
    }

    #[test]
    fn pretty_json_matches_serde_json() {
        let line = r#"{"a":[1,{"b":"c\nd","e":[]},{}],"f":null,"g":{"h":true}}"#;
        let value = parse_object(line, false).unwrap();
        let (pretty, complete) = json_text(&value, true);
        assert!(complete);
        let expected =
            serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(line).unwrap())
                .unwrap();
        // serde_json without preserve_order sorts keys; these are already sorted.
        assert_eq!(pretty, expected);
        let (compact, _) = json_text(&value, false);
        assert_eq!(compact, line);
    }

    #[test]
    fn helpers() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(unwrap_shell("bash -lc ls"), "ls");
        assert_eq!(unwrap_shell("bash -lc 'cat test.js'"), "cat test.js");
        assert_eq!(
            unwrap_shell("bash -lc 'echo '\\''x'\\'''"),
            "'echo '\\''x'\\'''"
        );
        assert_eq!(
            unwrap_shell("/bin/bash -lc \"echo $HOME\""),
            "\"echo $HOME\""
        );
        assert_eq!(unwrap_shell("python3 x.py"), "python3 x.py");
        assert_eq!(first_line("\n\n  a  \nb\n"), ("a", 3));
        assert_eq!(
            escaped_newlines(JStr {
                raw: r"a\nb\\nc\n",
                escaped: true
            }),
            (2, true)
        );
        assert_eq!(
            escaped_newlines(JStr {
                raw: r"a\n\\",
                escaped: true
            }),
            (1, false)
        );
    }

    // ---- properties ----

    /// Realistic lines of both formats, plus noise, for the properties.
    fn sample_lines() -> Vec<String> {
        let mut lines: Vec<String> = std::iter::once(&CLAUDE_FIXTURE)
            .chain(CODEX_FIXTURES)
            .flat_map(|name| {
                String::from_utf8(fixture(name))
                    .unwrap()
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        lines.extend(
            [
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"é—😀 line\n\tsecond \u001b[31m"}],"usage":{"input_tokens":3,"output_tokens":4}}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls\r\nx"}}],"usage":{"input_tokens":3,"output_tokens":9}}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a\nb"},{"type":"image"}],"is_error":true}]}}"#,
                r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1755806400,"rateLimitType":"five_hour"}}"#,
                r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"retry_delay_ms":500,"error_status":429}"#,
                r#"{"type":"result","subtype":"success","is_error":true,"num_turns":2,"result":"x\ny","total_cost_usd":0.5}"#,
                "plain \x1b[1mbold\x1b[0m\r progress",
                "",
                "  ",
                "{not json",
            ]
            .map(str::to_owned),
        );
        lines
    }

    fn feed_in_chunks(
        format: AgentFormat,
        data: &[u8],
        cuts: &[usize],
    ) -> (Vec<Rendered>, SessionStats) {
        let mut parser = StreamParser::new(format);
        let mut out = Vec::new();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        cuts.sort_unstable();
        let mut start = 0;
        for cut in cuts {
            out.extend(parser.feed(&data[start..cut]));
            start = cut;
        }
        out.extend(parser.feed(&data[start..]));
        out.extend(parser.finish());
        (out, parser.stats().clone())
    }

    proptest! {
        #[test]
        fn chunking_does_not_matter(
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
            cuts in proptest::collection::vec(any::<usize>(), 0..30),
            format in prop_oneof![Just(AgentFormat::Auto), Just(AgentFormat::ClaudeStreamJson), Just(AgentFormat::CodexJson), Just(AgentFormat::Text)],
            trailing_newline in any::<bool>(),
        ) {
            let lines = sample_lines();
            let mut data = picks.iter().map(|i| lines[i.index(lines.len())].as_str()).collect::<Vec<_>>().join("\n");
            if trailing_newline {
                data.push('\n');
            }
            let data = data.as_bytes();
            let whole = feed_in_chunks(format, data, &[]);
            let chunked = feed_in_chunks(format, data, &cuts);
            prop_assert_eq!(&whole, &chunked);
            // Byte by byte, too.
            let mut parser = StreamParser::new(format);
            let mut out = Vec::new();
            for b in data {
                out.extend(parser.feed(std::slice::from_ref(b)));
            }
            out.extend(parser.finish());
            prop_assert_eq!(&whole.0, &out);
            prop_assert_eq!(&whole.1, parser.stats());
            for line in &whole.0 {
                assert_clean(line);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..4096),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            for format in [AgentFormat::Auto, AgentFormat::ClaudeStreamJson, AgentFormat::CodexJson, AgentFormat::Text] {
                let (out, stats) = feed_in_chunks(format, &bytes, &cuts);
                prop_assert!(stats.json_lines <= stats.lines);
                for line in &out {
                    assert_clean(line);
                }
            }
        }

        #[test]
        fn mangled_events_never_panic(
            pick in any::<prop::sample::Index>(),
            cut in any::<prop::sample::Index>(),
            noise in proptest::collection::vec(any::<u8>(), 0..16),
            at in any::<prop::sample::Index>(),
        ) {
            let lines = sample_lines();
            let mut line = lines[pick.index(lines.len())].clone().into_bytes();
            let pos = at.index(line.len() + 1);
            line.splice(pos..pos, noise);
            line.truncate(cut.index(line.len() + 1).max(1));
            for format in [AgentFormat::Auto, AgentFormat::ClaudeStreamJson, AgentFormat::CodexJson] {
                let (out, _) = feed_in_chunks(format, &line, &[]);
                for r in &out {
                    assert_clean(r);
                }
                // As the kept start of an over-long line, too.
                let mut parser = StreamParser::new(format);
                let mut out = Vec::new();
                parser.process_line(&line, true, &mut out);
                for r in &out {
                    assert_clean(r);
                }
            }
        }

        #[test]
        fn json_reader_agrees_with_serde_json(value in arb_json()) {
            let line = serde_json::json!({"v": value}).to_string();
            let parsed = parse_object(&line, false);
            prop_assert!(parsed.is_some());
            let parsed = parsed.unwrap();
            let (compact, complete) = json_text(&parsed, false);
            prop_assert!(complete || compact.len() > MAX_DETAIL_BYTES);
            if complete {
                let reparsed: serde_json::Value = serde_json::from_str(&compact).unwrap();
                prop_assert_eq!(reparsed, serde_json::from_str::<serde_json::Value>(&line).unwrap());
            }
            if let serde_json::Value::String(s) = &value {
                let decoded = parsed.get_str("v");
                prop_assert_eq!(decoded.as_deref(), Some(s.as_str()));
            }
        }
    }

    // ---- throughput ----

    /// xorshift64*: deterministic, dependency-free randomness for generated data.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }

        fn range(&mut self, lo: u64, hi: u64) -> u64 {
            lo + self.below(hi - lo + 1)
        }

        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }
    }

    const CODE_WORDS: &[&str] = &[
        "fn",
        "let",
        "mut",
        "self",
        "return",
        "match",
        "impl",
        "pub",
        "struct",
        "=>",
        "{",
        "}",
        "(x)",
        "&str",
        "Vec<u8>",
        "Option<String>",
        "\"quoted\"",
        "// why",
        "0x1f",
        "'c'",
        "path\\to",
        "é",
        "→",
        "->",
        "==",
        "+=",
        "?;",
        "unwrap_or(0)",
        "config.timeout",
        "println!(\"{}\", v);",
        "if",
        "else",
        "for",
        "in",
        "while",
        "async",
        "await",
        "Ok(())",
    ];
    const PROSE_WORDS: &[&str] = &[
        "the",
        "test",
        "fails",
        "because",
        "parser",
        "reads",
        "a",
        "line",
        "I'll",
        "check",
        "file",
        "and",
        "then",
        "fix",
        "it",
        "—",
        "`src/lib.rs`",
        "function",
        "returns",
        "error",
        "when",
        "input",
        "is",
        "empty",
        "so",
        "we",
        "should",
        "handle",
        "that",
        "case",
        "first",
    ];

    fn words(rng: &mut Rng, vocabulary: &[&str], n: u64) -> String {
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(vocabulary[rng.below(vocabulary.len() as u64) as usize]);
        }
        out
    }

    /// Source code as Claude Code's Read tool shows it ("     1→…").
    fn code(rng: &mut Rng, lines: u64, numbered: bool) -> String {
        let mut out = String::new();
        for n in 1..=lines {
            if numbered {
                out.push_str(&format!("{n:>6}→"));
            }
            out.push_str(&"    ".repeat(rng.below(4) as usize));
            let count = rng.range(2, 12);
            out.push_str(&words(rng, CODE_WORDS, count));
            out.push('\n');
        }
        out
    }

    fn prose(rng: &mut Rng, sentences: u64) -> String {
        (0..sentences)
            .map(|_| {
                let count = rng.range(6, 25);
                format!("{}.", words(rng, PROSE_WORDS, count))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A Claude Code stream-json session of about `target` bytes, shaped like
    /// real ones: most bytes are tool results (file reads, command output),
    /// then tool inputs (edits, writes), thinking and text.
    fn bench_stream(target: usize) -> Vec<u8> {
        use serde_json::json;
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let session = "5f1c2a9e-1b7d-4e0a-9c3f-2d8e6b4a1f00";
        let mut out = Vec::with_capacity(target + (1 << 20));
        let push = |out: &mut Vec<u8>, value: serde_json::Value| {
            serde_json::to_writer(&mut *out, &value).unwrap();
            out.push(b'\n');
        };
        push(
            &mut out,
            json!({"type":"system","subtype":"init","cwd":"/home/dev/project","session_id":session,"tools":["Task","Bash","Glob","Grep","Read","Edit","Write","WebFetch","TodoWrite"],"mcp_servers":[],"model":"claude-sonnet-4-5-20250929","permissionMode":"bypassPermissions","claude_code_version":"2.1.7","uuid":"u0"}),
        );
        let mut turn = 0u64;
        while out.len() < target {
            turn += 1;
            let id = format!("msg_{turn:020}");
            let usage = json!({"input_tokens": rng.range(1, 50), "cache_creation_input_tokens": rng.range(0, 5000), "cache_read_input_tokens": rng.range(10_000, 150_000), "output_tokens": rng.range(20, 2000), "service_tier":"standard"});
            let assistant = |content: serde_json::Value| json!({"type":"assistant","message":{"model":"claude-sonnet-4-5-20250929","id":id,"type":"message","role":"assistant","content":[content],"stop_reason":null,"stop_sequence":null,"usage":usage},"parent_tool_use_id":null,"session_id":session,"uuid":format!("a{turn}")});
            if rng.chance(30) {
                let sentences = rng.range(5, 30);
                push(
                    &mut out,
                    assistant(
                        json!({"type":"thinking","thinking": prose(&mut rng, sentences),"signature":"EqQBCkYIBxgCKkDx".repeat(8)}),
                    ),
                );
            }
            if rng.chance(40) {
                let sentences = rng.range(1, 8);
                push(
                    &mut out,
                    assistant(json!({"type":"text","text": prose(&mut rng, sentences)})),
                );
            }
            let tool_id = format!("toolu_{turn:024}");
            let (name, input, result) = match rng.below(10) {
                0..=3 => {
                    let lines = rng.range(20, 600);
                    (
                        "Read",
                        json!({"file_path": format!("/home/dev/project/src/module_{}.rs", rng.below(50))}),
                        code(&mut rng, lines, true),
                    )
                }
                4..=5 => {
                    let lines = rng.range(0, 200);
                    (
                        "Bash",
                        json!({"command":"cargo test --all 2>&1 | tail -50","description":"Run tests"}),
                        code(&mut rng, lines, false),
                    )
                }
                6..=7 => {
                    let old_lines = rng.range(1, 30);
                    let new_lines = rng.range(1, 40);
                    let snippet = rng.range(5, 20);
                    (
                        "Edit",
                        json!({"file_path":"/home/dev/project/src/lib.rs","old_string": code(&mut rng, old_lines, false),"new_string": code(&mut rng, new_lines, false)}),
                        format!(
                            "The file /home/dev/project/src/lib.rs has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                            code(&mut rng, snippet, true)
                        ),
                    )
                }
                8 => {
                    let lines = rng.range(1, 60);
                    (
                        "Grep",
                        json!({"pattern":"fn parse_\\w+","path":"src","output_mode":"content"}),
                        code(&mut rng, lines, false),
                    )
                }
                _ => {
                    let lines = rng.range(30, 400);
                    (
                        "Write",
                        json!({"file_path":"/home/dev/project/src/new_module.rs","content": code(&mut rng, lines, false)}),
                        "File created successfully at: /home/dev/project/src/new_module.rs"
                            .to_owned(),
                    )
                }
            };
            push(
                &mut out,
                assistant(json!({"type":"tool_use","id":tool_id,"name":name,"input":input})),
            );
            let is_error = rng.chance(5);
            push(
                &mut out,
                json!({"type":"user","message":{"role":"user","content":[{"tool_use_id":tool_id,"type":"tool_result","content":result,"is_error":is_error}]},"parent_tool_use_id":null,"session_id":session,"uuid":format!("r{turn}")}),
            );
            if turn.is_multiple_of(300) {
                push(
                    &mut out,
                    json!({"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1_755_806_400,"rateLimitType":"five_hour"},"session_id":session}),
                );
            }
        }
        push(
            &mut out,
            json!({"type":"result","subtype":"success","is_error":false,"duration_ms":3_600_000,"num_turns":turn,"result":"Done.","session_id":session,"total_cost_usd":42.5,"usage":{"input_tokens":1000,"cache_creation_input_tokens":100_000,"cache_read_input_tokens":9_000_000,"output_tokens":400_000}}),
        );
        out
    }

    #[test]
    #[ignore = "benchmark: cargo test --release --lib agent::stream -- --ignored --nocapture"]
    fn throughput_report() {
        use std::time::Instant;
        let data = bench_stream(100 << 20);
        let path = std::env::temp_dir().join("clowder_stream_bench.jsonl");
        std::fs::write(&path, &data).unwrap();
        let mb = data.len() as f64 / 1e6;
        let lines = data.iter().filter(|b| **b == b'\n').count();
        println!("input: {} ({mb:.1} MB, {lines} lines)", path.display());

        let best = |label: &str, f: &dyn Fn() -> usize| {
            let mut times = Vec::new();
            let mut produced = 0;
            for _ in 0..3 {
                let start = Instant::now();
                produced = f();
                times.push(start.elapsed().as_secs_f64());
            }
            let t = times.iter().copied().fold(f64::INFINITY, f64::min);
            println!(
                "{label}: best of 3 {t:.3} s = {:.0} MB/s ({produced} out)",
                mb / t
            );
        };
        best("StreamParser, 256 KiB chunks", &|| {
            let mut parser = StreamParser::new(AgentFormat::Auto);
            let mut rendered = 0;
            for chunk in data.chunks(256 * 1024) {
                rendered += parser.feed(chunk).len();
            }
            rendered += parser.finish().len();
            assert_eq!(parser.stats().json_lines as usize, lines);
            rendered
        });
        best("StreamParser, 4 KiB chunks", &|| {
            let mut parser = StreamParser::new(AgentFormat::Auto);
            let mut rendered = 0;
            for chunk in data.chunks(4096) {
                rendered += parser.feed(chunk).len();
            }
            rendered + parser.finish().len()
        });
        best("serde_json::Value per line (baseline)", &|| {
            data.split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice::<serde_json::Value>(l).map_or(0, |_| 1))
                .sum()
        });
        let mut parser = StreamParser::new(AgentFormat::Auto);
        parser.feed(&data);
        parser.finish();
        let s = parser.stats();
        println!(
            "stats: turns {} tool calls {} errors {} cost {:?} lines {}",
            s.turns, s.tool_calls, s.tool_errors, s.cost_usd, s.lines
        );
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}

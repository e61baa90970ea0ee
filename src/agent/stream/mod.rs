//! Live reading of an agent's output stream: display lines, session statistics
//! and, for the supervisor, the session's classification, from one decode of
//! each line.
//!
//! While a session runs, the supervisor and the control room each read the
//! session's output file and hand every new chunk of bytes to a
//! [`StreamParser`]. The parser turns Claude Code `--output-format stream-json`
//! events, Codex `exec --json` events or plain terminal text into short, safe
//! display lines ([`Rendered`]), keeps running [`SessionStats`] (turns, tool
//! calls, tokens, cost, the final result) and hands each decoded event to the
//! classifier when one is attached ([`StreamParser::classify_with`]).
//!
//! Design points, each forced by what agents actually write:
//! - Chunks arrive at arbitrary byte boundaries, so partial lines are buffered;
//!   the result never depends on how the bytes were split.
//! - One line can be many megabytes (a tool result holding a whole file, a base64
//!   image). The pending line is capped at 1 MiB; a longer JSON line is still
//!   read from its kept start, with whatever the cut left open closed, so the
//!   event keeps its kind and id and the line is counted.
//! - Agent output is untrusted terminal content. Every displayed string is
//!   stripped of control characters and escape sequences (only colour SGR
//!   survives, and only on plain text lines), so nothing the agent printed can
//!   move the cursor, retitle the terminal or hide text.
//! - Each format has one decoder (see `DECODERS`) that turns a line into a
//!   typed event with serde_json: strings are borrowed from the line where they
//!   need no unescaping, and tool inputs and results stay `RawValue`s, decoded
//!   only when they are shown.
//! - Formats change between agent versions: unknown event types and fields are
//!   skipped, values of unexpected types are treated as absent, and nothing here
//!   ever fails or panics on any input.

use std::borrow::Cow;
use std::collections::BTreeMap;

// Every event of a stream looks an id up: a fast hasher (still seeded per
// process) is a measurable part of reading a line.
use foldhash::{HashMap, HashSet};

use memchr::memmem;
use serde_json::value::RawValue;

/// Longest part of one line kept in memory; the rest of a longer line is dropped.
#[cfg(test)]
const MAX_PENDING_BYTES: usize = super::lines::MAX_LINE_BYTES;

/// Cap for texts kept in [`SessionStats`] (they end up in status files).
const MAX_STATS_TEXT_BYTES: usize = 4 * 1024;

/// Non-empty lines after which a stream with no JSON object is taken for text.
const AUTO_DETECT_LINES: u32 = 20;

/// JSON object lines, none of a known format, after which the stream is said
/// to be in a format clowder does not recognise (Codex before 0.44 wrote
/// `{"id":…,"msg":{…}}` lines); a shorter stream is judged at its end.
const UNRECOGNISED_FORMAT_LINES: u64 = 5;

/// Why an agent that writes the JSON lines of Codex before 0.44 is stopped:
/// its errors (a rejected key, a rate limit, a server error) cannot be read.
const LEGACY_CODEX_NOTICE: &str = "the agent writes the JSON lines of Codex before 0.44 ({\"id\":…,\"msg\":{…}}), which clowder does not read: its errors (a rejected key, a rate limit, a server error) would go unseen — run Codex 0.44 or later";

/// What the screen says, once, of a stream it cannot read.
pub const UNRECOGNISED_FORMAT_NOTICE: &str = "⚠ clowder does not recognise this agent's output format: turns, tokens and cost are not counted";

/// Display lines produced from one text block; a pasted log of thousands of
/// lines would otherwise flood the output pane.
const MAX_LINES_PER_BLOCK: usize = 1000;

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
    /// Full content for "expand" (tool input pretty-printed + its result; capped at 64 KiB), if any; built on first use.
    ///
    /// A `ToolCall` carries its input and the matching `ToolResult` (same
    /// `tool_use_id`) carries the output. Newlines and tabs are kept; other
    /// control characters and all escape sequences are removed.
    pub detail: Option<Detail>,
    /// Ties a ToolCall to its ToolResult.
    pub tool_use_id: Option<String>,
    pub is_error: bool,
}

/// What a [`Rendered`] line shows.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
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
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
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
    /// Rate-limit events passed by paying for overage (not limits).
    pub overage_events: u64,
    /// Tokens per model (subagents' models included), Claude only.
    pub tokens_by_model: BTreeMap<String, ModelTokens>,
    /// Every line, empty ones and a final line without newline included.
    pub lines: u64,
    /// Lines read as JSON objects (not counted once the format is `Text`).
    pub json_lines: u64,
    /// The stream's ending was read (Claude's `result`, Codex's `turn.completed`):
    /// without it, turns and tokens are unknown.
    pub ended: bool,
    /// The stream holds JSON objects but no event of a format clowder reads:
    /// nothing in it is counted (see [`UNRECOGNISED_FORMAT_NOTICE`]).
    pub unrecognised_format: bool,
    /// The agent did something: a result, a tool call, or output past its
    /// start-up lines (a model message, a Codex item other than a warning).
    /// A session killed after its init line alone did nothing.
    pub acted: bool,
}

/// One model's tokens in a session.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(default)]
pub struct ModelTokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
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
    /// The unfinished line (at most MAX_PENDING_BYTES of it).
    pending: LineSplitter,
    /// While `Auto`: non-empty lines seen, and whether one was a JSON object.
    auto_lines: u32,
    auto_saw_object: bool,
    /// The line being handled was cut at MAX_PENDING_BYTES (details say so).
    line_cut: bool,
    /// JSON object lines of a known event type, and of none; lines of text
    /// in a stream not (yet) known to be text.
    known_objects: u64,
    unknown_objects: u64,
    text_lines: u64,
    stats: SessionStats,
    claude: ClaudeState,
    codex: CodexState,
    /// See [`StreamParser::watch_final_text`].
    watched: Option<String>,
    watched_in_final: bool,
    /// The stream is in a format no agent clowder supports writes (Codex
    /// before 0.44): why, for [`StreamParser::agent_error`].
    unsupported: Option<&'static str>,
    /// Tool calls not yet taken, when recording (see [`StreamParser::record_tool_calls`]).
    tool_call_log: Option<Vec<ToolCallSig>>,
    /// Display lines are wanted (false: statistics only, see
    /// [`StreamParser::statistics_only`]).
    render: bool,
    /// Classification of the same lines, from the same events (see
    /// [`StreamParser::classify_with`]).
    classifier: Option<Scanner<std::sync::Arc<Detectors>>>,
}

#[derive(Debug, Default)]
struct ClaudeState {
    /// Last usage seen per assistant message id, and the invocation the
    /// message belongs to: Claude Code splits one API message over several
    /// lines that all repeat the same usage.
    usage_by_message: HashMap<String, (usize, Usage)>,
    /// Sum of every invocation's messages, kept current so no event re-sums
    /// the map.
    summed: Usage,
    /// One entry per `session_id` met in the file: a resumed session or a
    /// wrapper running `claude` several times writes several invocations to
    /// one output file. A resumed session's cost and tokens are reported as
    /// running totals, so within one `session_id` the largest report counts;
    /// different ones add up.
    parts: Vec<Invocation>,
    /// Index in `parts` of the invocation being read.
    current: usize,
    /// One entry per run of the agent (each starts with an `init` line): a
    /// resumed session is a new run of the same `session_id`, whose turns
    /// and duration are its own, added to the earlier runs'.
    runs: Vec<Run>,
    /// tool_use ids already shown and counted.
    seen_tool_uses: HashSet<String>,
}

/// What one `session_id` reported.
#[derive(Debug, Default)]
struct Invocation {
    id: String,
    /// The model its init line named.
    main: Option<String>,
    /// Usage per model, from the assistant messages (subagents included).
    by_model: BTreeMap<String, Usage>,
    /// The largest usage a result line reported: the main model's only.
    result_usage: Option<Usage>,
    /// Usage per model as the result's `modelUsage` reported it.
    result_by_model: BTreeMap<String, Usage>,
    cost: Option<f64>,
}

/// What one run of the agent (from its `init` line on) reported.
#[derive(Debug, Default)]
struct Run {
    /// Its `init` line was read (lines before it belong to it too).
    started: bool,
    /// Assistant messages read.
    messages: u64,
    /// The largest `num_turns` its results reported.
    result_turns: Option<u64>,
    duration_ms: Option<u64>,
    /// A result line was read.
    ended: bool,
}

impl Run {
    fn turns(&self) -> u64 {
        self.result_turns.unwrap_or(self.messages)
    }
}

impl Invocation {
    /// Per model: what a result reported (it is exact), else what the
    /// messages added up to. A result's plain `usage` is the main model's only.
    fn tokens_by_model(&self, main: Option<&str>) -> BTreeMap<String, Usage> {
        let mut all = self.by_model.clone();
        for (model, usage) in &self.result_by_model {
            all.insert(model.clone(), *usage);
        }
        let main = self.main.as_deref().or(main).map(model_key);
        if let (Some(usage), Some(main)) = (self.result_usage, main)
            && !self.result_by_model.contains_key(main)
        {
            all.insert(main.to_owned(), usage);
        }
        all
    }

    /// The invocation's tokens, every model's: subagents' tokens stay counted
    /// when the result (the main model's) arrives.
    fn total_usage(&self, main: Option<&str>) -> Usage {
        let reported = self.result_usage.is_some() || !self.result_by_model.is_empty();
        match self.main.as_deref().or(main) {
            Some(_) if reported => self
                .tokens_by_model(main)
                .into_values()
                .fold(Usage::default(), Usage::plus),
            _ => self.result_usage.unwrap_or_else(|| {
                self.by_model
                    .values()
                    .copied()
                    .fold(Usage::default(), Usage::plus)
            }),
        }
    }
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

/// A model id without its bracketed variant: `claude-opus-4-6[1m]` (the 1M
/// context window, as the init line and `modelUsage` name it) and
/// `claude-opus-4-6` (as the messages name it) are one model.
pub(crate) fn model_key(name: &str) -> &str {
    match name
        .strip_suffix(']')
        .and_then(|n| n.rfind('[').map(|at| &n[..at]))
    {
        Some(base) if !base.is_empty() => base,
        _ => name,
    }
}

impl ClaudeState {
    /// The invocation of `session_id` (a line without one belongs to the
    /// current invocation), made current.
    fn enter(&mut self, session_id: Option<&str>) -> &mut Invocation {
        if self.parts.is_empty() {
            self.parts.push(Invocation::default());
        }
        if let Some(id) = session_id.filter(|id| !id.is_empty())
            && self.parts[self.current].id != id
        {
            if self.parts[self.current].id.is_empty() {
                id.clone_into(&mut self.parts[self.current].id);
            } else if let Some(at) = self.parts.iter().position(|p| p.id == id) {
                self.current = at;
            } else {
                self.parts.push(Invocation {
                    id: id.to_owned(),
                    ..Invocation::default()
                });
                self.current = self.parts.len() - 1;
            }
        }
        &mut self.parts[self.current]
    }

    fn part(&mut self) -> &mut Invocation {
        self.enter(None)
    }

    /// The run being read.
    fn run(&mut self) -> &mut Run {
        if self.runs.is_empty() {
            self.runs.push(Run::default());
        }
        let last = self.runs.len() - 1;
        &mut self.runs[last]
    }

    /// An `init` line: the agent starts (again). True when it begins a run
    /// after an earlier one.
    fn start_run(&mut self) -> bool {
        let run = self.run();
        if !run.started {
            run.started = true;
            return false;
        }
        self.runs.push(Run {
            started: true,
            ..Run::default()
        });
        true
    }

    /// Whether the last run's result was read: an earlier run's does not
    /// stand for one cut short.
    fn ended(&self) -> bool {
        self.runs.last().is_some_and(|run| run.ended)
    }

    /// Per model, summed over the invocations.
    fn tokens_by_model(&self, main: Option<&str>) -> BTreeMap<String, ModelTokens> {
        // Nearly every file holds one invocation: nothing to add up.
        if let [only] = self.parts.as_slice() {
            return only
                .tokens_by_model(main)
                .into_iter()
                .map(|(model, usage)| (model, ModelTokens::from(usage)))
                .collect();
        }
        let mut all: BTreeMap<String, Usage> = BTreeMap::new();
        for part in &self.parts {
            for (model, usage) in part.tokens_by_model(main) {
                let sum = all.entry(model).or_default();
                *sum = sum.plus(usage);
            }
        }
        all.into_iter()
            .map(|(model, usage)| (model, ModelTokens::from(usage)))
            .collect()
    }

    /// The file's tokens: each invocation's, added.
    fn total_usage(&self, main: Option<&str>) -> Usage {
        self.parts
            .iter()
            .map(|part| part.total_usage(main))
            .fold(Usage::default(), Usage::plus)
    }

    fn turns(&self) -> u64 {
        self.runs.iter().map(Run::turns).sum()
    }

    /// Sum of the invocations' costs; unknown when none reported one, or
    /// when the last run has not reported yet (a run cut short spent what
    /// nobody knows).
    fn cost(&self) -> Option<f64> {
        if !self.ended() {
            return None;
        }
        self.parts
            .iter()
            .filter_map(|p| p.cost)
            .fold(None, |sum, c| Some(sum.unwrap_or(0.0) + c))
    }

    fn duration_ms(&self) -> Option<u64> {
        self.runs
            .iter()
            .filter_map(|p| p.duration_ms)
            .fold(None, |sum, d| Some(sum.unwrap_or(0u64).saturating_add(d)))
    }
}

impl From<Usage> for ModelTokens {
    fn from(u: Usage) -> Self {
        ModelTokens {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
        }
    }
}

impl From<ModelTokens> for Usage {
    fn from(t: ModelTokens) -> Self {
        Usage {
            input: t.input,
            output: t.output,
            cache_read: t.cache_read,
            cache_write: t.cache_write,
        }
    }
}

impl Usage {
    fn plus(self, other: Usage) -> Usage {
        Usage {
            input: self.input.saturating_add(other.input),
            output: self.output.saturating_add(other.output),
            cache_read: self.cache_read.saturating_add(other.cache_read),
            cache_write: self.cache_write.saturating_add(other.cache_write),
        }
    }

    /// Field by field, the larger of two reports of the same session.
    fn max(self, other: Usage) -> Usage {
        Usage {
            input: self.input.max(other.input),
            output: self.output.max(other.output),
            cache_read: self.cache_read.max(other.cache_read),
            cache_write: self.cache_write.max(other.cache_write),
        }
    }

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
            pending: LineSplitter::default(),
            auto_lines: 0,
            auto_saw_object: false,
            line_cut: false,
            known_objects: 0,
            unknown_objects: 0,
            text_lines: 0,
            stats: SessionStats::default(),
            claude: ClaudeState::default(),
            codex: CodexState::default(),
            watched: None,
            watched_in_final: false,
            unsupported: None,
            tool_call_log: None,
            render: true,
            classifier: None,
        }
    }

    /// A parser that keeps the statistics (and the tool-call log and the final
    /// text) but does not build display lines: what the supervisor reads with.
    /// Its statistics are those of a rendering parser fed the same bytes.
    pub fn statistics_only(format: AgentFormat) -> Self {
        Self {
            render: false,
            ..Self::new(format)
        }
    }

    /// Whether [`StreamParser::feed`] builds display lines from now on (a
    /// reader far behind the writer builds only those the screen may show).
    /// The statistics do not change with it.
    pub fn set_rendering(&mut self, on: bool) {
        self.render = on;
    }

    /// Classify the session from the lines as they are read (rate limits,
    /// transient and fatal errors, commit patterns), each line decoded once
    /// for this and the statistics; the result is [`StreamParser::take_scan`].
    pub fn classify_with(&mut self, detectors: std::sync::Arc<Detectors>) {
        self.classifier = Some(Scanner::new(detectors));
    }

    /// The agent's own retry of a failed request, if its last lines are one
    /// (`None` unless [`StreamParser::classify_with`] was called).
    pub fn agent_retrying(&self) -> Option<crate::agent::Retrying> {
        self.classifier.as_ref().and_then(Scanner::retrying)
    }

    /// Why the agent cannot work (it cannot authenticate or pay), once its
    /// lines read so far say so (`None` unless [`StreamParser::classify_with`]
    /// was called): retrying will not help.
    pub fn agent_error(&self) -> Option<&str> {
        self.classifier
            .as_ref()
            .and_then(Scanner::fatal)
            .or(self.unsupported)
    }

    /// Why the agent is not one clowder can run: its output is in the
    /// format of Codex before 0.44.
    pub fn unsupported(&self) -> Option<&'static str> {
        self.unsupported
    }

    /// The classification of everything fed, after [`StreamParser::finish`];
    /// `None` unless [`StreamParser::classify_with`] was called.
    pub fn take_scan(&mut self) -> Option<OutputScan> {
        self.classifier.take().map(Scanner::finish)
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

    fn log_tool_call(&mut self, name: &str, summary: &str, input: Option<&RawValue>) {
        if let Some(log) = &mut self.tool_call_log {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            match input {
                Some(input) => decode::hash_canonical(input, &mut hasher),
                None => std::hash::Hash::hash(&0u8, &mut hasher),
            }
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
        let mut lines = std::mem::take(&mut self.pending);
        lines.feed(bytes, |line, cut| self.process_line(line, cut, &mut out));
        self.pending = lines;
        out
    }

    /// End of session: flush a partial last line.
    pub fn finish(&mut self) -> Vec<Rendered> {
        let mut out = Vec::new();
        let mut lines = std::mem::take(&mut self.pending);
        lines.finish(|line, cut| self.process_line(line, cut, &mut out));
        self.pending = lines;
        if self.unknown_objects > 0 {
            self.judge_format(true, &mut out);
        }
        out
    }

    /// Counts one JSON object line as of a known event type or not, and says
    /// once when a stream has shown none of a known one (`at_end`: nothing
    /// more will come).
    fn note_object(&mut self, known: bool, out: &mut Vec<Rendered>) {
        if known {
            self.known_objects += 1;
        } else {
            self.unknown_objects += 1;
            self.judge_format(false, out);
        }
    }

    fn judge_format(&mut self, at_end: bool, out: &mut Vec<Rendered>) {
        // A text agent that prints the odd JSON line writes text.
        let enough = (at_end || self.unknown_objects >= UNRECOGNISED_FORMAT_LINES)
            && self.unknown_objects >= self.text_lines;
        if self.stats.unrecognised_format || self.known_objects > 0 || !enough {
            return;
        }
        self.stats.unrecognised_format = true;
        out.push(line(LineKind::Error, UNRECOGNISED_FORMAT_NOTICE.to_owned()).with_error(true));
    }

    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Whether the agent did something ([`SessionStats::acted`]), when the
    /// stream can tell: `None` for text, for a format clowder does not read,
    /// and for a stream with no event of its format.
    pub fn acted(&self) -> Option<bool> {
        let structured = matches!(
            self.format,
            AgentFormat::ClaudeStreamJson | AgentFormat::CodexJson
        );
        (structured && self.known_objects > 0 && !self.stats.unrecognised_format)
            .then_some(self.stats.acted)
    }

    /// Auto resolves on the first JSON object line (Claude: has "type" among system/assistant/user/result/rate_limit_event...; Codex: type like "thread.started"/"turn.started"/"item.*"); a stream with no JSON object in its first 20 non-empty lines is Text.
    ///
    /// A JSON object whose `type` belongs to neither format does not resolve
    /// the format; it is skipped like any unknown event.
    pub fn format(&self) -> AgentFormat {
        self.format
    }

    fn process_line(&mut self, raw: &[u8], truncated: bool, out: &mut Vec<Rendered>) {
        let wanted = match &mut self.classifier {
            Some(classifier) => classifier.needs_event(raw, truncated),
            None => None,
        };
        self.stats.lines += 1;
        self.line_cut = truncated;
        let kept = if truncated {
            raw
        } else {
            raw.strip_suffix(b"\r").unwrap_or(raw)
        };
        if self.carries_no_statistics(kept, truncated) {
            // Not even checked for UTF-8: most of a stream's bytes are here.
            self.stats.json_lines += 1;
            if let (Some(body), Some(classifier)) = (wanted, &mut self.classifier) {
                classifier.on_event(body, serde_json::from_slice(body).as_ref());
            }
            return;
        }
        let text = decode_utf8(kept, truncated);
        let decoded = self.read_line(&text, truncated, out);
        if let (Some(body), Some(classifier)) = (wanted, &mut self.classifier) {
            // The event read for the screen and the statistics, if the line
            // was read as written (not repaired UTF-8); else the rules' own.
            match decoded.filter(|_| matches!(text, Cow::Borrowed(_))) {
                Some(event) => classifier.on_event(body, event.as_ref()),
                None => classifier.on_event(body, serde_json::from_slice(body).as_ref()),
            }
        }
    }

    /// Display lines and statistics of one line; what classification needs
    /// of it when it was decoded whole.
    fn read_line<'t>(
        &mut self,
        text: &'t str,
        truncated: bool,
        out: &mut Vec<Rendered>,
    ) -> Option<serde_json::Result<Signals<'t>>> {
        let line = text.strip_prefix('\u{feff}').unwrap_or(text);
        if self.format == AgentFormat::Text {
            out.push(plain(line));
            return None;
        }
        let body = line.trim_matches(is_json_ws);
        if body.is_empty() {
            return None;
        }
        if self.format == AgentFormat::Auto {
            self.auto_lines = self.auto_lines.saturating_add(1);
        }
        if !body.starts_with('{') {
            self.plain_line(line, out);
            return None;
        }
        if truncated {
            // A line cut at the cap is read from its kept start, closed.
            let read = decode::close_cut(body).is_some_and(|closed| {
                let event = self.decode_object(&closed, out);
                event.is_ok()
            });
            if read {
                self.stats.json_lines += 1;
            } else {
                self.plain_line(line, out);
            }
            return None;
        }
        let event = self.decode_object(body, out);
        if event.is_ok() {
            self.stats.json_lines += 1;
        } else {
            self.plain_line(line, out);
        }
        Some(event)
    }

    /// A line that is not a JSON object: shown as text, and in `Auto`, one
    /// more sign that the whole stream is text.
    fn plain_line(&mut self, line: &str, out: &mut Vec<Rendered>) {
        out.push(plain(line));
        self.text_lines += 1;
        if self.format == AgentFormat::CodexJson {
            self.codex_log_line(line);
        }
        if self.format == AgentFormat::Auto
            && self.auto_lines >= AUTO_DETECT_LINES
            && !self.auto_saw_object
        {
            self.format = AgentFormat::Text;
        }
    }

    /// Without display lines, a Claude `user` line (tool results, mostly the bulk
    /// of the bytes) counts only through its `is_error: true` flags: one that
    /// has none need not be read. Claude Code writes `type` first; any other
    /// shape is read in full.
    fn carries_no_statistics(&self, line: &[u8], truncated: bool) -> bool {
        if self.render
            || truncated
            || self.format != AgentFormat::ClaudeStreamJson
            || self.stats.agent_session_id.is_none()
        {
            return false;
        }
        let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
        let is_ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        let start = line.iter().position(|b| !is_ws(b)).unwrap_or(line.len());
        let end = line
            .iter()
            .rposition(|b| !is_ws(b))
            .map_or(start, |i| i + 1);
        let body = &line[start..end];
        body.starts_with(br#"{"type":"user","#)
            // A line cut short (the agent killed mid-write) is not an object.
            && body.ends_with(b"}")
            && !may_flag_an_error(body)
    }

    /// Hands a JSON object's text to its format's decoder (in `Auto`, to the
    /// one that owns its `type`, if any).
    fn decode_object<'t>(
        &mut self,
        object: &'t str,
        out: &mut Vec<Rendered>,
    ) -> serde_json::Result<Signals<'t>> {
        let decoder = DECODERS.iter().find(|d| d.format == self.format);
        if let Some(decoder) = decoder {
            let event = (decoder.decode)(self, object, out);
            if let Ok(event) = &event {
                let known = event.kind.str().is_some_and(decoder.owns);
                if event.kind.str().is_none() {
                    self.note_legacy_codex(object);
                }
                self.note_object(known, out);
            }
            return event;
        }
        // `Auto`: the event's `type` tells the format.
        let event = serde_json::from_str::<Signals<'t>>(object)?;
        self.auto_saw_object = true;
        if event.kind.str().is_none() {
            self.note_legacy_codex(object);
        }
        let owner = event
            .kind
            .str()
            .and_then(|kind| DECODERS.iter().find(|d| (d.owns)(kind)));
        // An object of neither format is skipped like an unknown event.
        if let Some(decoder) = owner {
            self.format = decoder.format;
            // Its classification fields are those just read.
            let _ = (decoder.decode)(self, object, out);
        }
        self.note_object(owner.is_some(), out);
        Ok(event)
    }

    /// Detail text of a shown value: sanitised, capped, and marked when either
    /// the value or the line it came from was cut.
    fn detail<'t>(&self, text: impl Into<Cow<'t, str>>, complete: bool) -> Option<Detail> {
        let text = text.into();
        if text.trim().is_empty() {
            return None;
        }
        Some(Detail::text(text.into_owned(), complete && !self.line_cut))
    }
}

/// A line of Codex before 0.44: `{"id":"1","msg":{"type":"task_started"}}`.
#[derive(serde::Deserialize)]
struct LegacyCodexLine<'a> {
    #[serde(borrow)]
    #[allow(dead_code)]
    id: &'a RawValue,
    #[serde(borrow)]
    msg: LegacyCodexMsg<'a>,
}

#[derive(serde::Deserialize)]
struct LegacyCodexMsg<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

impl StreamParser {
    /// An object without `type` in the shape of Codex before 0.44 marks the
    /// agent as unsupported.
    fn note_legacy_codex(&mut self, object: &str) {
        if self.unsupported.is_some() || self.known_objects > 0 {
            return;
        }
        if serde_json::from_str::<LegacyCodexLine<'_>>(object).is_ok_and(|l| !l.msg.kind.is_empty())
        {
            self.unsupported = Some(LEGACY_CODEX_NOTICE);
        }
    }
}

/// Whether some `"is_error"` key (a quoted one inside a string is escaped, so
/// never matches) is followed by `true`.
fn may_flag_an_error(body: &[u8]) -> bool {
    memmem::find_iter(body, br#""is_error""#).any(|at| {
        let rest = &body[at + br#""is_error""#.len()..];
        let value = rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b':'))
            .map_or(&[][..], |i| &rest[i..]);
        value.starts_with(b"true")
    })
}

mod claude;
mod codex;
use super::decode;
mod detail;
mod render;

pub use detail::Detail;

use super::classify::{Detectors, OutputScan, Scanner, Signals};
use super::lines::LineSplitter;
use super::text::*;
use render::*;

/// How one format's lines are read.
struct Decoder {
    format: AgentFormat,
    /// Whether an event `type` belongs to the format (how `Auto` decides).
    owns: fn(&str) -> bool,
    /// Reads one line holding a JSON object: display lines and statistics,
    /// and what classification reads of the event.
    decode: for<'a> fn(
        &mut StreamParser,
        &'a str,
        &mut Vec<Rendered>,
    ) -> serde_json::Result<Signals<'a>>,
}

/// The JSON formats, each with its decoder: a new format is one new file
/// (its event types, `owns` and `decode`) and one line here. Plain text needs
/// no decoder: every line is shown as it is.
const DECODERS: &[Decoder] = &[
    Decoder {
        format: AgentFormat::ClaudeStreamJson,
        owns: claude::owns,
        decode: claude::decode,
    },
    Decoder {
        format: AgentFormat::CodexJson,
        owns: codex::owns,
        decode: codex::decode,
    },
];

fn is_json_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

#[cfg(test)]
mod tests;

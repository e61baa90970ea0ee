//! `harness.toml`: the serde structs, the compiled defaults, command-line overrides
//! and validation.
//!
//! Every key is optional. Values are checked while they are deserialized, so that a
//! bad value is reported with the file, line, column and dotted key where it stands.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod duplicate;
mod files;
mod fleet;
mod hosts;
mod located;
pub mod preflight;
mod reviewer;
pub mod schema;
mod signals;
mod ui;
mod values;
mod wait;
mod worker;

pub use fleet::FleetConfig;
pub use hosts::HostEntry;
pub(crate) use located::{line_column, parse_located};
pub use reviewer::{OnUnreachable, ReviewerApi, ReviewerConfig, ReviewerMode};
pub use signals::{SignalsConfig, Sigterm};
pub use ui::{Notify, UiConfig, valid_http_url};
pub use values::*;
use values::{deserialize_count_u32, deserialize_count_u64, positive_duration};
pub use wait::Wait;
pub use worker::WorkerConfig;

/// Where approval requests wait, relative to the working directory.
pub const DEFAULT_APPROVALS_DIR: &str = ".clowder/approvals";

/// The file read when `--config` is not given. A missing default file means
/// "all defaults"; a missing file named with `--config` is an error.
pub const DEFAULT_CONFIG_FILE: &str = "harness.toml";

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub session: SessionConfig,
    pub agent: AgentConfig,
    pub watchdog: WatchdogConfig,
    pub retry: RetryConfig,
    pub backoff: BackoffConfig,
    pub shutdown: ShutdownConfig,
    pub signals: SignalsConfig,
    pub hooks: HooksConfig,
    pub prompt: PromptConfig,
    pub output: OutputConfig,
    pub detect: DetectConfig,
    pub completion: CompletionConfig,
    pub approvals: ApprovalsConfig,
    pub guard: GuardConfig,
    pub worker: WorkerConfig,
    pub fleet: FleetConfig,
    pub ui: UiConfig,
    /// `[[hosts]]`: the hosts `clowder attach` opens one room over.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostEntry>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    pub max_iterations: PositiveCount,
    pub prompt_file: NonEmptyPath,
    pub output_dir: NonEmptyPath,
    /// Output files are `{output_dir}/{output_prefix}-{global}.jsonl`; unset,
    /// the prefix is named after the agent (see [`SessionConfig::output_prefix`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_prefix: Option<FileStem>,
    pub counter_file: NonEmptyPath,
}

impl SessionConfig {
    /// The output files' prefix: `session.output_prefix`, else
    /// `{agent}-iteration` after the agent command's file name (a script's
    /// extension dropped), so `claude` keeps the `claude-iteration-N.jsonl`
    /// of the shell loops and `codex` writes `codex-iteration-N.jsonl`.
    pub fn output_prefix(&self, agent: &AgentConfig) -> String {
        match &self.output_prefix {
            Some(prefix) => prefix.0.clone(),
            None => format!("{}-iteration", agent_name(&agent.command.0)),
        }
    }
}

/// An agent command's name for file names: its last path component without
/// an extension of letters (`fake-agent.sh` → `fake-agent`, `codex-0.101`
/// stays), `agent` when nothing is left.
fn agent_name(command: &str) -> String {
    let base = command.rsplit('/').next().unwrap_or(command).trim();
    let stem = match base.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && !ext.is_empty()
                && ext.chars().all(|c| c.is_ascii_alphabetic()) =>
        {
            stem
        }
        _ => base,
    };
    if stem.is_empty() || stem.contains('\0') {
        "agent".to_owned()
    } else {
        stem.to_owned()
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_iterations: PositiveCount(25),
            prompt_file: NonEmptyPath::from("PROMPT.md"),
            output_dir: NonEmptyPath::from("."),
            output_prefix: None,
            counter_file: NonEmptyPath::from(".iteration_counter"),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    pub command: NonEmptyString,
    pub args: Vec<String>,
    /// How to read the agent's output: `auto`, `claude-stream-json`, `codex-json` or `text`.
    pub format: crate::agent::stream::AgentFormat,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            command: NonEmptyString("claude".into()),
            args: [
                "-p",
                "{prompt}",
                "--dangerously-skip-permissions",
                "--verbose",
                "--output-format",
                "stream-json",
            ]
            .map(String::from)
            .to_vec(),
            format: crate::agent::stream::AgentFormat::Auto,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogConfig {
    pub check_interval_secs: PositiveSeconds,
    pub stale_timeout_mins: PositiveMinutes,
    #[serde(deserialize_with = "deserialize_count_u64")]
    pub min_output_bytes: u64,
    pub kill_grace_secs: PositiveSeconds,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        Self {
            check_interval_secs: PositiveSeconds(Duration::from_secs(60)),
            stale_timeout_mins: PositiveMinutes(Duration::from_secs(20 * 60)),
            min_output_bytes: 100,
            kill_grace_secs: PositiveSeconds(Duration::from_secs(5)),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    #[serde(deserialize_with = "deserialize_count_u32")]
    pub max_empty_retries: u32,
    pub retry_delay_secs: Seconds,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_empty_retries: 2,
            retry_delay_secs: Seconds(Duration::from_secs(5)),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BackoffConfig {
    pub initial_delay_secs: Seconds,
    pub max_delay_secs: Seconds,
    pub max_consecutive_rate_limits: PositiveCount,
    /// Sessions in a row that may end in a transient server error (5xx,
    /// overloaded, a dropped connection) before the loop gives up.
    pub max_consecutive_errors: PositiveCount,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial_delay_secs: Seconds(Duration::from_secs(2)),
            max_delay_secs: Seconds(Duration::from_secs(600)),
            max_consecutive_rate_limits: PositiveCount(5),
            max_consecutive_errors: PositiveCount(10),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    pub stop_file: NonEmptyPath,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            stop_file: NonEmptyPath::from("STOP"),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    pub pre_session: Vec<NonEmptyString>,
    pub post_session: Vec<NonEmptyString>,
    /// A hook still running after this long has its process group killed and counts as failed.
    pub timeout_secs: PositiveSeconds,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            pre_session: Vec::new(),
            post_session: Vec::new(),
            timeout_secs: PositiveSeconds(Duration::from_secs(300)),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PromptConfig {
    /// Alias of `session.prompt_file`; wins over it when both are set.
    pub file: Option<NonEmptyPath>,
    pub prepend_commands: Vec<NonEmptyString>,
    /// Used from the second session of a run on (see `continuation_mode`);
    /// `""`: nothing.
    pub continuation: String,
    /// `prepend`: the continuation goes before the prompt; `replace`: it is sent
    /// instead of the prompt.
    pub continuation_mode: ContinuationMode,
    /// A JSON handoff the agent leaves for the next session (`phase`, `completed`,
    /// `next_step`, `critical_files`, `memory_notes`); `""` turns this off.
    pub handoff_file: PathBuf,
}

/// How `[prompt] continuation` combines with the prompt file.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContinuationMode {
    #[default]
    Prepend,
    Replace,
}

impl PromptConfig {
    /// The handoff file in force, if any.
    pub fn handoff_path(&self) -> Option<&Path> {
        (!self.handoff_file.as_os_str().is_empty()).then_some(self.handoff_file.as_path())
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// `""` turns the event log off.
    pub event_log: PathBuf,
    pub status_file: NonEmptyPath,
    pub disk_recheck_secs: PositiveSeconds,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            event_log: PathBuf::from("harness-events.jsonl"),
            status_file: NonEmptyPath::from("harness.status"),
            disk_recheck_secs: PositiveSeconds(Duration::from_secs(5)),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DetectConfig {
    pub rate_limit_patterns: Vec<Pattern>,
    pub commit_patterns: Vec<Pattern>,
}

impl Default for DetectConfig {
    fn default() -> Self {
        Self {
            rate_limit_patterns: Vec::new(),
            commit_patterns: vec![Pattern("bd-finish".into())],
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CompletionConfig {
    /// A text that, found in the agent's final message of a session (Claude's
    /// `result`, Codex's last `agent_message`), ends the loop; `""` turns this off.
    pub promise: Promise,
}

impl CompletionConfig {
    /// The promise in force, if any.
    pub fn promise(&self) -> Option<&str> {
        (!self.promise.0.is_empty()).then_some(self.promise.0.as_str())
    }
}

/// The approval queue and the rules that decide without a human.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    pub dir: NonEmptyPath,
    /// How long `clowder gate` waits before denying: `90s`, `10m`, `1h`, `never`.
    pub timeout: WaitSetting,
    /// Tool calls that run without asking (deny rules are checked first).
    pub allow: Vec<Rule>,
    /// Tool calls that are refused without asking.
    pub deny: Vec<Rule>,
    /// 1–2: every session waits for approval before it starts; 3: only critical
    /// sessions (every `critical_every`-th iteration, or a prompt holding
    /// `<!-- critical -->`); 4–5: sessions start without asking.
    pub autonomy: Autonomy,
    /// With autonomy 3: every N-th iteration is critical (0: none by count).
    #[serde(deserialize_with = "deserialize_count_u64")]
    pub critical_every: u64,
    /// A model that reviews what no rule decided, before a person is asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<ReviewerConfig>,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            dir: NonEmptyPath::from(DEFAULT_APPROVALS_DIR),
            // Under the 600 s timeout of the hook `clowder init --claude-hook`
            // registers: when the hook itself times out, Claude Code runs the call.
            timeout: WaitSetting("9m".into()),
            allow: Vec::new(),
            deny: Vec::new(),
            autonomy: Autonomy(5),
            critical_every: 0,
            reviewer: None,
        }
    }
}

/// Budgets and loop detection: what stops a session, or the run, that goes too far.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GuardConfig {
    /// A session making more tool calls than this is stopped (0: no limit).
    #[serde(deserialize_with = "deserialize_count_u64")]
    pub max_tool_calls_per_session: u64,
    /// A session reporting a higher cost than this is stopped (0: no limit).
    pub max_cost_per_session_usd: Usd,
    /// The run stops when its sessions together cost this much (0: no limit).
    pub max_cost_usd: Usd,
    /// The run stops after this long: `90m`, `8h`, `1.5d`; `""`: no limit.
    pub max_runtime: OptionalDuration,
    /// The same tool call (same tool, same input) this many times in a row is a
    /// doom loop (0: off).
    pub doom_loop_threshold: DoomLoopThreshold,
    /// What a doom loop does: `kill` the session, `gate` (ask a human), `warn`.
    pub on_doom_loop: crate::protocol::DoomLoopAction,
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self {
            max_tool_calls_per_session: 0,
            max_cost_per_session_usd: Usd(0.0),
            max_cost_usd: Usd(0.0),
            max_runtime: OptionalDuration::default(),
            doom_loop_threshold: DoomLoopThreshold(3),
            on_doom_loop: crate::protocol::DoomLoopAction::Kill,
        }
    }
}

/// A policy rule: a tool (regex on the whole tool name, e.g. `Bash` or `Edit|Write`)
/// and, optionally, what it acts on: `pattern` (a regex) or `prefix` (the first
/// words of a command, or the leading components of a path). What a rule covers is
/// decided in `approvals::policy`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub tool: Pattern,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// Appends allow rules (`tool` exactly, one per prefix: the words a command
/// starts with, or a path) to `[approvals] allow` in the config file, keeping its
/// comments and layout. The result is checked like any config before it replaces
/// the file.
pub fn add_allow_rule(path: &Path, tool: &str, prefixes: &[String]) -> Result<(), String> {
    if prefixes.is_empty() {
        return Ok(());
    }
    let text = match crate::store::small_file::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|err| format!("{}: cannot edit: {err}", path.display()))?;
    let approvals = document
        .entry("approvals")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| format!("{}: `approvals` is not a table", path.display()))?;
    let allow = approvals
        .entry("allow")
        .or_insert(toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| format!("{}: `approvals.allow` is not an array", path.display()))?;
    for prefix in prefixes {
        let mut rule = toml_edit::InlineTable::new();
        rule.insert("tool", regex::escape(tool).into());
        rule.insert("prefix", prefix.as_str().into());
        allow.push(rule);
    }
    let updated = document.to_string();
    Config::parse(&updated, path).map_err(|err| format!("the new rule would not load: {err}"))?;
    crate::store::write_atomically(path, updated.as_bytes())
        .map_err(|err| format!("cannot write {}: {err}", path.display()))
}

/// Values given on the command line; each `Some` wins over the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub max_iterations: Option<u64>,
    pub prompt_file: Option<PathBuf>,
    pub output_dir: Option<PathBuf>,
    pub stale_timeout_mins: Option<f64>,
    pub max_empty_retries: Option<u32>,
}

/// A configuration problem, located as precisely as the input allows.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based line and column, when the problem is inside the file.
    pub position: Option<(usize, usize)>,
    /// Dotted key, e.g. `watchdog.stale_timeout_mins`.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads `path`. With `required == false` a missing file yields the defaults.
    pub fn load(path: &Path, required: bool) -> Result<Config, ConfigError> {
        match crate::store::small_file::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|err| ConfigError {
                    file: path.to_path_buf(),
                    position: None,
                    key: None,
                    message: format!(
                        "expected UTF-8 text, found invalid bytes at offset {}",
                        err.utf8_error().valid_up_to()
                    ),
                })?;
                Config::parse(&text, path)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && !required => {
                Ok(Config::default())
            }
            Err(err) => Err(ConfigError {
                file: path.to_path_buf(),
                position: None,
                key: None,
                message: format!("cannot read the config file: {err}"),
            }),
        }
    }

    /// Parses TOML text; `file` is only used to name the source in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        parse_located(text, file)
    }

    pub fn apply(&mut self, overrides: &Overrides) -> Result<(), String> {
        if let Some(max) = overrides.max_iterations {
            if max == 0 {
                return Err("MAX_ITERATIONS: expected a whole number of at least 1".into());
            }
            self.session.max_iterations = PositiveCount(max);
        }
        if let Some(prompt) = &overrides.prompt_file {
            self.session.prompt_file = NonEmptyPath(prompt.clone());
            self.prompt.file = None;
        }
        if let Some(dir) = &overrides.output_dir {
            self.session.output_dir = NonEmptyPath(dir.clone());
        }
        if let Some(mins) = overrides.stale_timeout_mins {
            let duration = positive_duration(mins, 60.0)
                .ok_or("--timeout: expected a positive number of minutes, such as 20 or 0.5")?;
            self.watchdog.stale_timeout_mins = PositiveMinutes(duration);
        }
        if let Some(retries) = overrides.max_empty_retries {
            self.retry.max_empty_retries = retries;
        }
        Ok(())
    }

    /// The prompt file in force: `[prompt] file` wins over `[session] prompt_file`.
    pub fn prompt_path(&self) -> &Path {
        self.prompt
            .file
            .as_ref()
            .map_or(&self.session.prompt_file.0, |file| &file.0)
    }

    pub fn event_log_path(&self) -> Option<&Path> {
        let path = self.output.event_log.as_path();
        (!path.as_os_str().is_empty()).then_some(path)
    }

    pub fn stale_timeout(&self) -> Duration {
        self.watchdog.stale_timeout_mins.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_files_are_named_after_the_agent_unless_a_prefix_is_set() {
        let prefix = |command: &str, set: Option<&str>| {
            let session = SessionConfig {
                output_prefix: set.map(|p| FileStem(p.into())),
                ..SessionConfig::default()
            };
            let agent = AgentConfig {
                command: NonEmptyString(command.into()),
                ..AgentConfig::default()
            };
            session.output_prefix(&agent)
        };
        assert_eq!(prefix("claude", None), "claude-iteration");
        assert_eq!(prefix("/usr/local/bin/claude", None), "claude-iteration");
        assert_eq!(prefix("codex", None), "codex-iteration");
        assert_eq!(prefix("./agents/run-codex.sh", None), "run-codex-iteration");
        assert_eq!(prefix("codex-0.101", None), "codex-0.101-iteration");
        assert_eq!(prefix("codex", Some("runs")), "runs");
        // A config that leaves the key out reads as unset.
        let config: Config = toml::from_str("[agent]\ncommand = \"codex\"\n").expect("config");
        assert_eq!(
            config.session.output_prefix(&config.agent),
            "codex-iteration"
        );
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("harness.toml"))
    }

    #[test]
    fn the_reference_file_holds_exactly_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("harness.toml");
        let config = Config::load(&path, true).expect("reference config parses");
        assert_eq!(config, Config::default());
    }

    #[test]
    fn an_allow_rule_is_appended_keeping_comments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("harness.toml");
        std::fs::write(&path, "# my loop\n[session]\nmax_iterations = 3 # three\n").expect("write");
        add_allow_rule(&path, "Bash", &["cargo test --all".into()]).expect("add");
        add_allow_rule(&path, "mcp__x.y", &[r#"{"pattern":"a"}"#.into()]).expect("add");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with("# my loop\n[session]\nmax_iterations = 3 # three\n"),
            "{text}"
        );
        let config = Config::parse(&text, &path).expect("valid");
        assert_eq!(config.approvals.allow.len(), 2);
        let allows = |rule: &Rule, tool: &str, input: serde_json::Value| {
            use crate::approvals::policy::{Call, Verdict, decide};
            matches!(
                decide(&Call::new(tool, Some(&input)), &[rule.policy()], &[]),
                Verdict::Allow(_)
            )
        };
        let bash = |command: &str| serde_json::json!({ "command": command });
        let rules = &config.approvals.allow;
        assert!(allows(&rules[0], "Bash", bash("cargo test --all -q")));
        assert!(!allows(&rules[0], "Bash", bash("cargo build")));
        assert!(allows(
            &rules[1],
            "mcp__x.y",
            serde_json::json!({ "pattern": "a" })
        ));
        assert!(!allows(
            &rules[1],
            "mcp__xzy",
            serde_json::json!({ "pattern": "a" })
        ));
    }

    #[test]
    fn empty_file_gives_defaults() {
        let config = parse("").expect("empty config is valid");
        assert_eq!(config, Config::default());
        assert_eq!(config.session.max_iterations.0, 25);
        assert_eq!(config.stale_timeout(), Duration::from_secs(1200));
    }

    #[test]
    fn fractional_durations_are_accepted() {
        let config = parse("[watchdog]\nstale_timeout_mins = 0.02\ncheck_interval_secs = 0.5\n")
            .expect("valid");
        assert_eq!(config.stale_timeout(), Duration::from_secs_f64(1.2));
        assert_eq!(
            config.watchdog.check_interval_secs.0,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn unknown_key_is_located() {
        let err = parse("[watchdog]\nstale_timeout = 3\n").expect_err("unknown key");
        assert_eq!(err.position, Some((2, 1)));
        assert_eq!(err.key.as_deref(), Some("watchdog.stale_timeout"));
        assert!(
            err.message.contains("unknown field `stale_timeout`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_is_located() {
        let err = parse("[session]\n\nmax_iterations = \"ten\"\n").expect_err("wrong type");
        assert_eq!(err.position, Some((3, 18)));
        assert_eq!(err.key.as_deref(), Some("session.max_iterations"));
        assert_eq!(
            err.to_string(),
            "harness.toml:3:18: key `session.max_iterations`: invalid type: string \"ten\", expected a whole number of at least 1"
        );
    }

    #[test]
    fn negative_duration_is_rejected() {
        let err = parse("[backoff]\ninitial_delay_secs = -1\n").expect_err("negative");
        assert_eq!(err.key.as_deref(), Some("backoff.initial_delay_secs"));
        assert!(err.message.contains("zero or more"), "{err}");
    }

    #[test]
    fn bad_regex_is_rejected() {
        let err = parse("[detect]\nrate_limit_patterns = [\"(unclosed\"]\n").expect_err("regex");
        assert_eq!(err.key.as_deref(), Some("detect.rate_limit_patterns[0]"));
        assert_eq!(err.position.map(|p| p.0), Some(2));
    }

    #[test]
    fn completion_promise_is_off_by_default_and_checked() {
        assert_eq!(Config::default().completion.promise(), None);
        let config = parse("[completion]\npromise = \"TASK_COMPLETE\"\n").expect("valid");
        assert_eq!(config.completion.promise(), Some("TASK_COMPLETE"));
        let config = parse("[completion]\npromise = \"\"\n").expect("valid");
        assert_eq!(config.completion.promise(), None);
        let err = parse("[completion]\npromise = \"  \"\n").expect_err("blank");
        assert_eq!(err.key.as_deref(), Some("completion.promise"));
        assert_eq!(err.position, Some((2, 11)));
        assert!(err.message.contains("TASK_COMPLETE"), "{err}");
        let err = parse("[completion]\npromise = 3\n").expect_err("type");
        assert_eq!(err.key.as_deref(), Some("completion.promise"));
        assert!(err.message.contains("invalid type"), "{err}");
    }

    #[test]
    fn prompt_file_alias_wins() {
        let config = parse("[prompt]\nfile = \"TASK.md\"\n").expect("valid");
        assert_eq!(config.prompt_path(), Path::new("TASK.md"));
    }

    #[test]
    fn overrides_win_over_file() {
        let mut config = parse("[session]\nmax_iterations = 3\n").expect("valid");
        config
            .apply(&Overrides {
                max_iterations: Some(7),
                stale_timeout_mins: Some(0.5),
                ..Overrides::default()
            })
            .expect("valid overrides");
        assert_eq!(config.session.max_iterations.0, 7);
        assert_eq!(config.stale_timeout(), Duration::from_secs(30));
    }
}

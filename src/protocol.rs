//! The messages that cross between the supervisor and whoever watches it (the
//! headless console printer or the control room): the lane id, the commands a user
//! can send, the snapshot of a lane's state, and the events written to the event log.
//!
//! `harness.status` is a serialized [`Snapshot`]; each line of the event log is a
//! serialized [`Event`] with a timestamp.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Which loop a message is about. One lane today; several loops later.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
pub struct LaneId(pub u32);

/// What a user (or the UI) asks the supervisor to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// SIGSTOP the session's process group; the watchdog clock stops too.
    Pause,
    /// SIGCONT the session's process group.
    Resume,
    /// TERM, grace, KILL the current session; the loop goes on.
    KillSession,
    /// Toggle: finish the current session, then stop.
    StopAfterCurrent,
    /// Kill the current session and stop the loop.
    StopNow,
    /// The control room's terminal is gone: as [`Command::StopNow`], and the
    /// loop's end says so (`terminal_closed`).
    TerminalClosed,
}

/// The loop's state, as written to `harness.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoopState {
    Starting,
    PreHooks,
    SessionRunning,
    WatchdogKill,
    Retrying,
    PostHooks,
    RateLimitedBackoff,
    /// Waiting after a transient server error (`[backoff] max_consecutive_errors`).
    ErrorBackoff,
    Idle,
    ShuttingDown,
    Stopped,
    /// A session waits for a human's approval before it starts.
    AwaitingApproval,
    /// A human rejected a session; the loop waits to be resumed.
    Held,
    /// The output directory's disk is (nearly) full: no session starts until
    /// space returns.
    DiskFull,
}

impl LoopState {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopState::Starting => "starting",
            LoopState::PreHooks => "pre_hooks",
            LoopState::SessionRunning => "session_running",
            LoopState::WatchdogKill => "watchdog_kill",
            LoopState::Retrying => "retrying",
            LoopState::PostHooks => "post_hooks",
            LoopState::RateLimitedBackoff => "rate_limited_backoff",
            LoopState::ErrorBackoff => "error_backoff",
            LoopState::Idle => "idle",
            LoopState::ShuttingDown => "shutting_down",
            LoopState::Stopped => "stopped",
            LoopState::AwaitingApproval => "awaiting_approval",
            LoopState::Held => "held",
            LoopState::DiskFull => "disk_full",
        }
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// `max_iterations` iterations are done.
    MaxIterations,
    /// The STOP file was found.
    StopFile,
    /// A user asked from the control room.
    UserStop,
    /// The control room's terminal went away (a closed window, an SSH drop)
    /// while the loop ran: its session was killed, as nobody was watching.
    TerminalClosed,
    /// SIGINT or SIGTERM.
    Signal { signal: String, forced: bool },
    /// Too many rate-limited sessions in a row.
    RateLimited { consecutive: u64 },
    /// Too many sessions in a row ended in a transient server error.
    TransientErrors { consecutive: u64 },
    /// Something that retrying cannot fix, e.g. the agent command does not exist.
    Fatal { message: String },
    /// The agent's final message held the completion promise: the task is done.
    Completed,
    /// A run budget (`[guard] max_cost_usd`, `max_runtime`) was reached.
    BudgetExceeded {
        budget: Budget,
        limit: f64,
        value: f64,
    },
}

impl ExitReason {
    /// The process exit code for this reason.
    pub fn exit_code(&self) -> i32 {
        match self {
            ExitReason::MaxIterations
            | ExitReason::StopFile
            | ExitReason::UserStop
            | ExitReason::Completed => 0,
            ExitReason::Fatal { .. } => 1,
            ExitReason::RateLimited { .. } => 3,
            ExitReason::TransientErrors { .. } => 5,
            ExitReason::BudgetExceeded { .. } => 4,
            ExitReason::Signal { signal, .. } if signal == "SIGTERM" => 143,
            ExitReason::Signal { signal, .. } if signal == "SIGHUP" => 129,
            ExitReason::TerminalClosed => 129,
            ExitReason::Signal { .. } => 130,
        }
    }

    pub fn label(&self) -> String {
        match self {
            ExitReason::MaxIterations => "max_iterations".into(),
            ExitReason::StopFile => "stop_file".into(),
            ExitReason::UserStop => "user_stop".into(),
            ExitReason::TerminalClosed => "terminal_closed".into(),
            ExitReason::Signal { signal, forced } => {
                if *forced {
                    format!("{signal} (forced)")
                } else {
                    signal.clone()
                }
            }
            ExitReason::RateLimited { consecutive } => {
                format!("rate_limited ({consecutive} in a row)")
            }
            ExitReason::TransientErrors { consecutive } => {
                format!("transient_errors ({consecutive} in a row)")
            }
            ExitReason::Fatal { message } => format!("error: {message}"),
            ExitReason::Completed => "completed".into(),
            ExitReason::BudgetExceeded {
                budget,
                limit,
                value,
            } => format!("budget {}", budget.describe(*limit, *value)),
        }
    }
}

/// A limit of `[guard]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    MaxToolCallsPerSession,
    MaxCostPerSessionUsd,
    MaxCostUsd,
    MaxRuntime,
}

impl Budget {
    /// The key in `[guard]`.
    pub fn key(self) -> &'static str {
        match self {
            Budget::MaxToolCallsPerSession => "max_tool_calls_per_session",
            Budget::MaxCostPerSessionUsd => "max_cost_per_session_usd",
            Budget::MaxCostUsd => "max_cost_usd",
            Budget::MaxRuntime => "max_runtime",
        }
    }

    /// Whether reaching it ends the run (not just the session).
    pub fn is_run_budget(self) -> bool {
        matches!(self, Budget::MaxCostUsd | Budget::MaxRuntime)
    }

    /// A value in this budget's unit: `21`, `$5.12`, `1h 30m`.
    pub fn format(self, value: f64) -> String {
        match self {
            Budget::MaxToolCallsPerSession => format!("{value}"),
            Budget::MaxCostPerSessionUsd | Budget::MaxCostUsd => format!("${value:.2}"),
            Budget::MaxRuntime if value < 60.0 => {
                let text = format!("{value:.1}");
                format!("{}s", text.trim_end_matches(".0"))
            }
            Budget::MaxRuntime => {
                let secs = value.round() as i64;
                if secs % 60 == 0 || secs >= 3600 {
                    crate::fmt::duration(secs)
                } else {
                    format!("{}m {}s", secs / 60, secs % 60)
                }
            }
        }
    }

    /// `max_cost_usd: $5.12 of $5.00`.
    pub fn describe(self, limit: f64, value: f64) -> String {
        format!(
            "{}: {} of {}",
            self.key(),
            self.format(value),
            self.format(limit)
        )
    }
}

/// What a doom loop (the same tool call again and again) does.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DoomLoopAction {
    /// Stop the session; the loop goes on.
    #[default]
    Kill,
    /// Ask a human through the approval queue; a rejection stops the session.
    Gate,
    /// Only record it.
    Warn,
}

impl DoomLoopAction {
    pub fn as_str(self) -> &'static str {
        match self {
            DoomLoopAction::Kill => "kill",
            DoomLoopAction::Gate => "gate",
            DoomLoopAction::Warn => "warn",
        }
    }
}

/// One lane's state: the content of `harness.status`, and what the UI draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    pub lane: LaneId,
    pub pid: u32,
    /// The writer's start time (clock ticks since boot): with `pid`, it names
    /// the one process that is the loop, whatever its program file is called.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    pub state: LoopState,
    pub agent_command: String,
    /// The watchdog's limit: no output growth for this long kills the session.
    pub stale_timeout_secs: f64,
    pub paused: bool,
    /// When the current pause began; the watchdog clock stands still since then.
    pub paused_at: Option<DateTime<Utc>>,
    pub stop_pending: bool,
    pub iteration: u64,
    pub max_iterations: u64,
    pub global_iteration: Option<u64>,
    pub output_file: Option<PathBuf>,
    pub output_bytes: u64,
    pub loop_start: DateTime<Utc>,
    pub session_start: Option<DateTime<Utc>>,
    pub last_output_growth: Option<DateTime<Utc>>,
    pub last_update: DateTime<Utc>,
    pub last_completed_iteration: Option<u64>,
    pub last_completed_global: Option<u64>,
    pub last_committed: Option<bool>,
    pub last_exit_code: Option<i32>,
    pub consecutive_rate_limits: u64,
    /// Sessions in a row that ended in a transient server error.
    #[serde(default)]
    pub consecutive_errors: u64,
    /// The running agent is retrying a failed request on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_retrying: Option<AgentRetrying>,
    pub pgid: Option<i32>,
    pub agent_pid: Option<i32>,
    /// The agent's start time (clock ticks since boot, `/proc/PID/stat` field 22):
    /// a later run checks it before it kills a group this run left behind.
    #[serde(default)]
    pub agent_start_ticks: Option<u64>,
    /// When the current wait (retry delay, backoff, pause between sessions) ends.
    pub next_session_at: Option<DateTime<Utc>>,
    pub rate_limit_resets_at: Option<DateTime<Utc>>,
    pub counters: Counters,
    pub exit_reason: Option<ExitReason>,
    /// Why the loop is held (a human rejected a session), while it is.
    #[serde(default)]
    pub held_reason: Option<String>,
    /// What the agent reported about the last finished session.
    #[serde(default)]
    pub last_session: Option<SessionSummary>,
    /// Cost, turns, tool calls and tokens summed over every session of the run.
    #[serde(default)]
    pub totals: Totals,
    /// `[guard] max_cost_usd`, when set: the run's cost is shown against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// `[guard] max_runtime` in seconds, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime_secs: Option<f64>,
    /// `[guard] max_cost_per_session_usd`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_per_session_usd: Option<f64>,
    /// `[guard] max_tool_calls_per_session`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls_per_session: Option<u64>,
    /// Why the agent's tool calls do not reach the approval gate, when they
    /// cannot (a Codex without hooks, a Claude Code run with `--bare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ungated: Option<String>,
    /// The agent takes a note while a session runs (`clowder tell` reaches
    /// the running session); false: notes wait for the next session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notes_now: bool,
}

/// How a loop that has stopped ended, in the one word every listing uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its sessions ran out or its task was completed.
    Done,
    /// An error ended it, or its agent exited non-zero in every session.
    Failed,
    /// A person, a STOP file or a signal stopped it.
    Stopped,
}

impl Ending {
    /// How the loop that stopped for `reason` ended, its last status being `snapshot`.
    pub fn of(reason: Option<&ExitReason>, snapshot: Option<&Snapshot>) -> Ending {
        match reason {
            Some(ExitReason::MaxIterations)
                if snapshot
                    .is_some_and(|s| s.failed_every_session() || s.counters.none_succeeded()) =>
            {
                Ending::Failed
            }
            Some(ExitReason::MaxIterations | ExitReason::Completed) => Ending::Done,
            Some(
                ExitReason::UserStop
                | ExitReason::TerminalClosed
                | ExitReason::StopFile
                | ExitReason::Signal { .. },
            )
            | None => Ending::Stopped,
            Some(_) => Ending::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Done => "done",
            Ending::Failed => "failed",
            Ending::Stopped => "stopped",
        }
    }
}

impl Snapshot {
    /// Its agent exited non-zero in every session so far (at least one).
    pub fn failed_every_session(&self) -> bool {
        let c = &self.counters;
        c.sessions > 0
            && c.failed_exits >= c.sessions
            && self.last_exit_code.is_some_and(|e| e != 0)
    }

    /// A loop that is starting and has seen nothing yet, as of `at`.
    pub fn starting(pid: u32, agent_command: String, at: DateTime<Utc>) -> Snapshot {
        Snapshot {
            lane: LaneId::default(),
            pid,
            pid_start_ticks: None,
            state: LoopState::Starting,
            agent_command,
            stale_timeout_secs: 0.0,
            paused: false,
            paused_at: None,
            stop_pending: false,
            iteration: 0,
            max_iterations: 0,
            global_iteration: None,
            output_file: None,
            output_bytes: 0,
            loop_start: at,
            session_start: None,
            last_output_growth: None,
            last_update: at,
            last_completed_iteration: None,
            last_completed_global: None,
            last_committed: None,
            last_exit_code: None,
            consecutive_rate_limits: 0,
            consecutive_errors: 0,
            agent_retrying: None,
            pgid: None,
            agent_pid: None,
            agent_start_ticks: None,
            next_session_at: None,
            rate_limit_resets_at: None,
            counters: Counters::default(),
            exit_reason: None,
            held_reason: None,
            last_session: None,
            totals: Totals::default(),
            max_cost_usd: None,
            max_runtime_secs: None,
            max_cost_per_session_usd: None,
            max_tool_calls_per_session: None,
            ungated: None,
            notes_now: false,
        }
    }
}

/// One session as the agent reported it in its output stream (Claude Code
/// stream-json, Codex `--json`); all zero or absent for a plain-text agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SessionSummary {
    pub global: u64,
    /// Turns and tokens are `None` (unknown) when the stream's ending (Claude's
    /// `result`, Codex's `turn.completed`) was never written, and for plain text.
    pub turns: Option<u64>,
    pub tool_calls: u64,
    pub tool_errors: u64,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    /// What the agent said the session cost, if it said.
    pub cost_usd: Option<f64>,
    pub result_subtype: Option<String>,
    pub result_is_error: Option<bool>,
    pub model: Option<String>,
    pub agent_session_id: Option<String>,
    /// The agent's own measure of the session's length.
    pub duration_ms: Option<u64>,
    /// Rate-limit events the agent passed by paying for overage.
    pub overage_events: u64,
    /// The output was JSON of no format clowder reads: nothing was counted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unrecognised_format: bool,
}

impl SessionSummary {
    /// `"error"` when the final result is an error, else its subtype (`"success"`,
    /// `"error_max_turns"`, …); `None` without a final result.
    pub fn result(&self) -> Option<String> {
        if self.result_is_error == Some(true) {
            Some("error".into())
        } else {
            self.result_subtype.clone().filter(|s| !s.is_empty())
        }
    }
}

/// Sums over every session of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Totals {
    /// Sum of the costs the agent reported (sessions without one add nothing);
    /// unknown (`null`) until a session reports one: Codex reports none.
    pub cost_usd: Option<f64>,
    pub turns: u64,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the gate's reviewer cost (its cost is in `cost_usd` too).
    #[serde(skip_serializing_if = "ReviewerSpend::is_none")]
    pub reviewer: ReviewerSpend,
}

/// The gate's reviewer: its answers, tokens and cost, for a session or a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ReviewerSpend {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

impl ReviewerSpend {
    pub fn is_none(&self) -> bool {
        self.calls == 0
    }

    pub fn add(&mut self, other: &ReviewerSpend) {
        self.calls = self.calls.saturating_add(other.calls);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        if other.cost_usd.is_finite() {
            self.cost_usd += other.cost_usd.max(0.0);
        }
    }
}

impl Totals {
    /// Counts what the reviewer spent: in its own sums, and, when it cost
    /// anything, in the run's cost, which budgets are judged against.
    pub fn add_review(&mut self, spend: &ReviewerSpend) {
        self.reviewer.add(spend);
        if spend.cost_usd.is_finite() && spend.cost_usd > 0.0 {
            self.cost_usd = Some(self.known_cost() + spend.cost_usd);
        }
    }

    /// The cost reported so far, what budgets are judged against (an
    /// unknown cost is none).
    pub fn known_cost(&self) -> f64 {
        self.cost_usd.unwrap_or(0.0)
    }

    pub fn add(&mut self, session: &SessionSummary) {
        if let Some(cost) = session.cost_usd.filter(|c| c.is_finite()) {
            self.cost_usd = Some(self.known_cost() + cost.max(0.0));
        }
        // The run's totals are sums of what is known.
        let known = |n: Option<u64>| n.unwrap_or(0);
        self.turns = self.turns.saturating_add(known(session.turns));
        self.tool_calls = self.tool_calls.saturating_add(session.tool_calls);
        self.input_tokens = self
            .input_tokens
            .saturating_add(known(session.input_tokens));
        self.output_tokens = self
            .output_tokens
            .saturating_add(known(session.output_tokens));
    }
}

/// A budget and how far past it a session or the run went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetBreach {
    pub budget: Budget,
    pub limit: f64,
    pub value: f64,
}

impl BudgetBreach {
    pub fn describe(&self) -> String {
        self.budget.describe(self.limit, self.value)
    }

    /// How the loop ends when this is a run budget.
    pub fn exit_reason(&self) -> ExitReason {
        ExitReason::BudgetExceeded {
            budget: self.budget,
            limit: self.limit,
            value: self.value,
        }
    }
}

/// The agent retries a failed request on its own while its session runs
/// (Codex's `Reconnecting... 2/5`, Claude Code's `api_retry`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentRetrying {
    /// A rate limit (429); otherwise a transient server error.
    pub rate_limit: bool,
    /// The agent's words, shortened.
    pub message: String,
}

impl AgentRetrying {
    /// What the status and the screen say.
    pub fn describe(&self) -> &'static str {
        if self.rate_limit {
            "rate limited (the agent is retrying)"
        } else {
            "server error (the agent is retrying)"
        }
    }
}

/// Totals for the whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counters {
    pub sessions: u64,
    pub productive: u64,
    pub empty_retries: u64,
    pub empty_iterations: u64,
    pub rate_limits: u64,
    /// Sessions that ended in a transient server error (5xx, overloaded,
    /// a dropped connection): never counted as rate limits.
    #[serde(default)]
    pub transient_errors: u64,
    pub watchdog_kills: u64,
    pub user_kills: u64,
    pub hook_failures: u64,
    pub commits: u64,
    /// Rate limits passed by paying for overage (no backoff).
    #[serde(default)]
    pub overages: u64,
    /// Sessions whose agent exited non-zero, but for those a person killed.
    #[serde(default)]
    pub failed_exits: u64,
    /// Sessions whose final result says it is an error (`is_error`), whatever
    /// the agent's exit code.
    #[serde(default)]
    pub error_results: u64,
}

impl Counters {
    /// Sessions ran, and none of them came to anything: each exited non-zero,
    /// or none was productive (every one printed too little), or each one's
    /// result was an error.
    pub fn none_succeeded(&self) -> bool {
        self.sessions > 0
            && (self.failed_exits >= self.sessions
                || self.productive == 0
                || self.error_results >= self.sessions)
    }
}

/// Which set of hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookKind {
    PreSession,
    PostSession,
}

/// Why a session was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KillReason {
    Watchdog,
    User,
    StopNow,
    /// A `[guard]` budget was exceeded.
    Budget,
    /// The same tool call again and again (`[guard] doom_loop_threshold`).
    DoomLoop,
    /// The agent cannot work (it cannot authenticate or pay).
    AgentError,
}

/// A line of the event log, without its timestamp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    LoopStart {
        pid: u32,
        max_iterations: u64,
        agent_command: String,
        /// How sessions are ended: `cgroup` or `group+token`.
        #[serde(default)]
        kill_method: String,
        /// Where the cgroups are, or why there are none.
        #[serde(default)]
        kill_method_detail: String,
    },
    SessionStart {
        iteration: u64,
        global: u64,
        pid: i32,
        pgid: i32,
        output_file: PathBuf,
        /// The agent's start time in clock ticks since boot (see [`Snapshot::agent_start_ticks`]).
        #[serde(default)]
        agent_start_ticks: Option<u64>,
    },
    /// At start, the status file showed a session of an earlier run that never
    /// ended (clowder was killed): what was left of its process group is killed.
    SessionAbandoned {
        global: Option<u64>,
        pgid: i32,
        pid: i32,
        /// Processes of the group that were still alive and were killed.
        killed: u64,
    },
    WatchdogStale {
        iteration: u64,
        global: u64,
        idle_secs: f64,
        output_bytes: u64,
        /// The agent was retrying a failed request on its own, not hanging.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_retrying: Option<AgentRetrying>,
        /// What went quiet was a task lane's heartbeat, not the output.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        heartbeat: bool,
    },
    WatchdogKill {
        iteration: u64,
        global: u64,
        needed_sigkill: bool,
    },
    SessionKilled {
        iteration: u64,
        global: u64,
        reason: KillReason,
        needed_sigkill: bool,
    },
    LingeringKilled {
        iteration: u64,
        global: u64,
        processes: u64,
    },
    EmptyRetry {
        iteration: u64,
        global: u64,
        output_bytes: u64,
        retry: u32,
        max_retries: u32,
    },
    RateLimited {
        iteration: u64,
        global: u64,
        reason: String,
        consecutive: u64,
        backoff_secs: f64,
        resets_at: Option<DateTime<Utc>>,
    },
    /// The session ended in a transient server error: backed off and retried.
    TransientError {
        iteration: u64,
        global: u64,
        reason: String,
        consecutive: u64,
        backoff_secs: f64,
    },
    HookFailed {
        kind: HookKind,
        command: String,
        exit_code: Option<i32>,
        timed_out: bool,
        output: String,
    },
    IterationSkipped {
        iteration: u64,
        reason: String,
    },
    SessionComplete {
        iteration: u64,
        global: u64,
        output_bytes: u64,
        exit_code: i32,
        duration_secs: f64,
        committed: bool,
        retries: u32,
        rate_limited: bool,
        /// The session ended in a transient server error.
        #[serde(default)]
        transient_error: bool,
        productive: bool,
        #[serde(default)]
        cost_usd: Option<f64>,
        /// Unknown (null) without the stream's ending.
        #[serde(default)]
        turns: Option<u64>,
        #[serde(default)]
        tool_calls: u64,
        #[serde(default)]
        input_tokens: Option<u64>,
        #[serde(default)]
        output_tokens: Option<u64>,
        /// The final result: its subtype, `"error"`, or absent.
        #[serde(default)]
        result: Option<String>,
        /// Why clowder killed the session, if it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        killed: Option<KillReason>,
        /// The budget the session went over, if one stopped it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<BudgetBreach>,
    },
    /// A `[guard]` budget was exceeded: the session (per-session budgets) or the
    /// run (`max_cost_usd`, `max_runtime`) stops.
    BudgetExceeded {
        iteration: u64,
        global: Option<u64>,
        budget: Budget,
        limit: f64,
        value: f64,
    },
    /// The agent went past a rate limit by paying for overage, `count` times in
    /// the session: counted, not waited for.
    Overage {
        iteration: u64,
        global: u64,
        count: u64,
    },
    /// The agent's output holds JSON lines of no format clowder reads (said
    /// once a run): its sessions' turns, tokens and cost are not counted.
    UnrecognisedOutputFormat {
        iteration: u64,
        global: u64,
    },
    /// The same tool call `repeats` times in a row.
    DoomLoop {
        iteration: u64,
        global: u64,
        tool: String,
        /// The start of the call's input.
        input: String,
        repeats: u64,
        action: DoomLoopAction,
    },
    /// A human answered whether a session in a doom loop may go on.
    DoomLoopGate {
        global: u64,
        approved: bool,
        reason: String,
    },
    /// Less than the minimum free space is left where output files go: no new
    /// session starts until space returns (checked every few seconds).
    DiskFull {
        dir: PathBuf,
        free_bytes: u64,
    },
    /// Space is back after [`Event::DiskFull`]; the loop goes on.
    DiskSpaceRestored {
        waited_secs: f64,
    },
    /// The handoff file could not be used; the session starts without it.
    HandoffInvalid {
        file: PathBuf,
        error: String,
    },
    /// The agent cannot work at all (credentials, billing): the loop stops.
    AgentError {
        iteration: u64,
        global: u64,
        reason: String,
    },
    Paused {
        global: u64,
    },
    Resumed {
        global: u64,
        paused_secs: f64,
    },
    StopRequested {
        source: String,
    },
    StopCancelled,
    /// A human answered whether a session may start.
    SessionGate {
        iteration: u64,
        approved: bool,
        reason: String,
    },
    /// A held loop was resumed by the user.
    LoopResumed,
    LoopEnd {
        reason: ExitReason,
        iterations: u64,
        counters: Counters,
        duration_secs: f64,
    },
    /// A process of the session left its process group (`setsid`) and was still
    /// alive when the session ended: clowder found it and killed it.
    LeakedPid {
        global: u64,
        pid: i32,
        /// Its command name, as `/proc/PID/comm` gives it.
        command: String,
        /// False if it survived TERM and KILL (stuck in the kernel).
        killed: bool,
    },
    /// The human left a note for the loop's next session (`clowder tell`).
    NoteQueued {
        note: String,
        text: String,
        queued_at: DateTime<Utc>,
        /// Why it waits rather than reach the running session now.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// A session took the note: at the top of its prompt, or (`how`: `now`)
    /// written to its stdin while it ran.
    NoteDelivered {
        note: String,
        text: String,
        iteration: u64,
        global: u64,
        /// Logs from before notes were told to a running session say none.
        #[serde(default)]
        how: NoteHow,
    },
    /// A client of the host asked something of the lane (a merge, a pause…):
    /// who, as decisions record who decided (`web 127.0.0.1:50412`).
    Asked {
        action: String,
        by: String,
    },
}

/// How a session took a note.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NoteHow {
    /// At the top of the prompt of the session that started next.
    #[default]
    Prompt,
    /// Written to the running session's stdin: it read it at its next step.
    Now,
}

impl Event {
    pub fn name(&self) -> &'static str {
        match self {
            Event::LoopStart { .. } => "loop_start",
            Event::SessionStart { .. } => "session_start",
            Event::SessionAbandoned { .. } => "session_abandoned",
            Event::WatchdogStale { .. } => "watchdog_stale",
            Event::WatchdogKill { .. } => "watchdog_kill",
            Event::SessionKilled { .. } => "session_killed",
            Event::LingeringKilled { .. } => "lingering_killed",
            Event::EmptyRetry { .. } => "empty_retry",
            Event::RateLimited { .. } => "rate_limited",
            Event::TransientError { .. } => "transient_error",
            Event::HookFailed { .. } => "hook_failed",
            Event::IterationSkipped { .. } => "iteration_skipped",
            Event::SessionComplete { .. } => "session_complete",
            Event::AgentError { .. } => "agent_error",
            Event::Paused { .. } => "paused",
            Event::Resumed { .. } => "resumed",
            Event::StopRequested { .. } => "stop_requested",
            Event::StopCancelled => "stop_cancelled",
            Event::SessionGate { .. } => "session_gate",
            Event::LoopResumed => "loop_resumed",
            Event::BudgetExceeded { .. } => "budget_exceeded",
            Event::Overage { .. } => "overage",
            Event::UnrecognisedOutputFormat { .. } => "unrecognised_output_format",
            Event::DoomLoop { .. } => "doom_loop",
            Event::DoomLoopGate { .. } => "doom_loop_gate",
            Event::HandoffInvalid { .. } => "handoff_invalid",
            Event::DiskFull { .. } => "disk_full",
            Event::DiskSpaceRestored { .. } => "disk_space_restored",
            Event::LoopEnd { .. } => "loop_end",
            Event::LeakedPid { .. } => "leaked_pid",
            Event::NoteQueued { .. } => "note_queued",
            Event::NoteDelivered { .. } => "note_delivered",
            Event::Asked { .. } => "asked",
        }
    }
}

/// An event with the wall time it happened, as stored in the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimedEvent {
    pub ts: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}

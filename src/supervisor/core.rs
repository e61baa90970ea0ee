//! The supervisor's pure state machine: `step(now, input) -> effects`.
//!
//! Every decision of the loop lives here and only here: when to start a session,
//! when the watchdog kills one, whether a finished session was productive, empty
//! (retry) or rate-limited (back off), and when the loop ends. It performs no I/O
//! and never reads a clock: the runtime passes the time in and carries out the
//! returned [`Effect`]s, so the whole loop is tested without sleeping.

mod backoff;
mod control;
mod guards;
mod lifecycle;
mod verdict;
mod view;
mod watchdog;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::agent::ToolCallSig;
use crate::protocol::{
    AgentRetrying, BudgetBreach, Command, Counters, DoomLoopAction, Event, ExitReason, HookKind,
    KillReason, SessionSummary, Totals,
};

/// The second SIGINT within this window kills the session instead of waiting for it.
pub const DOUBLE_INTERRUPT_WINDOW: Duration = Duration::from_secs(3);
/// The most a file's modification time may move the watchdog's clock back: one
/// poll period (a larger gap means the clock or the file system is off).
pub const MAX_WRITTEN_AGO: Duration = Duration::from_secs(1);
/// A rate limit's reset time further ahead than this is not believed: a clock
/// that disagrees with the API's, or a wrong date.
pub const MAX_TRUSTED_RESET: Duration = Duration::from_secs(7 * 24 * 3600);

/// The settings the state machine needs, resolved from the config.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub max_iterations: u64,
    pub stale_timeout: Duration,
    pub min_output_bytes: u64,
    pub max_empty_retries: u32,
    pub retry_delay: Duration,
    pub initial_delay: Duration,
    pub max_delay: Duration,
    pub max_consecutive_rate_limits: u64,
    /// Sessions in a row ending in a transient server error before giving up.
    pub max_consecutive_errors: u64,
    /// Between SIGTERM and SIGKILL (`[watchdog] kill_grace_secs`).
    pub kill_grace: Duration,
    /// The first SIGTERM ends the session at once (`[signals] sigterm = "stop_now"`).
    pub sigterm_stops_now: bool,
    /// How often free disk space is looked at again while the disk is full
    /// (`[output] disk_recheck_secs`).
    pub disk_recheck: Duration,
    /// Which sessions wait for a human before they start.
    pub session_gate: SessionGate,
    /// Budgets and doom-loop detection (`[guard]`).
    pub guard: GuardSettings,
    /// What the watchdog watches, so that its kill says what went quiet.
    pub watched: Watched,
}

/// What shows that a session is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Watched {
    /// The agent's output grows.
    #[default]
    Output,
    /// A task lane's worker writes its heartbeat file.
    Heartbeat,
}

/// `[guard]`, resolved: zero means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GuardSettings {
    pub max_tool_calls_per_session: u64,
    pub max_cost_per_session_usd: f64,
    pub max_cost_usd: f64,
    pub max_runtime: Option<Duration>,
    /// The same tool call this many times in a row is a doom loop (0: off).
    pub doom_loop_threshold: u64,
    pub on_doom_loop: DoomLoopAction,
}

impl GuardSettings {
    /// Whether the runtime must report tool calls and cost while a session runs.
    pub fn watches_sessions(&self) -> bool {
        self.max_tool_calls_per_session > 0
            || self.max_cost_per_session_usd > 0.0
            || self.max_cost_usd > 0.0
            || self.doom_loop_threshold > 0
    }
}

/// The autonomy level's say over starting sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionGate {
    /// 1–2: every session asks; 3: critical sessions ask; 4–5 (and 0): none.
    pub autonomy: u8,
    /// With autonomy 3, every N-th iteration is critical (0: none by count).
    pub critical_every: u64,
}

impl SessionGate {
    /// Whether iteration `iteration` must be approved before it starts.
    pub fn asks(&self, iteration: u64, critical_marker: bool) -> bool {
        match self.autonomy {
            1 | 2 => true,
            3 => {
                critical_marker
                    || (self.critical_every > 0 && iteration.is_multiple_of(self.critical_every))
            }
            _ => false,
        }
    }
}

/// The time, passed in: monotonic for every decision, wall only for the record.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub mono: Instant,
    pub wall: DateTime<Utc>,
}

/// A signal that asks the loop to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Int,
    Term,
    /// The terminal closed.
    Hup,
}

impl StopSignal {
    pub(crate) fn name(self) -> &'static str {
        match self {
            StopSignal::Int => "SIGINT",
            StopSignal::Term => "SIGTERM",
            StopSignal::Hup => "SIGHUP",
        }
    }
}

/// A failed hook, as the runtime saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct HookFailure {
    pub command: String,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub output: String,
}

/// What the runtime learned from a finished session's output and working tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionFindings {
    pub output_bytes: u64,
    pub committed: bool,
    /// Set when the agent was rate-limited, with its own words.
    pub rate_limit: Option<RateLimitFinding>,
    /// Set when the session ended in a transient server error: its reason.
    pub transient_error: Option<String>,
    /// What the agent reported about the session (turns, tools, tokens, cost, result).
    pub stats: SessionSummary,
    /// The agent's final message held the completion promise.
    pub promise_kept: bool,
    /// Whether the agent did something: a result, a tool call, or output
    /// past its start-up lines. `None` when its output cannot tell (a
    /// plain-text agent): then only `min_output_bytes` decides.
    pub acted: Option<bool>,
    /// The agent cannot work at all (credentials, billing): the whole message.
    pub agent_error: Option<String>,
    /// Tool calls not yet reported while the session ran, in order, so that the
    /// guards see output read after the exit one call at a time as well.
    pub new_calls: Vec<ToolCallSig>,
    /// The disk where output goes was full when the session ended: its output
    /// may have been cut short, so it is not productive.
    pub out_of_space: Option<OutOfSpace>,
}

/// Where space ran out, and how much was left.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfSpace {
    pub dir: PathBuf,
    pub free_bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitFinding {
    pub reason: String,
    pub resets_at: Option<DateTime<Utc>>,
}

/// Something that happened, fed to [`Core::step`].
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Begin the loop.
    Start,
    /// The gate's reviewer spent this since the last look.
    ReviewerSpent(crate::protocol::ReviewerSpend),
    /// Answer to [`Effect::CheckStopFile`].
    StopFileChecked {
        present: bool,
    },
    /// The runtime noticed the STOP file while a session runs or the loop waits.
    StopFileSeen,
    /// Sent instead of `StopFileChecked { present: false }`, or when the output
    /// file cannot be created for want of space: too little space is left
    /// where output files go to start a session.
    DiskFull {
        dir: PathBuf,
        free_bytes: u64,
    },
    PreHooksFinished {
        failure: Option<HookFailure>,
    },
    Spawned {
        global: u64,
        pid: i32,
        pgid: i32,
        output_file: PathBuf,
    },
    SpawnFailed {
        global: Option<u64>,
        error: String,
    },
    /// The prompt is built; `critical_marker`: it holds `<!-- critical -->`.
    PromptReady {
        critical_marker: bool,
    },
    /// A human's answer to [`Effect::RequestSessionApproval`].
    SessionApproval {
        approved: bool,
        reason: String,
    },
    /// The output file's current size; sent on every poll while a session runs.
    /// `written_ago`: how long before this poll the file was last written (from
    /// its modification time), so the watchdog's clock starts at the last byte,
    /// not at the poll that noticed it. Capped at [`MAX_WRITTEN_AGO`].
    OutputSize {
        bytes: u64,
        written_ago: Duration,
    },
    /// A file other than the output (a task lane's heartbeat) was written
    /// `written_ago` before this poll: the session is alive, as with output growth.
    Activity {
        written_ago: Duration,
    },
    /// What the running session's output showed so far (sent while `[guard]`
    /// watches sessions): its tool calls up to now and the new ones in order.
    SessionProgress {
        global: u64,
        tool_calls: u64,
        cost_usd: Option<f64>,
        new_calls: Vec<ToolCallSig>,
    },
    /// The running agent started or stopped retrying a failed request on its
    /// own: shown in the status and on screen, not a stale session.
    AgentRetrying {
        global: u64,
        retrying: Option<AgentRetrying>,
    },
    /// The running agent's output says it cannot work (it cannot
    /// authenticate or pay): retrying, its own included, will not help.
    AgentError {
        global: u64,
        reason: String,
    },
    /// A human's answer to [`Effect::RequestDoomLoopApproval`].
    DoomLoopApproval {
        global: u64,
        approved: bool,
        reason: String,
    },
    /// Periodic: lets the watchdog look at the clock.
    Tick,
    /// The leader was reaped and no process of the group is left.
    SessionExited {
        exit_code: i32,
        needed_sigkill: bool,
        lingering_killed: u64,
    },
    SessionAnalyzed(Box<SessionFindings>),
    PostHooksFinished {
        failures: Vec<HookFailure>,
    },
    TimerFired {
        epoch: u64,
    },
    Signal(StopSignal),
    Command(Command),
}

/// Something the runtime must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Log {
        level: Level,
        message: String,
    },
    Emit(Event),
    WriteStatus,
    CheckStopFile,
    RemoveStopFile,
    RunHooks {
        kind: HookKind,
        env: Vec<(String, String)>,
    },
    Spawn {
        iteration: u64,
    },
    /// Start the agent with the prompt just built.
    StartAgent {
        iteration: u64,
    },
    /// Ask a human (through the approval queue) whether this session may start.
    RequestSessionApproval {
        iteration: u64,
        critical: bool,
    },
    /// Stop waiting for that answer: the loop moved on.
    CancelSessionApproval,
    /// Ask a human whether a session repeating the same tool call may go on
    /// (its group is stopped meanwhile).
    RequestDoomLoopApproval {
        iteration: u64,
        global: u64,
        tool: String,
        input: String,
        repeats: u64,
    },
    PauseGroup {
        pgid: i32,
    },
    ResumeGroup {
        pgid: i32,
    },
    /// TERM (and CONT) to the running hooks' and prompt commands' groups, then
    /// KILL after the kill grace: the loop is stopping and will not wait for them.
    InterruptHooks,
    /// TERM (and CONT) to the group, then KILL after `grace` if anything is left.
    TerminateGroup {
        pgid: i32,
        grace: Duration,
    },
    AnalyzeSession {
        output_file: PathBuf,
    },
    ArmTimer {
        epoch: u64,
        after: Duration,
    },
    Exit(ExitReason),
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Session {
    global: u64,
    pid: i32,
    pgid: i32,
    output_file: PathBuf,
    started: Instant,
    started_wall: DateTime<Utc>,
    output_bytes: u64,
    last_growth: Instant,
    last_growth_wall: DateTime<Utc>,
    paused_since: Option<Instant>,
    paused_since_wall: Option<DateTime<Utc>>,
    kill: Option<KillReason>,
    exit_code: Option<i32>,
    duration: Duration,
    /// The last tool call and how many times in a row it came.
    last_call: Option<(ToolCallSig, u64)>,
    /// A doom-loop gate is waiting for a human (the group is stopped).
    doom_gate: bool,
    /// The budget that stopped this session, if one did.
    budget: Option<BudgetBreach>,
    /// The cost the session reported so far.
    cost_so_far: Option<f64>,
    /// The agent retries a failed request on its own, as its last lines say.
    retrying: Option<AgentRetrying>,
}

impl Session {
    /// Time without output growth, not counting time spent paused.
    fn idle_for(&self, now: Instant) -> Duration {
        let until = self.paused_since.unwrap_or(now);
        until.saturating_duration_since(self.last_growth)
    }

    /// Something was written `written_ago` before `now`: the watchdog's clock
    /// starts again there, never before the activity already seen nor before a
    /// pause ended.
    fn note_activity(&mut self, now: Now, written_ago: Duration) {
        let ago = written_ago.min(MAX_WRITTEN_AGO);
        let at = now.mono.checked_sub(ago).unwrap_or(now.mono);
        if at > self.last_growth {
            self.last_growth = at;
            self.last_growth_wall = chrono::Duration::from_std(ago)
                .ok()
                .and_then(|ago| now.wall.checked_sub_signed(ago))
                .unwrap_or(now.wall);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitKind {
    Retry,
    Backoff,
    ErrorBackoff,
    BetweenIterations,
    DiskFull,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    NotStarted,
    CheckingStop,
    PreHooks,
    Spawning,
    Running(Session),
    Analyzing(Session),
    PostHooks,
    Waiting {
        kind: WaitKind,
        epoch: u64,
    },
    /// The session's start waits for a human.
    AwaitingApproval,
    /// A human rejected the session: nothing runs until they resume the loop.
    Held {
        reason: String,
    },
    Stopped,
}

#[derive(Debug, Clone, PartialEq)]
enum StopRequest {
    Signal(StopSignal),
    User,
    /// The control room's terminal went away.
    TerminalClosed,
}

/// The loop's whole state.
#[derive(Debug, Clone)]
pub struct Core {
    settings: Settings,
    pid: u32,
    agent_command: String,
    phase: Phase,
    loop_start: Option<Now>,
    /// Iterations finished: productive, empty after every retry, or skipped by a hook.
    completed_iterations: u64,
    /// The iteration of this run's last session that ended (0: none yet).
    last_ran_iteration: u64,
    empty_retries_this_iteration: u32,
    consecutive_rate_limits: u64,
    consecutive_errors: u64,
    counters: Counters,
    stop_request: Option<StopRequest>,
    stop_now: bool,
    /// Running hooks were interrupted by a stop: the loop ends when they do.
    hooks_interrupted: bool,
    stop_file_seen: bool,
    last_interrupt: Option<Instant>,
    /// SIGTERMs caught so far.
    terms_caught: u32,
    timer_epoch: u64,
    wait_until_wall: Option<DateTime<Utc>>,
    rate_limit_resets_at: Option<DateTime<Utc>>,
    last_completed_iteration: Option<u64>,
    last_completed_global: Option<u64>,
    last_committed: Option<bool>,
    last_exit_code: Option<i32>,
    last_session_wall: Option<DateTime<Utc>>,
    exit_reason: Option<ExitReason>,
    last_wall: Option<DateTime<Utc>>,
    /// The last session's numbers, kept for the status file after it ends.
    last_session: Option<(u64, PathBuf, u64)>,
    last_session_stats: Option<SessionSummary>,
    /// The agent's output format was said to be unrecognised (said once a run).
    format_unrecognised_said: bool,
    totals: Totals,
    /// The last productive session kept the completion promise: end after its hooks.
    promise_kept: bool,
    /// A run budget was reached: end once the session in progress is recorded.
    run_budget: Option<BudgetBreach>,
    /// Since when no session could start for want of disk space.
    disk_full_since: Option<Instant>,
    /// A reset time was not believed (in the past, or too far ahead): said once.
    reset_skew_logged: bool,
    /// Why the agent's calls bypass the approval gate, when they do.
    ungated: Option<String>,
    /// The agent takes notes while a session runs.
    notes_now: bool,
}

impl Core {
    pub fn new(settings: Settings, pid: u32, agent_command: String) -> Core {
        Core {
            settings,
            pid,
            agent_command,
            phase: Phase::NotStarted,
            loop_start: None,
            completed_iterations: 0,
            last_ran_iteration: 0,
            empty_retries_this_iteration: 0,
            consecutive_rate_limits: 0,
            consecutive_errors: 0,
            counters: Counters::default(),
            stop_request: None,
            stop_now: false,
            hooks_interrupted: false,
            stop_file_seen: false,
            last_interrupt: None,
            terms_caught: 0,
            timer_epoch: 0,
            wait_until_wall: None,
            rate_limit_resets_at: None,
            last_completed_iteration: None,
            last_completed_global: None,
            last_committed: None,
            last_exit_code: None,
            last_session_wall: None,
            exit_reason: None,
            last_wall: None,
            last_session: None,
            last_session_stats: None,
            format_unrecognised_said: false,
            totals: Totals::default(),
            promise_kept: false,
            run_budget: None,
            disk_full_since: None,
            reset_skew_logged: false,
            ungated: None,
            notes_now: false,
        }
    }

    pub fn step(&mut self, now: Now, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        self.last_wall = Some(now.wall);
        if self.phase == Phase::Stopped {
            return out;
        }
        self.dispatch(now, input, &mut out);
        out
    }

    /// Hands each input to the step that decides what it means.
    fn dispatch(&mut self, now: Now, input: Input, out: &mut Vec<Effect>) {
        match input {
            Input::Start => self.on_start(now, out),
            Input::StopFileChecked { present } => self.on_stop_file_checked(now, present, out),
            Input::StopFileSeen => self.on_stop_file_seen(now, out),
            Input::DiskFull { dir, free_bytes } => self.on_disk_full(now, dir, free_bytes, out),
            Input::PreHooksFinished { failure } => self.on_pre_hooks(now, failure, out),
            Input::Spawned {
                global,
                pid,
                pgid,
                output_file,
            } => self.on_spawned(now, global, pid, pgid, output_file, out),
            Input::SpawnFailed { global, error } => self.on_spawn_failed(now, global, error, out),
            Input::PromptReady { critical_marker } => {
                self.on_prompt_ready(now, critical_marker, out)
            }
            Input::SessionApproval { approved, reason } => {
                self.on_session_approval(now, approved, reason, out)
            }
            Input::OutputSize { bytes, written_ago } => {
                self.on_output_size(now, bytes, written_ago)
            }
            Input::Activity { written_ago } => self.on_activity(now, written_ago),
            Input::AgentRetrying { global, retrying } => {
                self.on_agent_retrying(global, retrying, out)
            }
            Input::AgentError { global, reason } => self.on_agent_error(global, reason, out),
            Input::SessionProgress {
                global,
                tool_calls,
                cost_usd,
                new_calls,
            } => self.on_session_progress(now, global, tool_calls, cost_usd, new_calls, out),
            Input::DoomLoopApproval {
                global,
                approved,
                reason,
            } => self.on_doom_loop_approval(now, global, approved, reason, out),
            Input::Tick => self.on_tick(now, out),
            Input::ReviewerSpent(spend) => {
                self.totals.add_review(&spend);
                self.check_run_cost(None, out);
            }
            Input::SessionExited {
                exit_code,
                needed_sigkill,
                lingering_killed,
            } => self.on_session_exited(now, exit_code, needed_sigkill, lingering_killed, out),
            Input::SessionAnalyzed(findings) => self.on_session_analyzed(now, *findings, out),
            Input::PostHooksFinished { failures } => self.on_post_hooks(now, failures, out),
            Input::TimerFired { epoch } => self.on_timer(now, epoch, out),
            Input::Signal(signal) => self.on_signal(now, signal, out),
            Input::Command(command) => self.on_command(now, command, out),
        }
    }
}

fn log(out: &mut Vec<Effect>, level: Level, message: String) {
    out.push(Effect::Log { level, message });
}

/// Seconds with millisecond precision, for the record.
fn round_secs(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0).round() / 1000.0
}

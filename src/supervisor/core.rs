//! The supervisor's pure state machine: `step(now, input) -> effects`.
//!
//! Every decision of the loop lives here and only here: when to start a session,
//! when the watchdog kills one, whether a finished session was productive, empty
//! (retry) or rate-limited (back off), and when the loop ends. It performs no I/O
//! and never reads a clock: the runtime passes the time in and carries out the
//! returned [`Effect`]s, so the whole loop is tested without sleeping.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::agent::ToolCallSig;
use crate::protocol::{
    AgentRetrying, Budget, BudgetBreach, Command, Counters, DoomLoopAction, Event, ExitReason,
    HookKind, KillReason, LaneId, LoopState, SessionSummary, Snapshot, Totals,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn is_stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The iteration being worked on (1-based), or the last one once the loop is done.
    pub fn iteration(&self) -> u64 {
        (self.completed_iterations + 1).min(self.settings.max_iterations)
    }

    pub fn completed_iterations(&self) -> u64 {
        self.completed_iterations
    }

    /// Goes on from an earlier run of the same lane that was stopped or killed
    /// before its work was done (`earlier` is its last status): its iterations,
    /// counters and totals count on, so `max_iterations` and the cost budget
    /// are the lane's, not each run's. Before the loop starts.
    pub fn continue_from(&mut self, earlier: &Snapshot) {
        if self.phase != Phase::NotStarted {
            return;
        }
        // The status shows the iteration under way: the one after those done.
        self.completed_iterations = earlier.iteration.saturating_sub(1);
        self.counters = earlier.counters.clone();
        self.totals = earlier.totals.clone();
        self.last_completed_iteration = earlier.last_completed_iteration;
        self.last_completed_global = earlier.last_completed_global;
        self.last_committed = earlier.last_committed;
        self.last_session_stats = earlier.last_session.clone();
    }

    /// The running session's process group, if a session is running.
    pub fn running_pgid(&self) -> Option<i32> {
        match &self.phase {
            Phase::Running(session) => Some(session.pgid),
            _ => None,
        }
    }

    /// The next moment an [`Input::Tick`] can change anything (the watchdog's
    /// limit, `max_runtime`, a run budget that ends the loop between sessions);
    /// `None` when only other inputs can. A moment already past means now.
    pub fn next_tick_due(&self) -> Option<Instant> {
        let start = self.loop_start?.mono;
        if self.phase == Phase::Stopped {
            return None;
        }
        let between_sessions = matches!(
            self.phase,
            Phase::Waiting { .. } | Phase::AwaitingApproval | Phase::Held { .. }
        );
        let limit = self.settings.guard.max_cost_usd;
        let cost_reached = limit > 0.0 && self.totals.known_cost() >= limit;
        if (self.run_budget.is_some() && between_sessions)
            || (self.run_budget.is_none() && cost_reached && !self.session_running())
        {
            return Some(start);
        }
        let runtime_end = self
            .settings
            .guard
            .max_runtime
            .filter(|_| self.run_budget.is_none())
            .map(|limit| start + limit);
        let stale = match &self.phase {
            Phase::Running(session) if session.kill.is_none() && session.paused_since.is_none() => {
                Some(session.last_growth + self.settings.stale_timeout)
            }
            _ => None,
        };
        match (runtime_end, stale) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the runtime should watch the output file and the STOP file closely.
    pub fn session_running(&self) -> bool {
        matches!(self.phase, Phase::Running(_))
    }

    pub fn state(&self) -> LoopState {
        match &self.phase {
            Phase::NotStarted => LoopState::Starting,
            Phase::CheckingStop => LoopState::Idle,
            Phase::PreHooks => LoopState::PreHooks,
            Phase::Spawning => LoopState::SessionRunning,
            Phase::Running(session) | Phase::Analyzing(session) => match session.kill {
                Some(KillReason::Watchdog) => LoopState::WatchdogKill,
                Some(_) if self.stop_now => LoopState::ShuttingDown,
                _ => LoopState::SessionRunning,
            },
            Phase::PostHooks => LoopState::PostHooks,
            Phase::Waiting { kind, .. } => match kind {
                WaitKind::Retry => LoopState::Retrying,
                WaitKind::Backoff => LoopState::RateLimitedBackoff,
                WaitKind::ErrorBackoff => LoopState::ErrorBackoff,
                WaitKind::BetweenIterations => LoopState::Idle,
                WaitKind::DiskFull => LoopState::DiskFull,
            },
            Phase::AwaitingApproval => LoopState::AwaitingApproval,
            Phase::Held { .. } => LoopState::Held,
            Phase::Stopped => LoopState::Stopped,
        }
    }

    /// The content of the status file.
    pub fn snapshot(&self, wall: DateTime<Utc>) -> Snapshot {
        let session = match &self.phase {
            Phase::Running(session) | Phase::Analyzing(session) => Some(session),
            _ => None,
        };
        let (global, output_file, output_bytes) = match session {
            Some(s) => (Some(s.global), Some(s.output_file.clone()), s.output_bytes),
            None => match &self.last_session {
                Some((global, file, bytes)) => (Some(*global), Some(file.clone()), *bytes),
                None => (None, None, 0),
            },
        };
        let waiting = matches!(self.phase, Phase::Waiting { .. });
        Snapshot {
            lane: LaneId::default(),
            pid: self.pid,
            pid_start_ticks: None,
            state: self.state(),
            agent_command: self.agent_command.clone(),
            stale_timeout_secs: self.settings.stale_timeout.as_secs_f64(),
            paused: session.is_some_and(|s| s.paused_since.is_some()),
            paused_at: session.and_then(|s| s.paused_since_wall),
            stop_pending: self.stop_request.is_some() || self.stop_file_seen,
            iteration: self.iteration(),
            max_iterations: self.settings.max_iterations,
            global_iteration: global,
            output_file,
            output_bytes,
            loop_start: self.loop_start.map_or(wall, |start| start.wall),
            session_start: session.map(|s| s.started_wall).or(self.last_session_wall),
            last_output_growth: session.map(|s| s.last_growth_wall),
            last_update: wall,
            last_completed_iteration: self.last_completed_iteration,
            last_completed_global: self.last_completed_global,
            last_committed: self.last_committed,
            last_exit_code: self.last_exit_code,
            consecutive_rate_limits: self.consecutive_rate_limits,
            consecutive_errors: self.consecutive_errors,
            agent_retrying: session
                .filter(|_| matches!(self.phase, Phase::Running(_)))
                .and_then(|s| s.retrying.clone()),
            pgid: session.map(|s| s.pgid),
            agent_pid: session.map(|s| s.pid),
            // Known to the runtime, which spawned the agent; it fills this in.
            agent_start_ticks: None,
            next_session_at: if waiting { self.wait_until_wall } else { None },
            rate_limit_resets_at: self.rate_limit_resets_at,
            counters: self.counters.clone(),
            exit_reason: self.exit_reason.clone(),
            held_reason: match &self.phase {
                Phase::Held { reason } => Some(reason.clone()),
                _ => None,
            },
            last_session: self.last_session_stats.clone(),
            totals: self.totals.clone(),
            max_cost_usd: Some(self.settings.guard.max_cost_usd).filter(|limit| *limit > 0.0),
            max_runtime_secs: self
                .settings
                .guard
                .max_runtime
                .map(|limit| limit.as_secs_f64()),
            max_cost_per_session_usd: Some(self.settings.guard.max_cost_per_session_usd)
                .filter(|limit| *limit > 0.0),
            max_tool_calls_per_session: Some(self.settings.guard.max_tool_calls_per_session)
                .filter(|limit| *limit > 0),
            ungated: self.ungated.clone(),
        }
    }

    /// Says, in every snapshot, that the agent runs without the approval gate.
    pub fn set_ungated(&mut self, why: Option<String>) {
        self.ungated = why;
    }

    /// The backoff before the next session after `consecutive` rate-limited sessions
    /// in a row (the first waits `initial_delay`), capped at `max_delay`.
    pub fn backoff_delay(settings: &Settings, consecutive: u64) -> Duration {
        let exponent = consecutive.saturating_sub(1).min(62) as u32;
        let factor = 2u64.saturating_pow(exponent);
        let initial = settings.initial_delay.as_secs_f64();
        let secs = (initial * factor as f64).min(settings.max_delay.as_secs_f64());
        Duration::from_secs_f64(secs.max(0.0))
    }

    pub fn step(&mut self, now: Now, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        self.last_wall = Some(now.wall);
        if self.phase == Phase::Stopped {
            return out;
        }
        match input {
            Input::Start => self.on_start(now, &mut out),
            Input::StopFileChecked { present } => self.on_stop_file_checked(now, present, &mut out),
            Input::StopFileSeen => self.on_stop_file_seen(now, &mut out),
            Input::DiskFull { dir, free_bytes } => {
                self.on_disk_full(now, dir, free_bytes, &mut out)
            }
            Input::PreHooksFinished { failure } => self.on_pre_hooks(now, failure, &mut out),
            Input::Spawned {
                global,
                pid,
                pgid,
                output_file,
            } => self.on_spawned(now, global, pid, pgid, output_file, &mut out),
            Input::SpawnFailed { global, error } => {
                let what = global.map_or(String::new(), |g| format!(" global={g}"));
                log(
                    &mut out,
                    Level::Error,
                    format!("cannot start the agent{what}: {error}"),
                );
                self.finish(now, ExitReason::Fatal { message: error }, &mut out);
            }
            Input::PromptReady { critical_marker } => {
                self.on_prompt_ready(now, critical_marker, &mut out)
            }
            Input::SessionApproval { approved, reason } => {
                self.on_session_approval(now, approved, reason, &mut out)
            }
            Input::OutputSize { bytes, written_ago } => {
                self.on_output_size(now, bytes, written_ago)
            }
            Input::Activity { written_ago } => self.on_activity(now, written_ago),
            Input::AgentRetrying { global, retrying } => {
                if let Phase::Running(session) = &mut self.phase
                    && session.global == global
                    && session.retrying != retrying
                {
                    session.retrying = retrying;
                    out.push(Effect::WriteStatus);
                }
            }
            Input::SessionProgress {
                global,
                tool_calls,
                cost_usd,
                new_calls,
            } => self.on_session_progress(now, global, tool_calls, cost_usd, new_calls, &mut out),
            Input::DoomLoopApproval {
                global,
                approved,
                reason,
            } => self.on_doom_loop_approval(now, global, approved, reason, &mut out),
            Input::Tick => self.on_tick(now, &mut out),
            Input::SessionExited {
                exit_code,
                needed_sigkill,
                lingering_killed,
            } => self.on_session_exited(now, exit_code, needed_sigkill, lingering_killed, &mut out),
            Input::SessionAnalyzed(findings) => self.on_session_analyzed(now, *findings, &mut out),
            Input::PostHooksFinished { failures } => {
                for failure in failures {
                    self.hook_failed(HookKind::PostSession, failure, &mut out);
                }
                self.complete_iteration(now, &mut out);
            }
            Input::TimerFired { epoch } => self.on_timer(now, epoch, &mut out),
            Input::Signal(signal) => self.on_signal(now, signal, &mut out),
            Input::Command(command) => self.on_command(now, command, &mut out),
        }
        out
    }

    fn on_start(&mut self, now: Now, out: &mut Vec<Effect>) {
        if self.phase != Phase::NotStarted {
            return;
        }
        self.loop_start = Some(now);
        out.push(Effect::Emit(Event::LoopStart {
            pid: self.pid,
            max_iterations: self.settings.max_iterations,
            agent_command: self.agent_command.clone(),
            // Filled in by the runtime, which chose the method.
            kill_method: String::new(),
            kill_method_detail: String::new(),
        }));
        log(
            out,
            Level::Info,
            format!(
                "loop_start pid={} max_iterations={} agent={}",
                self.pid, self.settings.max_iterations, self.agent_command
            ),
        );
        self.begin_iteration(out);
    }

    fn begin_iteration(&mut self, out: &mut Vec<Effect>) {
        self.phase = Phase::CheckingStop;
        self.wait_until_wall = None;
        out.push(Effect::CheckStopFile);
    }

    fn on_stop_file_checked(&mut self, now: Now, present: bool, out: &mut Vec<Effect>) {
        if self.phase != Phase::CheckingStop {
            return;
        }
        if present {
            log(out, Level::Info, "STOP file found, stopping".into());
            out.push(Effect::RemoveStopFile);
            self.finish(now, ExitReason::StopFile, out);
            return;
        }
        self.stop_file_seen = false;
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        if let Some(since) = self.disk_full_since.take() {
            let waited = now.mono.saturating_duration_since(since);
            log(
                out,
                Level::Info,
                format!(
                    "disk space is back after {:.0}s, going on",
                    waited.as_secs_f64()
                ),
            );
            out.push(Effect::Emit(Event::DiskSpaceRestored {
                waited_secs: round_secs(waited),
            }));
        }
        self.phase = Phase::PreHooks;
        out.push(Effect::WriteStatus);
        let iteration = self.iteration();
        out.push(Effect::RunHooks {
            kind: HookKind::PreSession,
            // The runtime adds the global number the session will get.
            env: vec![("HARNESS_ITERATION".into(), iteration.to_string())],
        });
    }

    /// No session starts while the disk is full; look again in a while.
    fn on_disk_full(&mut self, now: Now, dir: PathBuf, free_bytes: u64, out: &mut Vec<Effect>) {
        if !matches!(self.phase, Phase::CheckingStop | Phase::Spawning) {
            return;
        }
        self.hold_for_space(now, dir, free_bytes, out);
    }

    /// Waits, and looks again, until the disk has space for a session.
    fn hold_for_space(&mut self, now: Now, dir: PathBuf, free_bytes: u64, out: &mut Vec<Effect>) {
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        if self.disk_full_since.is_none() {
            self.disk_full_since = Some(now.mono);
            log(
                out,
                Level::Error,
                format!(
                    "status=disk_full free={free_bytes} bytes in {}: no new session until space returns (looking again every {}s)",
                    dir.display(),
                    self.settings.disk_recheck.as_secs_f64()
                ),
            );
            out.push(Effect::Emit(Event::DiskFull { dir, free_bytes }));
        }
        self.wait(now, WaitKind::DiskFull, self.settings.disk_recheck, out);
    }

    fn on_stop_file_seen(&mut self, now: Now, out: &mut Vec<Effect>) {
        if !self.stop_file_seen {
            self.stop_file_seen = true;
            log(
                out,
                Level::Info,
                "STOP file found, stopping after the current session".into(),
            );
            out.push(Effect::WriteStatus);
        }
        if matches!(
            self.phase,
            Phase::Waiting { .. } | Phase::AwaitingApproval | Phase::Held { .. }
        ) {
            // Nothing is running: no reason to sit out the wait.
            if self.phase == Phase::AwaitingApproval {
                out.push(Effect::CancelSessionApproval);
            }
            self.timer_epoch += 1;
            self.begin_iteration(out);
        }
        let _ = now;
    }

    fn on_pre_hooks(&mut self, now: Now, failure: Option<HookFailure>, out: &mut Vec<Effect>) {
        if self.phase != Phase::PreHooks {
            return;
        }
        if self.hooks_interrupted
            && let Some(reason) = self.pending_stop_reason()
        {
            self.finish(now, reason, out);
            return;
        }
        if let Some(failure) = failure {
            let iteration = self.iteration();
            let reason = format!("pre-session hook failed: {}", failure.command);
            self.hook_failed(HookKind::PreSession, failure, out);
            log(
                out,
                Level::Warn,
                format!("iteration={iteration} skipped: {reason}"),
            );
            out.push(Effect::Emit(Event::IterationSkipped { iteration, reason }));
            self.complete_iteration(now, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        self.phase = Phase::Spawning;
        out.push(Effect::Spawn {
            iteration: self.iteration(),
        });
    }

    fn on_spawned(
        &mut self,
        now: Now,
        global: u64,
        pid: i32,
        pgid: i32,
        output_file: PathBuf,
        out: &mut Vec<Effect>,
    ) {
        if self.phase != Phase::Spawning {
            return;
        }
        let iteration = self.iteration();
        self.counters.sessions += 1;
        log(
            out,
            Level::Info,
            format!(
                "iteration={iteration} global={global} status=session_running pid={pid} output={}",
                output_file.display()
            ),
        );
        out.push(Effect::Emit(Event::SessionStart {
            iteration,
            global,
            pid,
            pgid,
            output_file: output_file.clone(),
            agent_start_ticks: None,
        }));
        self.phase = Phase::Running(Session {
            global,
            pid,
            pgid,
            output_file,
            started: now.mono,
            started_wall: now.wall,
            output_bytes: 0,
            last_growth: now.mono,
            last_growth_wall: now.wall,
            paused_since: None,
            paused_since_wall: None,
            kill: None,
            exit_code: None,
            duration: Duration::ZERO,
            last_call: None,
            doom_gate: false,
            budget: None,
            cost_so_far: None,
            retrying: None,
        });
        out.push(Effect::WriteStatus);
        if self.stop_now {
            self.kill_session(KillReason::StopNow, out);
        } else if self.run_budget.is_some() {
            self.kill_session(KillReason::Budget, out);
        }
    }

    fn on_prompt_ready(&mut self, now: Now, critical_marker: bool, out: &mut Vec<Effect>) {
        if self.phase != Phase::Spawning {
            return;
        }
        if self.hooks_interrupted
            && let Some(reason) = self.pending_stop_reason()
        {
            self.finish(now, reason, out);
            return;
        }
        let iteration = self.iteration();
        if !self.settings.session_gate.asks(iteration, critical_marker) {
            out.push(Effect::StartAgent { iteration });
            return;
        }
        let critical = self.settings.session_gate.autonomy == 3;
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} status=awaiting_approval: the session waits for a human (autonomy {}{})",
                self.settings.session_gate.autonomy,
                if critical { ", critical session" } else { "" }
            ),
        );
        self.phase = Phase::AwaitingApproval;
        out.push(Effect::RequestSessionApproval {
            iteration,
            critical,
        });
        out.push(Effect::WriteStatus);
    }

    fn on_session_approval(
        &mut self,
        now: Now,
        approved: bool,
        reason: String,
        out: &mut Vec<Effect>,
    ) {
        if self.phase != Phase::AwaitingApproval {
            return;
        }
        let iteration = self.iteration();
        out.push(Effect::Emit(Event::SessionGate {
            iteration,
            approved,
            reason: reason.clone(),
        }));
        if let Some(stop) = self.pending_stop_reason() {
            self.finish(now, stop, out);
            return;
        }
        if approved {
            log(
                out,
                Level::Info,
                format!("iteration={iteration} session approved"),
            );
            self.phase = Phase::Spawning;
            out.push(Effect::StartAgent { iteration });
        } else {
            log(
                out,
                Level::Warn,
                format!(
                    "iteration={iteration} status=held: the session was rejected ({reason}); the loop waits until you resume it"
                ),
            );
            self.phase = Phase::Held { reason };
            out.push(Effect::WriteStatus);
        }
    }

    fn on_output_size(&mut self, now: Now, bytes: u64, written_ago: Duration) {
        if let Phase::Running(session) = &mut self.phase
            && bytes != session.output_bytes
        {
            session.output_bytes = bytes;
            session.note_activity(now, written_ago);
        }
    }

    fn on_activity(&mut self, now: Now, written_ago: Duration) {
        if let Phase::Running(session) = &mut self.phase {
            session.note_activity(now, written_ago);
        }
    }

    fn on_tick(&mut self, now: Now, out: &mut Vec<Effect>) {
        self.check_run_budgets(now, out);
        if self.phase == Phase::Stopped {
            return;
        }
        let stale = self.settings.stale_timeout;
        let iteration = self.iteration();
        let Phase::Running(session) = &self.phase else {
            return;
        };
        if session.kill.is_some() || session.paused_since.is_some() {
            return;
        }
        let idle = session.idle_for(now.mono);
        if idle < stale {
            return;
        }
        let global = session.global;
        // Waiting out a limit inside the agent is no hang, but it holds the
        // loop as long: the session ends, and is judged by its last lines.
        let why = match &session.retrying {
            Some(retrying) => format!("{}, killing the session", retrying.describe()),
            None => "no output, killing the session".to_owned(),
        };
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={global} status=watchdog_kill idle={:.1}s limit={:.1}s: {why}",
                idle.as_secs_f64(),
                stale.as_secs_f64()
            ),
        );
        out.push(Effect::Emit(Event::WatchdogStale {
            iteration,
            global,
            idle_secs: round_secs(idle),
            output_bytes: session.output_bytes,
            agent_retrying: session.retrying.clone(),
        }));
        self.kill_session(KillReason::Watchdog, out);
    }

    fn kill_session(&mut self, reason: KillReason, out: &mut Vec<Effect>) {
        let grace = self.settings.kill_grace;
        let Phase::Running(session) = &mut self.phase else {
            return;
        };
        if session.kill.is_some() {
            // Already dying; a stronger reason (stop now) still wins for the record.
            if reason == KillReason::StopNow {
                session.kill = Some(reason);
            }
            return;
        }
        session.kill = Some(reason);
        out.push(Effect::TerminateGroup {
            pgid: session.pgid,
            grace,
        });
        out.push(Effect::WriteStatus);
    }

    fn on_session_exited(
        &mut self,
        now: Now,
        exit_code: i32,
        needed_sigkill: bool,
        lingering_killed: u64,
        out: &mut Vec<Effect>,
    ) {
        let iteration = self.iteration();
        let Phase::Running(session) = &mut self.phase else {
            return;
        };
        session.duration = now.mono.saturating_duration_since(session.started);
        let global = session.global;
        session.paused_since = None;
        session.paused_since_wall = None;
        session.exit_code = Some(match session.kill {
            Some(KillReason::Watchdog) => 124,
            _ => exit_code,
        });
        match session.kill {
            Some(KillReason::Watchdog) => {
                self.counters.watchdog_kills += 1;
                out.push(Effect::Emit(Event::WatchdogKill {
                    iteration,
                    global,
                    needed_sigkill,
                }));
            }
            Some(reason) => {
                if reason == KillReason::User {
                    self.counters.user_kills += 1;
                }
                out.push(Effect::Emit(Event::SessionKilled {
                    iteration,
                    global,
                    reason,
                    needed_sigkill,
                }));
            }
            None => {}
        }
        if lingering_killed > 0 {
            log(
                out,
                Level::Warn,
                format!(
                    "iteration={iteration} global={global} killed {lingering_killed} process(es) left in the session's group after the agent exited"
                ),
            );
            out.push(Effect::Emit(Event::LingeringKilled {
                iteration,
                global,
                processes: lingering_killed,
            }));
        }
        let output_file = session.output_file.clone();
        let session = session.clone();
        self.phase = Phase::Analyzing(session);
        out.push(Effect::AnalyzeSession { output_file });
        out.push(Effect::WriteStatus);
    }

    fn on_session_analyzed(&mut self, now: Now, findings: SessionFindings, out: &mut Vec<Effect>) {
        let Phase::Analyzing(session) = &self.phase else {
            return;
        };
        let mut session = session.clone();
        let iteration = self.iteration();
        let exit_code = session.exit_code.unwrap_or(-1);
        // Output read only after the exit (written faster than a poll) is
        // held to the same guards as output read while the agent ran.
        let (dooms, breach) = guard_calls(
            self.settings.guard,
            &mut session,
            findings.new_calls.clone(),
            findings.stats.tool_calls,
            findings.stats.cost_usd,
            self.totals.known_cost(),
        );
        if session.kill.is_none() {
            for (call, repeats) in dooms {
                record_late_doom_loop(
                    self.settings.guard,
                    iteration,
                    session.global,
                    call,
                    repeats,
                    out,
                );
            }
        }
        if session.budget.is_none()
            && let Some(breach) = breach
            && !breach.budget.is_run_budget()
        {
            session.budget = Some(breach);
            record_breach(
                iteration,
                Some(session.global),
                breach,
                "the session had already ended",
                out,
            );
        }
        let agent_error = findings.agent_error.clone();
        // A session cut short by a full disk is not judged by its output at all.
        let out_of_space = agent_error.is_none() && findings.out_of_space.is_some();
        let rate_limited = agent_error.is_none() && !out_of_space && findings.rate_limit.is_some();
        let transient_error = agent_error.is_none()
            && !out_of_space
            && !rate_limited
            && findings.transient_error.is_some();
        let stopped = rate_limited || transient_error;
        let empty = agent_error.is_none()
            && !out_of_space
            && !stopped
            && findings.output_bytes < self.settings.min_output_bytes;
        let productive = agent_error.is_none() && !out_of_space && !stopped && !empty;
        let will_retry_empty =
            empty && self.empty_retries_this_iteration < self.settings.max_empty_retries;

        self.last_exit_code = Some(exit_code);
        // A session a person killed did not fail on its own.
        let killed_by_you = matches!(session.kill, Some(KillReason::User | KillReason::StopNow));
        if exit_code != 0 && !killed_by_you {
            self.counters.failed_exits += 1;
        }
        self.last_session_wall = Some(session.started_wall);
        self.last_session = Some((
            session.global,
            session.output_file.clone(),
            findings.output_bytes,
        ));
        if findings.committed {
            self.counters.commits += 1;
        }
        let overages = findings.stats.overage_events;
        if overages > 0 {
            self.counters.overages += overages;
            log(
                out,
                Level::Info,
                format!(
                    "iteration={iteration} global={} status=overage count={overages}: past a rate limit by paying for overage, no backoff",
                    session.global
                ),
            );
            out.push(Effect::Emit(Event::Overage {
                iteration,
                global: session.global,
                count: overages,
            }));
        }
        if findings.stats.unrecognised_format && !self.format_unrecognised_said {
            self.format_unrecognised_said = true;
            say_format_unrecognised(iteration, session.global, out);
        }
        let mut stats = findings.stats.clone();
        stats.global = session.global;
        self.totals.add(&stats);
        let mut stats_note = String::new();
        if let Some(cost) = stats.cost_usd {
            stats_note.push_str(&format!(" cost=${cost:.4}"));
        }
        if let Some(turns) = stats.turns {
            stats_note.push_str(&format!(" turns={turns}"));
        }
        log(
            out,
            Level::Info,
            format!(
                "iteration={iteration} global={} status=session_complete exit={exit_code} bytes={} duration={:.1}s committed={}{}{stats_note}",
                session.global,
                findings.output_bytes,
                session.duration.as_secs_f64(),
                findings.committed,
                if agent_error.is_some() {
                    " agent_error=true"
                } else if out_of_space {
                    " disk_full=true"
                } else if rate_limited {
                    " rate_limited=true"
                } else if transient_error {
                    " transient_error=true"
                } else if empty {
                    " empty=true"
                } else {
                    ""
                }
            ),
        );
        out.push(Effect::Emit(Event::SessionComplete {
            iteration,
            global: session.global,
            output_bytes: findings.output_bytes,
            exit_code,
            duration_secs: round_secs(session.duration),
            committed: findings.committed,
            retries: self.empty_retries_this_iteration,
            rate_limited,
            transient_error,
            productive,
            cost_usd: stats.cost_usd,
            turns: stats.turns,
            tool_calls: stats.tool_calls,
            input_tokens: stats.input_tokens,
            output_tokens: stats.output_tokens,
            result: stats.result(),
            killed: session.kill,
            budget: session.budget,
        }));
        self.last_session_stats = Some(stats.clone());

        if let Some(reason) = agent_error {
            log(out, Level::Error, reason.clone());
            out.push(Effect::Emit(Event::AgentError {
                iteration,
                global: session.global,
                reason: reason.clone(),
            }));
            self.finish(now, ExitReason::Fatal { message: reason }, out);
            return;
        }

        if self.stop_now {
            let reason = self.pending_stop_reason().unwrap_or(ExitReason::UserStop);
            self.finish(now, reason, out);
            return;
        }

        self.check_run_cost(Some(session.global), out);
        if !productive && let Some(breach) = self.run_budget {
            self.finish(now, breach.exit_reason(), out);
            return;
        }

        if let Some(space) = findings.out_of_space.filter(|_| out_of_space) {
            log(
                out,
                Level::Warn,
                format!(
                    "iteration={iteration} global={} the disk filled up during the session: not productive, the iteration runs again once there is space",
                    session.global
                ),
            );
            self.hold_for_space(now, space.dir, space.free_bytes, out);
            return;
        }
        if let Some(limit) = findings.rate_limit {
            self.consecutive_errors = 0;
            self.on_rate_limited(now, iteration, &session, limit, out);
            return;
        }
        self.consecutive_rate_limits = 0;
        self.rate_limit_resets_at = None;
        if let Some(reason) = findings.transient_error.filter(|_| transient_error) {
            self.on_transient_error(now, iteration, &session, reason, out);
            return;
        }
        self.consecutive_errors = 0;

        if empty {
            if will_retry_empty {
                self.empty_retries_this_iteration += 1;
                self.counters.empty_retries += 1;
                let retry = self.empty_retries_this_iteration;
                log(
                    out,
                    Level::Warn,
                    format!(
                        "iteration={iteration} global={} status=retrying output={} bytes < {}: empty session, retry {retry}/{} in {:.1}s",
                        session.global,
                        findings.output_bytes,
                        self.settings.min_output_bytes,
                        self.settings.max_empty_retries,
                        self.settings.retry_delay.as_secs_f64()
                    ),
                );
                out.push(Effect::Emit(Event::EmptyRetry {
                    iteration,
                    global: session.global,
                    output_bytes: findings.output_bytes,
                    retry,
                    max_retries: self.settings.max_empty_retries,
                }));
                if let Some(reason) = self.pending_stop_reason() {
                    self.finish(now, reason, out);
                    return;
                }
                self.wait(now, WaitKind::Retry, self.settings.retry_delay, out);
            } else {
                self.counters.empty_iterations += 1;
                log(
                    out,
                    Level::Warn,
                    format!(
                        "iteration={iteration} global={} empty after {} retries, moving on",
                        session.global, self.settings.max_empty_retries
                    ),
                );
                self.complete_iteration(now, out);
            }
            return;
        }

        self.counters.productive += 1;
        self.last_completed_iteration = Some(iteration);
        self.last_completed_global = Some(session.global);
        self.last_committed = Some(findings.committed);
        self.promise_kept = findings.promise_kept;
        if findings.promise_kept {
            log(
                out,
                Level::Info,
                format!(
                    "iteration={iteration} global={} the agent kept the completion promise: the task is complete, stopping after the post-session hooks",
                    session.global
                ),
            );
        }
        self.phase = Phase::PostHooks;
        out.push(Effect::WriteStatus);
        out.push(Effect::RunHooks {
            kind: HookKind::PostSession,
            env: vec![
                ("HARNESS_ITERATION".into(), iteration.to_string()),
                (
                    "HARNESS_GLOBAL_ITERATION".into(),
                    session.global.to_string(),
                ),
                (
                    "HARNESS_OUTPUT_FILE".into(),
                    session.output_file.display().to_string(),
                ),
                ("HARNESS_EXIT_CODE".into(), exit_code.to_string()),
                (
                    "HARNESS_OUTPUT_BYTES".into(),
                    findings.output_bytes.to_string(),
                ),
                (
                    "HARNESS_SESSION_DURATION".into(),
                    session.duration.as_secs().to_string(),
                ),
                ("HARNESS_COMMITTED".into(), findings.committed.to_string()),
                (
                    "HARNESS_COST_USD".into(),
                    stats.cost_usd.map_or_else(String::new, |c| c.to_string()),
                ),
                (
                    "HARNESS_TURNS".into(),
                    stats.turns.map_or_else(String::new, |t| t.to_string()),
                ),
                ("HARNESS_TOOL_CALLS".into(), stats.tool_calls.to_string()),
                ("HARNESS_RESULT".into(), stats.result().unwrap_or_default()),
            ],
        });
    }

    fn on_rate_limited(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        limit: RateLimitFinding,
        out: &mut Vec<Effect>,
    ) {
        self.consecutive_rate_limits += 1;
        self.counters.rate_limits += 1;
        let consecutive = self.consecutive_rate_limits;
        let backoff = Core::backoff_delay(&self.settings, consecutive);
        let resets_at = self.trusted_reset(now, limit.resets_at, out);
        // A reset time the agent gave wins when it comes sooner than the cap, but
        // no wait is shorter than the initial delay.
        let until_reset =
            resets_at.map(|reset| (reset - now.wall).to_std().unwrap_or(Duration::ZERO));
        let delay = match until_reset {
            Some(until) if until < self.settings.max_delay => until,
            _ => backoff,
        }
        .max(self.settings.initial_delay.min(self.settings.max_delay));
        self.rate_limit_resets_at = resets_at;
        let reset_note = match (resets_at, until_reset) {
            (Some(at), Some(until)) if until < self.settings.max_delay => {
                format!(
                    " resets_at={} (waiting for the reset)",
                    at.format("%Y-%m-%dT%H:%M:%SZ")
                )
            }
            (Some(at), _) => format!(
                " resets_at={} (later than the cap)",
                at.format("%Y-%m-%dT%H:%M:%SZ")
            ),
            _ => String::new(),
        };
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={} status=rate_limited_backoff consecutive={consecutive}/{} backoff={:.1}s reason=\"{}\"{reset_note}",
                session.global,
                self.settings.max_consecutive_rate_limits,
                delay.as_secs_f64(),
                limit.reason
            ),
        );
        out.push(Effect::Emit(Event::RateLimited {
            iteration,
            global: session.global,
            reason: limit.reason,
            consecutive,
            backoff_secs: round_secs(delay),
            resets_at,
        }));
        if consecutive >= self.settings.max_consecutive_rate_limits {
            log(
                out,
                Level::Error,
                format!("{consecutive} rate-limited sessions in a row, giving up"),
            );
            self.finish(now, ExitReason::RateLimited { consecutive }, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        self.wait(now, WaitKind::Backoff, delay, out);
    }

    /// A transient server error: backed off like a rate limit, with its own
    /// count and limit, and never reported as a rate limit.
    fn on_transient_error(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        reason: String,
        out: &mut Vec<Effect>,
    ) {
        self.consecutive_errors += 1;
        self.counters.transient_errors += 1;
        let consecutive = self.consecutive_errors;
        let delay = Core::backoff_delay(&self.settings, consecutive);
        let limit = self.settings.max_consecutive_errors;
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={} status=error_backoff consecutive={consecutive}/{limit} backoff={:.1}s reason=\"{reason}\"",
                session.global,
                delay.as_secs_f64(),
            ),
        );
        out.push(Effect::Emit(Event::TransientError {
            iteration,
            global: session.global,
            reason,
            consecutive,
            backoff_secs: round_secs(delay),
        }));
        if consecutive >= limit {
            log(
                out,
                Level::Error,
                format!(
                    "{consecutive} sessions in a row ended in a transient server error, giving up"
                ),
            );
            self.finish(now, ExitReason::TransientErrors { consecutive }, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        self.wait(now, WaitKind::ErrorBackoff, delay, out);
    }

    /// The agent's reset time if it can be believed: not passed already, and not
    /// more than [`MAX_TRUSTED_RESET`] ahead. Otherwise the exponential backoff
    /// applies, and the skew is logged the first time.
    fn trusted_reset(
        &mut self,
        now: Now,
        resets_at: Option<DateTime<Utc>>,
        out: &mut Vec<Effect>,
    ) -> Option<DateTime<Utc>> {
        let reset = resets_at?;
        let ahead = reset - now.wall;
        let too_far =
            chrono::Duration::from_std(MAX_TRUSTED_RESET).unwrap_or(chrono::Duration::MAX);
        if ahead > chrono::Duration::zero() && ahead <= too_far {
            return Some(reset);
        }
        if !std::mem::replace(&mut self.reset_skew_logged, true) {
            let skew = match ahead > chrono::Duration::zero() {
                true => format!("{} ahead", crate::fmt::duration(ahead.num_seconds())),
                false => format!("{} ago", crate::fmt::duration(-ahead.num_seconds())),
            };
            log(
                out,
                Level::Warn,
                format!(
                    "the rate limit's reset time {} is {skew} by this machine's clock (now {}): not trusted, backing off from initial_delay_secs instead (is the clock right?)",
                    reset.format("%Y-%m-%dT%H:%M:%SZ"),
                    now.wall.format("%Y-%m-%dT%H:%M:%SZ")
                ),
            );
        }
        None
    }

    fn complete_iteration(&mut self, now: Now, out: &mut Vec<Effect>) {
        self.completed_iterations += 1;
        self.empty_retries_this_iteration = 0;
        // The stop interrupted the hooks: its exit code, not the iteration's.
        if self.hooks_interrupted
            && let Some(reason) = self.pending_stop_reason()
        {
            self.finish(now, reason, out);
            return;
        }
        if std::mem::take(&mut self.promise_kept) {
            self.finish(now, ExitReason::Completed, out);
            return;
        }
        if let Some(breach) = self.run_budget {
            self.finish(now, breach.exit_reason(), out);
            return;
        }
        if self.completed_iterations >= self.settings.max_iterations {
            self.finish(now, ExitReason::MaxIterations, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        if self.stop_file_seen {
            // Let the iteration check remove it and stop, without the pause.
            self.begin_iteration(out);
            return;
        }
        self.wait(
            now,
            WaitKind::BetweenIterations,
            self.settings.initial_delay,
            out,
        );
    }

    fn wait(&mut self, now: Now, kind: WaitKind, after: Duration, out: &mut Vec<Effect>) {
        self.timer_epoch += 1;
        let epoch = self.timer_epoch;
        self.phase = Phase::Waiting { kind, epoch };
        self.wait_until_wall = chrono::Duration::from_std(after)
            .ok()
            .and_then(|d| now.wall.checked_add_signed(d));
        out.push(Effect::ArmTimer { epoch, after });
        out.push(Effect::WriteStatus);
    }

    fn on_timer(&mut self, now: Now, epoch: u64, out: &mut Vec<Effect>) {
        match self.phase {
            Phase::Waiting { epoch: current, .. } if current == epoch => {
                self.check_run_budgets(now, out);
                if self.phase != Phase::Stopped {
                    self.begin_iteration(out);
                }
            }
            _ => {}
        }
    }

    fn on_signal(&mut self, now: Now, signal: StopSignal, out: &mut Vec<Effect>) {
        let second = self.last_interrupt.is_some_and(|last| {
            now.mono.saturating_duration_since(last) <= DOUBLE_INTERRUPT_WINDOW
        });
        self.last_interrupt = Some(now.mono);
        // A service manager's second SIGTERM comes when it is about to SIGKILL,
        // however long after the first.
        let term_again = signal == StopSignal::Term && self.terms_caught > 0;
        self.terms_caught += u32::from(signal == StopSignal::Term);
        if second || term_again {
            log(
                out,
                Level::Warn,
                format!("Caught {} again, killing the session now", signal.name()),
            );
            self.stop_request = Some(StopRequest::Signal(signal));
            self.stop_now_requested(now, out);
            return;
        }
        if signal == StopSignal::Term && self.settings.sigterm_stops_now {
            log(
                out,
                Level::Warn,
                "Caught SIGTERM, killing the session now ([signals] sigterm = \"stop_now\")".into(),
            );
            self.stop_request = Some(StopRequest::Signal(signal));
            out.push(Effect::Emit(Event::StopRequested {
                source: signal.name().to_string(),
            }));
            self.stop_now_requested(now, out);
            return;
        }
        log(
            out,
            Level::Warn,
            format!("Caught {}, finishing current session...", signal.name()),
        );
        if self.stop_request.is_none() {
            self.stop_request = Some(StopRequest::Signal(signal));
            out.push(Effect::Emit(Event::StopRequested {
                source: signal.name().to_string(),
            }));
        }
        if matches!(signal, StopSignal::Term | StopSignal::Hup) {
            self.interrupt_hooks(out);
        }
        self.stop_if_idle(now, out);
    }

    /// Stop at once when nothing is running that the stop should wait for.
    fn stop_if_idle(&mut self, now: Now, out: &mut Vec<Effect>) {
        if matches!(
            self.phase,
            Phase::Waiting { .. }
                | Phase::NotStarted
                | Phase::AwaitingApproval
                | Phase::Held { .. }
        ) {
            if self.phase == Phase::AwaitingApproval {
                out.push(Effect::CancelSessionApproval);
            }
            if let Some(reason) = self.pending_stop_reason() {
                self.finish(now, reason, out);
            }
        } else {
            out.push(Effect::WriteStatus);
        }
    }

    fn stop_now_requested(&mut self, now: Now, out: &mut Vec<Effect>) {
        self.stop_now = true;
        match self.phase {
            Phase::Running(_) => self.kill_session(KillReason::StopNow, out),
            Phase::Waiting { .. }
            | Phase::NotStarted
            | Phase::CheckingStop
            | Phase::AwaitingApproval
            | Phase::Held { .. } => {
                if self.phase == Phase::AwaitingApproval {
                    out.push(Effect::CancelSessionApproval);
                }
                let reason = self.pending_stop_reason().unwrap_or(ExitReason::UserStop);
                self.finish(now, reason, out);
            }
            Phase::PreHooks | Phase::PostHooks | Phase::Spawning => {
                self.interrupt_hooks(out);
                out.push(Effect::WriteStatus);
            }
            // Analysis is short; the stop takes effect right after.
            _ => out.push(Effect::WriteStatus),
        }
    }

    /// A stop that will not wait for hooks (SIGTERM, a second Ctrl-C): their
    /// groups get TERM, the grace, KILL, and the loop ends when they have.
    fn interrupt_hooks(&mut self, out: &mut Vec<Effect>) {
        if matches!(
            self.phase,
            Phase::PreHooks | Phase::PostHooks | Phase::Spawning
        ) {
            self.hooks_interrupted = true;
            out.push(Effect::InterruptHooks);
        }
    }

    fn on_command(&mut self, now: Now, command: Command, out: &mut Vec<Effect>) {
        match command {
            Command::Pause => {
                if let Phase::Running(session) = &mut self.phase
                    && session.paused_since.is_none()
                    && session.kill.is_none()
                {
                    session.paused_since = Some(now.mono);
                    session.paused_since_wall = Some(now.wall);
                    let (pgid, global) = (session.pgid, session.global);
                    log(out, Level::Info, format!("global={global} status=paused"));
                    out.push(Effect::PauseGroup { pgid });
                    out.push(Effect::Emit(Event::Paused { global }));
                    out.push(Effect::WriteStatus);
                }
            }
            Command::Resume if matches!(self.phase, Phase::Held { .. }) => {
                log(
                    out,
                    Level::Info,
                    "resumed by the user: asking again for the next session".into(),
                );
                out.push(Effect::Emit(Event::LoopResumed));
                self.begin_iteration(out);
            }
            Command::Resume => self.resume_session(now, out),
            Command::KillSession => {
                if self.session_running() {
                    log(
                        out,
                        Level::Warn,
                        "killing the session at the user's request".into(),
                    );
                    self.kill_session(KillReason::User, out);
                }
            }
            Command::StopAfterCurrent => {
                if self.stop_request == Some(StopRequest::User) {
                    self.stop_request = None;
                    log(out, Level::Info, "stop cancelled".into());
                    out.push(Effect::Emit(Event::StopCancelled));
                    out.push(Effect::WriteStatus);
                } else if self.stop_request.is_none() {
                    self.stop_request = Some(StopRequest::User);
                    log(
                        out,
                        Level::Info,
                        "stopping after the current session".into(),
                    );
                    out.push(Effect::Emit(Event::StopRequested {
                        source: "user".into(),
                    }));
                    self.stop_if_idle(now, out);
                }
            }
            Command::TerminalClosed => {
                if self.stop_request.is_none() {
                    self.stop_request = Some(StopRequest::TerminalClosed);
                }
                log(
                    out,
                    Level::Warn,
                    "stopping now: the control room's terminal is gone".into(),
                );
                self.stop_now_requested(now, out);
            }
            Command::StopNow => {
                if self.stop_request.is_none() {
                    self.stop_request = Some(StopRequest::User);
                }
                log(
                    out,
                    Level::Warn,
                    "stopping now at the user's request".into(),
                );
                self.stop_now_requested(now, out);
            }
        }
    }

    /// Continues a paused session (a no-op when none is paused).
    fn resume_session(&mut self, now: Now, out: &mut Vec<Effect>) {
        if let Phase::Running(session) = &mut self.phase
            && let Some(since) = session.paused_since.take()
        {
            session.paused_since_wall = None;
            let paused = now.mono.saturating_duration_since(since);
            // The watchdog clock was frozen: move the last growth forward by the pause.
            session.last_growth += paused;
            let (pgid, global) = (session.pgid, session.global);
            log(out, Level::Info, format!("global={global} status=resumed"));
            out.push(Effect::ResumeGroup { pgid });
            out.push(Effect::Emit(Event::Resumed {
                global,
                paused_secs: round_secs(paused),
            }));
            out.push(Effect::WriteStatus);
        }
    }

    /// Budgets and doom-loop detection on what the running session did so far,
    /// one tool call at a time: a chunk of many calls is judged as if each had
    /// been read alone, so a budget of N stops the session at call N+1.
    fn on_session_progress(
        &mut self,
        now: Now,
        global: u64,
        tool_calls: u64,
        cost_usd: Option<f64>,
        new_calls: Vec<ToolCallSig>,
        out: &mut Vec<Effect>,
    ) {
        let guard = self.settings.guard;
        let iteration = self.iteration();
        let run_cost = self.totals.known_cost();
        let Phase::Running(session) = &mut self.phase else {
            return;
        };
        if session.global != global || session.kill.is_some() {
            return;
        }
        let (dooms, breach) =
            guard_calls(guard, session, new_calls, tool_calls, cost_usd, run_cost);
        for (call, repeats) in dooms {
            self.on_doom_loop(now, iteration, global, call, repeats, out);
        }
        if let Some(breach) = breach {
            self.budget_exceeded(breach, out);
        }
    }

    fn on_doom_loop(
        &mut self,
        now: Now,
        iteration: u64,
        global: u64,
        call: ToolCallSig,
        repeats: u64,
        out: &mut Vec<Effect>,
    ) {
        let action = self.settings.guard.on_doom_loop;
        let input: String = call.summary.chars().take(200).collect();
        let what = match action {
            DoomLoopAction::Kill => "killing the session",
            DoomLoopAction::Gate => "pausing the session to ask whether it may go on",
            DoomLoopAction::Warn => "going on ([guard] on_doom_loop = \"warn\")",
        };
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={global} status=doom_loop tool={} repeats={repeats} input=\"{input}\": the same tool call {repeats} times in a row, {what}",
                call.name
            ),
        );
        out.push(Effect::Emit(Event::DoomLoop {
            iteration,
            global,
            tool: call.name.clone(),
            input: input.clone(),
            repeats,
            action,
        }));
        match action {
            DoomLoopAction::Warn => {}
            DoomLoopAction::Kill => self.kill_session(KillReason::DoomLoop, out),
            DoomLoopAction::Gate => {
                let Phase::Running(session) = &mut self.phase else {
                    return;
                };
                session.doom_gate = true;
                if session.paused_since.is_none() {
                    session.paused_since = Some(now.mono);
                    session.paused_since_wall = Some(now.wall);
                    out.push(Effect::PauseGroup { pgid: session.pgid });
                    out.push(Effect::Emit(Event::Paused { global }));
                }
                out.push(Effect::RequestDoomLoopApproval {
                    iteration,
                    global,
                    tool: call.name,
                    input,
                    repeats,
                });
                out.push(Effect::WriteStatus);
            }
        }
    }

    fn on_doom_loop_approval(
        &mut self,
        now: Now,
        global: u64,
        approved: bool,
        reason: String,
        out: &mut Vec<Effect>,
    ) {
        let Phase::Running(session) = &mut self.phase else {
            return;
        };
        if session.global != global || !session.doom_gate {
            return;
        }
        session.doom_gate = false;
        out.push(Effect::Emit(Event::DoomLoopGate {
            global,
            approved,
            reason: reason.clone(),
        }));
        if approved {
            // A fresh streak: the human said this repetition is fine.
            session.last_call = None;
            log(
                out,
                Level::Info,
                format!("global={global} the session may go on ({reason})"),
            );
            self.resume_session(now, out);
        } else {
            log(
                out,
                Level::Warn,
                format!(
                    "global={global} doom loop: the session was rejected ({reason}), killing it"
                ),
            );
            self.kill_session(KillReason::DoomLoop, out);
        }
    }

    /// Records a budget breach and stops the session (and, for a run budget, the
    /// loop once the session is recorded).
    fn budget_exceeded(&mut self, breach: BudgetBreach, out: &mut Vec<Effect>) {
        let iteration = self.iteration();
        let global = match &mut self.phase {
            Phase::Running(session) => {
                session.budget.get_or_insert(breach);
                Some(session.global)
            }
            _ => None,
        };
        if breach.budget.is_run_budget() {
            self.run_budget.get_or_insert(breach);
        }
        let stopping = match (global.is_some(), breach.budget.is_run_budget()) {
            (true, true) => "stopping the session and the run",
            (true, false) => "stopping the session",
            (false, _) => "stopping the run",
        };
        record_breach(iteration, global, breach, stopping, out);
        if global.is_some() {
            self.kill_session(KillReason::Budget, out);
        }
    }

    /// `max_cost_usd` against the run's total so far.
    fn check_run_cost(&mut self, global: Option<u64>, out: &mut Vec<Effect>) {
        let limit = self.settings.guard.max_cost_usd;
        if limit <= 0.0 || self.run_budget.is_some() || self.totals.known_cost() < limit {
            return;
        }
        let breach = BudgetBreach {
            budget: Budget::MaxCostUsd,
            limit,
            value: self.totals.known_cost(),
        };
        self.run_budget = Some(breach);
        record_breach(self.iteration(), global, breach, "stopping the run", out);
    }

    /// `max_runtime` (and `max_cost_usd` between sessions): stops a session
    /// in progress, or ends the loop at once when nothing runs.
    fn check_run_budgets(&mut self, now: Now, out: &mut Vec<Effect>) {
        if self.run_budget.is_none()
            && let Some(limit) = self.settings.guard.max_runtime
            && let Some(start) = self.loop_start
        {
            let ran = now.mono.saturating_duration_since(start.mono);
            if ran >= limit {
                let breach = BudgetBreach {
                    budget: Budget::MaxRuntime,
                    limit: limit.as_secs_f64(),
                    value: ran.as_secs_f64(),
                };
                self.budget_exceeded(breach, out);
            }
        }
        if self.run_budget.is_none() && !self.session_running() {
            self.check_run_cost(None, out);
        }
        let Some(breach) = self.run_budget else {
            return;
        };
        if matches!(
            self.phase,
            Phase::Waiting { .. } | Phase::AwaitingApproval | Phase::Held { .. }
        ) {
            if self.phase == Phase::AwaitingApproval {
                out.push(Effect::CancelSessionApproval);
            }
            self.finish(now, breach.exit_reason(), out);
        }
    }

    fn pending_stop_reason(&self) -> Option<ExitReason> {
        match &self.stop_request {
            Some(StopRequest::Signal(signal)) => Some(ExitReason::Signal {
                signal: signal.name().into(),
                forced: self.stop_now,
            }),
            Some(StopRequest::User) => Some(ExitReason::UserStop),
            Some(StopRequest::TerminalClosed) => Some(ExitReason::TerminalClosed),
            None => None,
        }
    }

    fn hook_failed(&mut self, kind: HookKind, failure: HookFailure, out: &mut Vec<Effect>) {
        self.counters.hook_failures += 1;
        let what = match kind {
            HookKind::PreSession => "pre-session",
            HookKind::PostSession => "post-session",
        };
        let how = if failure.timed_out {
            "timed out".to_string()
        } else {
            match failure.exit_code {
                Some(code) => format!("exit={code}"),
                None => "killed by a signal".to_string(),
            }
        };
        log(
            out,
            Level::Warn,
            format!("{what} hook failed ({how}): {}", failure.command),
        );
        out.push(Effect::Emit(Event::HookFailed {
            kind,
            command: failure.command,
            exit_code: failure.exit_code,
            timed_out: failure.timed_out,
            output: failure.output,
        }));
    }

    fn finish(&mut self, now: Now, reason: ExitReason, out: &mut Vec<Effect>) {
        if self.phase == Phase::Stopped {
            return;
        }
        self.timer_epoch += 1;
        self.phase = Phase::Stopped;
        self.wait_until_wall = None;
        self.exit_reason = Some(reason.clone());
        let duration = self.loop_start.map_or(Duration::ZERO, |start| {
            now.mono.saturating_duration_since(start.mono)
        });
        out.push(Effect::Emit(Event::LoopEnd {
            reason: reason.clone(),
            iterations: self.completed_iterations,
            counters: self.counters.clone(),
            duration_secs: round_secs(duration),
        }));
        out.push(Effect::WriteStatus);
        out.push(Effect::Exit(reason));
    }
}

/// What the guards find in the tool calls read since the last check, taken one
/// at a time (`tool_calls` is the session's count after the last of them): the
/// doom loops, and the first budget broken, at the call that broke it. A doom
/// loop that stops the session ends the look, as the session ends there.
fn guard_calls(
    guard: GuardSettings,
    session: &mut Session,
    calls: Vec<ToolCallSig>,
    tool_calls: u64,
    cost_usd: Option<f64>,
    run_cost: f64,
) -> (Vec<(ToolCallSig, u64)>, Option<BudgetBreach>) {
    if let Some(cost) = cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
        session.cost_so_far = Some(cost);
    }
    let before = tool_calls.saturating_sub(calls.len() as u64);
    let mut dooms: Vec<(ToolCallSig, u64)> = Vec::new();
    for (n, call) in (before + 1..).zip(calls) {
        if guard.doom_loop_threshold > 0 {
            let repeats = match &mut session.last_call {
                Some((last, count))
                    if last.name == call.name && last.input_hash == call.input_hash =>
                {
                    *count += 1;
                    *count
                }
                slot => {
                    *slot = Some((call, 1));
                    1
                }
            };
            // Once per streak: a streak that goes on is not reported again.
            if repeats == guard.doom_loop_threshold && !session.doom_gate {
                dooms.extend(session.last_call.clone());
                if guard.on_doom_loop != DoomLoopAction::Warn {
                    return (dooms, None);
                }
            }
        }
        // The cost is known only as of the end of what was read.
        if let Some(breach) = budget_breach(guard, n, None, run_cost) {
            return (dooms, Some(breach));
        }
    }
    let breach = budget_breach(guard, tool_calls, session.cost_so_far, run_cost);
    (dooms, breach)
}

/// The first budget a session's tool calls and cost so far break, if any.
fn budget_breach(
    guard: GuardSettings,
    tool_calls: u64,
    cost: Option<f64>,
    run_cost: f64,
) -> Option<BudgetBreach> {
    if guard.max_tool_calls_per_session > 0 && tool_calls > guard.max_tool_calls_per_session {
        return Some(BudgetBreach {
            budget: Budget::MaxToolCallsPerSession,
            limit: guard.max_tool_calls_per_session as f64,
            value: tool_calls as f64,
        });
    }
    let cost = cost?;
    if guard.max_cost_per_session_usd > 0.0 && cost > guard.max_cost_per_session_usd {
        return Some(BudgetBreach {
            budget: Budget::MaxCostPerSessionUsd,
            limit: guard.max_cost_per_session_usd,
            value: cost,
        });
    }
    if guard.max_cost_usd > 0.0 && run_cost + cost >= guard.max_cost_usd {
        return Some(BudgetBreach {
            budget: Budget::MaxCostUsd,
            limit: guard.max_cost_usd,
            value: run_cost + cost,
        });
    }
    None
}

/// The log line and the `doom_loop` event of a doom loop found in output read
/// after the session ended: recorded, with nothing left to stop.
fn record_late_doom_loop(
    guard: GuardSettings,
    iteration: u64,
    global: u64,
    call: ToolCallSig,
    repeats: u64,
    out: &mut Vec<Effect>,
) {
    let input: String = call.summary.chars().take(200).collect();
    log(
        out,
        Level::Warn,
        format!(
            "iteration={iteration} global={global} status=doom_loop tool={} repeats={repeats} input=\"{input}\": the same tool call {repeats} times in a row: the session had already ended",
            call.name
        ),
    );
    out.push(Effect::Emit(Event::DoomLoop {
        iteration,
        global,
        tool: call.name,
        input,
        repeats,
        action: guard.on_doom_loop,
    }));
}

/// The log line and the `budget_exceeded` event of a breach.
fn record_breach(
    iteration: u64,
    global: Option<u64>,
    breach: BudgetBreach,
    stopping: &str,
    out: &mut Vec<Effect>,
) {
    let at = global.map_or_else(String::new, |g| format!(" global={g}"));
    log(
        out,
        Level::Warn,
        format!(
            "iteration={iteration}{at} status=budget_exceeded {}: {stopping}",
            breach.describe()
        ),
    );
    out.push(Effect::Emit(Event::BudgetExceeded {
        iteration,
        global,
        budget: breach.budget,
        limit: breach.limit,
        value: breach.value,
    }));
}

fn log(out: &mut Vec<Effect>, level: Level, message: String) {
    out.push(Effect::Log { level, message });
}

/// Seconds with millisecond precision, for the record.
fn round_secs(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0).round() / 1000.0
}

/// The agent writes JSON lines of no format clowder reads (Codex before 0.44):
/// its sessions are not counted, and the log and the event log say so.
fn say_format_unrecognised(iteration: u64, global: u64, out: &mut Vec<Effect>) {
    log(
        out,
        Level::Warn,
        format!(
            "iteration={iteration} global={global} status=unrecognised_output_format: the agent's output is in a format clowder does not recognise; turns, tokens and cost are not counted"
        ),
    );
    out.push(Effect::Emit(Event::UnrecognisedOutputFormat {
        iteration,
        global,
    }));
}

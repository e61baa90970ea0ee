//! The core seen from outside: its settings, counters, state, snapshot and next tick due.

use std::path::PathBuf;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::{Core, Phase, Session, Settings, WaitKind};
use crate::protocol::{Counters, KillReason, LaneId, LoopState, Snapshot};

impl Core {
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
        let under_way = (self.completed_iterations + 1).min(self.settings.max_iterations);
        if self.phase == Phase::Stopped {
            // Nothing is under way once stopped: the last iteration that ran,
            // finished or cut short (0 when none did).
            return self
                .completed_iterations
                .max(self.last_ran_iteration)
                .min(under_way);
        }
        under_way
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
        // The status shows the iteration under way (the one after those
        // done), or once stopped the last that ran, done if it completed.
        let done_last = earlier.state == LoopState::Stopped
            && earlier.last_completed_iteration == Some(earlier.iteration);
        self.completed_iterations = match done_last {
            true => earlier.iteration,
            false => earlier.iteration.saturating_sub(1),
        };
        self.counters = earlier.counters.clone();
        self.totals = earlier.totals.clone();
        self.last_completed_iteration = earlier.last_completed_iteration;
        self.last_completed_global = earlier.last_completed_global;
        self.last_committed = earlier.last_committed;
        // A run that ends before its first session still says how the last one went.
        self.last_exit_code = earlier.last_exit_code;
        self.last_session = earlier
            .global_iteration
            .zip(earlier.output_file.clone())
            .map(|(global, file)| (global, file, earlier.output_bytes));
        self.last_session_stats = earlier.last_session.clone();
    }

    /// The running session's process group, if a session is running.
    pub fn running_pgid(&self) -> Option<i32> {
        match &self.phase {
            Phase::Running(session) => Some(session.pgid),
            _ => None,
        }
    }

    /// The next moment an [`Input::Tick`](super::Input::Tick) can change anything (the watchdog's
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
        let session = self.shown_session();
        let (global, output_file, output_bytes) = self.shown_output(session);
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
            held_reason: self.held_reason(),
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
            notes_now: self.notes_now,
        }
    }

    /// The session the status shows: running, or ended and being judged.
    fn shown_session(&self) -> Option<&Session> {
        match &self.phase {
            Phase::Running(session) | Phase::Analyzing(session) => Some(session),
            _ => None,
        }
    }

    /// The session number, output file and size the status shows: the shown
    /// session's, or the last one's between sessions.
    fn shown_output(&self, session: Option<&Session>) -> (Option<u64>, Option<PathBuf>, u64) {
        match session {
            Some(s) => (Some(s.global), Some(s.output_file.clone()), s.output_bytes),
            None => match &self.last_session {
                Some((global, file, bytes)) => (Some(*global), Some(file.clone()), *bytes),
                None => (None, None, 0),
            },
        }
    }

    fn held_reason(&self) -> Option<String> {
        match &self.phase {
            Phase::Held { reason } => Some(reason.clone()),
            _ => None,
        }
    }

    /// Says, in every snapshot, that the agent runs without the approval gate.
    pub fn set_ungated(&mut self, why: Option<String>) {
        self.ungated = why;
    }

    /// Says, in every snapshot, that notes reach a running session.
    pub fn set_notes_now(&mut self, now: bool) {
        self.notes_now = now;
    }
}

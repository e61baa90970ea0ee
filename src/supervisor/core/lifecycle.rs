//! A session's life from start to exit: stop-file check, pre-hooks, spawn, prompt, approval, exit.

use std::path::PathBuf;
use std::time::Duration;

use super::{Core, Effect, HookFailure, Level, Now, Phase, Session, WaitKind, log, round_secs};
use crate::protocol::{AgentRetrying, Event, ExitReason, HookKind, KillReason};

impl Core {
    pub(super) fn on_start(&mut self, now: Now, out: &mut Vec<Effect>) {
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
        // A lane that goes on from an earlier run may have spent its budget
        // already: it ends before paying for one more session.
        self.check_run_cost(None, out);
        if let Some(breach) = self.run_budget {
            self.finish(now, breach.exit_reason(), out);
            return;
        }
        self.begin_iteration(out);
    }

    pub(super) fn begin_iteration(&mut self, out: &mut Vec<Effect>) {
        self.phase = Phase::CheckingStop;
        self.wait_until_wall = None;
        out.push(Effect::CheckStopFile);
    }

    pub(super) fn on_stop_file_checked(&mut self, now: Now, present: bool, out: &mut Vec<Effect>) {
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
    pub(super) fn on_disk_full(
        &mut self,
        now: Now,
        dir: PathBuf,
        free_bytes: u64,
        out: &mut Vec<Effect>,
    ) {
        if !matches!(self.phase, Phase::CheckingStop | Phase::Spawning) {
            return;
        }
        self.hold_for_space(now, dir, free_bytes, out);
    }

    /// Waits, and looks again, until the disk has space for a session.
    pub(super) fn hold_for_space(
        &mut self,
        now: Now,
        dir: PathBuf,
        free_bytes: u64,
        out: &mut Vec<Effect>,
    ) {
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

    pub(super) fn on_stop_file_seen(&mut self, now: Now, out: &mut Vec<Effect>) {
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

    pub(super) fn on_pre_hooks(
        &mut self,
        now: Now,
        failure: Option<HookFailure>,
        out: &mut Vec<Effect>,
    ) {
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

    pub(super) fn on_spawned(
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

    pub(super) fn on_prompt_ready(
        &mut self,
        now: Now,
        critical_marker: bool,
        out: &mut Vec<Effect>,
    ) {
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

    pub(super) fn on_session_approval(
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

    pub(super) fn on_session_exited(
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
        session.paused_since = None;
        session.paused_since_wall = None;
        session.exit_code = Some(match session.kill {
            Some(KillReason::Watchdog) => 124,
            _ => exit_code,
        });
        let session = session.clone();
        self.count_kill(iteration, &session, needed_sigkill, out);
        report_lingering(iteration, session.global, lingering_killed, out);
        let output_file = session.output_file.clone();
        self.phase = Phase::Analyzing(session);
        out.push(Effect::AnalyzeSession { output_file });
        out.push(Effect::WriteStatus);
    }

    /// A session ended by a kill is counted and told apart by who killed it.
    fn count_kill(
        &mut self,
        iteration: u64,
        session: &Session,
        needed_sigkill: bool,
        out: &mut Vec<Effect>,
    ) {
        let global = session.global;
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
    }

    /// The agent could not start: the run cannot go on.
    pub(super) fn on_spawn_failed(
        &mut self,
        now: Now,
        global: Option<u64>,
        error: String,
        out: &mut Vec<Effect>,
    ) {
        let what = global.map_or(String::new(), |g| format!(" global={g}"));
        log(
            out,
            Level::Error,
            format!("cannot start the agent{what}: {error}"),
        );
        self.finish(now, ExitReason::Fatal { message: error }, out);
    }

    /// The agent is retrying a request of its own; the status shows it.
    pub(super) fn on_agent_retrying(
        &mut self,
        global: u64,
        retrying: Option<AgentRetrying>,
        out: &mut Vec<Effect>,
    ) {
        if let Phase::Running(session) = &mut self.phase
            && session.global == global
            && session.retrying != retrying
        {
            session.retrying = retrying;
            out.push(Effect::WriteStatus);
        }
    }

    /// The agent cannot work: its session ends now, not after its own
    /// retries; the session's analysis then ends the loop.
    pub(super) fn on_agent_error(&mut self, global: u64, reason: String, out: &mut Vec<Effect>) {
        let iteration = self.iteration();
        let Phase::Running(session) = &mut self.phase else {
            return;
        };
        if session.global != global || session.kill.is_some() {
            return;
        }
        session.retrying = None;
        log(
            out,
            Level::Error,
            format!(
                "iteration={iteration} global={global} {reason} (the session ends now: retrying will not help)"
            ),
        );
        self.kill_session(KillReason::AgentError, out);
    }

    pub(super) fn on_post_hooks(
        &mut self,
        now: Now,
        failures: Vec<HookFailure>,
        out: &mut Vec<Effect>,
    ) {
        for failure in failures {
            self.hook_failed(HookKind::PostSession, failure, out);
        }
        self.complete_iteration(now, out);
    }
}

/// Processes left in the session's group after the agent exited were killed.
fn report_lingering(iteration: u64, global: u64, lingering_killed: u64, out: &mut Vec<Effect>) {
    if lingering_killed == 0 {
        return;
    }
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

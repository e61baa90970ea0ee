//! Carrying out the core's effects: events, status, hooks, slots and reports.

use std::collections::VecDeque;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::{
    Internal, MIN_FREE_SPACE, QUEUED_MARK, Runtime, SHARED_LIMIT_POLL, budget_spent, free_space,
    lock_limit,
};
use crate::protocol::{Event, ExitReason, HookKind};
use crate::store::status;
use crate::supervisor::core::{Effect, Input, Level};
use crate::supervisor::hooks;

impl Runtime {
    pub(super) fn execute(&mut self, effect: Effect, queue: &mut VecDeque<Input>) {
        match effect {
            Effect::Log { level, message } => self.reporter.log(Utc::now(), level, &message),
            Effect::Emit(event) => self.emit_from_core(event),
            Effect::WriteStatus => self.write_status(),
            Effect::CheckStopFile => queue.push_back(self.check_stop_file()),
            Effect::RemoveStopFile => self.remove_stop_file(),
            Effect::RunHooks { kind, env } => self.run_hooks(kind, env),
            Effect::Spawn { iteration } => self.take_slot(iteration),
            Effect::PauseGroup { pgid } => self.pause_group(pgid, true),
            Effect::ResumeGroup { pgid } => self.pause_group(pgid, false),
            Effect::TerminateGroup { pgid, .. } => {
                if let Some(session) = self.session.as_ref().filter(|s| s.pgid == pgid) {
                    // No note reaches a session after its kill.
                    if let Some(steer) = &session.steer {
                        steer.close();
                    }
                    let _ = session.kill.send(());
                }
            }
            Effect::AnalyzeSession { output_file } => self.analyze(output_file),
            Effect::ArmTimer { epoch, after } => self.arm_timer(epoch, after),
            Effect::Exit(reason) => {
                self.approval_cancel
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                self.exit = Some(reason);
            }
            Effect::StartAgent { .. } => {
                let prompt = self.pending_prompt.take().unwrap_or_default();
                let started = self.spawn_session(&prompt);
                if let Input::Spawned { global, .. } = &started {
                    self.notes_delivered(*global);
                }
                queue.push_back(started);
            }
            Effect::RequestSessionApproval {
                iteration,
                critical,
            } => self.request_session_approval(iteration, critical),
            Effect::RequestDoomLoopApproval {
                iteration,
                global,
                tool,
                input,
                repeats,
            } => self.request_doom_loop_approval(iteration, global, &tool, &input, repeats),
            Effect::InterruptHooks => {
                let _ = self.hook_cancel.send(true);
            }
            Effect::CancelSessionApproval => self
                .approval_cancel
                .store(true, std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// An event of the core's, completed with what only the runtime knows,
    /// recorded, and passed on to whoever waits for it.
    fn emit_from_core(&mut self, mut event: Event) {
        if let Event::LoopStart {
            kill_method,
            kill_method_detail,
            ..
        } = &mut event
        {
            *kill_method = self.kill_method.name().to_string();
            *kill_method_detail = self.kill_method.detail();
        }
        if let Event::SessionStart {
            pid,
            agent_start_ticks,
            ..
        } = &mut event
            && let Some(session) = self.session.as_ref().filter(|s| s.pid == *pid)
        {
            *agent_start_ticks = session.start_ticks;
        }
        self.emit(&event);
        if let Event::WatchdogStale { idle_secs, .. } = &event
            && let Some(hook) = self.lane.as_mut().and_then(|l| l.on_stale.as_mut())
        {
            hook(*idle_secs);
        }
        if let Event::RateLimited {
            backoff_secs,
            resets_at,
            ..
        } = &event
        {
            self.report_rate_limit(*backoff_secs, *resets_at);
        }
    }

    /// A stop file, or a disk too full to go on, between iterations.
    fn check_stop_file(&mut self) -> Input {
        let present = self.stop_file.exists();
        match self.free_space_if_low() {
            Some(free_bytes) if !present => Input::DiskFull {
                dir: self.output_dir.clone(),
                free_bytes,
            },
            _ => Input::StopFileChecked { present },
        }
    }

    fn remove_stop_file(&mut self) {
        if let Err(err) = std::fs::remove_file(&self.stop_file) {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!("cannot remove {}: {err}", self.stop_file.display()),
            );
        }
    }

    fn arm_timer(&self, epoch: u64, after: std::time::Duration) {
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = tx.send(Internal::Core(Box::new(Input::TimerFired { epoch })));
        });
    }

    pub(super) fn emit(&mut self, event: &Event) {
        let wall = Utc::now();
        if let Some(log) = &mut self.event_log {
            let result = log.append(wall, event).and_then(|()| {
                // A later run must find where a session started even if clowder dies.
                if matches!(event, Event::SessionStart { .. } | Event::LoopEnd { .. }) {
                    log.sync()
                } else {
                    Ok(())
                }
            });
            if let Err(err) = result {
                let path = log.path().display().to_string();
                self.reporter.log(
                    wall,
                    Level::Error,
                    &format!("cannot append to the event log {path}: {err}"),
                );
            }
        }
        self.reporter.event(wall, event);
    }

    pub(super) fn write_status(&mut self) {
        let mut snapshot = self.core.snapshot(Utc::now());
        self.status_growth = (snapshot.output_bytes, snapshot.last_output_growth);
        // The core learns the size at each poll; the status shows the freshest.
        if let Some(session) = &self.session
            && let Ok(meta) = std::fs::metadata(&session.output_file)
        {
            snapshot.output_bytes = snapshot.output_bytes.max(meta.len());
        }
        if let Some(session) = &self.session
            && snapshot.agent_pid == Some(session.pid)
        {
            snapshot.agent_start_ticks = session.start_ticks;
        }
        snapshot.pid_start_ticks = Some(self.shell.own_start).filter(|ticks| *ticks > 0);
        match status::write(&self.status_path, &snapshot) {
            Ok(()) => self.status_error_reported = false,
            Err(err) => {
                if !self.status_error_reported {
                    self.reporter.log(
                        Utc::now(),
                        Level::Error,
                        &format!(
                            "cannot write the status file {}: {err} (keeping the last good one)",
                            self.status_path.display()
                        ),
                    );
                    self.status_error_reported = true;
                }
            }
        }
        self.last_status_write = Some(Instant::now());
    }

    /// The free space where output files go, when it is below [`MIN_FREE_SPACE`].
    pub(super) fn free_space_if_low(&self) -> Option<u64> {
        free_space(&self.output_dir).filter(|free| *free < MIN_FREE_SPACE)
    }

    pub(super) fn base_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "HARNESS_PROMPT_FILE".into(),
            self.config.prompt_path().display().to_string(),
        )];
        if let Some(lane) = &self.lane {
            env.extend(lane.env.iter().cloned());
        }
        env
    }

    pub(super) fn run_hooks(&mut self, kind: HookKind, mut env: Vec<(String, String)>) {
        env.extend(self.base_env());
        let commands: Vec<String> = match kind {
            HookKind::PreSession => {
                env.push((
                    "HARNESS_GLOBAL_ITERATION".into(),
                    self.counter.next().to_string(),
                ));
                &self.config.hooks.pre_session
            }
            HookKind::PostSession => &self.config.hooks.post_session,
        }
        .iter()
        .map(|c| c.0.clone())
        .collect();
        let tx = self.internal_tx.clone();
        let cwd = self.options.working_dir.clone();
        let timeout = self.config.hooks.timeout_secs.0;
        let shell = self.shell.clone();
        tokio::spawn(async move {
            let pre = kind == HookKind::PreSession;
            let failures = hooks::run_hooks(&commands, &env, &cwd, timeout, pre, &shell).await;
            let _ = tx.send(Internal::HooksDone { kind, failures });
        });
    }

    /// Prepares session `iteration` once the fleet has a session slot for it
    /// (at once outside a fleet, or when the slot is still held).
    pub(super) fn take_slot(&mut self, iteration: u64) {
        let Some(lane) = &self.lane else {
            return self.build_prompt(iteration);
        };
        if self.lane_paused {
            // `clowder lane pause` between sessions: the next one waits for resume.
            let message = format!(
                "iteration={iteration} the lane is paused: the session starts on lane resume"
            );
            self.reporter.log(Utc::now(), Level::Info, &message);
            self.held_iteration = Some(iteration);
            return;
        }
        let budget = lane.budget.clone();
        if let Some(spent) = budget_spent(budget.as_ref()) {
            let _ = self.internal_tx.send(spent);
            return;
        }
        let slots = lane.slots.clone().filter(|_| self.slot.is_none());
        let shared = lane.shared_limit.clone();
        if slots.is_none() && shared.is_none() {
            return self.build_prompt(iteration);
        }
        let name = lane.name.clone();
        let tx = self.internal_tx.clone();
        self.set_queued(true);
        tokio::spawn(async move {
            if let Some(shared) = shared {
                while !lock_limit(&shared).admit(&name, Utc::now()) {
                    tokio::time::sleep(SHARED_LIMIT_POLL).await;
                }
            }
            let permit = match slots {
                Some(slots) => match slots.acquire_owned().await {
                    Ok(permit) => Some(permit),
                    Err(_) => return,
                },
                None => None,
            };
            // Spent while this lane waited for its turn.
            if let Some(spent) = budget_spent(budget.as_ref()) {
                let _ = tx.send(spent);
                return;
            }
            let _ = tx.send(Internal::SlotGranted(permit, iteration));
        });
    }

    /// Shows (with [`QUEUED_MARK`]) whether the lane waits for its turn.
    pub(super) fn set_queued(&mut self, queued: bool) {
        let Some(lane) = &self.lane else {
            return;
        };
        let mark = lane.files_dir.join(QUEUED_MARK);
        let result = if queued {
            std::fs::write(&mark, b"")
        } else if self.queued || mark.exists() {
            std::fs::remove_file(&mark)
        } else {
            Ok(())
        };
        self.queued = queued;
        if let Err(err) = result {
            let message = format!("cannot update {}: {err}", mark.display());
            self.reporter.log(Utc::now(), Level::Warn, &message);
        }
    }

    /// Ends the loop where the session being prepared would begin, with `reason`.
    pub(super) fn stop_before_start(&mut self, reason: ExitReason, why: String) {
        if self.stopped_before_start.is_some() {
            return;
        }
        self.held_iteration = None;
        self.stopped_before_start = Some(reason);
        // No session is coming: a failed start ends the loop where it would begin.
        self.internal_tx.send(Internal::PromptFailed(why)).ok();
    }

    /// Tells the shared limit (if any) that this lane's session ended.
    pub(super) fn report_session_end(&self, limited: bool) {
        if let Some(lane) = &self.lane
            && let Some(shared) = &lane.shared_limit
        {
            lock_limit(shared).session_ended(&lane.name, limited);
        }
    }

    /// Holds every lane of the account until this rate limit's wait is over.
    pub(super) fn report_rate_limit(&self, backoff_secs: f64, resets_at: Option<DateTime<Utc>>) {
        let Some(shared) = self
            .lane
            .as_ref()
            .and_then(|lane| lane.shared_limit.as_ref())
        else {
            return;
        };
        // Taken after the event was logged: the hold ends no earlier than it says.
        let backoff =
            chrono::TimeDelta::milliseconds((backoff_secs.max(0.0) * 1000.0).ceil() as i64);
        let until = (Utc::now() + backoff).max(resets_at.unwrap_or_default());
        lock_limit(shared).limited(until);
    }
}

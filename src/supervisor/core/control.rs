//! Signals and commands from outside, and how the loop stops and finishes.

use std::time::Duration;

use super::{
    Core, DOUBLE_INTERRUPT_WINDOW, Effect, HookFailure, Level, Now, Phase, StopRequest, StopSignal,
    log, round_secs,
};
use crate::protocol::{Command, Event, ExitReason, HookKind, KillReason};

impl Core {
    pub(super) fn on_signal(&mut self, now: Now, signal: StopSignal, out: &mut Vec<Effect>) {
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
        if self.session_paused() {
            return self.stop_paused_session(now, signal, out);
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

    /// A stop signal while the session is paused: it cannot finish, so it is killed.
    fn stop_paused_session(&mut self, now: Now, signal: StopSignal, out: &mut Vec<Effect>) {
        log(
            out,
            Level::Warn,
            format!(
                "Caught {} while the session is paused: a paused session cannot finish, killing it",
                signal.name()
            ),
        );
        self.stop_request = Some(StopRequest::Signal(signal));
        out.push(Effect::Emit(Event::StopRequested {
            source: signal.name().to_string(),
        }));
        self.stop_now_requested(now, out);
    }

    /// Whether a session runs and is paused (SIGSTOPped): it cannot finish.
    fn session_paused(&self) -> bool {
        matches!(&self.phase, Phase::Running(session) if session.paused_since.is_some())
    }

    /// Stop at once when nothing is running that the stop should wait for.
    pub(super) fn stop_if_idle(&mut self, now: Now, out: &mut Vec<Effect>) {
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

    pub(super) fn stop_now_requested(&mut self, now: Now, out: &mut Vec<Effect>) {
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
    pub(super) fn interrupt_hooks(&mut self, out: &mut Vec<Effect>) {
        if matches!(
            self.phase,
            Phase::PreHooks | Phase::PostHooks | Phase::Spawning
        ) {
            self.hooks_interrupted = true;
            out.push(Effect::InterruptHooks);
        }
    }

    pub(super) fn on_command(&mut self, now: Now, command: Command, out: &mut Vec<Effect>) {
        match command {
            Command::Pause => self.pause_session(now, out),
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
            Command::StopAfterCurrent => self.toggle_stop_after_current(now, out),
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

    /// Pauses a running session (a no-op when none runs, or it is already
    /// paused or being killed).
    fn pause_session(&mut self, now: Now, out: &mut Vec<Effect>) {
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

    /// The user's stop after the current session; asked again, it is cancelled.
    /// A stop asked for by anything else is left as it is.
    fn toggle_stop_after_current(&mut self, now: Now, out: &mut Vec<Effect>) {
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

    /// Continues a paused session (a no-op when none is paused).
    pub(super) fn resume_session(&mut self, now: Now, out: &mut Vec<Effect>) {
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

    pub(super) fn pending_stop_reason(&self) -> Option<ExitReason> {
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

    pub(super) fn hook_failed(
        &mut self,
        kind: HookKind,
        failure: HookFailure,
        out: &mut Vec<Effect>,
    ) {
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

    pub(super) fn finish(&mut self, now: Now, reason: ExitReason, out: &mut Vec<Effect>) {
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

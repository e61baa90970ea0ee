//! The watchdog: output size and activity, the tick that decides a kill, and the kill.

use std::time::Duration;

use super::{Core, Effect, Level, Now, Phase, Watched, log, round_secs};
use crate::protocol::{Event, KillReason};

impl Core {
    pub(super) fn on_output_size(&mut self, now: Now, bytes: u64, written_ago: Duration) {
        if let Phase::Running(session) = &mut self.phase
            && bytes != session.output_bytes
        {
            session.output_bytes = bytes;
            session.note_activity(now, written_ago);
        }
    }

    pub(super) fn on_activity(&mut self, now: Now, written_ago: Duration) {
        if let Phase::Running(session) = &mut self.phase {
            session.note_activity(now, written_ago);
        }
    }

    pub(super) fn on_tick(&mut self, now: Now, out: &mut Vec<Effect>) {
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
        let heartbeat = self.settings.watched == Watched::Heartbeat;
        // Waiting out a limit inside the agent is no hang, but it holds the
        // loop as long: the session ends, and is judged by its last lines.
        let why = match &session.retrying {
            Some(retrying) => format!("{}, killing the session", retrying.describe()),
            None if heartbeat => "no heartbeat, killing the session".to_owned(),
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
            heartbeat,
        }));
        self.kill_session(KillReason::Watchdog, out);
    }

    pub(super) fn kill_session(&mut self, reason: KillReason, out: &mut Vec<Effect>) {
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
}

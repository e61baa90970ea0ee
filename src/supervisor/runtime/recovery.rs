//! What an earlier run left behind: its abandoned session and leftover processes.

use chrono::Utc;

use super::Runtime;
use crate::protocol::{Event, LoopState, Snapshot};
use crate::store::status;
use crate::supervisor::core::Level;
use crate::supervisor::{leftovers, process};

impl Runtime {
    /// If the status file shows a session of an earlier run that never ended
    /// (clowder was killed; only its agent died with it), kills what is left of
    /// that session's process group and logs `session_abandoned`. A group is
    /// signalled only when it is provably that session's: its leader alive with
    /// the recorded start time, or, the leader gone, members started no earlier
    /// and carrying the session's `HARNESS_OUTPUT_FILE`. A pid or group id
    /// reused by an unrelated process is never signalled.
    pub(super) async fn recover_abandoned_session(&mut self) {
        let Some(old) = self.abandoned_session() else {
            return;
        };
        let (Some(pgid), Some(pid)) = (old.pgid, old.agent_pid) else {
            return;
        };
        let output_file = old
            .output_file
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_default();
        let ours = old.output_file.is_some()
            && leftovers::group_is_ours(
                pgid,
                pid,
                old.agent_start_ticks,
                "HARNESS_OUTPUT_FILE",
                &output_file,
            );
        let cleanup = if ours {
            process::kill_foreign_group(pgid, self.core.settings().kill_grace).await
        } else {
            process::GroupCleanup {
                killed: 0,
                needed_sigkill: false,
                stuck: 0,
            }
        };
        self.report_abandoned(&old, pgid, pid, &cleanup);
    }

    /// The status file's session, when it is of an earlier run that never
    /// ended and whose clowder is gone.
    fn abandoned_session(&mut self) -> Option<Snapshot> {
        let Ok((old, _)) = status::read(&self.status_path) else {
            return None;
        };
        if old.pgid.is_none() || old.agent_pid.is_none() {
            return None;
        }
        if old.state == LoopState::Stopped || old.pid == std::process::id() {
            return None;
        }
        if status::writer_alive(&old) {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!(
                    "{} names a session of clowder PID {}, which is still running: left alone",
                    self.status_path.display(),
                    old.pid
                ),
            );
            return None;
        }
        Some(old)
    }

    fn report_abandoned(
        &mut self,
        old: &Snapshot,
        pgid: i32,
        pid: i32,
        cleanup: &process::GroupCleanup,
    ) {
        let global = old
            .global_iteration
            .map_or_else(|| "?".to_string(), |g| g.to_string());
        let message = if cleanup.killed > 0 {
            format!(
                "session global={global} of an earlier run (clowder PID {}) was left running: killed {} process(es) of its group {pgid}",
                old.pid, cleanup.killed
            )
        } else {
            format!(
                "session global={global} of an earlier run (clowder PID {}) never ended; nothing of its group {pgid} is left to kill",
                old.pid
            )
        };
        self.reporter.log(Utc::now(), Level::Warn, &message);
        if cleanup.stuck > 0 {
            self.reporter.log(
                Utc::now(),
                Level::Error,
                &format!(
                    "{} process(es) of group {pgid} survived SIGKILL (stuck in the kernel?)",
                    cleanup.stuck
                ),
            );
        }
        self.emit(&Event::SessionAbandoned {
            global: old.global_iteration,
            pgid,
            pid,
            killed: cleanup.killed,
        });
    }

    /// Ends what a killed clowder's sessions and hooks left (see [`leftovers`]).
    pub(super) async fn end_leftovers(&mut self) {
        let grace = self.core.settings().kill_grace;
        for warning in self.running.set_aside_unreadable() {
            self.reporter.log(Utc::now(), Level::Warn, &warning);
        }
        for ended in leftovers::end_abandoned(&self.running, grace).await {
            let record = &ended.record;
            if ended.group_killed == 0 && ended.escaped.is_empty() {
                continue;
            }
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!(
                    "{} `{}` of an earlier run (clowder PID {}) was left running: killed {} process(es) of its group {} and {} outside it",
                    record.kind,
                    record.what,
                    record.clowder_pid,
                    ended.group_killed,
                    record.pgid,
                    ended.escaped.len()
                ),
            );
            let global = record
                .what
                .parse()
                .ok()
                .filter(|_| record.kind == "session");
            for escaped in &ended.escaped {
                if let Some(global) = global {
                    self.emit(&Event::LeakedPid {
                        global,
                        pid: escaped.pid,
                        command: escaped.command.clone(),
                        killed: escaped.killed,
                    });
                }
            }
        }
    }
}

//! Messages from the runtime's own tasks and threads, turned into the core's inputs.

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use super::{CRITICAL_MARKER, Internal, MIN_FREE_SPACE, Runtime, free_space, git_head, summary};
use crate::protocol::{Command, Event, ExitReason, HookKind};
use crate::supervisor::analysis::Progress;
use crate::supervisor::core::{
    Input, Level, OutOfSpace, RateLimitFinding, SessionFindings, StopSignal,
};
use crate::supervisor::process::{Escaped, GroupEnd};

impl Runtime {
    /// Hands the guards what the reader thread found; once the session ended,
    /// keeps its calls for the session's analysis.
    pub(super) fn on_progress(&mut self, global: u64, progress: Progress) -> Option<Input> {
        if !self.core.session_running() {
            self.late_calls.extend(progress.new_calls);
            return None;
        }
        Some(Input::SessionProgress {
            global,
            tool_calls: progress.tool_calls,
            cost_usd: progress.cost_usd,
            new_calls: progress.new_calls,
        })
    }

    pub(super) fn on_internal(&mut self, message: Internal) -> Option<Input> {
        match message {
            Internal::FleetBudgetSpent { spent, limit } => {
                Some(self.on_fleet_budget_spent(spent, limit))
            }
            // Stopped while it waited: the loop is ending, the slot goes to another lane.
            Internal::SlotGranted(..) if self.stopped_before_start.is_some() => None,
            Internal::SlotGranted(permit, iteration) => {
                self.set_queued(false);
                if permit.is_some() {
                    self.slot = permit;
                }
                self.build_prompt(iteration);
                None
            }
            // Taken by the loop itself, which may queue more than one input.
            Internal::OutputWritten | Internal::Look => None,
            Internal::Progress { global, progress } => self.on_progress(global, progress),
            Internal::Retrying { global, retrying } => {
                Some(Input::AgentRetrying { global, retrying })
            }
            Internal::AgentError { global, reason } => Some(Input::AgentError { global, reason }),
            Internal::ResultRead { global } => {
                self.stop_steering(Some(global));
                None
            }
            Internal::NoteWritten {
                global,
                note,
                written,
            } => {
                self.on_note_written(global, note, written);
                None
            }
            Internal::Core(input) => Some(self.on_core_input(input)),
            Internal::HooksDone { kind, failures } => Some(match kind {
                HookKind::PreSession => Input::PreHooksFinished {
                    failure: failures.into_iter().next(),
                },
                HookKind::PostSession => Input::PostHooksFinished { failures },
            }),
            Internal::PromptFailed(error) => Some({
                self.slot = None;
                Input::SpawnFailed {
                    global: None,
                    error,
                }
            }),
            Internal::PromptReady {
                text,
                warnings,
                handoff_error,
            } => Some(self.on_prompt_ready(text, warnings, handoff_error)),
            Internal::GroupEnded(end) => Some(self.on_group_ended(end)),
        }
    }

    /// The fleet's budget is spent: this lane stops before its next session.
    fn on_fleet_budget_spent(&mut self, spent: f64, limit: f64) -> Input {
        self.reporter.log(
            Utc::now(),
            Level::Warn,
            &format!(
                "the fleet's budget [guard] max_cost_usd = ${limit:.2} is spent (${spent:.4} over all lanes): this lane stops"
            ),
        );
        self.set_queued(false);
        let reason = ExitReason::BudgetExceeded {
            budget: crate::protocol::Budget::MaxCostUsd,
            limit,
            value: spent,
        };
        let why = format!("the fleet's budget ${limit:.2} is spent: no session starts");
        self.stop_before_start(reason, why);
        Input::Command(Command::StopNow)
    }

    fn on_core_input(&mut self, mut input: Box<Input>) -> Input {
        // The session's slot is given back once its end is recorded.
        if let Input::SessionAnalyzed(findings) = input.as_mut() {
            self.slot = None;
            self.report_session_end(findings.rate_limit.is_some());
            // Read before the rest, so judged first.
            let mut calls = std::mem::take(&mut self.late_calls);
            calls.append(&mut findings.new_calls);
            findings.new_calls = calls;
        }
        *input
    }

    fn on_prompt_ready(
        &mut self,
        text: String,
        warnings: Vec<String>,
        handoff_error: Option<(PathBuf, String)>,
    ) -> Input {
        for warning in warnings {
            self.reporter.log(Utc::now(), Level::Warn, &warning);
        }
        if let Some((file, error)) = handoff_error {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!(
                    "handoff file {}: {error}; the session starts without it",
                    file.display()
                ),
            );
            self.emit(&Event::HandoffInvalid { file, error });
        }
        let critical_marker = text.contains(CRITICAL_MARKER);
        self.pending_prompt = Some(text);
        Input::PromptReady { critical_marker }
    }

    fn on_group_ended(&mut self, end: GroupEnd) -> Input {
        if let Some(session) = &self.session {
            self.running.remove(&session.token);
        }
        if self.options.verbose {
            self.echo_output();
        }
        if end.stuck > 0 {
            self.reporter.log(
                Utc::now(),
                Level::Error,
                &format!(
                    "{} process(es) of the session survived SIGKILL (stuck in the kernel?)",
                    end.stuck
                ),
            );
        }
        // The number of the session that just ended: none is handed out
        // between a session's spawn and its end.
        let global = self.counter.last();
        for escaped in end.escaped {
            self.report_escaped(global, escaped);
        }
        Input::SessionExited {
            exit_code: end.exit_code,
            needed_sigkill: end.needed_sigkill,
            lingering_killed: end.lingering_killed,
        }
    }

    /// A process that left the session's group and outlived the session.
    fn report_escaped(&mut self, global: u64, escaped: Escaped) {
        let outcome = if escaped.killed {
            "killed"
        } else {
            "it survived SIGKILL (stuck in the kernel?)"
        };
        self.reporter.log(
            Utc::now(),
            Level::Warn,
            &format!(
                "global={global} process {} ({}) left the session's process group and outlived the session: {outcome}",
                escaped.pid, escaped.command
            ),
        );
        self.emit(&Event::LeakedPid {
            global,
            pid: escaped.pid,
            command: escaped.command,
            killed: escaped.killed,
        });
    }

    /// A lane still waiting for its turn starts no session once the fleet is
    /// told to stop: it ends as the signal says, without the session.
    pub(super) fn on_host_signal(&mut self, stop: StopSignal) {
        let waiting = self.queued || self.held_iteration.is_some();
        if !waiting || self.stopped_before_start.is_some() {
            return;
        }
        let signal = stop.name();
        let reason = ExitReason::Signal {
            signal: signal.to_string(),
            forced: false,
        };
        self.stop_before_start(reason, format!("{signal} while waiting for a session slot"));
    }

    pub(super) fn analyze(&mut self, output_file: PathBuf) {
        let Some(mut session) = self.session.take() else {
            return;
        };
        let reader = session
            .reader
            .take()
            .unwrap_or_else(|| self.start_reader(session.global, &output_file));
        let cwd = self.options.working_dir.clone();
        let output_dir = self.output_dir.clone();
        let tx = self.internal_tx.clone();
        let head_before = session.git_head_before;
        tokio::task::spawn_blocking(move || {
            // Most of the output was read while the session ran; this is the rest.
            // Waits for the reader thread here, never on the loop's thread.
            let analysis = reader.finish();
            let scan = analysis.scan;
            let head_after = git_head(&cwd);
            // No HEAD before and one after is a repository's first commit.
            let head_moved = head_after.is_some() && head_before != head_after;
            let findings = SessionFindings {
                output_bytes: analysis.output_bytes,
                committed: head_moved || scan.commit_pattern_seen,
                rate_limit: scan.rate_limit.map(|limit| RateLimitFinding {
                    reason: limit.reason,
                    resets_at: limit
                        .resets_at_epoch
                        .and_then(|epoch| DateTime::<Utc>::from_timestamp(epoch, 0)),
                }),
                stats: summary(&analysis.stats),
                promise_kept: analysis.promise_kept,
                acted: analysis.acted,
                transient_error: scan.transient_error.map(|found| found.reason),
                agent_error: scan.fatal_error,
                new_calls: analysis.new_calls,
                out_of_space: free_space(&output_dir)
                    .filter(|free| *free < MIN_FREE_SPACE)
                    .map(|free_bytes| OutOfSpace {
                        dir: output_dir,
                        free_bytes,
                    }),
            };
            let _ = tx.send(Internal::Core(Box::new(Input::SessionAnalyzed(Box::new(
                findings,
            )))));
        });
    }
}

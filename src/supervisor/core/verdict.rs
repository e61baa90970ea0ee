//! What a finished session was: productive, empty or failed, from its analysis.

use super::guards::{guard_calls, record_breach, record_late_doom_loop};
use super::{Core, Effect, Level, Now, Phase, SessionFindings, WaitKind, log, round_secs};
use crate::protocol::{Event, ExitReason, HookKind, KillReason};

impl Core {
    pub(super) fn on_session_analyzed(
        &mut self,
        now: Now,
        findings: SessionFindings,
        out: &mut Vec<Effect>,
    ) {
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
}

/// The agent writes JSON lines of no format clowder reads (Codex before 0.44):
/// its sessions are not counted, and the log and the event log say so.
pub(super) fn say_format_unrecognised(iteration: u64, global: u64, out: &mut Vec<Effect>) {
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

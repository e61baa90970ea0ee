//! What a finished session was: productive, empty or failed, from its analysis.

use super::guards::{guard_calls, record_breach, record_late_doom_loop};
use super::{Core, Effect, Level, Now, Phase, Session, SessionFindings, WaitKind, log, round_secs};
use crate::protocol::{Event, ExitReason, HookKind, KillReason, SessionSummary};

/// What kind of session it was, judged from its findings alone. At most one of
/// the kinds holds; a session that is none of them was productive.
struct Verdict {
    agent_error: Option<String>,
    /// A session cut short by a full disk is not judged by its output at all.
    out_of_space: bool,
    rate_limited: bool,
    transient_error: bool,
    empty: bool,
    productive: bool,
}

impl Verdict {
    fn judge(findings: &SessionFindings, min_output_bytes: u64) -> Verdict {
        let agent_error = findings.agent_error.clone();
        let out_of_space = agent_error.is_none() && findings.out_of_space.is_some();
        let rate_limited = agent_error.is_none() && !out_of_space && findings.rate_limit.is_some();
        let transient_error = agent_error.is_none()
            && !out_of_space
            && !rate_limited
            && findings.transient_error.is_some();
        let stopped = rate_limited || transient_error;
        // Bytes alone do not show work: Claude Code's init line is longer
        // than `min_output_bytes`, and a hung agent writes nothing else.
        let empty = agent_error.is_none()
            && !out_of_space
            && !stopped
            && (findings.output_bytes < min_output_bytes || findings.acted == Some(false));
        let productive = agent_error.is_none() && !out_of_space && !stopped && !empty;
        Verdict {
            agent_error,
            out_of_space,
            rate_limited,
            transient_error,
            empty,
            productive,
        }
    }

    /// The flag the session-complete log line carries.
    fn log_flag(&self) -> &'static str {
        if self.agent_error.is_some() {
            " agent_error=true"
        } else if self.out_of_space {
            " disk_full=true"
        } else if self.rate_limited {
            " rate_limited=true"
        } else if self.transient_error {
            " transient_error=true"
        } else if self.empty {
            " empty=true"
        } else {
            ""
        }
    }
}

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
        self.guard_late_output(iteration, &mut session, &findings, out);
        let verdict = Verdict::judge(&findings, self.settings.min_output_bytes);
        // A person who killed the session wants the loop to move on, not the
        // same session again.
        let killed_by_you = matches!(session.kill, Some(KillReason::User));
        let will_retry_empty = verdict.empty
            && !killed_by_you
            && self.empty_retries_this_iteration < self.settings.max_empty_retries;
        let stats = self.count_session(iteration, &session, &findings, exit_code, out);
        self.report_session_complete(iteration, &session, &findings, &verdict, &stats, out);
        self.last_session_stats = Some(stats.clone());
        if self.stopped_by_session(now, iteration, &session, &findings, &verdict, out) {
            return;
        }
        if verdict.empty {
            self.on_empty_session(now, iteration, &session, &findings, will_retry_empty, out);
            return;
        }
        self.on_productive_session(iteration, &session, &findings, &stats, out);
    }

    /// Output read only after the exit (written faster than a poll) is held to
    /// the same guards as output read while the agent ran.
    fn guard_late_output(
        &mut self,
        iteration: u64,
        session: &mut Session,
        findings: &SessionFindings,
        out: &mut Vec<Effect>,
    ) {
        let (dooms, breach) = guard_calls(
            self.settings.guard,
            session,
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
    }

    /// Counts the session into the run's counters and totals; its stats, with
    /// its global number.
    fn count_session(
        &mut self,
        iteration: u64,
        session: &Session,
        findings: &SessionFindings,
        exit_code: i32,
        out: &mut Vec<Effect>,
    ) -> SessionSummary {
        self.last_exit_code = Some(exit_code);
        // A session a person killed did not fail on its own.
        let killed_by_you = matches!(session.kill, Some(KillReason::User | KillReason::StopNow));
        if exit_code != 0 && !killed_by_you {
            self.counters.failed_exits += 1;
        }
        self.last_session_wall = Some(session.started_wall);
        self.last_ran_iteration = iteration;
        self.last_session = Some((
            session.global,
            session.output_file.clone(),
            findings.output_bytes,
        ));
        if findings.committed {
            self.counters.commits += 1;
        }
        if findings.stats.result_is_error == Some(true) {
            self.counters.error_results += 1;
        }
        self.count_overages(
            iteration,
            session.global,
            findings.stats.overage_events,
            out,
        );
        if findings.stats.unrecognised_format && !self.format_unrecognised_said {
            self.format_unrecognised_said = true;
            say_format_unrecognised(iteration, session.global, out);
        }
        let mut stats = findings.stats.clone();
        stats.global = session.global;
        self.totals.add(&stats);
        stats
    }

    fn count_overages(
        &mut self,
        iteration: u64,
        global: u64,
        overages: u64,
        out: &mut Vec<Effect>,
    ) {
        if overages == 0 {
            return;
        }
        self.counters.overages += overages;
        log(
            out,
            Level::Info,
            format!(
                "iteration={iteration} global={global} status=overage count={overages}: past a rate limit by paying for overage, no backoff"
            ),
        );
        out.push(Effect::Emit(Event::Overage {
            iteration,
            global,
            count: overages,
        }));
    }

    fn report_session_complete(
        &self,
        iteration: u64,
        session: &Session,
        findings: &SessionFindings,
        verdict: &Verdict,
        stats: &SessionSummary,
        out: &mut Vec<Effect>,
    ) {
        let exit_code = session.exit_code.unwrap_or(-1);
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
                verdict.log_flag()
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
            rate_limited: verdict.rate_limited,
            transient_error: verdict.transient_error,
            productive: verdict.productive,
            cost_usd: stats.cost_usd,
            turns: stats.turns,
            tool_calls: stats.tool_calls,
            input_tokens: stats.input_tokens,
            output_tokens: stats.output_tokens,
            result: stats.result(),
            killed: session.kill,
            budget: session.budget,
        }));
    }

    /// Whatever ends the run or holds the iteration before the session's output
    /// is judged. True when one of them took over.
    fn stopped_by_session(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        findings: &SessionFindings,
        verdict: &Verdict,
        out: &mut Vec<Effect>,
    ) -> bool {
        self.run_ended_by_session(now, iteration, session, verdict, out)
            || self.iteration_held_by_session(now, iteration, session, findings, verdict, out)
    }

    /// The agent's own error, a stop asked for, or the run's budget spent.
    fn run_ended_by_session(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        verdict: &Verdict,
        out: &mut Vec<Effect>,
    ) -> bool {
        if let Some(reason) = verdict.agent_error.clone() {
            log(out, Level::Error, reason.clone());
            out.push(Effect::Emit(Event::AgentError {
                iteration,
                global: session.global,
                reason: reason.clone(),
            }));
            self.finish(now, ExitReason::Fatal { message: reason }, out);
            return true;
        }
        if self.stop_now {
            let reason = self.pending_stop_reason().unwrap_or(ExitReason::UserStop);
            self.finish(now, reason, out);
            return true;
        }
        self.check_run_cost(Some(session.global), out);
        if !verdict.productive
            && let Some(breach) = self.run_budget
        {
            self.finish(now, breach.exit_reason(), out);
            return true;
        }
        false
    }

    /// A full disk, a rate limit or a transient error: the iteration waits and
    /// runs again.
    fn iteration_held_by_session(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        findings: &SessionFindings,
        verdict: &Verdict,
        out: &mut Vec<Effect>,
    ) -> bool {
        if let Some(space) = findings
            .out_of_space
            .clone()
            .filter(|_| verdict.out_of_space)
        {
            log(
                out,
                Level::Warn,
                format!(
                    "iteration={iteration} global={} the disk filled up during the session: not productive, the iteration runs again once there is space",
                    session.global
                ),
            );
            self.hold_for_space(now, space.dir, space.free_bytes, out);
            return true;
        }
        if let Some(limit) = findings.rate_limit.clone() {
            self.consecutive_errors = 0;
            self.on_rate_limited(now, iteration, session, limit, out);
            return true;
        }
        self.consecutive_rate_limits = 0;
        self.rate_limit_resets_at = None;
        if let Some(reason) = findings
            .transient_error
            .clone()
            .filter(|_| verdict.transient_error)
        {
            self.on_transient_error(now, iteration, session, reason, out);
            return true;
        }
        self.consecutive_errors = 0;
        false
    }

    /// An empty session is retried a few times, then the iteration moves on.
    fn on_empty_session(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        findings: &SessionFindings,
        will_retry: bool,
        out: &mut Vec<Effect>,
    ) {
        if !will_retry {
            self.move_on_from_empty(now, iteration, session, out);
            return;
        }
        self.empty_retries_this_iteration += 1;
        self.counters.empty_retries += 1;
        let retry = self.empty_retries_this_iteration;
        let why = self.why_empty(findings);
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={} status=retrying {why}: empty session, retry {retry}/{} in {:.1}s",
                session.global,
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
    }

    /// The iteration ends without a productive session.
    fn move_on_from_empty(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        out: &mut Vec<Effect>,
    ) {
        self.counters.empty_iterations += 1;
        let why = if session.kill == Some(KillReason::User) {
            "empty and killed by you".to_owned()
        } else {
            format!("empty after {} retries", self.settings.max_empty_retries)
        };
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={} {why}, moving on",
                session.global
            ),
        );
        self.complete_iteration(now, out);
    }

    /// What made a session empty, for its log line.
    fn why_empty(&self, findings: &SessionFindings) -> String {
        if findings.output_bytes < self.settings.min_output_bytes {
            format!(
                "output={} bytes < {}",
                findings.output_bytes, self.settings.min_output_bytes
            )
        } else {
            format!(
                "output={} bytes, nothing past the agent's start-up lines (no message, tool call or result)",
                findings.output_bytes
            )
        }
    }

    /// A productive session counts, and its post-session hooks run.
    fn on_productive_session(
        &mut self,
        iteration: u64,
        session: &Session,
        findings: &SessionFindings,
        stats: &SessionSummary,
        out: &mut Vec<Effect>,
    ) {
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
            env: post_session_env(iteration, session, findings, stats),
        });
    }
}

/// What the post-session hooks are told about the session.
fn post_session_env(
    iteration: u64,
    session: &Session,
    findings: &SessionFindings,
    stats: &SessionSummary,
) -> Vec<(String, String)> {
    let exit_code = session.exit_code.unwrap_or(-1);
    vec![
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
    ]
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

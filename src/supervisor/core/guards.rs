//! The in-session guards: doom loops and the session and run budgets.

use super::{Core, Effect, GuardSettings, Level, Now, Phase, Session, log};
use crate::agent::ToolCallSig;
use crate::protocol::{Budget, BudgetBreach, DoomLoopAction, Event, KillReason};

impl Core {
    /// Budgets and doom-loop detection on what the running session did so far,
    /// one tool call at a time: a chunk of many calls is judged as if each had
    /// been read alone, so a budget of N stops the session at call N+1.
    pub(super) fn on_session_progress(
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

    pub(super) fn on_doom_loop(
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

    pub(super) fn on_doom_loop_approval(
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
    pub(super) fn budget_exceeded(&mut self, breach: BudgetBreach, out: &mut Vec<Effect>) {
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
    pub(super) fn check_run_cost(&mut self, global: Option<u64>, out: &mut Vec<Effect>) {
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
    pub(super) fn check_run_budgets(&mut self, now: Now, out: &mut Vec<Effect>) {
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
}

/// What the guards find in the tool calls read since the last check, taken one
/// at a time (`tool_calls` is the session's count after the last of them): the
/// doom loops, and the first budget broken, at the call that broke it. A doom
/// loop that stops the session ends the look, as the session ends there.
pub(super) fn guard_calls(
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
pub(super) fn budget_breach(
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
pub(super) fn record_late_doom_loop(
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
pub(super) fn record_breach(
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

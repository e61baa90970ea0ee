//! The waits between sessions: rate limits, transient errors, trusted resets and timers.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{
    Core, Effect, Level, MAX_TRUSTED_RESET, Now, Phase, RateLimitFinding, Session, Settings,
    WaitKind, log, round_secs,
};
use crate::protocol::{Event, ExitReason};

impl Core {
    /// The backoff before the next session after `consecutive` rate-limited sessions
    /// in a row (the first waits `initial_delay`), capped at `max_delay`.
    pub fn backoff_delay(settings: &Settings, consecutive: u64) -> Duration {
        let exponent = consecutive.saturating_sub(1).min(62) as u32;
        let factor = 2u64.saturating_pow(exponent);
        let initial = settings.initial_delay.as_secs_f64();
        let secs = (initial * factor as f64).min(settings.max_delay.as_secs_f64());
        Duration::from_secs_f64(secs.max(0.0))
    }

    pub(super) fn on_rate_limited(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        limit: RateLimitFinding,
        out: &mut Vec<Effect>,
    ) {
        self.consecutive_rate_limits += 1;
        self.counters.rate_limits += 1;
        let consecutive = self.consecutive_rate_limits;
        let backoff = Core::backoff_delay(&self.settings, consecutive);
        let resets_at = self.trusted_reset(now, limit.resets_at, out);
        let (delay, reset_note) = limit_wait(&self.settings, backoff, now.wall, resets_at);
        self.rate_limit_resets_at = resets_at;
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={} status=rate_limited_backoff consecutive={consecutive}/{} backoff={:.1}s reason=\"{}\"{reset_note}",
                session.global,
                self.settings.max_consecutive_rate_limits,
                delay.as_secs_f64(),
                limit.reason
            ),
        );
        out.push(Effect::Emit(Event::RateLimited {
            iteration,
            global: session.global,
            reason: limit.reason,
            consecutive,
            backoff_secs: round_secs(delay),
            resets_at,
        }));
        if consecutive >= self.settings.max_consecutive_rate_limits {
            log(
                out,
                Level::Error,
                format!("{consecutive} rate-limited sessions in a row, giving up"),
            );
            self.finish(now, ExitReason::RateLimited { consecutive }, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        self.wait(now, WaitKind::Backoff, delay, out);
    }

    /// A transient server error: backed off like a rate limit, with its own
    /// count and limit, and never reported as a rate limit.
    pub(super) fn on_transient_error(
        &mut self,
        now: Now,
        iteration: u64,
        session: &Session,
        reason: String,
        out: &mut Vec<Effect>,
    ) {
        self.consecutive_errors += 1;
        self.counters.transient_errors += 1;
        let consecutive = self.consecutive_errors;
        let delay = Core::backoff_delay(&self.settings, consecutive);
        let limit = self.settings.max_consecutive_errors;
        log(
            out,
            Level::Warn,
            format!(
                "iteration={iteration} global={} status=error_backoff consecutive={consecutive}/{limit} backoff={:.1}s reason=\"{reason}\"",
                session.global,
                delay.as_secs_f64(),
            ),
        );
        out.push(Effect::Emit(Event::TransientError {
            iteration,
            global: session.global,
            reason,
            consecutive,
            backoff_secs: round_secs(delay),
        }));
        if consecutive >= limit {
            log(
                out,
                Level::Error,
                format!(
                    "{consecutive} sessions in a row ended in a transient server error, giving up"
                ),
            );
            self.finish(now, ExitReason::TransientErrors { consecutive }, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        self.wait(now, WaitKind::ErrorBackoff, delay, out);
    }

    /// The agent's reset time if it can be believed: not passed already, and not
    /// more than [`MAX_TRUSTED_RESET`] ahead. Otherwise the exponential backoff
    /// applies, and the skew is logged the first time.
    pub(super) fn trusted_reset(
        &mut self,
        now: Now,
        resets_at: Option<DateTime<Utc>>,
        out: &mut Vec<Effect>,
    ) -> Option<DateTime<Utc>> {
        let reset = resets_at?;
        let ahead = reset - now.wall;
        let too_far =
            chrono::Duration::from_std(MAX_TRUSTED_RESET).unwrap_or(chrono::Duration::MAX);
        if ahead > chrono::Duration::zero() && ahead <= too_far {
            return Some(reset);
        }
        if !std::mem::replace(&mut self.reset_skew_logged, true) {
            let skew = match ahead > chrono::Duration::zero() {
                true => format!("{} ahead", crate::fmt::duration(ahead.num_seconds())),
                false => format!("{} ago", crate::fmt::duration(-ahead.num_seconds())),
            };
            log(
                out,
                Level::Warn,
                format!(
                    "the rate limit's reset time {} is {skew} by this machine's clock (now {}): not trusted, backing off from initial_delay_secs instead (is the clock right?)",
                    reset.format("%Y-%m-%dT%H:%M:%SZ"),
                    now.wall.format("%Y-%m-%dT%H:%M:%SZ")
                ),
            );
        }
        None
    }

    pub(super) fn complete_iteration(&mut self, now: Now, out: &mut Vec<Effect>) {
        self.completed_iterations += 1;
        self.empty_retries_this_iteration = 0;
        // The stop interrupted the hooks: its exit code, not the iteration's.
        if self.hooks_interrupted
            && let Some(reason) = self.pending_stop_reason()
        {
            self.finish(now, reason, out);
            return;
        }
        if std::mem::take(&mut self.promise_kept) {
            self.finish(now, ExitReason::Completed, out);
            return;
        }
        if let Some(breach) = self.run_budget {
            self.finish(now, breach.exit_reason(), out);
            return;
        }
        if self.completed_iterations >= self.settings.max_iterations {
            self.finish(now, ExitReason::MaxIterations, out);
            return;
        }
        if let Some(reason) = self.pending_stop_reason() {
            self.finish(now, reason, out);
            return;
        }
        if self.stop_file_seen {
            // Let the iteration check remove it and stop, without the pause.
            self.begin_iteration(out);
            return;
        }
        self.wait(
            now,
            WaitKind::BetweenIterations,
            self.settings.initial_delay,
            out,
        );
    }

    pub(super) fn wait(
        &mut self,
        now: Now,
        kind: WaitKind,
        after: Duration,
        out: &mut Vec<Effect>,
    ) {
        self.timer_epoch += 1;
        let epoch = self.timer_epoch;
        self.phase = Phase::Waiting { kind, epoch };
        self.wait_until_wall = chrono::Duration::from_std(after)
            .ok()
            .and_then(|d| now.wall.checked_add_signed(d));
        out.push(Effect::ArmTimer { epoch, after });
        out.push(Effect::WriteStatus);
    }

    pub(super) fn on_timer(&mut self, now: Now, epoch: u64, out: &mut Vec<Effect>) {
        match self.phase {
            Phase::Waiting { epoch: current, .. } if current == epoch => {
                self.check_run_budgets(now, out);
                if self.phase != Phase::Stopped {
                    self.begin_iteration(out);
                }
            }
            _ => {}
        }
    }
}

/// How long a rate limit waits, with the note its log line carries. A reset
/// time the agent gave wins when it comes sooner than the cap, but no wait is
/// shorter than the initial delay.
fn limit_wait(
    settings: &Settings,
    backoff: Duration,
    now: DateTime<Utc>,
    resets_at: Option<DateTime<Utc>>,
) -> (Duration, String) {
    let until_reset = resets_at.map(|reset| (reset - now).to_std().unwrap_or(Duration::ZERO));
    let delay = match until_reset {
        Some(until) if until < settings.max_delay => until,
        _ => backoff,
    }
    .max(settings.initial_delay.min(settings.max_delay));
    let reset_note = match (resets_at, until_reset) {
        (Some(at), Some(until)) if until < settings.max_delay => {
            format!(
                " resets_at={} (waiting for the reset)",
                at.format("%Y-%m-%dT%H:%M:%SZ")
            )
        }
        (Some(at), _) => format!(
            " resets_at={} (later than the cap)",
            at.format("%Y-%m-%dT%H:%M:%SZ")
        ),
        _ => String::new(),
    };
    (delay, reset_note)
}

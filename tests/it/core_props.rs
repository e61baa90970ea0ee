//! Property tests on the pure supervisor core: time is injected, nothing sleeps.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use clowder::agent::ToolCallSig;
use clowder::protocol::{DoomLoopAction, Event, ExitReason, HookKind, LoopState, SessionSummary};
use clowder::supervisor::core::{
    Core, Effect, GuardSettings, Input, Now, RateLimitFinding, SessionFindings, SessionGate,
    Settings, StopSignal, Watched,
};
use proptest::prelude::*;

fn settings(initial_ms: u64, max_ms: u64, max_consecutive: u64) -> Settings {
    Settings {
        max_iterations: 1_000,
        stale_timeout: Duration::from_secs(60),
        min_output_bytes: 100,
        max_empty_retries: 2,
        retry_delay: Duration::from_secs(5),
        initial_delay: Duration::from_millis(initial_ms),
        max_delay: Duration::from_millis(max_ms),
        max_consecutive_rate_limits: max_consecutive,
        max_consecutive_errors: max_consecutive,
        kill_grace: Duration::from_secs(5),
        sigterm_stops_now: false,
        disk_recheck: Duration::from_secs(5),
        session_gate: SessionGate::default(),
        guard: GuardSettings::default(),
        watched: Watched::Output,
    }
}

/// Drives a core with an injected clock.
struct Driver {
    core: Core,
    base: Instant,
    wall: DateTime<Utc>,
    elapsed: Duration,
    global: u64,
    /// How far the wall clock was set away from the monotonic one (NTP, a user).
    wall_jump: chrono::Duration,
}

impl Driver {
    fn new(settings: Settings) -> Driver {
        let mut driver = Driver {
            core: Core::new(settings, 1, "agent".into()),
            base: Instant::now(),
            wall: DateTime::from_timestamp(1_800_000_000, 0).expect("valid"),
            elapsed: Duration::ZERO,
            global: 0,
            wall_jump: chrono::Duration::zero(),
        };
        driver.step(Input::Start);
        driver
    }

    fn now(&self) -> Now {
        Now {
            mono: self.base + self.elapsed,
            wall: self.wall
                + chrono::Duration::from_std(self.elapsed).expect("small")
                + self.wall_jump,
        }
    }

    fn advance(&mut self, by: Duration) {
        self.elapsed += by;
    }

    /// Sets the wall clock `secs` forward (or back), leaving the monotonic one alone.
    fn jump_wall(&mut self, secs: i64) {
        self.wall_jump += chrono::Duration::seconds(secs);
    }

    fn step(&mut self, input: Input) -> Vec<Effect> {
        let now = self.now();
        self.core.step(now, input)
    }

    /// From the start of an iteration to a running session.
    fn start_session(&mut self) {
        let effects = self.step(Input::StopFileChecked { present: false });
        assert!(effects.iter().any(|e| matches!(
            e,
            Effect::RunHooks {
                kind: HookKind::PreSession,
                ..
            }
        )));
        let effects = self.step(Input::PreHooksFinished { failure: None });
        assert!(effects.iter().any(|e| matches!(e, Effect::Spawn { .. })));
        self.global += 1;
        self.step(Input::Spawned {
            global: self.global,
            pid: 1000,
            pgid: 1000,
            output_file: PathBuf::from(format!("out-{}.jsonl", self.global)),
        });
        assert!(self.core.session_running());
    }

    /// Ends the running session with `findings`; returns the effects of the analysis.
    fn end_session(&mut self, findings: SessionFindings) -> Vec<Effect> {
        let effects = self.step(Input::SessionExited {
            exit_code: 0,
            needed_sigkill: false,
            lingering_killed: 0,
        });
        assert!(
            effects
                .iter()
                .any(|e| matches!(e, Effect::AnalyzeSession { .. }))
        );
        self.step(Input::SessionAnalyzed(Box::new(findings)))
    }

    /// Lets whatever timer is armed fire, or finishes post hooks; true when a new
    /// iteration check is pending.
    fn continue_loop(&mut self, effects: &[Effect]) -> bool {
        let mut pending: Vec<Effect> = effects.to_vec();
        loop {
            if pending.iter().any(|e| matches!(e, Effect::CheckStopFile)) {
                return true;
            }
            if pending.iter().any(|e| matches!(e, Effect::Exit(_))) {
                return false;
            }
            if let Some(epoch) = pending.iter().find_map(|e| match e {
                Effect::ArmTimer { epoch, after } => Some((*epoch, *after)),
                _ => None,
            }) {
                self.advance(epoch.1);
                pending = self.step(Input::TimerFired { epoch: epoch.0 });
                continue;
            }
            if pending.iter().any(|e| {
                matches!(
                    e,
                    Effect::RunHooks {
                        kind: HookKind::PostSession,
                        ..
                    }
                )
            }) {
                pending = self.step(Input::PostHooksFinished {
                    failures: Vec::new(),
                });
                continue;
            }
            return false;
        }
    }
}

fn armed_delay(effects: &[Effect]) -> Option<Duration> {
    effects.iter().find_map(|e| match e {
        Effect::ArmTimer { after, .. } => Some(*after),
        _ => None,
    })
}

fn rate_limited(resets_at: Option<DateTime<Utc>>) -> SessionFindings {
    SessionFindings {
        output_bytes: 5_000,
        committed: false,
        rate_limit: Some(RateLimitFinding {
            reason: "test".into(),
            resets_at,
        }),
        ..SessionFindings::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Backoff never exceeds the cap and never shrinks while rate limits continue.
    #[test]
    fn backoff_is_capped_and_monotonic(
        initial_ms in 0u64..10_000,
        max_ms in 0u64..1_000_000,
        sessions in 1usize..40,
    ) {
        let mut driver = Driver::new(settings(initial_ms, max_ms, 1_000));
        let mut previous = Duration::ZERO;
        for _ in 0..sessions {
            driver.start_session();
            let effects = driver.end_session(rate_limited(None));
            prop_assert_eq!(driver.core.state(), LoopState::RateLimitedBackoff);
            let delay = armed_delay(&effects).expect("a backoff timer");
            prop_assert!(delay <= Duration::from_millis(max_ms) + Duration::from_micros(1),
                "delay {:?} over cap {}ms", delay, max_ms);
            prop_assert!(delay >= previous, "delay shrank: {:?} after {:?}", delay, previous);
            previous = delay;
            prop_assert!(driver.continue_loop(&effects));
        }
    }

    /// With reset times the agent gave, the wait still never exceeds the cap.
    #[test]
    fn reset_times_never_exceed_the_cap(
        max_ms in 1u64..1_000_000,
        reset_offsets in proptest::collection::vec(-100_000i64..10_000_000, 1..20),
    ) {
        let mut driver = Driver::new(settings(2_000, max_ms, 1_000));
        for offset in reset_offsets {
            driver.start_session();
            let reset = driver.now().wall + chrono::Duration::milliseconds(offset);
            let effects = driver.end_session(rate_limited(Some(reset)));
            let delay = armed_delay(&effects).expect("a backoff timer");
            prop_assert!(delay <= Duration::from_millis(max_ms) + Duration::from_micros(1));
            // Never shorter than the initial delay (unless the cap is lower still).
            prop_assert!(delay >= Duration::from_millis(max_ms.min(2_000)), "{:?}", delay);
            prop_assert!(driver.continue_loop(&effects));
        }
    }

    /// Empty sessions (and rate-limited ones) never count as productive, and never
    /// run post-session hooks.
    #[test]
    fn empty_retries_never_count_as_productive(
        outcomes in proptest::collection::vec((0u64..300, any::<bool>()), 1..60),
    ) {
        let mut driver = Driver::new(settings(10, 100, 1_000));
        let mut expected_productive = 0;
        for (bytes, limited) in outcomes {
            driver.start_session();
            let findings = SessionFindings {
                output_bytes: bytes,
                committed: false,
                rate_limit: limited.then(|| RateLimitFinding { reason: "x".into(), resets_at: None }),
                ..SessionFindings::default()
            };
            let productive = !limited && bytes >= 100;
            let effects = driver.end_session(findings);
            let post_hooks = effects.iter().any(|e| matches!(e, Effect::RunHooks { kind: HookKind::PostSession, .. }));
            prop_assert_eq!(post_hooks, productive);
            if productive {
                expected_productive += 1;
            }
            prop_assert_eq!(driver.core.counters().productive, expected_productive);
            if !driver.continue_loop(&effects) {
                break;
            }
        }
    }

    /// The completion promise ends the loop after exactly the first productive
    /// session that kept it, once its post-session hooks ran; a promise in a
    /// rate-limited or empty session does not count.
    #[test]
    fn only_a_productive_session_keeps_the_promise(
        outcomes in proptest::collection::vec((0u64..300, any::<bool>(), any::<bool>()), 1..40),
    ) {
        let mut driver = Driver::new(settings(10, 100, 1_000));
        let mut ended = false;
        for (bytes, limited, promise) in outcomes {
            driver.start_session();
            let findings = SessionFindings {
                output_bytes: bytes,
                rate_limit: limited.then(|| RateLimitFinding { reason: "x".into(), resets_at: None }),
                promise_kept: promise,
                ..SessionFindings::default()
            };
            let productive = !limited && bytes >= 100;
            let effects = driver.end_session(findings);
            prop_assert!(!effects.iter().any(|e| matches!(e, Effect::Exit(ExitReason::Completed))),
                "the loop must not end before the post-session hooks");
            let mut pending = effects;
            if productive {
                pending = driver.step(Input::PostHooksFinished { failures: Vec::new() });
            }
            let completed = pending.iter().any(|e| matches!(e, Effect::Exit(ExitReason::Completed)));
            prop_assert_eq!(completed, productive && promise);
            if completed {
                prop_assert!(driver.core.is_stopped());
                let snapshot = driver.core.snapshot(driver.now().wall);
                prop_assert_eq!(snapshot.exit_reason, Some(ExitReason::Completed));
                ended = true;
                break;
            }
            if !driver.continue_loop(&pending) {
                break;
            }
        }
        if !ended {
            prop_assert!(!matches!(driver.core.snapshot(driver.now().wall).exit_reason, Some(ExitReason::Completed)));
        }
    }

    /// The run totals are the sums of what each session reported.
    #[test]
    fn totals_are_the_sums_of_the_sessions(
        sessions in proptest::collection::vec((0u64..50, 0u64..50, 0u64..100_000, proptest::option::of(0u32..10_000)), 1..20),
    ) {
        let mut driver = Driver::new(settings(10, 100, 1_000));
        let (mut turns, mut tools, mut tokens) = (0, 0, 0);
        // Unknown until a session reports a cost.
        let mut cost: Option<f64> = None;
        for (t, c, tok, cents) in sessions {
            driver.start_session();
            let cost_usd = cents.map(|c| f64::from(c) / 10_000.0);
            let effects = driver.end_session(SessionFindings {
                output_bytes: 500,
                stats: SessionSummary { turns: Some(t), tool_calls: c, output_tokens: Some(tok), cost_usd, ..SessionSummary::default() },
                ..SessionFindings::default()
            });
            turns += t;
            tools += c;
            tokens += tok;
            if let Some(c) = cost_usd {
                cost = Some(cost.unwrap_or(0.0) + c);
            }
            let complete = effects.iter().find_map(|e| match e {
                Effect::Emit(Event::SessionComplete { turns, tool_calls, cost_usd, .. }) => Some((*turns, *tool_calls, *cost_usd)),
                _ => None,
            });
            prop_assert_eq!(complete, Some((Some(t), c, cost_usd)));
            let snapshot = driver.core.snapshot(driver.now().wall);
            prop_assert_eq!(snapshot.totals.turns, turns);
            prop_assert_eq!(snapshot.totals.tool_calls, tools);
            prop_assert_eq!(snapshot.totals.output_tokens, tokens);
            match (snapshot.totals.cost_usd, cost) {
                (Some(a), Some(b)) => prop_assert!((a - b).abs() < 1e-9),
                (a, b) => prop_assert_eq!(a, b),
            }
            prop_assert_eq!(snapshot.last_session.map(|s| s.global), Some(driver.global));
            if !driver.continue_loop(&effects) {
                break;
            }
        }
    }

    /// The watchdog never kills a session whose output grew within the limit, and
    /// always kills one that has been silent past it, whatever the wall clock
    /// does meanwhile (jumps of up to a day either way).
    #[test]
    fn watchdog_kills_only_stale_sessions(
        steps in proptest::collection::vec(
            (0u64..30_000, any::<bool>(), -86_400i64..86_400),
            1..200,
        ),
    ) {
        let stale = Duration::from_secs(60);
        let mut driver = Driver::new(settings(10, 100, 1_000));
        driver.start_session();
        let mut bytes = 0;
        let mut since_growth = Duration::ZERO;
        for (advance_ms, grows, jump) in steps {
            driver.jump_wall(jump);
            driver.advance(Duration::from_millis(advance_ms));
            since_growth += Duration::from_millis(advance_ms);
            if grows {
                bytes += 10;
                since_growth = Duration::ZERO;
                driver.step(Input::OutputSize { bytes, written_ago: Duration::ZERO });
            }
            let effects = driver.step(Input::Tick);
            let killed = killed(&effects);
            if since_growth < stale {
                prop_assert!(!killed, "killed after only {:?} of silence", since_growth);
            } else {
                prop_assert!(killed, "not killed after {:?} of silence", since_growth);
                break;
            }
        }
    }
}

#[test]
fn a_good_session_resets_the_rate_limit_count() {
    let mut driver = Driver::new(settings(1_000, 600_000, 5));
    let mut delays = Vec::new();
    for limited in [true, true, false, true] {
        driver.start_session();
        let findings = if limited {
            rate_limited(None)
        } else {
            SessionFindings {
                output_bytes: 500,
                ..SessionFindings::default()
            }
        };
        let effects = driver.end_session(findings);
        if limited {
            delays.push(armed_delay(&effects).expect("timer"));
        }
        assert!(driver.continue_loop(&effects));
    }
    assert_eq!(
        delays,
        vec![
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(1)
        ]
    );
}

#[test]
fn the_watchdog_clock_is_frozen_while_paused() {
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    driver.advance(Duration::from_secs(50));
    driver.step(Input::Command(clowder::protocol::Command::Pause));
    driver.advance(Duration::from_secs(600));
    let effects = driver.step(Input::Tick);
    assert!(!killed(&effects));
    driver.step(Input::Command(clowder::protocol::Command::Resume));
    driver.advance(Duration::from_secs(5));
    let effects = driver.step(Input::Tick);
    assert!(!killed(&effects));
    driver.advance(Duration::from_secs(6));
    let effects = driver.step(Input::Tick);
    assert!(killed(&effects));
}

#[test]
fn too_many_rate_limits_in_a_row_end_the_loop() {
    let mut driver = Driver::new(settings(10, 100, 3));
    for round in 1..=3 {
        driver.start_session();
        let effects = driver.end_session(rate_limited(None));
        if round < 3 {
            assert!(driver.continue_loop(&effects));
        } else {
            assert!(effects.iter().any(|e| matches!(
                e,
                Effect::Exit(clowder::protocol::ExitReason::RateLimited { consecutive: 3 })
            )));
            assert!(driver.core.is_stopped());
        }
    }
}

#[test]
fn an_agent_error_stops_the_loop_at_once() {
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    let message =
        "the agent cannot authenticate: Invalid API key — fix the credentials and start again";
    let effects = driver.end_session(SessionFindings {
        output_bytes: 5_000,
        // An auth failure wins over anything else the scan found.
        rate_limit: Some(RateLimitFinding {
            reason: "x".into(),
            resets_at: None,
        }),
        promise_kept: true,
        agent_error: Some(message.into()),
        ..SessionFindings::default()
    });
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Emit(Event::AgentError { reason, global: 1, .. }) if reason == message
    )));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Exit(ExitReason::Fatal { message: m }) if m == message))
    );
    assert!(!effects.iter().any(|e| matches!(
        e,
        Effect::RunHooks { .. } | Effect::ArmTimer { .. } | Effect::Emit(Event::RateLimited { .. })
    )));
    assert!(driver.core.is_stopped());
    assert_eq!(driver.core.counters().productive, 0);
    assert_eq!(driver.core.counters().rate_limits, 0);
    assert_eq!(
        ExitReason::Fatal {
            message: message.into()
        }
        .exit_code(),
        1
    );
    assert_eq!(ExitReason::Completed.exit_code(), 0);
    assert_eq!(ExitReason::Completed.label(), "completed");
}

#[test]
fn the_post_session_hooks_get_the_session_stats() {
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    let effects = driver.end_session(SessionFindings {
        output_bytes: 500,
        stats: SessionSummary {
            turns: Some(6),
            tool_calls: 4,
            cost_usd: Some(0.0412),
            result_subtype: Some("error_max_turns".into()),
            ..SessionSummary::default()
        },
        ..SessionFindings::default()
    });
    let env = effects
        .iter()
        .find_map(|e| match e {
            Effect::RunHooks {
                kind: HookKind::PostSession,
                env,
            } => Some(env.clone()),
            _ => None,
        })
        .expect("post-session hooks");
    let get = |key: &str| {
        env.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{key} missing"))
    };
    assert_eq!(get("HARNESS_COST_USD"), "0.0412");
    assert_eq!(get("HARNESS_TURNS"), "6");
    assert_eq!(get("HARNESS_TOOL_CALLS"), "4");
    assert_eq!(get("HARNESS_RESULT"), "error_max_turns");
}

#[test]
fn a_rejected_session_gate_holds_until_resumed() {
    let mut settings = settings(10, 100, 5);
    settings.session_gate = SessionGate {
        autonomy: 1,
        critical_every: 0,
    };
    let mut driver = Driver::new(settings);
    driver.step(Input::StopFileChecked { present: false });
    driver.step(Input::PreHooksFinished { failure: None });
    let effects = driver.step(Input::PromptReady {
        critical_marker: false,
    });
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::RequestSessionApproval { iteration: 1, .. }))
    );
    assert_eq!(driver.core.state(), LoopState::AwaitingApproval);
    driver.step(Input::SessionApproval {
        approved: false,
        reason: "not now".into(),
    });
    assert_eq!(driver.core.state(), LoopState::Held);
    // Time passing, ticks and timers do not start anything while held.
    driver.advance(Duration::from_secs(3600));
    assert!(driver.step(Input::Tick).is_empty());
    let effects = driver.step(Input::Command(clowder::protocol::Command::Resume));
    assert!(effects.iter().any(|e| matches!(e, Effect::CheckStopFile)));
}

fn call(input: u8) -> ToolCallSig {
    ToolCallSig {
        name: "Bash".into(),
        summary: format!("run {input}"),
        input_hash: u64::from(input),
    }
}

proptest! {
    /// With `warn`, a doom loop is reported exactly once for every streak of
    /// `threshold` or more identical calls, however the calls are split across
    /// polls; with `kill`, the session is stopped at the first such streak.
    #[test]
    fn doom_loops_are_found_exactly_at_the_threshold(
        calls in proptest::collection::vec(0u8..3, 0..40),
        chunk in 1usize..6,
        threshold in 2u64..5,
        kill in any::<bool>(),
    ) {
        let mut config = settings(1000, 60_000, 5);
        config.guard = GuardSettings {
            doom_loop_threshold: threshold,
            on_doom_loop: if kill { DoomLoopAction::Kill } else { DoomLoopAction::Warn },
            ..GuardSettings::default()
        };
        let mut driver = Driver::new(config);
        driver.start_session();
        let mut reported = 0usize;
        let mut terminated = false;
        for (i, part) in calls.chunks(chunk).enumerate() {
            let effects = driver.step(Input::SessionProgress {
                global: driver.global,
                tool_calls: (i * chunk + part.len()) as u64,
                cost_usd: None,
                new_calls: part.iter().map(|c| call(*c)).collect(),
            });
            reported += effects
                .iter()
                .filter(|e| matches!(e, Effect::Emit(Event::DoomLoop { .. })))
                .count();
            terminated |= killed(&effects);
        }
        // Streaks of identical calls of length >= threshold.
        let mut streaks = 0usize;
        let mut run = 0u64;
        for (i, c) in calls.iter().enumerate() {
            run = if i > 0 && calls[i - 1] == *c { run + 1 } else { 1 };
            if run == threshold {
                streaks += 1;
            }
        }
        if kill {
            prop_assert_eq!(reported, streaks.min(1));
            prop_assert_eq!(terminated, streaks > 0);
        } else {
            prop_assert_eq!(reported, streaks);
            prop_assert!(!terminated);
        }
    }
}

#[test]
fn clock_jumps_do_not_move_backoff_the_double_interrupt_window_or_the_runtime_budget() {
    // Backoff: the wait armed after a rate limit is the same with the wall clock
    // set an hour back just before.
    let mut driver = Driver::new(settings(2_000, 60_000, 5));
    driver.start_session();
    driver.jump_wall(-3600);
    let effects = driver.end_session(rate_limited(None));
    assert_eq!(armed_delay(&effects), Some(Duration::from_secs(2)));

    // Double SIGINT: the second comes 1 s later by the monotonic clock while the
    // wall clock went back an hour: still "again", the session is killed now.
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    driver.step(Input::Signal(StopSignal::Int));
    driver.advance(Duration::from_secs(1));
    driver.jump_wall(-3600);
    let effects = driver.step(Input::Signal(StopSignal::Int));
    assert!(killed(&effects));
    // And 10 s later by the monotonic clock is not "again", though the wall
    // clock says only a moment passed.
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    driver.step(Input::Signal(StopSignal::Int));
    driver.advance(Duration::from_secs(10));
    driver.jump_wall(-10);
    let effects = driver.step(Input::Signal(StopSignal::Int));
    assert!(!killed(&effects));

    // max_runtime counts monotonic time: a day's jump forward ends nothing.
    let budget = |effects: &[Effect]| {
        effects
            .iter()
            .any(|e| matches!(e, Effect::Emit(Event::BudgetExceeded { .. })))
    };
    let mut config = settings(10, 100, 5);
    config.guard.max_runtime = Some(Duration::from_secs(3600));
    let mut driver = Driver::new(config);
    driver.start_session();
    driver.jump_wall(86_400);
    driver.advance(Duration::from_secs(30));
    assert!(!budget(&driver.step(Input::Tick)));
    driver.advance(Duration::from_secs(3570));
    driver.step(Input::OutputSize {
        bytes: 100,
        written_ago: Duration::ZERO,
    });
    assert!(budget(&driver.step(Input::Tick)));
}

#[test]
fn the_watchdog_counts_from_the_last_write_not_from_the_poll_that_saw_it() {
    // settings(): a 60 s stale limit.
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    driver.advance(Duration::from_secs(10));
    // The poll sees growth written 0.8 s before it.
    driver.step(Input::OutputSize {
        bytes: 10,
        written_ago: Duration::from_millis(800),
    });
    driver.advance(Duration::from_millis(59_000));
    assert!(!killed(&driver.step(Input::Tick)));
    driver.advance(Duration::from_millis(300));
    assert!(killed(&driver.step(Input::Tick)));

    // A modification time far in the past moves the clock back one poll at most.
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    driver.advance(Duration::from_secs(30));
    driver.step(Input::OutputSize {
        bytes: 10,
        written_ago: Duration::from_secs(25),
    });
    driver.advance(Duration::from_millis(58_900));
    assert!(!killed(&driver.step(Input::Tick)));
    driver.advance(Duration::from_millis(200));
    assert!(killed(&driver.step(Input::Tick)));
}

/// Whether the session is being killed (its group terminated).
fn killed(effects: &[Effect]) -> bool {
    effects
        .iter()
        .any(|e| matches!(e, Effect::TerminateGroup { .. }))
}

fn exit_of(effects: &[Effect]) -> Option<ExitReason> {
    effects.iter().find_map(|e| match e {
        Effect::Exit(reason) => Some(reason.clone()),
        _ => None,
    })
}

fn interrupts(effects: &[Effect]) -> bool {
    effects.iter().any(|e| matches!(e, Effect::InterruptHooks))
}

#[test]
fn a_second_ctrl_c_during_the_last_post_session_hook_interrupts_it_and_exits_130() {
    let mut config = settings(10, 100, 5);
    config.max_iterations = 1;
    let mut driver = Driver::new(config);
    driver.start_session();
    driver.end_session(SessionFindings {
        output_bytes: 500,
        ..SessionFindings::default()
    });
    assert!(!interrupts(&driver.step(Input::Signal(StopSignal::Int))));
    assert!(interrupts(&driver.step(Input::Signal(StopSignal::Int))));
    let effects = driver.step(Input::PostHooksFinished {
        failures: Vec::new(),
    });
    let reason = exit_of(&effects).expect("the loop ends");
    assert_eq!(reason.exit_code(), 130, "{reason:?}");
}

#[test]
fn sigterm_during_a_pre_session_hook_interrupts_it_and_exits_143() {
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.step(Input::StopFileChecked { present: false });
    assert!(interrupts(&driver.step(Input::Signal(StopSignal::Term))));
    let effects = driver.step(Input::PreHooksFinished {
        failure: Some(clowder::supervisor::core::HookFailure {
            command: "sleep 1000".into(),
            exit_code: Some(143),
            timed_out: false,
            output: String::new(),
        }),
    });
    assert!(!effects.iter().any(|e| matches!(e, Effect::Spawn { .. })));
    let reason = exit_of(&effects).expect("the loop ends");
    assert_eq!(reason.exit_code(), 143, "{reason:?}");
}

#[test]
fn sigterm_during_a_session_does_not_interrupt_hooks_that_are_not_running() {
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    assert!(!interrupts(&driver.step(Input::Signal(StopSignal::Term))));
}

#[test]
fn activity_outside_the_output_keeps_the_watchdog_from_a_silent_session() {
    // settings(): a 60 s stale limit; a heartbeat written every 50 s, no output.
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    for _ in 0..4 {
        driver.advance(Duration::from_secs(50));
        driver.step(Input::Activity {
            written_ago: Duration::ZERO,
        });
        assert!(!killed(&driver.step(Input::Tick)));
    }
    // Then nothing: stale 60 s after the last write.
    driver.advance(Duration::from_secs(59));
    assert!(!killed(&driver.step(Input::Tick)));
    driver.advance(Duration::from_secs(2));
    assert!(killed(&driver.step(Input::Tick)));
}

/// The loop sleeps until `next_tick_due` when its files are watched: a tick
/// before that moment changes nothing, a tick at it kills a stale session.
#[test]
fn the_next_tick_due_is_exactly_when_the_watchdog_would_kill() {
    let mut driver = Driver::new(settings(10, 100, 5));
    driver.start_session();
    driver.advance(Duration::from_secs(7));
    driver.step(Input::OutputSize {
        bytes: 10,
        written_ago: Duration::from_millis(500),
    });
    // settings(): a 60 s stale limit, counted from the write 6.5 s into the session.
    let due = driver
        .core
        .next_tick_due()
        .expect("a running session is watched");
    assert_eq!(due, driver.base + Duration::from_millis(66_500));
    driver.advance(Duration::from_millis(59_499));
    assert!(!killed(&driver.step(Input::Tick)));
    // Paused, nothing is due; resumed, the clock goes on where it stood.
    driver.step(Input::Command(clowder::protocol::Command::Pause));
    assert_eq!(driver.core.next_tick_due(), None);
    driver.advance(Duration::from_secs(600));
    driver.step(Input::Command(clowder::protocol::Command::Resume));
    let due = driver.core.next_tick_due().expect("running again");
    assert_eq!(due, driver.now().mono + Duration::from_millis(1));
    driver.advance(Duration::from_millis(1));
    assert!(killed(&driver.step(Input::Tick)));
    // Being killed, the session needs no more ticks.
    assert_eq!(driver.core.next_tick_due(), None);
}

#[test]
fn a_max_runtime_is_due_from_the_loop_start_even_between_sessions() {
    let mut config = settings(10, 100, 5);
    config.guard.max_runtime = Some(Duration::from_secs(300));
    let mut driver = Driver::new(config);
    assert_eq!(
        driver.core.next_tick_due(),
        Some(driver.base + Duration::from_secs(300))
    );
    driver.start_session();
    // The watchdog (60 s) comes first while a session runs.
    assert_eq!(
        driver.core.next_tick_due(),
        Some(driver.base + Duration::from_secs(60))
    );
}

/// Rate limits and transient server errors back off alike but are counted
/// apart: neither's run resets the other's total, each kind has its own limit
/// and exit reason, and a transient error never shows as a rate limit.
#[test]
fn transient_errors_are_counted_apart_from_rate_limits() {
    let transient = || SessionFindings {
        output_bytes: 5_000,
        transient_error: Some("transient API error (500)".into()),
        ..SessionFindings::default()
    };
    let mut driver = Driver::new(settings(1_000, 600_000, 3));
    let mut delays = Vec::new();
    for error in [true, true, false, true, true] {
        driver.start_session();
        let effects = driver.end_session(if error {
            transient()
        } else {
            rate_limited(None)
        });
        let state = driver.core.state();
        assert_eq!(
            state,
            if error {
                LoopState::ErrorBackoff
            } else {
                LoopState::RateLimitedBackoff
            }
        );
        delays.push(armed_delay(&effects).expect("timer"));
        let said_rate_limited = effects.iter().any(|e| {
            matches!(
                e,
                Effect::Emit(clowder::protocol::Event::RateLimited { .. })
            )
        });
        assert_eq!(said_rate_limited, !error, "{effects:?}");
        assert!(driver.continue_loop(&effects));
    }
    let snapshot = driver.core.snapshot(driver.now().wall);
    assert_eq!(snapshot.counters.rate_limits, 1);
    assert_eq!(snapshot.counters.transient_errors, 4);
    assert_eq!(snapshot.consecutive_errors, 2);
    assert_eq!(snapshot.counters.productive, 0);
    // The rate limit in between started the errors' count again.
    let secs = |s| Duration::from_secs(s);
    assert_eq!(delays, [secs(1), secs(2), secs(1), secs(1), secs(2)]);
    // The third in a row ends the loop, as transient errors.
    driver.start_session();
    let effects = driver.end_session(transient());
    assert!(
        effects.iter().any(|e| matches!(
            e,
            Effect::Exit(ExitReason::TransientErrors { consecutive: 3 })
        )),
        "{effects:?}"
    );
    assert_eq!(
        ExitReason::TransientErrors { consecutive: 3 }.exit_code(),
        5
    );
}

//! The tokio side of the supervisor: feeds [`Input`]s (signals, timers, the child's
//! exit, output growth, user commands) to the pure [`Core`] and carries out the
//! [`Effect`]s it returns: spawning, signalling, hooks, files.
//!
//! Runs on a current-thread runtime: the agent is spawned from the thread that
//! owns it, which is what the parent-death signal is tied to.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use super::analysis::{Progress, SessionReader};
use super::cgroup::KillMethod;
use super::core::{
    Core, Effect, GuardSettings, HookFailure, Input, Level, Now, OutOfSpace, RateLimitFinding,
    SessionFindings, SessionGate, Settings, StopSignal,
};
use super::hooks::ShellContext;
use super::reading::{ReaderThread, Report};
use super::{cgroup, hooks, leftovers, process, prompt};
use crate::agent::follow::FollowUpdate;
use crate::agent::{Detectors, SessionStats, ToolCallSig};
use crate::approvals::{Outcome as ApprovalOutcome, Queue, Request, RequestKind};
use crate::config::{Config, pattern_strings};
use crate::protocol::{
    AgentRetrying, Command, Event, ExitReason, HookKind, LoopState, SessionSummary, Snapshot,
};
use crate::store::control;
use crate::store::counter::{self, Counter, create_output_file};
use crate::store::events::EventLog;
use crate::store::running::{Record, Running};
use crate::store::status;
use crate::wake::Watch;

/// How often the status file is refreshed while a session's output grows.
const STATUS_REFRESH: Duration = Duration::from_secs(2);
/// How often it is refreshed while a session runs and nothing changes.
const STATUS_HEARTBEAT: Duration = Duration::from_secs(30);
/// A prompt holding this marks its session critical (asked first at autonomy 3).
pub const CRITICAL_MARKER: &str = "<!-- critical -->";
/// Below this much free space where output files go, no session starts: the
/// session's output (and the status file, the event log) would be cut short.
pub const MIN_FREE_SPACE: u64 = 1024 * 1024;
/// The longest gap between two looks at the output file and the STOP file when
/// they cannot be watched.
const MAX_POLL: Duration = Duration::from_secs(1);
/// The longest gap between two looks when they are watched: a watch wakes the
/// loop when they change, this look is for a change the watch did not report
/// (a file system without inotify events, a write through a memory map).
const IDLE_LOOK: Duration = Duration::from_secs(10);
/// The shortest gap between two looks.
const MIN_LOOK_GAP: Duration = Duration::from_millis(20);
/// In verbose mode, output is copied to the console at least this often.
const VERBOSE_POLL: Duration = Duration::from_millis(200);
/// At most this much agent output is echoed per poll in verbose mode.
const VERBOSE_CHUNK: usize = 1 << 20;

/// Loops started in this process: part of every token, so that no two loops
/// hand out the same one.
static LOOPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Where the supervisor's human-readable output goes: the console in headless
/// mode, the control room otherwise.
pub trait Reporter: Send {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str);
    fn event(&mut self, _wall: DateTime<Utc>, _event: &Event) {}
    fn agent_output(&mut self, _bytes: &[u8]) {}
}

/// What the loop needs besides the config.
pub struct RuntimeOptions {
    pub working_dir: PathBuf,
    /// Echo the agent's output through the reporter.
    pub verbose: bool,
}

/// What makes a loop one lane of a fleet: its files live apart from the folder
/// the agent works in, and what is process-wide (signals, the subreaper, the
/// cgroup tree, session slots) comes from the host.
pub struct LaneSetup {
    pub name: String,
    /// The lane's files folder: the config's relative file paths (status, events,
    /// counter, output, STOP) resolve here, and its requests are taken from here.
    pub files_dir: PathBuf,
    /// Added to the environment of the agent, the hooks and the prompt commands.
    pub env: Vec<(String, String)>,
    /// The host's SIGINT / SIGTERM, in place of a handler of the lane's own.
    pub signals: Option<mpsc::UnboundedReceiver<StopSignal>>,
    /// One is held from the moment a session is prepared until it ended.
    pub slots: Option<Arc<tokio::sync::Semaphore>>,
    pub kill_method: Arc<KillMethod>,
    /// `[fleet] shared_rate_limit`: the limit of the account this lane's agent uses.
    pub shared_limit: Option<super::shared_limit::Shared>,
    /// `[guard] max_cost_usd` of the fleet: no session starts once it is spent.
    pub budget: Option<super::fleet_budget::SharedBudget>,
    /// A file whose writes count as the agent's activity for the watchdog, as
    /// its output's growth does (a task lane's heartbeat).
    pub activity_file: Option<PathBuf>,
    /// Called with the idle seconds when the watchdog finds the session stale,
    /// before the session is ended (a task lane asks its worker to stop).
    pub on_stale: Option<Box<dyn FnMut(f64) + Send>>,
}

/// How often a lane held by the shared rate limit looks again.
const SHARED_LIMIT_POLL: Duration = Duration::from_millis(50);
/// Present in a lane's files folder while the lane waits for its turn to run a
/// session (`[fleet] max_parallel`, a shared rate limit).
pub const QUEUED_MARK: &str = "queued";
/// The request file that stops a lane now (`clowder lane stop NAME --now`).
const STOP_NOW_REQUEST: &str = "stop-now";

/// How the loop ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub reason: ExitReason,
    pub snapshot: Snapshot,
}

/// Messages from the runtime's own tasks back to the loop.
enum Internal {
    Core(Box<Input>),
    PromptReady {
        text: String,
        warnings: Vec<String>,
        handoff_error: Option<(PathBuf, String)>,
    },
    PromptFailed(String),
    HooksDone {
        kind: HookKind,
        failures: Vec<HookFailure>,
    },
    GroupEnded(process::GroupEnd),
    /// The session's reader thread read more output (at most once per
    /// [`super::reading::GREW_GAP`]): look at its size.
    OutputWritten,
    /// The session's reader thread read tool calls or a cost.
    Progress {
        global: u64,
        progress: Progress,
    },
    /// The agent started or stopped retrying a failed request on its own.
    Retrying {
        global: u64,
        retrying: Option<AgentRetrying>,
    },
    /// STOP, a request or the activity file changed: look at them all.
    Look,
    /// A session slot of the fleet is this lane's: prepare session `iteration`.
    SlotGranted(Option<tokio::sync::OwnedSemaphorePermit>, u64),
    /// The fleet's budget is spent: this lane starts no more sessions.
    FleetBudgetSpent {
        spent: f64,
        limit: f64,
    },
}

struct LiveSession {
    global: u64,
    pid: i32,
    /// The agent's start time, recorded so a later run can recognise its group.
    start_ticks: Option<u64>,
    pgid: i32,
    /// Its `CLOWDER_SESSION` value, which names its record.
    token: String,
    output_file: PathBuf,
    kill: mpsc::UnboundedSender<()>,
    git_head_before: Option<String>,
    echoed: u64,
    /// Wakes the reader thread when the output file changes; `None`: the tick
    /// polls.
    output_watch: Option<Watch>,
    /// Reads the output as it grows, on its own thread; taken when the session
    /// is analysed.
    reader: Option<ReaderThread>,
    /// The lane's activity file's modification time when last looked at: only
    /// a new write is activity.
    activity_seen: Option<std::time::SystemTime>,
}

pub struct Runtime {
    config: Config,
    options: RuntimeOptions,
    core: Core,
    reporter: Box<dyn Reporter>,
    detectors: Arc<Detectors>,
    event_log: Option<EventLog>,
    counter: Counter,
    status_path: PathBuf,
    stop_file: PathBuf,
    output_dir: PathBuf,
    session: Option<LiveSession>,
    pending_iteration: u64,
    snapshots: watch::Sender<Arc<Snapshot>>,
    internal_tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    last_status_write: Option<Instant>,
    status_error_reported: bool,
    exit: Option<ExitReason>,
    /// The prompt built for the session about to start.
    pending_prompt: Option<String>,
    /// Set to stop waiting for a session's approval.
    approval_cancel: Arc<std::sync::atomic::AtomicBool>,
    /// How sessions and hooks are contained and ended (cgroup or group+token).
    kill_method: Arc<KillMethod>,
    running: Running,
    /// What hooks and prompt commands share; its cancel ends them on a stop.
    shell: ShellContext,
    hook_cancel: watch::Sender<bool>,
    lane: Option<LaneSetup>,
    /// Where `pause` / `resume` requests are taken from.
    control_dir: PathBuf,
    /// The fleet's session slot while this lane prepares or runs a session.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Waiting for a session slot (or the shared rate limit): no session yet.
    queued: bool,
    /// `clowder lane pause` was taken; a session not yet started waits for resume.
    lane_paused: bool,
    /// The session held back by a pause, started on resume.
    held_iteration: Option<u64>,
    /// Why the lane ended before a session it was preparing could start (the
    /// fleet's budget, a signal while queued): the core saw only a failed start.
    stopped_before_start: Option<ExitReason>,
    /// Wakes the loop when STOP, a request or the activity file changes; `None`:
    /// they are polled.
    look_watch: Option<Watch>,
    /// When the loop last looked at its files.
    last_look: Option<Instant>,
    /// The output's size and last growth as the status file last showed them.
    status_growth: (u64, Option<DateTime<Utc>>),
    /// Tool calls the reader thread sent after the core stopped taking them (the
    /// session ended): judged with the rest of the session's analysis.
    late_calls: Vec<ToolCallSig>,
    /// Where the live session's display lines go (the control room's output
    /// pane), built by the session's reader from the lines it decodes anyway.
    output_tap: Option<mpsc::UnboundedSender<FollowUpdate>>,
    /// SIGHUP is the control room's to take: for it, the terminal is gone.
    hangup_to_the_room: bool,
}

impl Runtime {
    /// Prepares everything that can fail before the loop starts: the event log,
    /// the counter, the output directory, the patterns.
    pub fn new(
        config: Config,
        options: RuntimeOptions,
        reporter: Box<dyn Reporter>,
    ) -> Result<(Runtime, watch::Receiver<Arc<Snapshot>>), String> {
        Runtime::with_lane(config, options, None, reporter)
    }

    /// [`Runtime::new`], for a lane of a fleet when `lane` is given.
    pub fn with_lane(
        config: Config,
        options: RuntimeOptions,
        lane: Option<LaneSetup>,
        mut reporter: Box<dyn Reporter>,
    ) -> Result<(Runtime, watch::Receiver<Arc<Snapshot>>), String> {
        let cwd = options.working_dir.clone();
        let files_base = lane
            .as_ref()
            .map_or_else(|| cwd.clone(), |lane| lane.files_dir.clone());
        let control_dir = lane.as_ref().map_or_else(
            || cwd.join(crate::store::lock::STATE_DIR),
            |lane| lane.files_dir.clone(),
        );
        // `./x` and `x` name the same file; keep `.` out of the paths users read.
        let resolve = |path: &Path| -> PathBuf {
            files_base
                .join(path)
                .components()
                .filter(|c| *c != std::path::Component::CurDir)
                .collect()
        };
        let output_dir = resolve(&config.session.output_dir.0);
        std::fs::create_dir_all(&output_dir).map_err(|err| {
            format!(
                "cannot create the output directory {}: {err}",
                output_dir.display()
            )
        })?;
        let detectors = shared_detectors(
            pattern_strings(&config.detect.rate_limit_patterns),
            pattern_strings(&config.detect.commit_patterns),
        )?;
        let event_log = match config.event_log_path() {
            Some(path) => {
                let path = resolve(path);
                Some(EventLog::open(&path).map_err(|err| {
                    format!("cannot open the event log {}: {err}", path.display())
                })?)
            }
            None => None,
        };
        let prefix = &config.session.output_prefix(&config.agent);
        let counter_path = resolve(&config.session.counter_file.0);
        // Under the instance lock nobody else writes these files: a temp file next
        // to one is a write that a killed run never finished.
        for path in [resolve(&config.output.status_file.0), counter_path.clone()] {
            if let Err(err) = crate::store::remove_interrupted_writes(&path) {
                reporter.log(
                    Utc::now(),
                    Level::Warn,
                    &format!(
                        "cannot remove the temp files of an interrupted write of {}: {err}",
                        path.display()
                    ),
                );
            }
        }
        // A request left for a loop that ended meanwhile is not for this one.
        control::take_in(&control_dir, control::PAUSE_REQUEST);
        control::take_in(&control_dir, control::RESUME_REQUEST);
        if lane.is_some() {
            control::take_in(&control_dir, STOP_NOW_REQUEST);
        }
        let loaded = counter::recover(
            &counter_path,
            &output_dir,
            prefix,
            event_log.as_ref().map(EventLog::path),
        );
        for warning in loaded.warnings {
            reporter.log(Utc::now(), Level::Warn, &warning);
        }
        let settings = Settings {
            max_iterations: config.session.max_iterations.0,
            stale_timeout: config.stale_timeout(),
            min_output_bytes: config.watchdog.min_output_bytes,
            max_empty_retries: config.retry.max_empty_retries,
            retry_delay: config.retry.retry_delay_secs.0,
            initial_delay: config.backoff.initial_delay_secs.0,
            max_delay: config.backoff.max_delay_secs.0,
            max_consecutive_rate_limits: config.backoff.max_consecutive_rate_limits.0,
            max_consecutive_errors: config.backoff.max_consecutive_errors.0,
            kill_grace: config.watchdog.kill_grace_secs.0,
            sigterm_stops_now: config.signals.sigterm == crate::config::Sigterm::StopNow,
            disk_recheck: config.output.disk_recheck_secs.0,
            session_gate: SessionGate {
                autonomy: config.approvals.autonomy.0,
                critical_every: config.approvals.critical_every,
            },
            guard: GuardSettings {
                max_tool_calls_per_session: config.guard.max_tool_calls_per_session,
                max_cost_per_session_usd: config.guard.max_cost_per_session_usd.0,
                max_cost_usd: config.guard.max_cost_usd.0,
                max_runtime: config.guard.max_runtime.duration,
                doom_loop_threshold: config.guard.doom_loop_threshold.0,
                on_doom_loop: config.guard.on_doom_loop,
            },
        };
        let kill_method = match &lane {
            Some(lane) => Arc::clone(&lane.kill_method),
            None => Arc::new(cgroup::setup()),
        };
        if let KillMethod::GroupToken { why } = kill_method.as_ref() {
            reporter.log(
                Utc::now(),
                Level::Info,
                &format!(
                    "no per-session cgroups ({why}): sessions are ended by process group and {}",
                    process::TOKEN_ENV
                ),
            );
        }
        let running = match &lane {
            Some(lane) => Running::in_dir(lane.files_dir.join(crate::store::running::RUNNING_DIR)),
            None => Running::new(&cwd),
        };
        let (hook_cancel, cancel) = watch::channel(false);
        let own_start =
            process::read_proc_stat(std::process::id() as i32).map_or(0, |info| info.start_ticks);
        let shell = ShellContext {
            method: Arc::clone(&kill_method),
            running: Some(running.clone()),
            // Unique per loop, even with several loops in one process.
            token_prefix: format!(
                "{}-{own_start}-{}",
                std::process::id(),
                LOOPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            own_start,
            counter: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            grace: settings.kill_grace,
            cancel,
        };
        let mut core = Core::new(settings, std::process::id(), config.agent.command.0.clone());
        core.set_ungated(crate::approvals::codex_hook::ungated(&config.agent, &cwd));
        let status_path = resolve(&config.output.status_file.0);
        if lane.is_some()
            && let Some(earlier) = unfinished_run(&status_path)
        {
            core.continue_from(&earlier);
        }
        let snapshot = Arc::new(core.snapshot(Utc::now()));
        let (snapshots, snapshot_rx) = watch::channel(snapshot);
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        let runtime = Runtime {
            status_path,
            stop_file: resolve(&config.shutdown.stop_file.0),
            output_dir,
            config,
            core,
            reporter,
            detectors,
            event_log,
            counter: loaded.counter,
            session: None,
            pending_iteration: 0,
            snapshots,
            internal_tx,
            internal_rx,
            last_status_write: None,
            status_error_reported: false,
            exit: None,
            pending_prompt: None,
            approval_cancel: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            kill_method,
            running,
            shell,
            hook_cancel,
            options,
            lane,
            control_dir,
            slot: None,
            queued: false,
            lane_paused: false,
            held_iteration: None,
            stopped_before_start: None,
            look_watch: None,
            last_look: None,
            status_growth: (0, None),
            late_calls: Vec::new(),
            output_tap: None,
            hangup_to_the_room: false,
        };
        Ok((runtime, snapshot_rx))
    }

    fn poll_period(&self) -> Duration {
        let mut period = self.config.watchdog.check_interval_secs.0.min(MAX_POLL);
        if self.options.verbose {
            period = period.min(VERBOSE_POLL);
        }
        period.max(Duration::from_millis(20))
    }

    /// Hands the snapshot to its watchers unless only its time changed: a look
    /// that found nothing new wakes no one (the control room, the host).
    fn publish(&self, mut snapshot: Snapshot) {
        self.snapshots.send_if_modified(|latest| {
            let now = snapshot.last_update;
            snapshot.last_update = latest.last_update;
            if snapshot == **latest {
                return false;
            }
            snapshot.last_update = now;
            *latest = Arc::new(snapshot);
            true
        });
    }

    /// Watches what [`Runtime::on_tick`] looks at besides the output: STOP, the
    /// requests, the activity file.
    fn watch_control_files(&self) -> Option<Watch> {
        let mut files = vec![self.stop_file.clone()];
        for request in [
            control::PAUSE_REQUEST,
            control::RESUME_REQUEST,
            STOP_NOW_REQUEST,
        ] {
            files.push(self.control_dir.join(request));
        }
        let activity = self.lane.as_ref().and_then(|l| l.activity_file.as_ref());
        files.extend(activity.cloned());
        let wake = self.internal_tx.clone();
        Watch::start(&files, move || {
            let _ = wake.send(Internal::Look);
        })
    }

    /// When to look at the files next: every [`Runtime::poll_period`] unless
    /// they are watched; then when the core or the status file needs it, and at
    /// least every [`IDLE_LOOK`].
    fn next_look(&self) -> Instant {
        let Some(last) = self.last_look else {
            return Instant::now();
        };
        let watched = |watch: &Option<Watch>| watch.as_ref().is_some_and(Watch::working);
        let output_watched = self
            .session
            .as_ref()
            .is_none_or(|session| watched(&session.output_watch));
        if self.options.verbose || !watched(&self.look_watch) || !output_watched {
            return last + self.poll_period();
        }
        let idle = self.config.watchdog.check_interval_secs.0.min(IDLE_LOOK);
        let mut due = last + idle.max(MIN_LOOK_GAP);
        due = due.min(self.core.next_tick_due().unwrap_or(due));
        due = due.min(self.status_due().unwrap_or(due));
        due.max(last + MIN_LOOK_GAP)
    }

    /// When the status file is to be written again while a session runs: soon
    /// after the output grew, else as a heartbeat.
    fn status_due(&self) -> Option<Instant> {
        if !self.core.session_running() {
            return None;
        }
        let Some(written) = self.last_status_write else {
            return Some(Instant::now());
        };
        let latest = self.snapshots.borrow();
        let grew = (latest.output_bytes, latest.last_output_growth) != self.status_growth;
        Some(
            written
                + if grew {
                    STATUS_REFRESH
                } else {
                    STATUS_HEARTBEAT
                },
        )
    }

    /// The reader thread read more output: its size for the watchdog.
    fn output_grew(&mut self, queue: &mut VecDeque<Input>) {
        let Some(session) = &mut self.session else {
            return;
        };
        if let Ok(meta) = std::fs::metadata(&session.output_file) {
            queue.push_back(Input::OutputSize {
                bytes: meta.len(),
                written_ago: written_ago(&meta),
            });
        }
        if self.options.verbose {
            self.echo_output();
        }
    }

    fn now(&self) -> Now {
        Now {
            mono: Instant::now(),
            wall: Utc::now(),
        }
    }

    /// Runs the loop until it ends; `commands` are the user's (may never send).
    pub async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) -> Outcome {
        let mut host_signals = self.lane.as_mut().and_then(|lane| lane.signals.take());
        let (mut sigint, mut sigterm, mut sighup) = if self.lane.is_some() {
            (None, None, None)
        } else {
            process::become_subreaper();
            tokio::spawn(super::reaper::reap_as_orphans_die());
            (
                signal(SignalKind::interrupt()).ok(),
                signal(SignalKind::terminate()).ok(),
                (!self.hangup_to_the_room)
                    .then(process::hangup_signal)
                    .flatten(),
            )
        };
        // Before anything rewrites the status file of the run that may have left it.
        self.recover_abandoned_session().await;
        self.end_leftovers().await;
        self.look_watch = self.watch_control_files();
        let mut commands_open = true;
        let mut queue = VecDeque::from([Input::Start]);

        loop {
            while let Some(input) = queue.pop_front() {
                let effects = self.core.step(self.now(), input);
                for effect in effects {
                    self.execute(effect, &mut queue);
                }
                let snapshot = self.core.snapshot(Utc::now());
                if let Some(lane) = &self.lane
                    && let Some(budget) = &lane.budget
                {
                    lock_budget(budget).report(&lane.name, snapshot.totals.known_cost());
                }
                self.publish(snapshot);
            }
            if self.exit.is_some() && self.session.is_none() {
                break;
            }
            let next_look = tokio::time::Instant::from_std(self.next_look());
            tokio::select! {
                Some(message) = self.internal_rx.recv() => match message {
                    Internal::Look => self.on_tick(&mut queue),
                    Internal::OutputWritten => self.output_grew(&mut queue),
                    message => queue.extend(self.on_internal(message)),
                },
                Some(()) = recv_signal(&mut sigint) => queue.push_back(Input::Signal(StopSignal::Int)),
                Some(()) = recv_signal(&mut sigterm) => queue.push_back(Input::Signal(StopSignal::Term)),
                Some(()) = recv_signal(&mut sighup) => queue.push_back(Input::Signal(StopSignal::Hup)),
                Some(stop) = recv_host_signal(&mut host_signals) => {
                    queue.push_back(Input::Signal(stop));
                    self.on_host_signal(stop);
                }
                command = commands.recv(), if commands_open => match command {
                    Some(command) => queue.push_back(Input::Command(command)),
                    None => commands_open = false,
                },
                () = tokio::time::sleep_until(next_look) => self.on_tick(&mut queue),
            }
        }
        self.slot = None;
        if let Some(lane) = &self.lane
            && let Some(shared) = &lane.shared_limit
        {
            lock_limit(shared).left(&lane.name);
        }
        self.set_queued(false);
        process::reap_orphan_zombies(&[]);
        self.kill_method.teardown();
        let mut snapshot = self.core.snapshot(Utc::now());
        let mut reason = self.exit.take().unwrap_or(ExitReason::MaxIterations);
        if let Some(stopped) = self.stopped_before_start.take() {
            reason = stopped;
            snapshot.exit_reason = Some(reason.clone());
            if let Err(err) = status::write(&self.status_path, &snapshot) {
                let message = format!("cannot write the status file: {err}");
                self.reporter.log(Utc::now(), Level::Error, &message);
            }
        }
        Outcome { reason, snapshot }
    }

    /// If the status file shows a session of an earlier run that never ended
    /// (clowder was killed; only its agent died with it), kills what is left of
    /// that session's process group and logs `session_abandoned`. A group is
    /// signalled only when it is provably that session's: its leader alive with
    /// the recorded start time, or, the leader gone, members started no earlier
    /// and carrying the session's `HARNESS_OUTPUT_FILE`. A pid or group id
    /// reused by an unrelated process is never signalled.
    async fn recover_abandoned_session(&mut self) {
        let Ok((old, _)) = status::read(&self.status_path) else {
            return;
        };
        let (Some(pgid), Some(pid)) = (old.pgid, old.agent_pid) else {
            return;
        };
        if old.state == LoopState::Stopped || old.pid == std::process::id() {
            return;
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
            return;
        }
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
    async fn end_leftovers(&mut self) {
        let grace = self.core.settings().kill_grace;
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

    fn on_tick(&mut self, queue: &mut VecDeque<Input>) {
        self.last_look = Some(Instant::now());
        if self.exit.is_some() {
            return;
        }
        if let Some(session) = &mut self.session {
            if let Ok(meta) = std::fs::metadata(&session.output_file) {
                queue.push_back(Input::OutputSize {
                    bytes: meta.len(),
                    written_ago: written_ago(&meta),
                });
            }
            let activity = self.lane.as_ref().and_then(|l| l.activity_file.as_ref());
            if let Some(meta) = activity.and_then(|file| std::fs::metadata(file).ok())
                && let Ok(modified) = meta.modified()
                && session.activity_seen.replace(modified) != Some(modified)
            {
                queue.push_back(Input::Activity {
                    written_ago: written_ago(&meta),
                });
            }
            // For a change the watch did not report.
            if let Some(reader) = &session.reader {
                reader.wake();
            }
            if self.options.verbose {
                self.echo_output();
            }
        }
        if self.stop_file.exists() {
            queue.push_back(Input::StopFileSeen);
        }
        // From `clowder pause` / `clowder resume` (or `clowder lane …`) elsewhere.
        let dir = self.control_dir.clone();
        if control::take_in(&dir, control::PAUSE_REQUEST) {
            self.lane_paused = self.lane.is_some();
            queue.push_back(Input::Command(Command::Pause));
        }
        if control::take_in(&dir, control::RESUME_REQUEST) {
            queue.push_back(Input::Command(Command::Resume));
            self.lane_paused = false;
            if let Some(iteration) = self.held_iteration.take() {
                self.take_slot(iteration);
            }
        }
        if self.lane.is_some() && control::take_in(&dir, STOP_NOW_REQUEST) {
            queue.push_back(Input::Command(Command::StopNow));
            if self.held_iteration.is_some() {
                self.stop_before_start(ExitReason::UserStop, "stopped while paused".into());
            }
        }
        if self.held_iteration.is_some() && self.stop_file.exists() {
            self.stop_before_start(ExitReason::StopFile, "stopped while paused".into());
        }
        queue.push_back(Input::Tick);
        if self.status_due().is_some_and(|at| at <= Instant::now()) {
            self.write_status();
        }
    }

    /// Copies what the agent wrote since the last look to the reporter.
    fn echo_output(&mut self) {
        let Some(session) = &mut self.session else {
            return;
        };
        let Ok(mut file) = File::open(&session.output_file) else {
            return;
        };
        if file.seek(SeekFrom::Start(session.echoed)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if let Ok(read) = file.take(VERBOSE_CHUNK as u64).read_to_end(&mut buf) {
            session.echoed += read as u64;
            if read > 0 {
                self.reporter.agent_output(&buf);
            }
        }
    }

    /// Hands the guards what the reader thread found; once the session ended,
    /// keeps its calls for the session's analysis.
    fn on_progress(&mut self, global: u64, progress: Progress) -> Option<Input> {
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

    fn on_internal(&mut self, message: Internal) -> Option<Input> {
        match message {
            Internal::FleetBudgetSpent { spent, limit } => {
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
                Some(Input::Command(Command::StopNow))
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
            Internal::Core(mut input) => {
                // The session's slot is given back once its end is recorded.
                if let Input::SessionAnalyzed(findings) = input.as_mut() {
                    self.slot = None;
                    self.report_session_end(findings.rate_limit.is_some());
                    // Read before the rest, so judged first.
                    let mut calls = std::mem::take(&mut self.late_calls);
                    calls.append(&mut findings.new_calls);
                    findings.new_calls = calls;
                }
                Some(*input)
            }
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
            } => {
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
                Some(Input::PromptReady { critical_marker })
            }
            Internal::GroupEnded(end) => {
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
                Some(Input::SessionExited {
                    exit_code: end.exit_code,
                    needed_sigkill: end.needed_sigkill,
                    lingering_killed: end.lingering_killed,
                })
            }
        }
    }

    fn spawn_session(&mut self, prompt_text: &str) -> Input {
        let prefix = self.config.session.output_prefix(&self.config.agent);
        let (global, output_file, file) =
            match create_output_file(&self.output_dir, &prefix, self.counter.next()) {
                Ok(created) => created,
                Err(err) if is_out_of_space(&err) => {
                    return Input::DiskFull {
                        dir: self.output_dir.clone(),
                        free_bytes: free_space(&self.output_dir).unwrap_or(0),
                    };
                }
                Err(err) => {
                    return Input::SpawnFailed {
                        global: Some(self.counter.next()),
                        error: format!(
                            "cannot create the output file in {}: {err}",
                            self.output_dir.display()
                        ),
                    };
                }
            };
        // Persisted before the session starts: a crash never hands this number out again.
        if let Err(err) = self.counter.commit(global) {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!("cannot save the iteration counter: {err}"),
            );
        }
        let args = prompt::agent_args(&self.config.agent.args, prompt_text);
        let git_head_before = git_head(&self.options.working_dir);
        // The agent can tell which session it is, e.g. to name its own logs.
        let mut env = self.base_env();
        env.push((
            "HARNESS_ITERATION".into(),
            self.pending_iteration.to_string(),
        ));
        env.push(("HARNESS_GLOBAL_ITERATION".into(), global.to_string()));
        env.push((
            "HARNESS_OUTPUT_FILE".into(),
            output_file.display().to_string(),
        ));
        let token = format!("{}s{global}", self.shell.token_prefix);
        env.push((process::TOKEN_ENV.into(), token.clone()));
        let cgroup = self.session_cgroup(global);
        let mut containment = process::Containment {
            token: token.clone(),
            cgroup,
        };
        // Recorded before it starts, and again once its pid is known.
        self.record_session(global, 0, Some(self.shell.own_start), &containment);
        let spawned = match self.spawn_contained(&args, &env, &file, &mut containment) {
            Ok(spawned) => spawned,
            Err(err) => {
                self.running.remove(&containment.token);
                self.slot = None;
                return Input::SpawnFailed {
                    global: Some(global),
                    error: format!("`{}`: {err}", self.config.agent.command.0),
                };
            }
        };
        drop(file);
        let (kill_tx, kill_rx) = mpsc::unbounded_channel();
        let (pid, pgid) = (spawned.pid, spawned.pgid);
        let tx = self.internal_tx.clone();
        let grace = self.core.settings().kill_grace;
        let start_ticks = process::read_proc_stat(pid).map(|info| info.start_ticks);
        self.record_session(global, pid, start_ticks, &containment);
        let owned = spawned.owned;
        tokio::spawn(async move {
            let end =
                process::supervise_group(spawned.child, pgid, grace, kill_rx, containment).await;
            drop(owned);
            let _ = tx.send(Internal::GroupEnded(end));
        });
        let reader = self.start_reader(global, &output_file);
        // Without a thread nothing reads on a wake-up: the tick polls the size.
        let waker = reader.threaded().then(|| reader.waker());
        let output_watch = waker.and_then(|waker| {
            Watch::start(std::slice::from_ref(&output_file), move || waker.wake())
        });
        self.session = Some(LiveSession {
            global,
            pid,
            start_ticks,
            pgid,
            token,
            output_file: output_file.clone(),
            kill: kill_tx,
            git_head_before,
            echoed: 0,
            reader: Some(reader),
            output_watch,
            // A write from before the session is no sign of its life.
            activity_seen: self
                .lane
                .as_ref()
                .and_then(|lane| lane.activity_file.as_ref())
                .and_then(|file| std::fs::metadata(file).ok()?.modified().ok()),
        });
        Input::Spawned {
            global,
            pid,
            pgid,
            output_file,
        }
    }

    /// Each session's display lines and statistics go to `tap`, from the
    /// reader that reads the session anyway, while `tap` is open: the screen
    /// needs no second reader of the same output.
    pub fn show_output_to(&mut self, tap: mpsc::UnboundedSender<FollowUpdate>) {
        self.output_tap = Some(tap);
    }

    /// Leaves SIGHUP to the control room, which ends the loop with
    /// [`Command::TerminalClosed`] when its terminal hangs up.
    pub fn leave_hangup_to_the_room(&mut self) {
        self.hangup_to_the_room = true;
    }

    /// Starts the session's reader thread; its progress goes to the guards if
    /// they watch sessions, its display lines to the output tap if open.
    fn start_reader(&mut self, global: u64, output_file: &Path) -> ReaderThread {
        let mut reader = SessionReader::new(
            output_file,
            Arc::clone(&self.detectors),
            self.config.agent.format,
            self.config.completion.promise(),
        );
        let progress = self.core.settings().guard.watches_sessions();
        if progress {
            reader.record_tool_calls();
        }
        let tap = self.output_tap.clone().filter(|tap| !tap.is_closed());
        if tap.is_some() {
            reader.show();
        }
        let tx = self.internal_tx.clone();
        let file = output_file.to_path_buf();
        let mut reset = true;
        let sink = Box::new(move |report| {
            let _ = tx.send(match report {
                Report::Grew => Internal::OutputWritten,
                Report::Progress(progress) => Internal::Progress { global, progress },
                Report::Retrying(retrying) => Internal::Retrying { global, retrying },
                Report::Shown { lines, stats } => {
                    if let Some(tap) = &tap {
                        let file = file.clone();
                        let update = FollowUpdate {
                            file,
                            lines,
                            stats: *stats,
                            reset,
                        };
                        let _ = tap.send(update);
                        reset = false;
                    }
                    return;
                }
            });
        });
        match ReaderThread::start(reader, output_file, sink, progress) {
            Ok(reader) => reader,
            Err((reader, err)) => {
                self.reporter.log(
                    Utc::now(),
                    Level::Warn,
                    &format!(
                        "global={global}: cannot start a thread to read the output as it is written ({err}): it is read when the session ends"
                    ),
                );
                reader
            }
        }
    }

    /// Spawns the agent in its cgroup; if that fails, once more without one (the
    /// session is then ended by its group and token), so that a cgroup that
    /// refuses a process never stops the loop.
    fn spawn_contained(
        &mut self,
        args: &[String],
        env: &[(String, String)],
        file: &File,
        containment: &mut process::Containment,
    ) -> std::io::Result<process::Spawned> {
        let program = &self.config.agent.command.0;
        let cwd = &self.options.working_dir;
        let owner = self.lane.as_ref().map_or("", |lane| lane.name.as_str());
        let cgroup = containment.cgroup.as_deref();
        let first = process::spawn_agent(program, args, env, file, cwd, cgroup, owner);
        if first.is_ok() {
            return first;
        }
        let Some(cgroup) = containment.cgroup.take() else {
            return first;
        };
        cgroup::remove_tree(&cgroup);
        let second = process::spawn_agent(program, args, env, file, cwd, None, owner);
        if second.is_ok()
            && let Err(err) = &first
        {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!(
                    "cannot start the agent in {}: {err}; this session is ended by its process group and {}",
                    cgroup.display(),
                    process::TOKEN_ENV
                ),
            );
        }
        second
    }

    /// The session's own cgroup, when sessions get one (a failure is logged and
    /// the session goes on under the process group and its token).
    fn session_cgroup(&mut self, global: u64) -> Option<PathBuf> {
        match self.kill_method.create(&format!("session-{global}")) {
            Ok(cgroup) => cgroup,
            Err(err) => {
                self.reporter.log(
                    Utc::now(),
                    Level::Warn,
                    &format!("global={global}: no cgroup for the session: {err}"),
                );
                None
            }
        }
    }

    /// Records the session before it can do much, for a later start to end it
    /// if clowder dies.
    fn record_session(
        &mut self,
        global: u64,
        pid: i32,
        start_ticks: Option<u64>,
        containment: &process::Containment,
    ) {
        let Some(start_ticks) = start_ticks else {
            return;
        };
        let record = Record {
            token: containment.token.clone(),
            kind: "session".into(),
            what: global.to_string(),
            clowder_pid: std::process::id(),
            pid,
            pgid: pid,
            start_ticks,
            cgroup: containment.cgroup.clone(),
        };
        if let Err(err) = self.running.add(&record) {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!("global={global}: cannot record the session in .clowder/running: {err}"),
            );
        }
    }

    fn execute(&mut self, effect: Effect, queue: &mut VecDeque<Input>) {
        match effect {
            Effect::Log { level, message } => self.reporter.log(Utc::now(), level, &message),
            Effect::Emit(mut event) => {
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
            Effect::WriteStatus => self.write_status(),
            Effect::CheckStopFile => {
                let present = self.stop_file.exists();
                match self.free_space_if_low() {
                    Some(free_bytes) if !present => queue.push_back(Input::DiskFull {
                        dir: self.output_dir.clone(),
                        free_bytes,
                    }),
                    _ => queue.push_back(Input::StopFileChecked { present }),
                }
            }
            Effect::RemoveStopFile => {
                if let Err(err) = std::fs::remove_file(&self.stop_file) {
                    self.reporter.log(
                        Utc::now(),
                        Level::Warn,
                        &format!("cannot remove {}: {err}", self.stop_file.display()),
                    );
                }
            }
            Effect::RunHooks { kind, env } => self.run_hooks(kind, env),
            Effect::Spawn { iteration } => self.take_slot(iteration),
            Effect::PauseGroup { pgid } => process::signal_group(pgid, Signal::SIGSTOP),
            Effect::ResumeGroup { pgid } => process::signal_group(pgid, Signal::SIGCONT),
            Effect::TerminateGroup { pgid, .. } => {
                if let Some(session) = self.session.as_ref().filter(|s| s.pgid == pgid) {
                    let _ = session.kill.send(());
                }
            }
            Effect::AnalyzeSession { output_file } => self.analyze(output_file),
            Effect::ArmTimer { epoch, after } => {
                let tx = self.internal_tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let _ = tx.send(Internal::Core(Box::new(Input::TimerFired { epoch })));
                });
            }
            Effect::Exit(reason) => {
                self.approval_cancel
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                self.exit = Some(reason);
            }
            Effect::StartAgent { .. } => {
                let prompt = self.pending_prompt.take().unwrap_or_default();
                queue.push_back(self.spawn_session(&prompt));
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

    fn emit(&mut self, event: &Event) {
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

    fn write_status(&mut self) {
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
    fn free_space_if_low(&self) -> Option<u64> {
        free_space(&self.output_dir).filter(|free| *free < MIN_FREE_SPACE)
    }

    fn base_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "HARNESS_PROMPT_FILE".into(),
            self.config.prompt_path().display().to_string(),
        )];
        if let Some(lane) = &self.lane {
            env.extend(lane.env.iter().cloned());
        }
        env
    }

    fn run_hooks(&mut self, kind: HookKind, mut env: Vec<(String, String)>) {
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
    fn take_slot(&mut self, iteration: u64) {
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
    fn set_queued(&mut self, queued: bool) {
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

    /// A lane still waiting for its turn starts no session once the fleet is
    /// told to stop: it ends as the signal says, without the session.
    fn on_host_signal(&mut self, stop: StopSignal) {
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

    /// Ends the loop where the session being prepared would begin, with `reason`.
    fn stop_before_start(&mut self, reason: ExitReason, why: String) {
        if self.stopped_before_start.is_some() {
            return;
        }
        self.held_iteration = None;
        self.stopped_before_start = Some(reason);
        // No session is coming: a failed start ends the loop where it would begin.
        self.internal_tx.send(Internal::PromptFailed(why)).ok();
    }

    /// Tells the shared limit (if any) that this lane's session ended.
    fn report_session_end(&self, limited: bool) {
        if let Some(lane) = &self.lane
            && let Some(shared) = &lane.shared_limit
        {
            lock_limit(shared).session_ended(&lane.name, limited);
        }
    }

    /// Holds every lane of the account until this rate limit's wait is over.
    fn report_rate_limit(&self, backoff_secs: f64, resets_at: Option<DateTime<Utc>>) {
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

    fn build_prompt(&mut self, iteration: u64) {
        self.pending_iteration = iteration;
        let prompt_file = self.options.working_dir.join(self.config.prompt_path());
        let commands: Vec<String> = self
            .config
            .prompt
            .prepend_commands
            .iter()
            .map(|c| c.0.clone())
            .collect();
        let mut env = self.base_env();
        env.push(("HARNESS_ITERATION".into(), iteration.to_string()));
        env.push((
            "HARNESS_GLOBAL_ITERATION".into(),
            self.counter.next().to_string(),
        ));
        let prompt_config = &self.config.prompt;
        let extras = prompt::Extras {
            // From the run's second session on.
            continuation: (self.core.counters().sessions > 0)
                .then(|| prompt_config.continuation.clone()),
            continuation_mode: prompt_config.continuation_mode,
            handoff_file: prompt_config
                .handoff_path()
                .map(|path| self.options.working_dir.join(path)),
        };
        let tx = self.internal_tx.clone();
        let cwd = self.options.working_dir.clone();
        let timeout = self.config.hooks.timeout_secs.0;
        let shell = self.shell.clone();
        tokio::spawn(async move {
            let built = prompt::build(
                &prompt_file,
                &commands,
                &extras,
                &env,
                &cwd,
                timeout,
                &shell,
            )
            .await;
            let message = match built {
                Ok(built) => Internal::PromptReady {
                    text: built.text,
                    warnings: built.warnings,
                    handoff_error: built.handoff_error,
                },
                Err(error) => Internal::PromptFailed(error),
            };
            let _ = tx.send(message);
        });
    }

    /// Puts a "may this session start?" request in the approval queue and waits
    /// for the answer off the loop's thread; no timeout: the loop waits for a human.
    fn request_session_approval(&mut self, iteration: u64, critical: bool) {
        let prompt = self.pending_prompt.clone().unwrap_or_default();
        let max = self.config.session.max_iterations.0;
        let request = Request {
            id: String::new(),
            created: Utc::now(),
            kind: RequestKind::Session,
            title: format!(
                "start session {iteration}/{max}{}",
                if critical { " (critical)" } else { "" }
            ),
            tool_name: None,
            tool_input: None,
            session_id: None,
            cwd: Some(self.options.working_dir.display().to_string()),
            // Whole: the human approves the session this prompt starts.
            body: Some(prompt),
            lane: self.lane.as_ref().map(|lane| lane.name.clone()),
            abandoned: false,
        };
        self.ask_through_queue(request, |approved, reason| Input::SessionApproval {
            approved,
            reason,
        });
    }

    /// Asks whether a session that repeats the same tool call may go on.
    fn request_doom_loop_approval(
        &mut self,
        iteration: u64,
        global: u64,
        tool: &str,
        input: &str,
        repeats: u64,
    ) {
        let request = Request {
            id: String::new(),
            created: Utc::now(),
            kind: RequestKind::Ask,
            title: format!(
                "doom loop: {tool} ×{repeats} with the same input — let session {iteration} (global {global}) go on?"
            ),
            tool_name: Some(tool.to_string()),
            tool_input: Some(serde_json::json!({ "input": input })),
            session_id: None,
            cwd: Some(self.options.working_dir.display().to_string()),
            body: Some(format!(
                "The session is paused. Approve to let it go on (the count starts again), reject to kill it.\n\n{tool}  {input}"
            )),
            lane: self.lane.as_ref().map(|lane| lane.name.clone()),
            abandoned: false,
        };
        self.ask_through_queue(request, move |approved, reason| Input::DoomLoopApproval {
            global,
            approved,
            reason,
        });
    }

    /// Submits `request` to the approval queue and waits for the answer off the
    /// loop's thread (no timeout: the loop waits for a human); the answer comes
    /// back as `to_input(approved, reason)`. A queue that cannot be used is a
    /// rejection: nothing goes on without a human's say.
    fn ask_through_queue(
        &mut self,
        request: Request,
        to_input: impl Fn(bool, String) -> Input + Send + 'static,
    ) {
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        self.approval_cancel = Arc::clone(&cancel);
        let dir = self.options.working_dir.join(&self.config.approvals.dir.0);
        let tx = self.internal_tx.clone();
        tokio::task::spawn_blocking(move || {
            let answer = |approved: bool, reason: String| {
                let _ = tx.send(Internal::Core(Box::new(to_input(approved, reason))));
            };
            let queue = match Queue::open(&dir) {
                Ok(queue) => queue,
                Err(err) => {
                    return answer(
                        false,
                        format!("cannot ask through the approval queue: {err}"),
                    );
                }
            };
            let submitted = match queue.submit(request) {
                Ok(submitted) => submitted,
                Err(err) => {
                    return answer(
                        false,
                        format!("cannot ask through the approval queue: {err}"),
                    );
                }
            };
            let cancelled = || {
                cancel
                    .load(std::sync::atomic::Ordering::SeqCst)
                    .then_some(0)
            };
            match queue.wait(&submitted, None, &cancelled) {
                Ok(ApprovalOutcome::Approved { reason }) => {
                    answer(true, reason.unwrap_or_else(|| "approved".into()))
                }
                Ok(ApprovalOutcome::Rejected { reason }) => answer(false, reason),
                Ok(ApprovalOutcome::TimedOut) => answer(false, "timed out".into()),
                Ok(ApprovalOutcome::Removed) => {
                    answer(false, "the request was removed from the queue".into())
                }
                // The loop moved on; nobody is listening.
                Ok(ApprovalOutcome::Cancelled { .. }) => {}
                Err(err) => answer(false, format!("approval queue error: {err}")),
            }
        });
    }

    fn analyze(&mut self, output_file: PathBuf) {
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

/// The detectors for these patterns, compiled once for every loop of the
/// process that uses the same ones (the lanes of a fleet, mostly).
fn shared_detectors(
    rate_limit: Vec<String>,
    commit: Vec<String>,
) -> Result<Arc<Detectors>, String> {
    type Compiled = Vec<((Vec<String>, Vec<String>), std::sync::Weak<Detectors>)>;
    static COMPILED: std::sync::Mutex<Compiled> = std::sync::Mutex::new(Vec::new());
    let mut compiled = COMPILED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    compiled.retain(|(_, detectors)| detectors.strong_count() > 0);
    let key = (rate_limit, commit);
    if let Some(detectors) = compiled
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, detectors)| detectors.upgrade())
    {
        return Ok(detectors);
    }
    let detectors = Arc::new(Detectors::new(&key.0, &key.1)?);
    compiled.push((key, Arc::downgrade(&detectors)));
    Ok(detectors)
}

/// Bytes an unprivileged process may still write on `dir`'s file system.
fn free_space(dir: &Path) -> Option<u64> {
    let stats = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(
        stats
            .blocks_available()
            .saturating_mul(stats.fragment_size()),
    )
}

fn is_out_of_space(err: &std::io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(code) if code == libc::ENOSPC || code == libc::EDQUOT
    )
}

/// The parts of the parser's statistics that the loop records.
fn summary(stats: &SessionStats) -> SessionSummary {
    SessionSummary {
        global: 0,
        turns: stats.ended.then_some(stats.turns),
        tool_calls: stats.tool_calls,
        tool_errors: stats.tool_errors,
        input_tokens: stats.ended.then_some(stats.input_tokens),
        output_tokens: stats.ended.then_some(stats.output_tokens),
        cache_read_tokens: stats.ended.then_some(stats.cache_read_tokens),
        cache_write_tokens: stats.ended.then_some(stats.cache_write_tokens),
        cost_usd: stats.cost_usd.filter(|c| c.is_finite()),
        result_subtype: stats.result_subtype.clone(),
        result_is_error: stats.result_is_error,
        model: stats.model.clone(),
        agent_session_id: stats.agent_session_id.clone(),
        duration_ms: stats.duration_ms,
        overage_events: stats.overage_events,
        unrecognised_format: stats.unrecognised_format,
    }
}

/// The message that stops a lane, when the fleet's budget is spent.
fn budget_spent(budget: Option<&super::fleet_budget::SharedBudget>) -> Option<Internal> {
    let budget = lock_budget(budget?);
    budget.reached().then(|| Internal::FleetBudgetSpent {
        spent: budget.spent_usd(),
        limit: budget.limit_usd(),
    })
}

fn lock_budget(
    budget: &super::fleet_budget::SharedBudget,
) -> std::sync::MutexGuard<'_, super::fleet_budget::FleetBudget> {
    budget
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_limit(
    shared: &super::shared_limit::Shared,
) -> std::sync::MutexGuard<'_, super::shared_limit::SharedLimit> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn recv_host_signal(
    signals: &mut Option<mpsc::UnboundedReceiver<StopSignal>>,
) -> Option<StopSignal> {
    match signals {
        Some(signals) => signals.recv().await,
        None => std::future::pending().await,
    }
}

/// How long before now a file was last written; a modification time in the
/// future (clock set back) counts as now.
fn written_ago(meta: &std::fs::Metadata) -> Duration {
    meta.modified()
        .ok()
        .and_then(|at| std::time::SystemTime::now().duration_since(at).ok())
        .unwrap_or(Duration::ZERO)
}

async fn recv_signal(stream: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

/// The working tree's HEAD commit, if it is a git repository with one.
fn git_head(cwd: &Path) -> Option<String> {
    let mut git = std::process::Command::new("git");
    git.args(["rev-parse", "--verify", "-q", "HEAD"])
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    // Registered with the reaper: another lane's clean-up must not take its exit.
    let (child, _owned) =
        super::reaper::spawn_owned("git", || git.spawn(), |c| Some(c.id())).ok()?;
    let output = child.wait_with_output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .filter(|head| !head.is_empty())
}

/// A lane's last run, when it ended before its work was done (stopped, a
/// signal, a budget, killed): a resumed or restarted lane goes on from it. One
/// that ran all its iterations or kept its promise starts afresh when run again.
fn unfinished_run(status_path: &Path) -> Option<Snapshot> {
    let (earlier, _) = status::read(status_path).ok()?;
    let finished = matches!(
        earlier.exit_reason,
        Some(ExitReason::MaxIterations | ExitReason::Completed)
    );
    (!finished).then_some(earlier)
}

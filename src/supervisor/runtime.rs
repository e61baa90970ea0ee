//! The tokio side of the supervisor: feeds [`Input`]s (signals, timers, the child's
//! exit, output growth, user commands) to the pure [`Core`] and carries out the
//! [`Effect`](super::core::Effect)s it returns: spawning, signalling, hooks, files.
//!
//! Runs on a current-thread runtime: the agent is spawned from the thread that
//! owns it, which is what the parent-death signal is tied to.

mod approval;
mod effects;
mod inputs;
mod looks;
mod notes;
mod recovery;
mod setup;
mod spawning;
mod steering;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{mpsc, watch};

use super::analysis::Progress;
use super::cgroup::KillMethod;
use super::core::{Core, HookFailure, Input, Level, StopSignal};
use super::hooks::ShellContext;
use super::process;
use super::reading::ReaderThread;
use crate::agent::follow::FollowUpdate;
use crate::agent::{Detectors, SessionStats, ToolCallSig};
use crate::config::Config;
use crate::protocol::{
    AgentRetrying, Command, Event, ExitReason, HookKind, SessionSummary, Snapshot,
};
use crate::store::counter::Counter;
use crate::store::events::EventLog;
use crate::store::running::Running;
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
    /// The project whose hook registration asks for the gate the lane's agent
    /// is handed: the fleet's root, never the lane's own folder.
    pub gate_project: PathBuf,
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
    /// The running agent's output says it cannot work.
    AgentError {
        global: u64,
        reason: String,
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
    /// The session's result line was read: it takes no more notes.
    ResultRead {
        global: u64,
    },
    /// A note was written to session `global`'s stdin, or could not be.
    NoteWritten {
        global: u64,
        note: crate::store::notes::Note,
        written: Result<(), String>,
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
    /// The agent's stdin, when it takes notes while it runs.
    steer: Option<steering::Steer>,
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
    /// The human's notes the pending prompt carries: delivered when its session starts.
    notes_in_prompt: Vec<crate::store::notes::Note>,
    /// Unreadable note files already reported.
    note_problems: std::collections::HashSet<String>,
    /// The gate handed to the agent on its command line (see
    /// [`crate::approvals::handed`]).
    gate: crate::approvals::handed::Handover,
    /// How the agent takes a message while a session runs, if it does.
    live_input: Option<crate::agent::live_input::LiveInput>,
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

    /// Runs the loop until it ends; `commands` are the user's (may never send).
    pub async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) -> Outcome {
        let mut host_signals = self.lane.as_mut().and_then(|lane| lane.signals.take());
        let (mut sigint, mut sigterm, mut sighup) = self.take_process_signals();
        // Before anything rewrites the status file of the run that may have left it.
        self.recover_abandoned_session().await;
        self.end_leftovers().await;
        self.recover_notes();
        self.look_watch = self.watch_control_files();
        let mut commands_open = true;
        let mut queue = VecDeque::from([Input::Start]);

        loop {
            self.drain(&mut queue);
            if self.exit.is_some() && self.session.is_none() {
                break;
            }
            let next_look = tokio::time::Instant::from_std(self.next_look());
            tokio::select! {
                Some(message) = self.internal_rx.recv() => match message {
                    Internal::Look => self.on_tick(&mut queue),
                    Internal::OutputWritten => self.output_grew(&mut queue),
                    // What the session's gates spent is counted before its end.
                    message @ Internal::GroupEnded(_) => {
                        self.take_reviewer_spend(&mut queue);
                        queue.extend(self.on_internal(message));
                    }
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
        self.wind_up()
    }

    /// A loop of its own takes the process's stop signals and adopts its
    /// orphans; a lane leaves both to the fleet.
    fn take_process_signals(&mut self) -> (Option<Signal>, Option<Signal>, Option<Signal>) {
        if self.lane.is_some() {
            return (None, None, None);
        }
        process::become_subreaper();
        tokio::spawn(super::reaper::reap_as_orphans_die());
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
            (!self.hangup_to_the_room)
                .then(process::hangup_signal)
                .flatten(),
        )
    }

    /// Steps the core through every queued input, carrying out its effects
    /// (which may queue more), and publishes what the loop looks like after each.
    fn drain(&mut self, queue: &mut VecDeque<Input>) {
        while let Some(input) = queue.pop_front() {
            let effects = self.core.step(self.now(), input);
            for effect in effects {
                self.execute(effect, queue);
            }
            let snapshot = self.core.snapshot(Utc::now());
            if let Some(lane) = &self.lane
                && let Some(budget) = &lane.budget
            {
                lock_budget(budget).report(&lane.name, snapshot.totals.known_cost());
            }
            self.publish(snapshot);
        }
    }

    /// The loop has ended: what it held is given back, and why it ended is told.
    fn wind_up(&mut self) -> Outcome {
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
fn unfinished_run(status_path: &Path) -> Result<Option<Snapshot>, String> {
    if std::fs::symlink_metadata(status_path).is_err() {
        return Ok(None);
    }
    // Its iterations and cost are the lane's budgets: a lane that cannot read
    // them does not start from 1 at $0, nor replace the file that holds them.
    let (earlier, _) = status::read(status_path).map_err(|err| {
        format!(
            "{err}; the lane is not started, and the file is kept: repair it, or move it away to start the lane afresh (`clowder lane restart` moves it aside)"
        )
    })?;
    let finished = matches!(
        earlier.exit_reason,
        Some(ExitReason::MaxIterations | ExitReason::Completed)
    );
    Ok((!finished).then_some(earlier))
}
